"""Policy: which backend, code path and thread count a call uses, and whose bits that gives.

The C core takes plain values (backend and path indices, counts); every name and default is
decided here, once per call (``opts``), and nothing in C calls back into Python.

The default backend is 'auto', resolved when a call needs it (not frozen at import), so a
notebook that imports sinpe first and torch later gets torch's bits from then on:

1. torch is imported: what that torch computes: on x86-64 its own kernels (its
   libtorch_cpu's oneMKL), 'torch'; on 64-bit Arm the SLEEF profile of its version, CPU
   capability and thread count;
2. else on x86-64 the mkl wheel, when its release is one measured equal to torch's copy,
   'mkl'; on 64-bit Arm the profile of the newest torch measured, at torch's default
   thread count;
3. else the correctly rounded built-in kernels, 'builtin' (the same bits everywhere).

set_backend(name) / SINPE_BACKEND pins a backend instead.  Libraries are loaded once per
process; a caller that needs one while another thread loads it waits for that load.
"""
from __future__ import annotations

import os
import platform
import sys
import threading
from typing import Any, Dict, List, Optional, SupportsIndex, Tuple

from . import _sinpe
from ._types import Kernel, Name
from ._mkl import DIFFERENT, EQUAL_TO_TORCH, TORCH_MKL_RELEASE, find_mkl, release, release_matches
from ._torchlib import find_torch_library, torch_version

MACHINE = platform.machine().lower()
X86_64 = MACHINE in ("x86_64", "amd64")
ARM64 = MACHINE in ("aarch64", "arm64")

#: The core's registries: backend and path indices are the options' values.
REGISTRY = _sinpe.registry()
BACKEND_INDEX: Dict[str, int] = {b[0]: i for i, b in enumerate(REGISTRY["backends"])}
#: per backend index: 1 when a result depends on its argument alone (SLEEF's vectors couple)
INDEPENDENT = tuple(bool(b[2]) for b in REGISTRY["backends"])
PATH_NAMES: List[str] = [p[0] for p in REGISTRY["paths"]]

#: What torch on 64-bit Arm computes, per release and CPU capability (measured under qemu:
#: docs/backends.md, tests/data/torch_arm64_*.json; 0 differences in every table and thread
#: split).  name -> (torch release, capabilities, sin/cos, lanes)
PROFILES: Dict[str, Tuple[str, str, str, int]] = {
    "torch-aarch64-2.13": ("2.13", "DEFAULT (NEON) or SVE128", "SLEEF u10", 4),
    "torch-aarch64-2.13-sve256": ("2.13", "SVE256", "SLEEF u10", 8),
    "torch-aarch64-2.14": ("2.14", "DEFAULT (NEON) or SVE128", "SLEEF u10", 4),
    "torch-aarch64-2.14-sve256": ("2.14", "SVE256", "SLEEF u10", 8),
    "torch-aarch64-2.15": ("2.15", "DEFAULT (NEON) or SVE128", "SLEEF u35", 4),
    "torch-aarch64-2.15-sve256": ("2.15", "SVE256", "SLEEF u35", 8),
}
NEWEST = "torch-aarch64-2.15"

#: Names a call can pass as backend= (besides 'auto').
NAMES: List[str] = ["builtin", "mkl", "torch", "sleef"] + list(PROFILES)

# What was found, loaded or why not, per library (process-wide, like the libraries).
_LIB: Dict[str, Dict[str, Any]] = {
    "mkl": {"path": None, "reason": "oneMKL was not looked for", "tried": False},
    "torch": {"path": None, "reason": "torch's library was not looked for", "tried": False},
}
_LOAD_LOCK = threading.Lock()

# The process's defaults (set_backend, set_kernel, set_threads; the environment at import).
_STATE: Dict[str, Any] = {"backend": "auto", "path": REGISTRY["best_path"], "threads": 1}


# ---- libraries ------------------------------------------------------------------------------

