"""Policy: which threads run the core's parallel work.

sinpe has its own pool of helper threads.  When torch is imported and its parallel loops run
on GNU OpenMP (libgomp: torch's Linux wheels), the core's parallel work is handed to that
runtime instead, so that it runs on torch's own worker threads (docs/speed.md, "Threads"):
after each of torch's parallel ops its workers spin for a while, waiting for the next one,
and on a machine with as many cores as threads a helper of sinpe's pool would share a core
with such a spinning worker.  Measured on a 2-core Zen 4 beside transformers' eager rotation,
2 threads: apply_rotary_pos_emb at 8 x 8 x 128 x 64 float16 took 252 us on sinpe's pool and
135 us on torch's OpenMP threads (torch's own rotation: 208 us).

The choice is made once per imported torch module, and never in a forked child (libgomp's
workers do not exist there; the core forgets the runtime at fork, sinpe's own threads run),
nor in a process that sinpe finds was forked before it was imported (a worker that imports
sinpe lazily: libgomp's team there names threads the child does not have, and its first
parallel region would wait for them for ever): a multiprocessing child (fork or spawn), or a
process whose main thread's recorded native id is not this process's id (os.fork: Python
keeps the parent's).
set_thread_runtime('sinpe') / SINPE_THREAD_RUNTIME=sinpe keeps sinpe's own threads.  The
bits never depend on which threads run the work.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Any, Dict, Optional

from .. import _jobs

NAMES = ("auto", "sinpe")

# want: the setting; torch: the torch module the choice was made for; library: the OpenMP
# runtime adopted (None: sinpe's threads); pid: the process that may adopt one
_RT: Dict[str, Any] = {"want": "auto", "torch": None, "library": None, "pid": os.getpid()}


def torch_openmp(torch: Any) -> Optional[str]:
    """The path of the GNU OpenMP runtime torch's parallel loops run on: torch built with
    OpenMP and a libgomp shipped beside its libraries (torch/lib, or the wheel's torch.libs),
    which the core then takes only if it is loaded in this process; else None."""
    try:
        if not torch._C.has_openmp:
            return None
        pkg = os.path.dirname(os.path.abspath(torch.__file__))
        dirs = (os.path.join(pkg, "lib"), pkg + ".libs")
        found = [os.path.join(d, n) for d in dirs if os.path.isdir(d)
                 for n in sorted(os.listdir(d)) if n.startswith("libgomp") and ".so" in n]
    except Exception:  # a partial or unusual torch: sinpe's own threads
        return None
    return found[0] if found else None


def forked_before_import() -> bool:
    """This process was forked from another Python process before sinpe was imported here
    (sinpe's own fork handler did not see it): a multiprocessing child, or os.fork's child,
    whose main thread object keeps the parent's native id (Python 3.8 to 3.13)."""
    mp = sys.modules.get("multiprocessing.process")
    try:
        if mp is not None and mp.parent_process() is not None:
            return True
        native = getattr(threading.main_thread(), "native_id", None)
    except Exception:  # an unusual interpreter: treated as a child (sinpe's own threads)
        return True
    return native is not None and native != os.getpid()


_LOCK = threading.Lock()  # one choice at a time: set_thread_runtime's and the calls'


def _choose(torch: Any) -> None:
    """Adopt torch's OpenMP runtime for the core's parallel work, when the setting allows."""
    with _LOCK:
        if torch is _RT["torch"]:
            return  # another thread chose for it
        if getattr(torch, "_C", None) is None:
            return  # still being imported (by another thread): looked at again next call
        _RT["torch"] = torch
        if _RT["want"] != "auto" or _RT["library"] or os.getpid() != _RT["pid"]:
            return
        if forked_before_import():
            _RT["pid"] = -1  # never in this process
            return
        lib = torch_openmp(torch)
        if lib is None:
            return
        try:
            _jobs.adopt_openmp(lib)
        except OSError:  # not loaded after all, or another runtime was adopted before
            return
        _RT["library"] = lib


def follow() -> None:
    """Called with every call's options: a newly imported torch is looked at once."""
    torch = sys.modules.get("torch")
    if torch is not None and torch is not _RT["torch"]:
        _choose(torch)


def _forked() -> None:
    _RT["library"] = None  # the core forgot it: sinpe's own threads in the child, for good
    _RT["pid"] = -1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def set_thread_runtime(name: str) -> None:
    """Set which threads run sinpe's parallel work: 'auto' (torch's OpenMP worker threads
    when torch is imported and runs on GNU OpenMP, else sinpe's own) or 'sinpe' (always
    sinpe's own threads).  The bits never depend on it."""
    if not isinstance(name, str):
        raise TypeError(f"thread runtime must be 'auto' or 'sinpe' (str), got {name!r} "
                        f"({type(name).__name__})")
    if name not in NAMES:
        raise ValueError(f"unknown thread runtime {name!r}: choose 'auto' or 'sinpe'")
    with _LOCK:  # not between another thread's check of the setting and its adoption
        _RT["want"] = name
        if name == "sinpe":
            _jobs.adopt_openmp(None)
            _RT["library"] = None
        else:
            _RT["torch"] = None  # looked at again at the next call
    if name == "auto":
        follow()


def get_thread_runtime() -> str:
    """Which threads run sinpe's parallel work now: 'openmp' (an adopted OpenMP runtime:
    torch's) or 'sinpe'."""
    return "openmp" if _jobs.openmp_adopted() else "sinpe"


def report() -> Dict[str, Any]:
    """For numerics(): the setting, what runs the work now and the runtime's library."""
    return {"default": _RT["want"], "runs": get_thread_runtime(),
            "library": _RT["library"] if _jobs.openmp_adopted() else None}


def configure(value: Optional[str]) -> None:
    """The setting at import: SINPE_THREAD_RUNTIME (auto or sinpe), else auto."""
    want = (value or "").strip().lower() or "auto"
    if want not in NAMES:
        raise ValueError(f"SINPE_THREAD_RUNTIME={os.environ.get('SINPE_THREAD_RUNTIME')!r} is "
                         f"not valid: use auto or sinpe (or leave it unset)")
    set_thread_runtime(want)
