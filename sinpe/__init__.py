"""sinpe: sinusoidal positional-encoding tables, bit for bit equal to PyTorch.

    >>> import sinpe
    >>> pe = sinpe.positional_encoding(5000, 512)     # float32 (5000, 512)
    >>> sinpe.add_pe(x)                               # in place, returns x
    >>> sinpe.numerics()                              # which numerics are in use

The work is done by the C core (``sinpe._sinpe``); this package finds the
optional oneMKL library and chooses the default backend once, at import.
"""
from __future__ import annotations

import os
import platform
from typing import Any, Dict

try:
    from . import _sinpe
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
from ._sinpe import add_pe, positional_encoding
from ._mkl import TORCH_MKL_RELEASE, find_mkl, release_matches
from ._sinpe import (
    elementwise,
    get_backend,
    get_kernel,
    get_threads,
    kernels,
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
    "elementwise",
    "reproduces",
]
__version__ = "0.1.0"

#: What each backend's bits are equal to (measured; see README, Numerics).
REPRODUCES = {
    "builtin": "correctly rounded float32 exp/sin/cos (round to nearest, every input); "
    "equal to torch where torch's results are correctly rounded (about 95% of values)",
    "mkl": "PyTorch's official x86-64 wheels (oneMKL 2024.2 VML, HA mode, as in torch "
    "2.8 to 2.13): bit for bit with the reference module",
}

_MKL_PATH = None


def _load_mkl() -> None:
    global _MKL_PATH
    path, reason = find_mkl()
    if path is None:
        _sinpe._set_mkl_unavailable(reason)
        return
    try:
        _sinpe.load_mkl(path)
        _MKL_PATH = path
    except OSError as exc:  # the reason is kept by the extension too
        _sinpe._set_mkl_unavailable(f"{path}: {exc}")


def __getattr__(name: str) -> Any:
    # sinpe.torch is imported on first use, so that sinpe never needs torch
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'sinpe' has no attribute {name!r}")


def backends() -> Dict[str, bool]:
    """Which backends can be used in this process."""
    return {"builtin": True, "mkl": bool(_sinpe.mkl_info()["loaded"])}


def reproduces(backend: str) -> str:
    """Whose bits a backend gives, for the library actually loaded."""
    if backend == "mkl":
        info = _sinpe.mkl_info()
        version = str(info.get("version", ""))
        if info["loaded"] and not release_matches(version):
            return (f"oneMKL VML HA of the loaded library ({version}), which is not the release "
                    f"torch's x86-64 wheels bundle ({TORCH_MKL_RELEASE}): not torch's bits")
    return REPRODUCES[backend]


def numerics() -> Dict[str, Any]:
    """The active default backend, whose bits it reproduces, and what is available."""
    name = get_backend()
    info = _sinpe.mkl_info()
    mkl: Dict[str, Any] = dict(info)
    if info["loaded"]:
        mkl["path"] = _MKL_PATH
        mkl["matches_torch"] = release_matches(info["version"])
    return {
        "backend": name,
        "reproduces": reproduces(name),
        "kernel": get_kernel(),
        "kernels": kernels(),
        "threads": get_threads(),
        "available": backends(),
        "mkl": mkl,
        "machine": platform.machine(),
    }


def _env(name: str) -> str:
    return os.environ.get(name, "").strip().lower()


def _choose_default() -> None:
    want = _env("SINPE_BACKEND") or "auto"
    if want not in ("auto", "builtin", "mkl"):
        raise ValueError(f"SINPE_BACKEND={os.environ['SINPE_BACKEND']!r} is not valid: use "
                         "auto, builtin or mkl (or leave it unset)")
    if want == "auto":
        # oneMKL is what torch uses on x86-64; elsewhere torch does not use it.  Another
        # oneMKL release than torch's gives other bits: then the builtin is the default
        # (set_backend('mkl') still selects it).
        x86 = platform.machine().lower() in ("x86_64", "amd64")
        info = _sinpe.mkl_info()
        good = bool(info["loaded"]) and release_matches(str(info.get("version", "")))
        set_backend("mkl" if x86 and good else "builtin")
        return
    try:
        set_backend(want)
    except RuntimeError as exc:
        raise RuntimeError(f"SINPE_BACKEND={want!r}: {exc}") from None


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the CPUs this process may use
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _configure() -> None:
    kernel = _env("SINPE_KERNEL")
    if kernel and kernel != "auto":
        try:
            set_kernel(kernel)
        except ValueError:
            raise ValueError(f"SINPE_KERNEL={os.environ['SINPE_KERNEL']!r} is not valid: unknown "
                             f"kernel {kernel!r}; use auto, scalar, avx2 or neon (this CPU has "
                             f"{', '.join(kernels())})") from None
        except RuntimeError as exc:
            raise RuntimeError(f"SINPE_KERNEL={kernel!r}: {exc}") from None
    threads = _env("SINPE_NUM_THREADS")
    if threads:
        try:
            n = int(threads)
            if not 1 <= n <= 256:
                raise ValueError
        except ValueError:
            raise ValueError(f"SINPE_NUM_THREADS={os.environ['SINPE_NUM_THREADS']!r} is not "
                             "valid: use an integer from 1 to 256 (or leave it unset)") from None
        set_threads(n)
    else:
        set_threads(min(_usable_cpus(), 256))


_load_mkl()
_choose_default()
_configure()