def library_info(lib: str) -> Optional[Dict[str, Any]]:
    """The core's view of a library backend: None until it is loaded."""
    return _sinpe.backend_info(BACKEND_INDEX[lib])


def _load(lib: str, finder: Any) -> bool:
    """Loads a library once per process; records the path or the reason it cannot be used.
    Every caller waits for a load under way (the core's load releases the GIL)."""
    if library_info(lib) is not None:
        return True
    state = _LIB[lib]
    with _LOAD_LOCK:
        if library_info(lib) is not None:
            return True
        if state["tried"]:
            return False
        path, reason = finder()
        if path is None:
            state["reason"] = reason
        else:
            try:
                _sinpe.load(BACKEND_INDEX[lib], path)
                state["path"], state["reason"] = path, ""
            except OSError as exc:
                state["reason"] = f"{path}: {exc}"
        state["tried"] = True
        return library_info(lib) is not None


def load_mkl() -> bool:
    """The mkl wheel's library (opened at import: it is small and has no side effects)."""
    return _load("mkl", find_mkl)


def load_torch() -> bool:
    """torch's libtorch_cpu: already in the process when torch is imported; otherwise opened
    on the first call that needs it (about 0.2 s and 110 MiB)."""
    return _load("torch", find_torch_library)


def _mkl_equal() -> bool:
    info = library_info("mkl")
    return info is not None and release_matches(info["version"])


# ---- torch on 64-bit Arm ------------------------------------------------------------------

def physical_cores() -> int:
    """torch's default thread count: the physical cores (at::get_num_physical_cores)."""
    cores = set()
    try:
        base = "/sys/devices/system/cpu"
        for cpu in os.listdir(base):
            topo = os.path.join(base, cpu, "topology")
            if cpu.startswith("cpu") and cpu[3:].isdigit() and os.path.isdir(topo):
                with open(os.path.join(topo, "core_id")) as f:
                    core = f.read().strip()
                pkg_path = os.path.join(topo, "physical_package_id")
                pkg = open(pkg_path).read().strip() if os.path.exists(pkg_path) else "0"
                cores.add((pkg, core))
    except OSError:
        cores = set()
    return len(cores) or os.cpu_count() or 1


def torch_profile() -> Tuple[str, int, str]:
    """(profile, torch threads, note) of what torch on 64-bit Arm computes here: the imported
    torch's version, capability and thread count, else the newest measured torch."""
    mod = sys.modules.get("torch")
    if mod is None:
        return NEWEST, physical_cores(), (f"torch is not imported: the newest torch measured "
                                          f"({PROFILES[NEWEST][0]}) at its default threads")
    version = str(getattr(mod, "__version__", "0.0"))
    try:
        major, minor = (int(v) for v in version.split("+")[0].split(".")[:2])
    except ValueError:
        major, minor = 0, 0
    # the newest measured release not newer than this torch (the oldest for older ones)
    measured = sorted({tuple(int(v) for v in p[0].split(".")) for p in PROFILES.values()})
    known = [r for r in measured if r <= (major, minor)]
    rel = known[-1] if known else measured[0]
    release = f"{rel[0]}.{rel[1]}"
    note = "" if rel == (major, minor) else (
        f"torch {version} was not measured: using the {release} profile")
    try:
        sve256 = mod.backends.cpu.get_cpu_capability() == "SVE256"
        threads = int(mod.get_num_threads())
    except Exception:
        sve256, threads = False, physical_cores()
    name = f"torch-aarch64-{release}" + ("-sve256" if sve256 else "")
    return name, threads, note


# ---- resolving a backend name ---------------------------------------------------------------

def auto() -> str:
    """The backend 'auto' stands for right now."""
    return _auto()[0]


def _auto() -> Tuple[str, int]:
    if ARM64:
        name, threads, _ = torch_profile()
        return name, threads
    if X86_64 and "torch" in sys.modules and load_torch():
        return "torch", 0
    if X86_64 and _mkl_equal():
        return "mkl", 0
    return "builtin", 0


