"""sinpe's warning class, and a warning given once per process, shown at the caller's line.

A warning says that a call gives other bits than its name promises (a framework's release with
no measured profile, docs/backends.md); it never changes what is computed.  It imports nothing
of the package, so every layer may warn.
"""
from __future__ import annotations

import os
import sys
import threading
import warnings
from types import FrameType
from typing import Any, Optional, Set


class SinpeWarning(UserWarning):
    """sinpe's warnings: a call gives other bits than its name promises (e.g. a framework's
    release with no measured profile: docs/backends.md).  Filter them as any warning
    (``warnings.filterwarnings("error", category=sinpe.SinpeWarning)``)."""


#: The keys already warned about in this process (e.g. ('numpy', '1.26.4')).
_WARNED: Set[Any] = set()
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _caller_level() -> int:
    """warnings.warn's stacklevel, from warn_once, of the first frame outside the package:
    the user's line, however deep in the package the warning is given.  Counted as warnings
    counts, importlib's own frames skipped (an import of sinpe warns at the importer's line)."""
    frame: Optional[FrameType] = sys._getframe(1).f_back  # warn_once (level 1)'s caller
    level = 2
    while True:
        while frame is not None and _importlib(frame.f_code.co_filename):
            frame = frame.f_back
        if frame is None or not frame.f_code.co_filename.startswith(_PACKAGE):
            return level
        frame, level = frame.f_back, level + 1


def _importlib(filename: str) -> bool:
    return "importlib" in filename and "_bootstrap" in filename


_LOCK = threading.Lock()


def warn_once(key: Any, message: str) -> bool:
    """A SinpeWarning, the first time in this process for key that it is shown.  Where a
    filter turns it into an error, the error propagates and the key is not marked (the next
    call raises again: threads racing the first call each raise, one after the other); where
    a filter ignores it at the caller's line, nothing is marked either (a later call outside
    that filter warns).  Whether the key is settled (warned now or before; False: ignored)."""
    if key in _WARNED:
        return True
    with _LOCK:
        if key in _WARNED:
            return True
        level = _caller_level()
        if _ignored(message, level):
            return False
        _WARNED.add(key)
        try:
            warnings.warn(message, SinpeWarning, stacklevel=level)
        except BaseException:
            _WARNED.discard(key)
            raise
        return True


def _ignored(message: str, level: int) -> bool:
    """Whether the warnings filters in force ignore a SinpeWarning of this message at the line
    stacklevel `level` of warn_once names (the filters' first match decides, as warnings
    decides)."""
    frame: Optional[FrameType] = sys._getframe(1)  # warn_once
    for _ in range(level - 1):  # (as warnings walks: importlib's own frames skipped)
        frame = frame.f_back if frame is not None else None
        while frame is not None and _importlib(frame.f_code.co_filename):
            frame = frame.f_back
    module = frame.f_globals.get("__name__", "<string>") if frame is not None else "sys"
    lineno = frame.f_lineno if frame is not None else 0
    for action, msg, cat, mod, ln in warnings.filters:
        if (msg is None or msg.match(message)) and issubclass(SinpeWarning, cat) \
                and (mod is None or mod.match(module)) and (ln == 0 or ln == lineno):
            return bool(action == "ignore")
    # typeshed does not declare warnings.defaultaction (the module has had it since 2.1)
    return bool(warnings.defaultaction == "ignore")  # type: ignore[attr-defined]
