"""The package's one caller of the C core (``sinpe._sinpe``), by keyword: the core's jobs
(sinpe.h: TABLE, ADD, ROPE, MAP, FREQS), its rules (options, memory, bases), its registry and
thread runtime, and torch's C-level routes; with the presets' building blocks on these
(arguments converted, arrays admitted before anything is allocated, the float32 roundings).

Options come in resolved (sinpe._backends.policy resolves a call's options); every other
module of the package reaches the core through this one, which imports only the floors below
it (_types, _dtypes, _tensors).
"""
from __future__ import annotations

import math
import operator
import os
from typing import (Any, Callable, Dict, List, Optional, Sequence, SupportsFloat, SupportsIndex,
                    Tuple)

import numpy as np
import numpy.typing as npt

from . import _dtypes, _sinpe, _tensors
from ._types import DType, Opts, PresetOpts

#: A fresh table of 4 MiB or more is advised to use transparent huge pages (docs/speed.md);
#: SINPE_FRESH=plain turns that off (for measurements).
HUGE = os.environ.get("SINPE_FRESH", "").strip().lower() != "plain"
_PE_NAMES = ("out", "max_len", "d_model")
LEAD, OWN = 1, 2  # the table job's flags
#: a preset table's column kinds: column = 4 * angle + kind
SIN, COS, ANGLE, ZERO = 0, 1, 2, 3


def _dtype_args(dtype: Any, out: Any) -> Any:
    """The dtype a result is made in: dtype= (resolved), or float32 without out=; with out=
    and no dtype=, none (out's own)."""
    return None if dtype is None and out is not None else _dtypes.resolve(dtype)


# ---- the core's jobs with resolved options --------------------------------------------------

def empty_table(core: Opts, max_len: SupportsIndex, d_model: SupportsIndex,
                base: SupportsFloat = 10000.0, *, dtype: DType = None) -> np.ndarray:
    """An uninitialized array of the shape and dtype positional_encoding would return, after
    every check it makes (sizes, base, dtype, memory), for callers that fill a table in
    pieces with out= and offset= (the command line); core: resolved options."""
    t: np.ndarray = _sinpe.table(opts=core, out=None,
                                 rows=max_len, cols=d_model, base=base, offset=0,
                                 positions=None, grid=None, dtype=_dtypes.resolve(dtype),
                                 dtype_asked=dtype, table_rows=0, preset=None, names=_PE_NAMES,
                                 huge=HUGE, fill=False, flags=0, kept=None)
    return t



def pe_table(core: Opts, out: Any, max_len: Any, d_model: Any, base: Any, offset: Any,
             positions: Any, dtype: Any, kept: Any) -> Any:
    """positional_encoding's table (the TABLE job), kept: the cache's rows (sinpe._api)."""
    return _sinpe.table(opts=core, out=out, rows=max_len, cols=d_model, base=base,
                        offset=offset, positions=positions, grid=None,
                        dtype=_dtype_args(dtype, out), dtype_asked=dtype, table_rows=0,
                        preset=None, names=_PE_NAMES, huge=HUGE, fill=True,
                        flags=LEAD if positions is None else 0, kept=kept)


def add_job(core: Opts, x: Any, base: Any, offset: Any, positions: Any, table_rows: Any,
            grow: bool, kept: Any) -> Any:
    """add_pe's add (the ADD job), kept: the cache's rows (sinpe._api)."""
    return _sinpe.add(opts=core, x=x, base=base, offset=offset, positions=positions,
                      table_rows=table_rows, grow=grow, kept=kept)


def rope_job(core: Opts, x: Any, cos: Any, sin: Any, seq_axis: int, batch_axis: int,
             pairs: bool, src: Any = None, x2: Any = None, src2: Any = None,
             names: Optional[Tuple[str, str, str, str, str, str]] = None, form: int = 0) -> None:
    """A rotation (the ROPE job): x (and x2) rotated by the tables cos and sin, from src
    (and src2) or in place, in torch's eager ops or an engine's form (sinpe._producers);
    the job checks core's options itself (one call)."""
    _sinpe.rope(core, x, cos, sin, seq_axis, batch_axis, pairs, src, x2, src2, names, form)


