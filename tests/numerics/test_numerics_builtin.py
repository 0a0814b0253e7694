"""The built-in backend is correctly rounded (checked against mpmath, not
against torch), and its tables follow the reference formula step by step."""
import math
import os

import numpy as np
import pytest

import sinpe
from conftest import TESTS, assert_bits_equal
from crmath import cr_array


def _hard_cases(func):
    """Inputs that the exhaustive check found nearest a rounding boundary."""
    path = os.path.join(TESTS, "data", f"hard_{func}.txt")
    with open(path) as f:
        words = [int(line, 16) for line in f if line.strip()]
    assert words, f"{path} is empty"
    return np.array(words, np.uint32).view(np.float32)


def _samples(func, n=4000, seed=0):
    rng = np.random.default_rng(seed)
    parts = [
        # random bit patterns: every exponent, sign, subnormals, NaN, inf
        rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32),
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754944e-38,
                  3.4028235e38, -3.4028235e38, np.pi / 4, np.pi / 2, np.pi, 2**20, 2**24,
                  88.72283, 88.72284, -103.97208, -103.97209, -87.33655, 1.0, -1.0],
                 np.float32),
    ]
    if func == "exp":
        parts.append(rng.uniform(-104, 89, n).astype(np.float32))
        parts.append(rng.uniform(-1e-6, 1e-6, n // 4).astype(np.float32))
    else:
        parts.append(rng.uniform(0, 20000, n).astype(np.float32))  # table angles
        parts.append(rng.uniform(-2**24, 2**24, n // 2).astype(np.float32))
        # floats nearest to multiples of pi/2 (the hardest reductions)
        k = rng.integers(1, 2**20, n // 4)
        parts.append((k * (np.pi / 2)).astype(np.float32))
    parts.append(_hard_cases(func))
    return np.concatenate(parts)


@pytest.mark.parametrize("func", ["exp", "sin", "cos"])
def test_correctly_rounded(func, kernel):
    xs = _samples(func)
    got = sinpe.elementwise(func, xs, backend="builtin")
    want = cr_array(func, xs)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), f"{func}: NaN results differ"
    assert_bits_equal(got[~nan], want[~nan], f"builtin {func} vs correctly rounded")


def test_hard_case_files_are_hard():
    # The files hold the inputs the exhaustive check had to send to MPFR:
    # their values lie within 2^-50 (relative) of a midpoint between floats.
    # Rounding glibc's double result to float is wrong on some of them (6 of
    # 140 when measured); the builtin must be right on all (test above).
    naive_wrong = 0
    for func in ("exp", "sin", "cos"):
        x = _hard_cases(func)
        naive = getattr(np, func)(x.astype(np.float64)).astype(np.float32)
        naive_wrong += int((naive.view(np.uint32) != cr_array(func, x).view(np.uint32)).sum())
    assert naive_wrong >= 1


def _formula_table(max_len, d_model, base, be="builtin"):
    """The reference steps in NumPy, with the backend's elementwise exp/sin/cos."""
    c = np.float32(-math.log(base) / d_model)
    k = np.arange(0, d_model, 2).astype(np.float32)
    div = sinpe.elementwise("exp", k * c, backend=be)
    pos = np.arange(max_len).astype(np.float32)[:, None]
    ang = np.ascontiguousarray(pos * div)
    pe = np.empty((max_len, d_model), np.float32)
    pe[:, 0::2] = sinpe.elementwise("sin", ang, backend=be)
    pe[:, 1::2] = sinpe.elementwise("cos", ang, backend=be)
    return pe


@pytest.mark.parametrize("max_len,d_model,base", [(5000, 512, 1e4), (17, 2, 10.0), (300, 1024, 1e6),
                                                  (66000, 6, 12345.678)])
def test_builtin_table_is_the_formula(max_len, d_model, base, kernel):
    got = sinpe.positional_encoding(max_len, d_model, base, backend="builtin")
    assert_bits_equal(got, _formula_table(max_len, d_model, base), "builtin table")


def test_builtin_add_pe_matches_table(kernel):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 64, 128)).astype(np.float32)
    want = x + sinpe.positional_encoding(1000 + 64, 128, backend="builtin")[1000:]
    sinpe.add_pe(x, offset=1000, backend="builtin")
    assert_bits_equal(x, want, "builtin add_pe")
