"""Which backend a call uses, and whose bits that gives.

The default is 'auto', resolved when a call needs it (not frozen at import), so a notebook
that imports sinpe first and torch later gets torch's bits from then on:

1. torch is imported (x86-64): torch's own kernels (its libtorch_cpu's oneMKL), 'torch';
2. else the mkl wheel, when its release is one measured equal to torch's copy, 'mkl';
3. else the correctly rounded built-in kernels, 'builtin' (the same bits everywhere).

set_backend(name) / SINPE_BACKEND pins a backend instead.  The C binding calls resolve()
for 'auto' and for any backend whose library is not loaded yet.
"""
from __future__ import annotations

import os
import platform
import sys
from typing import Any, Dict, List, Optional

from . import _sinpe
from ._mkl import DIFFERENT, EQUAL_TO_TORCH, TORCH_MKL_RELEASE, find_mkl, release, release_matches
from ._torchlib import find_torch_library, torch_version

MACHINE = platform.machine().lower()
X86_64 = MACHINE in ("x86_64", "amd64")

#: Names a call can pass as backend= (besides 'auto').
NAMES: List[str] = ["builtin", "mkl", "torch"]

# What was found, loaded or why not, per library (process-wide, like the libraries).
_LIB: Dict[str, Dict[str, Any]] = {
    "mkl": {"path": None, "reason": "oneMKL was not looked for", "tried": False},
    "torch": {"path": None, "reason": "torch's library was not looked for", "tried": False},
}


def _load(lib: str, finder: Any) -> bool:
    """Loads a library once per process; records the path or the reason it cannot be used."""
    state = _LIB[lib]
    if _sinpe.vml_info(lib) is not None:
        return True
    if state["tried"]:
        return False
    state["tried"] = True
    path, reason = finder()
    if path is None:
        state["reason"] = reason
        return False
    try:
        _sinpe.load_vml(lib, path)
    except OSError as exc:
        state["reason"] = f"{path}: {exc}"
        return False
    state["path"], state["reason"] = path, ""
    return True


def load_mkl() -> bool:
    """The mkl wheel's library (opened at import: it is small and has no side effects)."""
    return _load("mkl", find_mkl)


def load_torch() -> bool:
    """torch's libtorch_cpu: already in the process when torch is imported; otherwise opened
    on the first call that needs it (about 0.2 s and 110 MiB)."""
    return _load("torch", find_torch_library)


def _mkl_equal() -> bool:
    info = _sinpe.vml_info("mkl")
    return info is not None and release_matches(info["version"])


def auto() -> str:
    """The backend 'auto' stands for right now."""
    if X86_64 and "torch" in sys.modules and load_torch():
        return "torch"
    if X86_64 and _mkl_equal():
        return "mkl"
    return "builtin"


def resolve(name: str) -> str:
    """A concrete backend for name ('auto' or a backend name), loading its library if
    needed; ValueError for unknown names, RuntimeError (with the reason) if unavailable."""
    if name == "auto":
        return auto()
    if name == "builtin":
        return name
    if name == "mkl":
        if load_mkl():
            return name
        raise RuntimeError(f"backend 'mkl' is not available: {_LIB['mkl']['reason']}")
    if name == "torch":
        if load_torch():
            return name
        raise RuntimeError(f"backend 'torch' is not available: {_LIB['torch']['reason']}")
    raise ValueError(f"unknown backend {name!r}: choose 'auto' or one of "
                     f"{', '.join(repr(n) for n in NAMES)}")


def torch_kernels() -> str:
    """The backend that computes what the imported torch computes (sinpe.torch uses it)."""
    return "torch" if X86_64 else "auto"


def backends() -> Dict[str, bool]:
    """Which backends can be used in this process (torch's library counts when it is loaded,
    or found and not known to fail)."""
    torch_ok = _sinpe.vml_info("torch") is not None or (
        not _LIB["torch"]["tried"] and find_torch_library()[0] is not None)
    return {"builtin": True, "mkl": _sinpe.vml_info("mkl") is not None, "torch": torch_ok}


