"""The numerics() report: the backend calls use now, whose bits it gives, where sinpe knowingly
differs from torch, the code paths' records, the cache and the libraries found."""
from __future__ import annotations

import platform
from typing import Any, Dict

from . import _cache
from ._backends import records, runtime
from ._backends.mkl import DIFFERENT, release_matches
from ._backends.policy import (backends, cpu_features, get_backend, get_default, get_kernel,
                               get_threads, kernels, reproduces)
from ._backends.records import REGISTRY
from ._backends.torchlib import torch_version


def _records() -> Dict[str, Any]:
    return {p[0]: {"available": p[1], "verified": p[2], "records": p[3]} for p in REGISTRY["paths"]}


# Where sinpe knowingly gives other bits than the torch code it replaces (docs/numerics.md),
# each measured with torch 2.13 and pinned by a test; numerics() lists them.
DIFFERS = (
    "NaN inputs of float16 add_pe: torch's x.add_(pe) gives 0x7fff in the scalar tail of its "
    "vector loop (where depends on layout and thread split); sinpe keeps the payload everywhere",
    "NaN float16 positions: torch's pos.float() gives 0x7fffffff in its scalar tail; sinpe "
    "keeps the payload everywhere, so only NaN rows can differ (NaN either way)",
    "NaN inputs of apply_rope where both of a step's operands are NaN (q and cos, or both "
    "products): sinpe keeps the second operand's NaN, as torch's vector loops do on x86-64; "
    "torch's scalar loop tail keeps the first (only the NaN's sign or payload can differ)",
    "NaN results of bfloat16 rotations: torch's vector loops round a NaN to 0xffff on x86-64, "
    "their scalar tail (head dims under the vector width, the last lanes of others) to 0x7fc0; "
    "sinpe gives 0xffff everywhere (only the NaN's bits can differ)",
    "positions from 134,217,737 (2^27 + 9) on: torch's vectorized float32 arange adds lane "
    "offsets in float32; sinpe rounds each integer to nearest",
)


def _frameworks() -> Dict[str, Any]:
    """What each framework's plain name means here: the installed release (None if not
    installed), the profile it stands for, and whether that release was measured (None if
    not installed: the newest measured profile)."""
    out = {}
    for fw in records.FRAMEWORKS:
        profile, version, measured = records.framework_release(fw)
        out[fw] = {"installed": version, "profile": profile,
                   "measured": None if version is None else measured}
    return out


def numerics() -> Dict[str, Any]:
    """The backend calls use now, whose bits it reproduces, and what is available."""
    name = get_backend()
    default = get_default()
    mkl: Dict[str, Any] = {"loaded": False}
    torch: Dict[str, Any] = {"loaded": False, "version": torch_version()}
    infos: Dict[str, Dict[str, Any]] = {}  # the loaded libraries' own
    for lib, d in (("mkl", mkl), ("torch", torch)):
        info = records.library_info(lib)
        if info is None:
            d["reason"] = records.reason(lib)
        else:
            infos[lib] = info
            d.update(loaded=True, path=records.library_path(lib), mkl_version=info["version"])
    if mkl["loaded"]:
        mkl["version"] = mkl.pop("mkl_version")
        mkl["threading_layer"] = infos["mkl"]["threading_layer"]
        mkl["matches_torch"] = release_matches(mkl["version"])
        if not mkl["matches_torch"]:
            mkl["why_not_chosen"] = f"not a release measured equal to torch's copy: {DIFFERENT}"
    return {
        "backend": name,
        "default": default,
        # a pinned plain name ('numpy', 'sleef') is described as such: which profile it
        # stands for and why (an installed release that was not measured, say)
        "reproduces": reproduces(name if default == "auto" else default),
        "differs": list(DIFFERS),
        "kernel": get_kernel(),
        "kernels": kernels(),
        "kernel_records": _records(),
        "threads": get_threads(),
        "thread_runtime": runtime.report(),
        "cache": _cache.cache_info(),
        "available": backends(),
        "frameworks": _frameworks(),
        "mkl": mkl,
        "torch": torch,
        "cpu": cpu_features(),
        "machine": platform.machine(),
    }
