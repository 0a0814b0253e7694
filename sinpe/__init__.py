"""sinpe: sinusoidal positional-encoding tables, bit for bit equal to PyTorch.

    >>> import sinpe
    >>> pe = sinpe.positional_encoding(5000, 512)     # float32 (5000, 512)
    >>> sinpe.add_pe(x)                               # in place, returns x
    >>> sinpe.numerics()                              # which numerics are in use

The work is done by the C core (``sinpe._sinpe``, which decides nothing; ``sinpe._jobs`` is
its one caller); this package
owns the names and the policy: which backend 'auto' means, the SLEEF profiles, the
defaults, and finding the optional oneMKL libraries (``sinpe._backends``).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

try:
    from . import _jobs  # noqa: F401 (the core's one caller: imports the C extension)
except ImportError:  # a message for a common mistake
    import importlib.machinery

    _here = os.path.dirname(os.path.abspath(__file__))
    if any(os.path.exists(os.path.join(_here, "_sinpe" + suffix))
           for suffix in importlib.machinery.EXTENSION_SUFFIXES):
        raise  # the extension is there but does not load: show why
    raise ImportError(
        f"sinpe's C extension is not built in {_here}: this is the source tree, not the "
        "installed package. Either install it (`pip install .`) and run from another "
        "directory, or install it in place (`pip install -e .`), which builds the "
        "extension into this folder."
    ) from None
from . import _cache
from ._api import add_pe, elementwise, positional_encoding
from . import presets
from ._rope import apply_rope, apply_rope_qk, shift_matrix
from ._cache import cache_info, clear_cache, get_cache_size, set_cache_size
from ._backends import policy as _policy
from ._backends import runtime as _runtime
from ._report import numerics
from ._warn import SinpeWarning
from ._backends.runtime import get_thread_runtime, set_thread_runtime
if TYPE_CHECKING:
    from ._types import Kernel
from ._backends.policy import (
    backends,
    get_backend,
    get_kernel,
    get_threads,
    kernels,
    load_mkl,
    reproduces,
    set_backend,
    set_kernel,
    set_threads,
)

__all__ = [
    "positional_encoding",
    "add_pe",
    "numerics",
    "get_backend",
    "set_backend",
    "backends",
    "kernels",
    "get_kernel",
    "set_kernel",
    "get_threads",
    "set_threads",
    "get_thread_runtime",
    "set_thread_runtime",
    "elementwise",
    "reproduces",
    "presets",
    "apply_rope",
    "apply_rope_qk",
    "shift_matrix",
    "set_cache_size",
    "get_cache_size",
    "clear_cache",
    "cache_info",
    "SinpeWarning",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # sinpe.torch is imported on first use, so that sinpe never needs torch
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'sinpe' has no attribute {name!r}")


def _env(name: str) -> str:
    return os.environ.get(name, "").strip().lower()


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the CPUs this process may use
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _configure() -> None:
    kernel = _env("SINPE_KERNEL")
    if kernel and kernel != "auto":
        try:
            set_kernel(cast("Kernel", kernel))  # any string: set_kernel checks it
        except ValueError:
            from ._backends.records import PATH_NAMES
            raise ValueError(f"SINPE_KERNEL={os.environ['SINPE_KERNEL']!r} is not valid: unknown "
                             f"kernel {kernel!r}; use auto, {', '.join(PATH_NAMES)} (this "
                             f"CPU has {', '.join(kernels())})") from None
        except RuntimeError as exc:
            raise RuntimeError(f"SINPE_KERNEL={kernel!r}: {exc}") from None
    threads = _env("SINPE_NUM_THREADS")
    if threads:
        try:
            set_threads(int(threads))
        except (ValueError, OverflowError):  # not a number, out of range, past int64
            raise ValueError(f"SINPE_NUM_THREADS={os.environ['SINPE_NUM_THREADS']!r} is not "
                             "valid: use an integer from 1 to 256 (or leave it unset)") from None
    else:
        set_threads(min(_usable_cpus(), 256))
    _runtime.configure(_env("SINPE_THREAD_RUNTIME"))


def _command_line() -> bool:
    """This import is the command line's (python -m sinpe, or the sinpe script)."""
    import sys
    if os.path.basename(sys.argv[0] if sys.argv else "") in ("sinpe", "sinpe.exe"):
        return True
    orig = list(getattr(sys, "orig_argv", []))
    if orig:
        return "-msinpe" in orig or any(a == "-m" and b == "sinpe" for a, b in zip(orig, orig[1:]))
    return sys.argv[:1] == ["-m"]


#: A bad SINPE_* variable met by the command line's import: reported by sinpe.__main__ as
#: `sinpe: error: ...` with exit status 2, as bad arguments are (any other import raises it).
_ENV_ERROR = None
load_mkl()
try:
    _policy.configure_default(os.environ.get("SINPE_BACKEND"))
    _configure()
    _cache.configure(os.environ.get(_cache.ENV))
except (ValueError, RuntimeError, TypeError, OverflowError) as _exc:
    if not _command_line():
        raise
    _ENV_ERROR = _exc