def map_job(core: Opts, func: int, x: Any) -> Any:
    """func(x) elementwise (the MAP job: 0 exp, 1 sin, 2 cos; 3 glibc's log)."""
    return _sinpe.map(core, func, x)


#: the core's held add (sinpe.h: sinpe_add_held): (path, threads, rows, x) -> whether done,
#: called straight from C by add_pe's held route (functools.partial of it)
add_held = _sinpe.add_held


def physical_memory() -> int:
    """This machine's physical memory in bytes (0: unknown), the core's figure."""
    return int(_sinpe.physical_memory())


def backend_name(core: Opts) -> str:
    """The name of core's backend, as the core names it."""
    return _sinpe.BACKENDS[core.backend]


def _round(x: npt.NDArray[np.float32], dtype: DType) -> np.ndarray:
    """The float32 array x rounded to dtype (float16, bfloat16 or float64) as the tables and
    add_pe round it (for tests)."""
    r: np.ndarray = _sinpe.round(x, _dtypes.resolve(dtype))
    return r


def table_job(core: Opts, *, rows: Any = None, positions: Any = None, grid: Any = None,
              freq: np.ndarray, col: Any, comp: Any = None, scale: Any = None,
              zero_row: int = -1, trow_shift: int = 0, f64_div: bool = False, offset: Any = 0,
              table_rows: Any = 0, dtype: Any = None, out: Any = None,
              names: Tuple[str, str, str] = ("out", "rows", "columns"), fill: bool = True,
              lead: bool = False, own: bool = False, out_scale: Any = None) -> Any:
    """A preset table (the presets' one entry into the core) with resolved options core:
    rows offset .. offset+rows-1, or positions (an array-like, with a trailing axis of 2
    when comp names component 1), or a grid (h, w, lead); freq: float32 (or float64)
    frequencies, one per angle; col: 4 * angle + kind (0 sin, 1 cos, 2 angle, 3 zero) per
    column.  fill=False: every check, nothing written (returns out, or a fresh array).
    lead: out may have one more leading axis of length 1 (a library's (1, L, d) result).
    own: by offset, torch's tensor is the rows themselves (arange(offset, offset + rows)),
    not a table from row 0 (only SLEEF's bits can tell).  out_scale: each float32 value
    multiplied by it in float32 before the rounding to dtype (transformers' attention scaling)."""
    preset = (freq, np.asarray(col, np.int64), comp, scale, zero_row, trow_shift, f64_div,
              out_scale)
    if fill and out is not None and _tensors.writable(out, names[0]):
        bump_version(out)
    return _sinpe.table(opts=core, out=out, rows=rows, cols=None, base=10000.0, offset=offset,
                        positions=positions, grid=grid, dtype=_dtype_args(dtype, out),
                        dtype_asked=dtype, table_rows=table_rows, preset=preset, names=names,
                        huge=HUGE, fill=fill, flags=(LEAD if lead else 0) | (OWN if own else 0),
                        kept=None)


def admit(shape: Tuple[int, ...], dtype: Any = None, noun: str = "a table") -> None:
    """The core's memory rule for an array about to be made (a preset's result or inputs),
    before anything is allocated."""
    try:
        d = _dtypes.resolve(dtype)
    except TypeError:  # an input's type (positions, masks)
        d = np.dtype(dtype)
    _sinpe.admit(tuple(shape), d, noun)


def check_opts(core: Opts) -> Opts:
    """The core's rules for a call's options (threads, torch_threads), before a caller that
    builds arrays of its own (presets, apply_rope) allocates anything."""
    _sinpe.check(core)
    return core


def positive(value: Any, name: str) -> float:
    """value as a float, by the core's rule of a base (finite and > 0)."""
    return float(_sinpe.positive(value, name))