def resolve(name: Any) -> Tuple[str, int]:
    """(concrete backend, default torch threads) for name ('auto', 'sleef' or a backend
    name), loading its library if needed; TypeError for non-strings, ValueError for unknown
    names, RuntimeError (with the reason) if unavailable."""
    if not isinstance(name, str):
        raise TypeError(f"backend must be a backend name (str) or None, got {name!r} "
                        f"({type(name).__name__})")
    if name == "auto":
        return _auto()
    if name == "sleef":  # the profile of this platform's torch (or the newest measured)
        profile, threads, _ = torch_profile()
        return profile, threads
    if name in PROFILES:
        mod = sys.modules.get("torch")
        return name, int(mod.get_num_threads()) if ARM64 and mod is not None else physical_cores()
    if name == "builtin":
        return name, 0
    if name == "mkl":
        if load_mkl():
            return name, 0
        raise RuntimeError(f"backend 'mkl' is not available: {_LIB['mkl']['reason']}")
    if name == "torch":
        if load_torch():
            return name, 0
        raise RuntimeError(f"backend 'torch' is not available: {_LIB['torch']['reason']}")
    raise ValueError(f"unknown backend {name!r}: choose 'auto' or one of "
                     f"{', '.join(repr(n) for n in NAMES)}")


def _x86_pow_lanes() -> int:
    """torch's float32 vector width on x86-64, which decides where torch.pow switches from
    SLEEF to the C library (aten/src/ATen/native/DispatchStub.cpp: ATEN_CPU_CAPABILITY, else
    AVX512 with avx512f/vl/bw/dq, AVX2 with avx2 and fma)."""
    torch = sys.modules.get("torch")
    cap = None
    if torch is not None:
        try:
            cap = torch.backends.cpu.get_cpu_capability()
        except Exception:  # an old or partial torch: fall back to the rule
            cap = None
    if cap is None:
        cap = os.environ.get("ATEN_CPU_CAPABILITY", "").strip().upper() or None
    if cap is None:
        f = REGISTRY["cpu"]
        cap = ("AVX512" if all(f.get(k) for k in ("avx512f", "avx512vl", "avx512bw", "avx512dq"))
               else "AVX2" if f.get("avx2") and f.get("fma") else "DEFAULT")
    return {"AVX512": 16, "AVX2": 8}.get(str(cap).upper(), 0)


_POW_LANES: Dict[Any, int] = {}


def _pow_lanes() -> int:
    key = (id(sys.modules.get("torch")), os.environ.get("ATEN_CPU_CAPABILITY"))
    if key not in _POW_LANES:
        _POW_LANES[key] = _x86_pow_lanes()
    return _POW_LANES[key]


def _resolve_opts(name: Any) -> Tuple[int, int, int, int, int]:
    """(backend index, trig, lanes, default torch threads, pow lanes) for a backend name."""
    concrete, default_tt = resolve(name)
    if concrete in PROFILES:
        trig, lanes = (1 if PROFILES[concrete][2] == "SLEEF u35" else 0), PROFILES[concrete][3]
        index = BACKEND_INDEX["sleef"]
    else:
        trig, lanes, index = 0, 4, BACKEND_INDEX[concrete]
    return index, trig, lanes, default_tt or 1, _pow_lanes()


# Resolutions of a name, by what they depend on: the name, the imported torch (and on Arm its
# thread count).  Libraries only ever become loaded, and a resolution is kept only once it
# succeeded, so an entry stays true; set_backend and set_kernel need no invalidation.
_OPTS_CACHE: Dict[Any, Tuple[int, int, int, int, int]] = {}


