"""dtype= as users spell it: every spelling np.dtype accepts ('f4', '<f4', 'e', 'd'; float
and 'float' are float64, as in NumPy), 'bfloat16' (through ml_dtypes, imported on first use)
and torch dtypes, to the np.dtype the core writes.  One resolver for every entry point."""
from __future__ import annotations

from typing import Any

import numpy as np

TABLE_DTYPES = ("float32", "float16", "bfloat16", "float64")


def _error(obj: Any) -> TypeError:
    return TypeError(f"dtype must be float32, float16, bfloat16 or float64, got {obj!r}")


def bfloat16() -> np.dtype:
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError("dtype bfloat16 needs the ml_dtypes package "
                        "(pip install 'sinpe[bfloat16]')") from None
    return np.dtype(ml_dtypes.bfloat16)


def resolve(obj: Any) -> np.dtype:
    """The np.dtype of a dtype= value (None: float32); TypeError for anything but the four
    float types in native byte order."""
    if obj is None:
        return np.dtype(np.float32)
    key = obj
    if type(obj).__name__ == "dtype" and type(obj).__module__ == "torch":
        key = str(obj).replace("torch.", "", 1)
    if isinstance(key, str) and key == "bfloat16":
        return bfloat16()
    if isinstance(key, np.dtype) and key.name == "bfloat16":
        return key
    try:
        d = np.dtype(key)
    except (TypeError, ValueError):
        raise _error(obj) from None
    if d.name not in TABLE_DTYPES:
        raise _error(obj)
    if not d.isnative:
        raise TypeError(f"dtype {obj!r} is not in native byte order: sinpe writes native "
                        "float32, float16, bfloat16 or float64")
    return d
