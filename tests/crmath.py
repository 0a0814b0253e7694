"""Correctly rounded float32 exp/sin/cos from mpmath (an oracle independent
of sinpe): evaluate at high precision, then pick the nearest float32 among
the neighbours of the double rounding, comparing exactly in mpmath."""
import math

import mpmath
import numpy as np

_FUNCS = {"exp": mpmath.exp, "sin": mpmath.sin, "cos": mpmath.cos}
_OVERFLOW = mpmath.mpf(2) ** 128 - mpmath.mpf(2) ** 103  # FLT_MAX + half an ulp


def cr(func, x):
    x = np.float32(x)
    xf = float(x)
    if math.isnan(xf) or (math.isinf(xf) and func != "exp"):
        return np.float32("nan")
    if math.isinf(xf):
        return np.float32(np.inf if xf > 0 else 0.0)
    if xf == 0.0:
        return np.float32(1.0) if func != "sin" else x
    with mpmath.workprec(200):
        v = _FUNCS[func](mpmath.mpf(xf))
        if func == "exp" and v >= _OVERFLOW:
            return np.float32(np.inf)
        with np.errstate(over="ignore"):
            f0 = np.float32(float(v))
        cands = [np.nextafter(f0, np.float32(-np.inf)), f0, np.nextafter(f0, np.float32(np.inf))]
        cands = [c for c in cands if np.isfinite(c)]
        return min(cands, key=lambda c: abs(mpmath.mpf(float(c)) - v))


def cr_array(func, xs):
    return np.array([cr(func, x) for x in np.asarray(xs, np.float32).ravel()], np.float32)


def cr_pow(x, y):
    """Correctly rounded float32 x ** y (x > 0 finite, y finite; else NaN/inf/0/1 by C99)."""
    x, y = np.float32(x), np.float32(y)
    xf, yf = float(x), float(y)
    if yf == 0.0 or xf == 1.0:
        return np.float32(1.0)
    if not (math.isfinite(xf) and math.isfinite(yf)) or xf <= 0.0:
        with np.errstate(all="ignore"):
            return np.float32(np.power(np.float64(xf), np.float64(yf)))
    with mpmath.workprec(300):
        v = mpmath.power(mpmath.mpf(xf), mpmath.mpf(yf))
        if v >= _OVERFLOW:
            return np.float32(np.inf)
        with np.errstate(over="ignore", under="ignore"):
            f0 = np.float32(float(v))
        cands = [np.nextafter(f0, np.float32(-np.inf)), f0, np.nextafter(f0, np.float32(np.inf))]
        cands = [c for c in cands if np.isfinite(c)]
        best = min(abs(mpmath.mpf(float(c)) - v) for c in cands)
        ties = [c for c in cands if abs(mpmath.mpf(float(c)) - v) == best]
        return min(ties, key=lambda c: int(np.asarray(c).view(np.uint32)) & 1)  # ties to even