def opts(backend: Any = None, threads: Any = None, torch_threads: Any = None) -> tuple:
    """The core's options for one call: (backend, path, threads, trig, lanes,
    torch_threads, pow_lanes) as plain values; threads and torch_threads stay as the caller
    gave them (the core checks them and names them)."""
    name = _STATE["backend"] if backend is None else backend
    torch = sys.modules.get("torch")
    key = (name, id(torch), torch.get_num_threads() if ARM64 and torch is not None else 0)
    try:
        hit = _OPTS_CACHE.get(key)
    except TypeError:  # an unhashable name: resolve says what is wrong with it
        hit = None
    if hit is None:
        hit = _resolve_opts(name)
        if isinstance(name, str) and len(_OPTS_CACHE) < 64:
            _OPTS_CACHE[key] = hit
    index, trig, lanes, default_tt, pow_lanes = hit
    return (index, _STATE["path"], _STATE["threads"] if threads is None else threads, trig,
            lanes, default_tt if torch_threads is None else torch_threads, pow_lanes)


# ---- the defaults --------------------------------------------------------------------------

def set_backend(name: Name) -> None:
    """Set the default backend: 'auto' (chosen at each call: torch's own kernels when torch
    is imported, ...: docs/backends.md), or a backend name to pin it.  Raises if that backend
    is unavailable."""
    if not isinstance(name, str):
        raise TypeError(f"backend must be a backend name (str), got {name!r} "
                        f"({type(name).__name__})")
    resolve(name)
    _STATE["backend"] = name


def get_backend() -> str:
    """The backend a call without backend= uses now (the default, resolved)."""
    return resolve(_STATE["backend"])[0]


def get_default() -> str:
    """The default as set: 'auto' or a backend name."""
    return str(_STATE["backend"])


def set_threads(n: SupportsIndex) -> None:
    """Set the default number of worker threads (1 to 256)."""
    _sinpe.check((0, _STATE["path"], n, 0, 4, 1, 0))
    _STATE["threads"] = int(n)


def get_threads() -> int:
    """The default number of worker threads."""
    return int(_STATE["threads"])


def kernels() -> List[str]:
    """The built-in backend's code paths this CPU can run, fastest last."""
    return [p[0] for p in REGISTRY["paths"] if p[1]]


def set_kernel(name: Kernel) -> None:
    """Force the built-in backend's code path: 'scalar', 'avx2' (x86-64 with AVX2 and FMA),
    'avx512' (x86-64 with AVX-512F) or 'neon' (AArch64).  Every path gives the same bits."""
    if not isinstance(name, str):
        raise TypeError(f"kernel must be one of {', '.join(repr(n) for n in PATH_NAMES)}, got "
                        f"{name!r} ({type(name).__name__})")
    if name not in PATH_NAMES:
        raise ValueError(f"unknown kernel {name!r}: choose "
                         + ", ".join(repr(n) for n in PATH_NAMES))
    k = PATH_NAMES.index(name)
    if not REGISTRY["paths"][k][1]:
        raise RuntimeError(f"kernel {name!r} is not available: this build or CPU lacks it")
    _STATE["path"] = k


def get_kernel() -> Kernel:
    """The built-in backend's code path in use."""
    k: Kernel = PATH_NAMES[_STATE["path"]]  # type: ignore[assignment]
    return k


def cpu_features() -> Dict[str, Any]:
    """What the CPU probe found: vendor and the vector features sinpe can use (x86 flags
    count only when the OS saves their registers)."""
    return dict(REGISTRY["cpu"])


# ---- reports ------------------------------------------------------------------------------

def torch_kernels() -> str:
    """The backend that computes what the imported torch computes (sinpe.torch uses it)."""
    return "torch" if X86_64 else "sleef" if ARM64 else "auto"


