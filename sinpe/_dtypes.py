"""dtype= as users spell it: every spelling np.dtype accepts ('f4', '<f4', 'e', 'd'; float
and 'float' are float64, as in NumPy), 'bfloat16' (through ml_dtypes, imported on first use)
and torch dtypes, to the np.dtype the core writes.  One resolver for every entry point."""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from ._memo import Memo

TABLE_DTYPES = ("float32", "float16", "bfloat16", "float64")


def _error(obj: Any) -> TypeError:
    return TypeError(f"dtype must be float32, float16, bfloat16 or float64, got {obj!r}")


def bfloat16() -> np.dtype:
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError("dtype bfloat16 needs the ml_dtypes package "
                        "(pip install 'sinpe[bfloat16]')") from None
    d: np.dtype = np.dtype(ml_dtypes.bfloat16)
    return d


def resolve(obj: Any) -> np.dtype:
    """The np.dtype of a dtype= value (None: float32); TypeError for anything but the four
    float types in native byte order."""
    if obj is None:
        return _F32
    try:  # torch dtypes, NumPy dtypes and scalar types, names: resolved once each
        hit = _RESOLVED.get((type(obj), obj))
    except TypeError:  # unhashable: resolved below, which names it
        hit = None
    if hit is not None:
        return hit
    d = _resolve(obj)
    if type(obj) in (str, type) or type(obj).__module__ == "torch":
        _RESOLVED[(type(obj), obj)] = d
    return d


_F32 = np.dtype(np.float32)
#: names, scalar types and torch dtypes, which compare and hash by value (an np.dtype is
#: not kept: one with metadata equals one without, and np.dtype() of it is quick anyway)
_RESOLVED: Memo[Tuple[Any, Any], np.dtype] = Memo(64)


def _resolve(obj: Any) -> np.dtype:
    key = obj
    if type(obj).__name__ == "dtype" and type(obj).__module__ == "torch":
        key = str(obj).replace("torch.", "", 1)
    if isinstance(key, str) and key == "bfloat16":
        return bfloat16()
    if isinstance(key, np.dtype) and key.name == "bfloat16":
        return key
    try:
        d: np.dtype = np.dtype(key)
    except (TypeError, ValueError, SyntaxError):  # NumPy's parser of "f4,(2)" strings raises
        raise _error(obj) from None                # SyntaxError on a bad one (the fuzzer's)
    if d.name not in TABLE_DTYPES:
        raise _error(obj)
    if not d.isnative:
        raise TypeError(f"dtype {obj!r} is not in native byte order: sinpe writes native "
                        "float32, float16, bfloat16 or float64")
    return d
