"""Policy: which backend, code path and thread count a call uses, and whose bits that gives.

The C core takes plain values (backend and path indices, counts); every name and default is
decided here, once per call (``opts``); C calls back into Python only for the cache's buffer
on a miss (docs/layout.md).

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
import sys
from typing import Any, Dict, List, Optional, Set, SupportsIndex, Tuple, cast

from .. import _dtypes, _jobs
from .._memo import Memo
from .._types import Kernel, Name, Opts, PresetOpts
from .._warn import warn_once

#: names whose warning a filter ignored during this resolution (not kept: it is said later)
_UNSETTLED: Set[str] = set()
from . import records, runtime
from .records import ARM64, BACKEND_INDEX, NAMES, PATH_NAMES, PROFILES, REGISTRY, X86_64

# The process's defaults (set_backend, set_kernel, set_threads; the environment at import).
_STATE: Dict[str, Any] = {"backend": "auto", "path": REGISTRY["best_path"], "threads": 1}


# ---- resolving a backend name ---------------------------------------------------------------

def auto() -> str:
    """The backend 'auto' stands for right now."""
    return _auto()[0]


def _auto() -> Tuple[str, int]:
    for rec in records.BACKENDS:  # in the order 'auto' tries them
        if rec.auto is not None and rec.auto():
            return resolve(rec.name)
    raise AssertionError("the built-in backend is always there")


def resolve(name: Any, warn: bool = True) -> Tuple[str, int]:
    """(concrete backend, default torch threads) for name ('auto', 'sleef' or a backend
    name), loading its library if needed; TypeError for non-strings, ValueError for unknown
    names, RuntimeError (with the reason) if unavailable.  A plain name whose profile stands
    for an installed release that was not measured ('numpy' with NumPy 1.26, 'sleef' with
    an unmeasured torch imported) gives a SinpeWarning once per release and process (not
    with warn=False); opts() keeps the resolution, so a call resolves it once."""
    if not isinstance(name, str):
        raise TypeError(f"backend must be a backend name (str) or None, got {name!r} "
                        f"({type(name).__name__})")
    if name == "auto":
        return _auto()
    rec = records.BY_NAME.get(name) or records.BY_PROFILE.get(name)
    if rec is None:
        raise ValueError(f"unknown backend {name!r}: choose 'auto' or one of "
                         f"{', '.join(repr(n) for n in NAMES)}")
    if rec.profile_of is not None and name == rec.name:  # the profile of what is installed
        profile, threads, _ = rec.profile_of()  # (or of the newest measured)
        unmeasured = rec.unmeasured() if rec.unmeasured is not None else None
        if unmeasured is not None and warn:  # another release's bits: said once per release
            if not warn_once(*unmeasured):  # ignored by a filter at the caller's line: the
                _UNSETTLED.add(name)  # resolution is not kept, so a later call warns
        return profile, threads
    if name in PROFILES:
        mod = sys.modules.get("torch")
        return name, (int(mod.get_num_threads()) if ARM64 and mod is not None
                      else records.physical_cores())
    if name in rec.profiles:  # a framework's release
        return name, 0
    if rec.finder is not None and not records.load(name):
        raise RuntimeError(f"backend {name!r} is not available: {records.reason(name)}")
    return name, 0


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


_POW_LANES: Memo[Any, int] = Memo(16)


def _pow_lanes() -> int:
    key = (id(sys.modules.get("torch")), os.environ.get("ATEN_CPU_CAPABILITY"))
    try:
        return _POW_LANES[key]
    except KeyError:  # (not known yet, or forgotten by clear_cache meanwhile)
        n = _POW_LANES[key] = _x86_pow_lanes()
        return n


def _resolve_opts(name: Any) -> Tuple[int, int, int, int, int]:
    """(backend index, trig, lanes, default torch threads, pow lanes) for a backend name."""
    concrete, default_tt = resolve(name)
    if concrete in PROFILES:
        trig, lanes = (1 if PROFILES[concrete][2] == "SLEEF u35" else 0), PROFILES[concrete][3]
        index = BACKEND_INDEX["sleef"]
    else:  # a framework's profile selects its backend, and its variant (trig)
        rec = records.BY_PROFILE.get(concrete)
        trig, lanes = (rec.profiles[concrete][3] if rec is not None else 0), 4
        index = BACKEND_INDEX[rec.name if rec is not None else concrete]
    return index, trig, lanes, default_tt or 1, _pow_lanes()


# Resolutions of a name, by what they depend on: the name, the imported torch (and on Arm its
# thread count).  Libraries only ever become loaded, and a resolution is kept only once it
# succeeded, so an entry stays true; set_backend and set_kernel need no invalidation.
_OPTS_CACHE: Memo[Any, Tuple[int, int, int, int, int]] = Memo(64)
_RT = runtime._RT


def opts(backend: Any = None, threads: Any = None, torch_threads: Any = None) -> Opts:
    """The core's options for one call: (backend, path, threads, trig, lanes,
    torch_threads, pow_lanes) as plain values; threads and torch_threads stay as the caller
    gave them (the core checks them and names them)."""
    name = _STATE["backend"] if backend is None else backend
    torch = sys.modules.get("torch")
    if torch is not None and torch is not _RT["torch"]:  # whose threads: once per torch
        runtime.follow()
    key = (name,) + _torch_key()
    try:
        hit = _OPTS_CACHE.get(key)
    except TypeError:  # an unhashable name: resolve says what is wrong with it
        hit = None
    if hit is None:
        hit = _resolve_opts(name)
        if isinstance(name, str) and not _UNSETTLED:
            _OPTS_CACHE[key] = hit
        _UNSETTLED.clear()
    index, trig, lanes, default_tt, pow_lanes = hit
    return Opts(index, _STATE["path"], _STATE["threads"] if threads is None else threads, trig,
                lanes, default_tt if torch_threads is None else torch_threads, pow_lanes)


def token() -> Tuple[Any, ...]:
    """What a call's options depend on besides its own arguments: the defaults, the
    imported torch (on Arm its threads), ATEN_CPU_CAPABILITY.  Equal tokens and arguments give
    equal options once their resolution is kept (settled): a caller may keep what it made of
    them (apply_rope's plans)."""
    return (_STATE["backend"], _STATE["path"], _STATE["threads"]) + _torch_key() \
        + (_aten_capability(),)


def _torch_key() -> Tuple[int, int]:
    """What a resolution depends on of torch: the module imported (its id), on Arm its
    threads (the SLEEF profiles' lanes follow them)."""
    torch = sys.modules.get("torch")
    return id(torch), torch.get_num_threads() if ARM64 and torch is not None else 0


def _aten_capability() -> Any:
    """ATEN_CPU_CAPABILITY as os.environ holds it (its encoded mapping, read directly: a call's
    plan reads it every call, where os.environ.get encodes the name each time)."""
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict):
        return data.get(_ATEN_KEY)
    return os.environ.get("ATEN_CPU_CAPABILITY")


