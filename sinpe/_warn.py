"""sinpe's warning class, and a warning given once per process, shown at the caller's line.

A warning says that a call gives other bits than its name promises (a framework's release with
no measured profile, docs/backends.md); it never changes what is computed.  It imports nothing
of the package, so every layer may warn.
"""
from __future__ import annotations

import os
import sys
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


def warn_once(key: Any, message: str) -> None:
    """A SinpeWarning, the first time in this process for key.  Where a filter turns it into
    an error, the error propagates and the key is not marked (the next call raises again)."""
    if key in _WARNED:
        return
    _WARNED.add(key)
    try:
        warnings.warn(message, SinpeWarning, stacklevel=_caller_level())
    except BaseException:
        _WARNED.discard(key)
        raise
