"""The public functions: names and defaults resolved here (sinpe._choice), everything else
done by one core job each (sinpe._sinpe: table, add, rope, map, freqs)."""
from __future__ import annotations

import os
from typing import Any, Literal, Optional, SupportsFloat, SupportsIndex

import numpy as np
import numpy.typing as npt

from . import _cache, _dtypes, _sinpe
from ._choice import opts as _opts
from ._types import Backend, DType, X

#: A fresh table of 4 MiB or more is advised to use transparent huge pages (docs/speed.md);
#: SINPE_FRESH=plain turns that off (for measurements).
HUGE = os.environ.get("SINPE_FRESH", "").strip().lower() != "plain"
_PE_NAMES = ("out", "max_len", "d_model")
LEAD, OWN = 1, 2  # the table job's flags
_FUNCS = {"exp": 0, "sin": 1, "cos": 2}


def _dtype_args(dtype: Any, out: Any) -> Any:
    """The dtype a result is made in: dtype= (resolved), or float32 without out=; with out=
    and no dtype=, none (out's own)."""
    return None if dtype is None and out is not None else _dtypes.resolve(dtype)


def positional_encoding(max_len: Optional[SupportsIndex] = None,
                        d_model: Optional[SupportsIndex] = None, base: SupportsFloat = 10000.0,
                        *, positions: Optional[npt.ArrayLike] = None, offset: SupportsIndex = 0,
                        dtype: DType = None, out: Any = None, backend: Backend = None,
                        torch_threads: Optional[SupportsIndex] = None,
                        threads: Optional[SupportsIndex] = None) -> Any:
    """Sinusoidal positional-encoding table, shape (max_len, d_model).

    pe[pos, 2i] = sin(pos * div[i]) and pe[pos, 2i+1] = cos(pos * div[i]) with
    div[i] = exp(2i * -log(base) / d_model), computed step by step in float32 as the
    reference PyTorch module does (bit for bit with torch on the backends with torch's bits).

    offset: the first row's position (rows offset .. offset+max_len-1).
    positions: instead of max_len, an array of positions of any shape (integers, or reals
        rounded to float32 as torch's .float() does; negative and fractional positions work);
        the result has shape positions.shape + (d_model,).
    dtype: float32 (default), float16, bfloat16 (with ml_dtypes) or float64, in any spelling
        np.dtype accepts (or a torch dtype); rounded from the float32 values as torch's
        .half(), .bfloat16() and .double() round them.
    out: a writable array or buffer (NumPy array, memoryview, ctypes array, the NumPy view of
        a torch CPU tensor) of the result's shape, or of (1, max_len, d_model), in any layout
        whose elements do not share memory; filled and returned.  Its dtype is the result's
        (dtype= must agree).
    backend: None (sinpe.get_backend(): 'auto' chooses torch's bits when it can), 'torch'
        (the installed torch's own kernels), 'mkl' (the mkl wheel), 'builtin' (correctly
        rounded), 'sleef' or a 'torch-aarch64-...' profile (torch on 64-bit Arm).
    torch_threads: for the 'sleef' profiles, torch's thread count (its vectors depend on it);
        None: the running torch's, or torch's default.
    threads: worker threads (None: sinpe.get_threads()); the bits do not depend on it.
    """
    if d_model is None:
        raise TypeError("positional_encoding() needs d_model")
    if (max_len is None) == (positions is None):
        raise TypeError("positional_encoding() needs exactly one of max_len and positions")
    core = _opts(backend, threads, torch_threads)
    lease = _cache.table_rows_lease(core, max_len, d_model, base, offset, positions)
    return _leased(lease, _sinpe.table, core, out, max_len, d_model, base, offset, positions,
                   None, _dtype_args(dtype, out), dtype, 0, None, _PE_NAMES, HUGE, True,
                   LEAD if positions is None else 0)


def _leased(lease: Any, f: Any, *args: Any) -> Any:
    """f(*args, kept): a core call with the cache's rows (None: none; a tuple: kept rows
    read as they are; a Lease: rows to fill, settled after the call)."""
    if lease is None or type(lease) is tuple:
        return f(*args, lease)
    try:
        r = f(*args, lease.kept)
    except BaseException:
        lease.failed()
        raise
    lease.done()
    return r


def empty_table(max_len: SupportsIndex, d_model: SupportsIndex, base: SupportsFloat = 10000.0,
                *, dtype: DType = None, backend: Backend = None,
                torch_threads: Optional[SupportsIndex] = None,
                threads: Optional[SupportsIndex] = None) -> Any:
    """An uninitialized array of the shape and dtype positional_encoding would return, after
    every check it makes (sizes, base, dtype, memory), for callers that fill a table in
    pieces with out= and offset= (the command line)."""
    return _sinpe.table(_opts(backend, threads, torch_threads), None, max_len, d_model, base, 0,
                        None, None, _dtypes.resolve(dtype), dtype, 0, None, _PE_NAMES, HUGE,
                        False, 0, None)


