"""The public functions: dtype handling and positions around the C core.

float32 calls go straight to the C core (``sinpe._sinpe``); other dtypes are
rounded from the float32 table (round to nearest even, as torch's ``.half()``,
``.bfloat16()`` and ``.double()`` of the reference buffer do), and add_pe on
them adds in the wider of the two types and rounds once, as torch's in-place
``x.add_(pe)`` does.
"""
from __future__ import annotations

from typing import Any, Literal, Optional, SupportsFloat, SupportsIndex, TypeVar, Union

import numpy as np
import numpy.typing as npt

from . import _sinpe

Backend = Optional[Literal["builtin", "mkl"]]
DTypeName = Literal["float32", "float16", "bfloat16", "float64", "half", "double", "float"]
_X = TypeVar("_X", bound="np.ndarray[Any, Any]")

_NAMES = {"float32": np.float32, "float16": np.float16, "float64": np.float64,
          "half": np.float16, "double": np.float64, "float": np.float32}


def _bfloat16() -> Any:
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError("dtype bfloat16 needs the ml_dtypes package "
                        "(pip install 'sinpe[bfloat16]')") from None
    return np.dtype(ml_dtypes.bfloat16)


def resolve_dtype(dtype: Any) -> np.dtype:
    """np.dtype for float32 (default), float16, bfloat16 or float64; TypeError otherwise."""
    if dtype is None:
        return np.dtype(np.float32)
    if isinstance(dtype, str):
        name = dtype.strip().lower()
        if name == "bfloat16":
            return _bfloat16()
        if name in _NAMES:
            return np.dtype(_NAMES[name])
    else:
        try:
            dt = np.dtype(dtype)
        except TypeError:
            dt = None
        if dt is not None:
            if dt.name == "bfloat16":
                return dt
            if dt in (np.float32, np.float16, np.float64):
                return dt
    raise TypeError(f"dtype must be float32, float16, bfloat16 or float64, got {dtype!r}")


def positional_encoding(max_len: Optional[SupportsIndex] = None,
                        d_model: Optional[SupportsIndex] = None,
                        base: SupportsFloat = 10000.0, *,
                        positions: Optional[npt.ArrayLike] = None,
                        dtype: Union[None, DTypeName, npt.DTypeLike] = None,
                        out: Any = None,
                        backend: Backend = None,
                        threads: Optional[SupportsIndex] = None) -> Any:
    """Sinusoidal positional-encoding table (see the README for the numerics).

    max_len rows (positions 0 .. max_len-1) or, with ``positions=`` (any shape,
    integers or reals; negative and fractional work), shape positions.shape +
    (d_model,).  dtype: float32 (default, the master), float16, bfloat16 (with
    ml_dtypes) or float64, rounded from the float32 values.  out: a writable
    C-contiguous buffer of the result's shape (or (1, max_len, d_model)) and
    dtype, filled in place and returned.  backend: 'builtin' or 'mkl' (torch's
    bits); threads: worker threads.  The bits do not depend on threads.
    """
    dt = resolve_dtype(dtype)
    if dt == np.float32:
        return _sinpe.positional_encoding(max_len, d_model, base, positions=positions, out=out,
                                          backend=backend, threads=threads)
    if out is not None:
        if not isinstance(out, np.ndarray) or out.dtype != dt:
            got = getattr(out, "dtype", type(out).__name__)
            raise TypeError(f"out must be a NumPy array of dtype {dt.name}, got {got}")
        if not out.flags.writeable:
            raise ValueError("out is read-only")
        if not out.flags.c_contiguous:
            raise ValueError("out must be C-contiguous")
    table = _sinpe.positional_encoding(max_len, d_model, base, positions=positions,
                                       backend=backend, threads=threads)
    if out is None:
        return table.astype(dt)
    if out.shape != table.shape and out.shape != (1,) + table.shape:
        raise ValueError(f"out has shape {out.shape}; expected {table.shape}")
    out.reshape(table.shape)[...] = table.astype(dt)
    return out


def add_pe(x: _X, base: SupportsFloat = 10000.0, *, offset: SupportsIndex = 0,
           positions: Optional[npt.ArrayLike] = None, backend: Backend = None,
           threads: Optional[SupportsIndex] = None) -> _X:
    """Add the positional encoding to x in place and return x.

    x: shape (seq_len, d_model) or (..., seq_len, d_model), dtype float32,
    float16, bfloat16 or float64.  Rows offset .. offset+seq_len-1 are added to
    every batch element, as the reference forward ``x + pe[:, :seq_len]`` (eval
    mode); ``positions=`` (broadcastable to x.shape[:-1]) adds the encodings of
    those positions instead, e.g. restarting per packed sequence.
    """
    dt = getattr(x, "dtype", None)
    if positions is None and (dt is None or dt == np.float32):
        _sinpe.add_pe(x, base, offset=offset, backend=backend, threads=threads)
        return x
    if not isinstance(x, np.ndarray):
        raise TypeError(f"x must be a NumPy array for dtype {dt} or positions=, got "
                        f"{type(x).__name__}")
    if dt != np.float32:
        try:
            resolve_dtype(dt)
        except TypeError:
            raise TypeError(f"x must have dtype float32, float16, bfloat16 or float64, got "
                            f"{dt}") from None
    if x.ndim < 2:
        raise ValueError(f"x must have at least 2 dimensions (..., seq_len, d_model), got shape "
                         f"{x.shape}")
    if not x.flags.writeable:
        raise ValueError("x is read-only")
    d, L = x.shape[-1], x.shape[-2]
    if positions is None:
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
            raise TypeError(f"offset must be an integer, got {offset!r} ({type(offset).__name__})")
        off = int(offset)
        if off < 0:
            raise ValueError(f"offset must be >= 0, got {off}")
        pos = np.arange(off, off + L, dtype=np.int64)
    else:
        if int(offset) != 0:
            raise ValueError("offset and positions exclude each other")
        pos = np.asarray(positions)
        try:
            shape = np.broadcast_shapes(pos.shape, x.shape[:-1])
        except ValueError:
            shape = None
        if shape != x.shape[:-1]:
            raise ValueError(f"positions of shape {pos.shape} do not broadcast to x.shape[:-1] = "
                             f"{x.shape[:-1]}")
    pe = _sinpe.positional_encoding(d_model=d, base=base, positions=pos, backend=backend,
                                    threads=threads)
    np.add(x, pe, out=x, casting="same_kind")
    return x