def backends() -> Dict[str, bool]:
    """Which backends can be used in this process (torch's library counts when it is loaded,
    or found and not known to fail)."""
    torch_ok = library_info("torch") is not None or (  # torch's oneMKL: x86-64 builds only
        X86_64 and not _LIB["torch"]["tried"] and find_torch_library()[0] is not None)
    out = {"builtin": True, "mkl": library_info("mkl") is not None, "torch": torch_ok}
    out.update({name: True for name in ["sleef"] + list(PROFILES)})  # portable C: everywhere
    return out


def _cpu() -> str:
    f = REGISTRY["cpu"]
    isa = "AVX-512" if f.get("avx512f") else "AVX2" if f.get("avx2") else "SSE"
    return f"{f.get('vendor', '?')} CPU with {isa}"


def reproduces(backend: str, torch_threads: Optional[int] = None) -> str:
    """Whose bits a backend gives, for the library actually loaded, and what would change it
    (torch_threads: the count a SLEEF profile is used with, if not the default)."""
    if backend == "builtin":
        return ("correctly rounded float32 exp/sin/cos (round to nearest, every input): the same "
                "bits on every machine; equal to torch's where torch's results are correctly "
                "rounded (about 95% of values)")
    if backend in PROFILES:
        torch_release, caps, trig, lanes = PROFILES[backend]
        _, threads, note = torch_profile()
        threads = torch_threads or threads
        return (f"torch {torch_release} on 64-bit Arm ({caps}: {trig} sin/cos, SLEEF u10 exp, "
                f"{lanes}-lane vectors) with {threads} torch thread{'s' if threads != 1 else ''} "
                "(or torch_threads=), bit for bit: the bits depend on torch's release, CPU "
                "capability and thread count (torch.set_num_threads changes them)"
                + (f"; {note}" if note else ""))
    info = library_info(backend) if backend in BACKEND_INDEX else None
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
    "positions from 134,217,737 (2^27 + 9) on: torch's vectorized float32 arange adds lane "
    "offsets in float32; sinpe rounds each integer to nearest",
)


def _cache_info() -> Dict[str, Any]:
    from . import _cache  # it imports this module
    return _cache.cache_info()


def numerics() -> Dict[str, Any]:
    """The backend calls use now, whose bits it reproduces, and what is available."""
    name = get_backend()
    mkl: Dict[str, Any] = {"loaded": False}
    torch: Dict[str, Any] = {"loaded": False, "version": torch_version()}
    for lib, d in (("mkl", mkl), ("torch", torch)):
        info = library_info(lib)
        if info is None:
            d["reason"] = _LIB[lib]["reason"]
        else:
            d.update(loaded=True, path=_LIB[lib]["path"], mkl_version=info["version"])
    if mkl["loaded"]:
        mkl["version"] = mkl.pop("mkl_version")
        mkl["threading_layer"] = library_info("mkl")["threading_layer"]
        mkl["matches_torch"] = release_matches(mkl["version"])
        if not mkl["matches_torch"]:
            mkl["why_not_chosen"] = f"not a release measured equal to torch's copy: {DIFFERENT}"
    return {
        "backend": name,
        "default": get_default(),
        "reproduces": reproduces(name),
        "differs": list(DIFFERS),
        "kernel": get_kernel(),
        "kernels": kernels(),
        "kernel_records": _records(),
        "threads": get_threads(),
        "cache": _cache_info(),
        "available": backends(),
        "mkl": mkl,
        "torch": torch,
        "cpu": cpu_features(),
        "machine": platform.machine(),
    }


def configure_default(value: Optional[str]) -> None:
    """The default at import: SINPE_BACKEND (auto, or a backend name to pin), else auto."""
    want = (value or "").strip().lower() or "auto"
    if want != "auto" and want not in NAMES:
        raise ValueError(f"SINPE_BACKEND={os.environ.get('SINPE_BACKEND')!r} is not valid: use "
                         f"auto or one of {', '.join(NAMES)} (or leave it unset)")
    try:
        set_backend(want)
    except RuntimeError as exc:
        raise RuntimeError(f"SINPE_BACKEND={want!r}: {exc}") from None