_FREQ_KINDS = {"exp_mul": 0, "exp_muldiv": 1, "pow": 2, "pow64": 3, "exp_log": 4}


def freq_job(core: Opts, kind: str, n: int, *, start: int = 0, step: int = 1, group: int = 1,
             a: float = 0.0, b: float = 1.0, m: float = 1.0, base: Any = 1.0,
             recip: bool = False, base_name: str = "base") -> np.ndarray:
    """A preset's frequency vector (sinpe.h: sinpe_freq) with resolved options core."""
    v: np.ndarray = _sinpe.freqs(opts=core, kind=_FREQ_KINDS[kind], n=n, start=start,
                                 step=step, group=group, a=a, b=b, m=m, base=base, recip=recip,
                                 base_name=base_name)
    if kind == "pow" and backend_name(core) == "numpy":
        v = numpy_pow(v.size, start, step, group, a, b, base, recip)
    return v


def numpy_pow(n: int, start: int, step: int, group: int, a: float, b: float, base: Any,
              recip: bool) -> np.ndarray:
    """The POW frequency vector (sinpe.h) with NumPy's own float32 ``np.power`` for the
    'numpy' backend: NumPy picks its power loop per CPU (Intel SVML's powf on AVX-512
    machines, the C library's powf elsewhere), so the installed NumPy on this machine computes
    it, as the library's code would.  The core has checked the arguments (same vector, its
    pow step aside); the other steps are the core's float32 operations: k_i = f32(start +
    step * (i // group)), then k_i * f32(a) when a != 0, else k_i / f32(b)."""
    k = (start + step * (np.arange(n, dtype=np.int64) // group)).astype(np.float32)
    e = k * np.float32(a) if np.float32(a) != 0 else k / np.float32(b)
    with np.errstate(all="ignore"):
        r: np.ndarray = np.power(np.full(n, np.float32(float(base))), e)
        return np.float32(1) / r if recip else r


# ---- the core's registry, thread runtime and torch routes ------------------------------------

#: the core's backends and code paths, by index (sinpe.h: sinpe_backend_id, sinpe_path_id)
BACKENDS: Tuple[str, ...] = tuple(_sinpe.BACKENDS)
PATHS: Tuple[str, ...] = tuple(_sinpe.PATHS)


def registry() -> Dict[str, Any]:
    """The core's backends as data (name, kind, library, symbols, ...), one record each."""
    return _sinpe.registry()


def backend_info(index: int) -> Optional[Dict[str, Any]]:
    """What the core knows now of backend index (loaded, its library's path, ...)."""
    return _sinpe.backend_info(index)


def load(index: int, path: str) -> None:
    """The core loads backend index's library from path (raises OSError if it cannot)."""
    _sinpe.load(index, path)


def adopt_openmp(lib: Any) -> None:
    """The core's workers run on lib's OpenMP runtime from now on (None: its own threads)."""
    _sinpe.adopt_openmp(lib)


def openmp_adopted() -> bool:
    """Whether the core's workers run on an adopted OpenMP runtime."""
    return bool(_sinpe.openmp_adopted())


_TORCH_C: List[Callable[..., Any]] = []  # torch's C-level version bump, once torch was seen


def bump_version(x: Any) -> None:
    """A torch tensor written outside autograd: its version counter moves, as torch's own
    in-place ops move it (a graph that saved it then refuses to backpropagate).  Inference
    tensors have none."""
    torch = _tensors.torch_of(x)
    if torch is not None and not x.is_inference():
        torch_seen(torch)
        _TORCH_C[0]((x,))


def torch_seen(torch: Any) -> None:
    """Once per process, when torch tensors reach the core (a tensor written, sinpe.torch
    imported): the binding takes torch's C-level export of a tensor from then on (instead of
    the Python-level __dlpack__; docs/speed.md), and torch's C-level version bump is kept."""
    if _TORCH_C:
        return
    to_dlpack = getattr(torch._C, "_to_dlpack_versioned", None)
    bump = getattr(torch._C, "_increment_version", None)
    if to_dlpack is not None:  # (the held add moves a version in C, right after its write)
        _sinpe.tensor_route(torch.Tensor, to_dlpack, bump)
    _TORCH_C.append(bump if bump is not None else torch.autograd.graph.increment_version)


# ---- the presets' arguments, options, admission, tables -------------------------------------

def _int(value: Any, name: str, minimum: int = 0) -> int:
    """An integer parameter (NumPy integers too; bool, float and str refused)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r} "
                        f"({type(value).__name__})") from None
    if v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {v}")
    return v


def _real(value: Any, name: str) -> float:
    """A real parameter (bool, str and complex refused)."""
    if isinstance(value, (bool, np.bool_, str, bytes, complex, np.complexfloating)):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {value!r} "
                        f"({type(value).__name__})") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


def _positive(value: Any, name: str) -> float:
    """A base, period or scale: finite and > 0, by the core's rule."""
    return positive(value, name)


def _admit(shape: Tuple[int, ...], opts: PresetOpts, noun: str = "a table",
           dtype: Any = None) -> None:
    """Refuse, before any work, an array that cannot be made (the core's rule and figures):
    the result (not with out=, whose shape the core checks), or an input built here."""
    if noun != "a table" or opts.out is None:
        admit(shape, dtype if noun != "a table" else opts.dtype, noun)


def _freqs(kind: str, n: int, opts: PresetOpts, **kw: Any) -> np.ndarray:
    return freq_job(opts.core, kind, n, **kw)


def _table(rows: Any, freq: np.ndarray, col: Sequence[int], opts: PresetOpts,
           **kw: Any) -> np.ndarray:
    """The preset table of rows: an int (positions offset .. offset + rows - 1), an array of
    positions, or a grid (grid=(h, w, lead))."""
    where = {"rows": rows} if isinstance(rows, int) else {} if rows is None else {"positions": rows}
    t: np.ndarray = table_job(opts.core, freq=freq, col=col, dtype=opts.dtype,
                              out=opts.out, **where, **kw)
    return t


def _result(shape: Tuple[int, ...], opts: PresetOpts) -> np.ndarray:
    """The array a batch-repeated result goes into: out= (checked by the core's rules for a
    result of that shape: a writable buffer of the result's dtype whose elements do not
    share memory, else untouched), as an ndarray view, or a fresh array (admitted first)."""
    out = opts.out
    if out is None:
        _admit(shape, opts)
        return np.empty(shape, _dtypes.resolve(opts.dtype))
    # torch's rules for an in-place write first (nested, vmapped, inference tensors: named
    # before the core reaches for the memory), then the core's
    tensor = _tensors.writable(out, "out")
    rows = np.broadcast_to(np.float32(0), shape[:-1])
    table_job(opts.core, positions=rows, freq=np.zeros(1, np.float32),
                   col=[ZERO] * shape[-1], dtype=opts.dtype, out=out, fill=False)
    if tensor:  # about to be written outside autograd
        bump_version(out)
    return _tensors.memory(out)


def _round_to(values: np.ndarray, dtype: Any) -> np.ndarray:
    """float32 values rounded to dtype as torch rounds them (and the tables do)."""
    if dtype is None or _dtypes.resolve(dtype) == np.float32:
        return values
    return _round(np.ascontiguousarray(values, np.float32).ravel(), dtype).reshape(values.shape)


def _rope_inv_freq(dim: int, theta: Any, opts: PresetOpts, name: str = "theta") -> np.ndarray:
    """``1 / (theta ** (arange(0, dim, 2).float() / dim))``: HF Llama's default rope,
    rotary-embedding-torch's 'lang' freqs and tatp22's inv_freq (with dim = its channels)."""
    return _freqs("pow", (dim + 1) // 2, opts, step=2, b=float(dim), base=theta, recip=True,
                  base_name=name)