_ATEN_KEY: Any = getattr(os.environ, "encodekey", lambda k: k)("ATEN_CPU_CAPABILITY")


def settled(backend: Any) -> bool:
    """The resolution of backend (None: the default) is kept: it no longer changes for the
    same token."""
    name = _STATE["backend"] if backend is None else backend
    try:
        return (name,) + _torch_key() in _OPTS_CACHE
    except TypeError:
        return False


def call_opts(dtype: Any, out: Any, backend: Any, threads: Any, torch_threads: Any, *,
              check: bool = True) -> PresetOpts:
    """A call's options, resolved once (the package's one resolver of a call's options: the
    presets, apply_rope, the HF rope): dtype= checked, and the core's (backend, path,
    threads, ...), checked by the core's rules before any work (check=False: by the call's
    first job, no separate call for them)."""
    if dtype is not None:
        _dtypes.resolve(dtype)
    core = opts(backend, threads, torch_threads)
    return PresetOpts(dtype, out, _jobs.check_opts(core) if check else core)


def load_mkl() -> bool:
    """The mkl wheel's library (opened at import: it is small and has no side effects)."""
    return records.load("mkl")


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
    _jobs.check_opts(Opts(0, _STATE["path"], n, 0, 4, 1, 0))
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
    return cast(Kernel, PATH_NAMES[_STATE["path"]])  # the core's path names are Kernel's


def cpu_features() -> Dict[str, Any]:
    """What the CPU probe found: vendor and the vector features sinpe can use (x86 flags
    count only when the OS saves their registers)."""
    return dict(REGISTRY["cpu"])


# ---- reports ------------------------------------------------------------------------------

def torch_kernels() -> Name:
    """The backend that computes what the imported torch computes (sinpe.torch uses it)."""
    return "torch" if X86_64 else "sleef" if ARM64 else "auto"


def backends() -> Dict[str, bool]:
    """Which backends can be used in this process (torch's library counts when it is loaded,
    or found and not known to fail); the profiles are portable C, usable everywhere."""
    out = {r.name: r.available() for r in sorted(records.BACKENDS,
                                                 key=lambda r: BACKEND_INDEX[r.name])}
    out.update({p: r.available() for p, r in records.BY_PROFILE.items()})
    return out


def reproduces(backend: str, torch_threads: Optional[int] = None) -> str:
    """Whose bits a backend gives, for the library actually loaded, and what would change it
    (torch_threads: the count a SLEEF profile is used with, if not the default)."""
    rec = records.BY_NAME.get(backend) or records.BY_PROFILE.get(backend)
    if rec is None:
        raise ValueError(f"unknown backend {backend!r}: choose one of "
                         f"{', '.join(repr(n) for n in NAMES)}")
    return rec.sentence(backend, torch_threads)


def configure_default(value: Optional[str]) -> None:
    """The default at import: SINPE_BACKEND (auto, or a backend name to pin), else auto."""
    want = (value or "").strip().lower() or "auto"
    if want != "auto" and want not in NAMES:
        raise ValueError(f"SINPE_BACKEND={os.environ.get('SINPE_BACKEND')!r} is not valid: use "
                         f"auto or one of {', '.join(NAMES)} (or leave it unset)")
    try:  # checked now; a warning it has (a release not measured) comes with its first use,
        resolve(want, warn=False)  # at the caller's line (the command line's: its own format)
    except RuntimeError as exc:
        raise RuntimeError(f"SINPE_BACKEND={want!r}: {exc}") from None
    _STATE["backend"] = want