def _cpu() -> str:
    f = _sinpe.cpu_features()
    isa = "AVX-512" if f.get("avx512f") else "AVX2" if f.get("avx2") else "SSE"
    return f"{f.get('vendor', '?')} CPU with {isa}"


def reproduces(backend: str) -> str:
    """Whose bits a backend gives, for the library actually loaded, and what would change it."""
    if backend == "builtin":
        return ("correctly rounded float32 exp/sin/cos (round to nearest, every input): the same "
                "bits on every machine; equal to torch's where torch's results are correctly "
                "rounded (about 95% of values)")
    info = _sinpe.vml_info(backend)
    version = str(info["version"]) if info else "not loaded"
    rel = release(version)
    rel_txt = f"{rel[0]}.{rel[1]}" if rel else version
    where = (f"on this {_cpu()}: oneMKL chooses its code path by CPU (Intel AVX-512 and AVX2-only "
             "CPUs give different bits, and so do MKL_ENABLE_INSTRUCTIONS or MKL_CBWR there), and "
             "sinpe follows torch because both run the same oneMKL on the same CPU")
    if backend == "torch":
        return (f"torch {torch_version() or '?'} on x86-64, bit for bit: the oneMKL {rel_txt} VML "
                f"inside the torch in this environment ({_LIB['torch']['path']}), {where}")
    if rel in EQUAL_TO_TORCH:
        return (f"torch's x86-64 wheels (1.13 to 2.15, oneMKL {TORCH_MKL_RELEASE} inside), bit "
                f"for bit: oneMKL {rel_txt} from the mkl wheel is measured equal to that copy "
                f"({EQUAL_TO_TORCH[rel]}), {where}")
    return (f"not torch's bits: oneMKL {rel_txt} from the mkl wheel ({version}) is not a release "
            f"measured equal to torch's copy: {DIFFERENT}")


def numerics() -> Dict[str, Any]:
    """The backend calls use now, whose bits it reproduces, and what is available."""
    name = _sinpe.get_backend()
    mkl: Dict[str, Any] = {"loaded": False}
    torch: Dict[str, Any] = {"loaded": False, "version": torch_version()}
    for lib, d in (("mkl", mkl), ("torch", torch)):
        info = _sinpe.vml_info(lib)
        if info is None:
            d["reason"] = _LIB[lib]["reason"]
        else:
            d.update(loaded=True, path=_LIB[lib]["path"], mkl_version=info["version"])
    if mkl["loaded"]:
        mkl["version"] = mkl.pop("mkl_version")
        mkl["threading_layer"] = _sinpe.vml_info("mkl")["threading_layer"]
        mkl["matches_torch"] = release_matches(mkl["version"])
        if not mkl["matches_torch"]:
            mkl["why_not_chosen"] = f"not a release measured equal to torch's copy: {DIFFERENT}"
    return {
        "backend": name,
        "default": _sinpe._get_default(),
        "reproduces": reproduces(name),
        "kernel": _sinpe.get_kernel(),
        "kernels": _sinpe.kernels(),
        "threads": _sinpe.get_threads(),
        "available": backends(),
        "mkl": mkl,
        "torch": torch,
        "cpu": _sinpe.cpu_features(),
        "machine": platform.machine(),
    }


def configure_default(value: Optional[str]) -> None:
    """The default at import: SINPE_BACKEND (auto, or a backend name to pin), else auto."""
    want = (value or "").strip().lower() or "auto"
    if want != "auto" and want not in NAMES:
        raise ValueError(f"SINPE_BACKEND={os.environ.get('SINPE_BACKEND')!r} is not valid: use "
                         f"auto or one of {', '.join(NAMES)} (or leave it unset)")
    try:
        _sinpe.set_backend(want)
    except RuntimeError as exc:
        raise RuntimeError(f"SINPE_BACKEND={want!r}: {exc}") from None