def add_pe(x: X, /, base: SupportsFloat = 10000.0, *, offset: SupportsIndex = 0,
           positions: Optional[npt.ArrayLike] = None, max_len: Optional[SupportsIndex] = None,
           backend: Backend = None, torch_threads: Optional[SupportsIndex] = None,
           threads: Optional[SupportsIndex] = None) -> X:
    """Add the positional encoding to x in place and return x.

    x: a writable array of shape (seq_len, d_model) or (..., seq_len, d_model), dtype
        float32, float16, bfloat16 or float64, in any layout whose elements do not share
        memory (NumPy arrays and buffer-protocol objects).  Rows offset .. offset+seq_len-1
        of the table are added to every element of the leading axes, bit for bit as the
        reference forward in eval mode (float32; other dtypes as torch's in-place
        x.add_(pe)).  Rows are computed, so there is no max_len limit.
    positions: instead of offset, positions broadcastable to x.shape[:-1] (for packed
        sequences whose positions restart).
    max_len: the length of the table the rows come from (the reference module's max_len;
        None: 5000, or offset+seq_len if larger); only the 'sleef' profiles' bits can
        depend on it.  backend, torch_threads, threads: as for positional_encoding.
    """
    table_rows, grow = (5000, True) if max_len is None else (max_len, False)
    core = _opts(backend, threads, torch_threads)
    lease = _cache.add_rows(core, x, base, offset, positions, table_rows, grow)
    _leased(lease, _sinpe.add, core, x, base, offset, positions, table_rows, grow)
    if type(x).__module__ == "torch":  # written outside autograd: its version counter moves
        _bump_version(x)
    return x


def _bump_version(t: Any) -> None:
    if not _TORCH:
        _torch_route()
    _TORCH[0]((t,))


_TORCH: list = []  # torch's C-level version bump, once a tensor was seen


def _torch_route() -> None:
    """Hands the binding torch's C-level export of a tensor (the route of later calls; the
    first call took __dlpack__) and keeps torch's C-level version bump."""
    import torch  # imported: x is one of its tensors
    to_dlpack = getattr(torch._C, "_to_dlpack_versioned", None)
    if to_dlpack is not None:
        _sinpe.tensor_route(torch.Tensor, to_dlpack)
    bump = getattr(torch._C, "_increment_version", None)
    _TORCH.append(bump if bump is not None else torch.autograd.graph.increment_version)


def elementwise(func: Literal["exp", "sin", "cos"], x: npt.NDArray[np.float32], /, *,
                backend: Backend = None,
                torch_threads: Optional[SupportsIndex] = None) -> npt.NDArray[np.float32]:
    """func(x) elementwise for func in 'exp', 'sin', 'cos' and a float32 ndarray x, as the
    chosen backend computes it.  Returns a new C-contiguous array."""
    if func not in _FUNCS:
        raise ValueError(f"func must be 'exp', 'sin' or 'cos', got {func!r}")
    r: npt.NDArray[np.float32] = _sinpe.map(_opts(backend, None, torch_threads), _FUNCS[func], x)
    return r


def _round(x: npt.NDArray[np.float32], dtype: DType) -> Any:
    """The float32 array x rounded to dtype (float16, bfloat16 or float64) as the tables and
    add_pe round it (for tests)."""
    return _sinpe.round(x, _dtypes.resolve(dtype))


def table_job(core: tuple, *, rows: Any = None, positions: Any = None, grid: Any = None,
              freq: np.ndarray, col: Any, comp: Any = None, scale: Any = None,
              zero_row: int = -1, trow_shift: int = 0, f64_div: bool = False, offset: Any = 0,
              table_rows: Any = 0, dtype: Any = None, out: Any = None,
              names: tuple = ("out", "rows", "columns"), fill: bool = True,
              lead: bool = False, own: bool = False) -> Any:
    """A preset table (the presets' one entry into the core) with resolved options core:
    rows offset .. offset+rows-1, or positions (an array-like, with a trailing axis of 2
    when comp names component 1), or a grid (h, w, lead); freq: float32 (or float64)
    frequencies, one per angle; col: 4 * angle + kind (0 sin, 1 cos, 2 angle, 3 zero) per
    column.  fill=False: every check, nothing written (returns out, or a fresh array).
    lead: out may have one more leading axis of length 1 (a library's (1, L, d) result).
    own: by offset, torch's tensor is the rows themselves (arange(offset, offset + rows)),
    not a table from row 0 (only SLEEF's bits can tell)."""
    preset = (freq, np.asarray(col, np.int64), comp, scale, zero_row, trow_shift, f64_div)
    return _sinpe.table(core, out, rows, None, 10000.0, offset, positions, grid,
                        _dtype_args(dtype, out), dtype, table_rows, preset, names, HUGE, fill,
                        (LEAD if lead else 0) | (OWN if own else 0), None)


def admit(shape: tuple, dtype: Any = None, noun: str = "a table") -> None:
    """The core's memory rule for an array about to be made (a preset's result or inputs),
    before anything is allocated."""
    try:
        d = _dtypes.resolve(dtype)
    except TypeError:  # an input's type (positions, masks)
        d = np.dtype(dtype)
    _sinpe.admit(tuple(shape), d, noun)


def check_opts(core: tuple) -> tuple:
    """The core's rules for a call's options (threads, torch_threads), before a caller that
    builds arrays of its own (presets, apply_rope) allocates anything."""
    _sinpe.check(core)
    return core


def positive(value: Any, name: str) -> float:
    """value as a float, by the core's rule of a base (finite and > 0)."""
    return float(_sinpe.positive(value, name))


_FREQ_KINDS = {"exp_mul": 0, "exp_muldiv": 1, "pow": 2, "pow64": 3}


def freq_job(core: tuple, kind: str, n: int, *, start: int = 0, step: int = 1, group: int = 1,
             a: float = 0.0, b: float = 1.0, m: float = 1.0, base: Any = 1.0,
             recip: bool = False, base_name: str = "base") -> np.ndarray:
    """A preset's frequency vector (sinpe.h: sinpe_freq) with resolved options core."""
    return _sinpe.freqs(core, _FREQ_KINDS[kind], n, start, step, group, a, b, m, base, recip,
                        base_name)
