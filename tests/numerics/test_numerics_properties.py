"""Property tests (hypothesis): random shapes, bases, offsets, strides, dtypes, positions.

Results equal a pure-NumPy reference formula within 1 ulp (built-in backend) and torch
bit for bit (oneMKL backend); invalid combinations raise the documented exception and
leave their inputs untouched."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sinpe
from conftest import TORCH_BITS, X86_64, same, torch, torch_formula

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

d_models = st.integers(1, 48).map(lambda h: 2 * h)
bases = st.one_of(st.sampled_from([10000.0, 10.0, 2.0, 1.0001, 500000.0, 1e6, 12345.678, 1.0]),
                  st.floats(1.0001, 1e7))
lengths = st.integers(0, 40)


def numpy_reference(pos, d, base):
    """The reference steps in NumPy: float32 products, exp/sin/cos in float64 then
    rounded to float32 (that is, correctly rounded but for rare double roundings)."""
    c = np.float32(-math.log(base) / d)
    div = np.exp((np.arange(0, d, 2).astype(np.float32) * c).astype(np.float64)).astype(np.float32)
    ang = np.asarray(pos, np.float32)[..., None] * div
    pe = np.empty(ang.shape[:-1] + (d,), np.float32)
    pe[..., 0::2] = np.sin(ang.astype(np.float64)).astype(np.float32)
    pe[..., 1::2] = np.cos(ang.astype(np.float64)).astype(np.float32)
    return pe


def within_1ulp(got, want):
    return np.all(np.abs(got.astype(np.float64) - want) <= np.spacing(np.abs(want)).astype(np.float64))


@pytest.mark.needs_torch
@SETTINGS
@given(L=lengths, d=d_models, base=bases, off=st.integers(0, 10**6))
def test_rows_match_references(L, d, base, off):
    pos = np.arange(off, off + L)
    got_b = sinpe.positional_encoding(d_model=d, positions=pos, base=base, backend="builtin")
    assert within_1ulp(got_b, numpy_reference(pos, d, base))
    got_m = sinpe.positional_encoding(d_model=d, positions=pos, base=base, backend=TORCH_BITS)
    assert same(got_m, torch_formula(pos, d, base))
    if off == 0:
        assert same(sinpe.positional_encoding(L, d, base, backend=TORCH_BITS), got_m)


@pytest.mark.needs_torch
@SETTINGS
@given(d=d_models, base=bases,
       pos=st.lists(st.one_of(st.integers(-10**6, 10**6),
                              st.floats(-1e6, 1e6, width=32, allow_nan=False)), min_size=0,
                    max_size=30))
def test_arbitrary_positions(d, base, pos):
    p = np.array(pos, np.float32)
    assert same(sinpe.positional_encoding(d_model=d, positions=p, base=base, backend=TORCH_BITS),
                      torch_formula(p, d, base))
    assert within_1ulp(sinpe.positional_encoding(d_model=d, positions=p, base=base,
                                                 backend="builtin"), numpy_reference(p, d, base))


def torch_rows(off, L, d, base):
    """Rows off .. off+L-1 of the table add_pe stands for (the reference module's 5000 rows,
    or off+L when more).  On x86-64 oneMKL's values do not depend on the table around them;
    on 64-bit Arm torch's SLEEF vectors do, so the whole table is computed there."""
    if X86_64:
        return torch_formula(np.arange(off, off + L), d, base)
    return torch_formula(np.arange(max(5000, off + L)), d, base)[off:off + L]


@pytest.mark.needs_torch
@SETTINGS
@given(B=st.integers(1, 4), L=st.integers(1, 20), d=d_models, base=bases,
       off=st.integers(0, 10**5 if X86_64 else 6000), step_b=st.sampled_from([1, 2, -1]),
       step_l=st.sampled_from([1, 3, -1]), transpose=st.booleans(),
       dtype=st.sampled_from(["float32", "float16", "float64"]))
def test_add_pe_strided_and_dtypes(B, L, d, base, off, step_b, step_l, transpose, dtype):
    rng = np.random.default_rng(B * 1000 + L)
    if transpose:
        store = rng.standard_normal((L * abs(step_l), B * abs(step_b), d)).astype(dtype)
        x = store[::step_l, ::step_b].transpose(1, 0, 2)
    else:
        store = rng.standard_normal((B * abs(step_b), L * abs(step_l), d)).astype(dtype)
        x = store[::step_b, ::step_l]
    before = store.copy()
    pe = torch_rows(off, L, d, base)
    want = (torch.from_numpy(x.copy()) + torch.from_numpy(pe)).numpy() \
        if dtype == "float32" else None
    if dtype != "float32":
        t = torch.from_numpy(x.copy()).clone()
        t.add_(torch.from_numpy(pe))
        want = t.numpy()
    assert sinpe.add_pe(x, base, offset=off, backend=TORCH_BITS) is x
    assert np.array_equal(np.ascontiguousarray(x).view(np.uint8), np.ascontiguousarray(want).view(np.uint8))
    # only the view's elements changed
    mask = np.zeros(store.shape, bool)
    if transpose:
        mask[::step_l, ::step_b] = True
    else:
        mask[::step_b, ::step_l] = True
    assert np.array_equal(store[~mask].view(np.uint8), before[~mask].view(np.uint8))


@SETTINGS
@given(L=st.integers(-5, 5), d=st.integers(-3, 9), base=st.sampled_from(
    [float("nan"), float("inf"), 0.0, -2.0, 10000.0]), off=st.integers(-3, 3))
def test_invalid_raise_and_leave_inputs_untouched(L, d, base, off):
    valid = L >= 0 and d >= 2 and d % 2 == 0 and math.isfinite(base) and base > 0
    if not valid:
        with pytest.raises((ValueError, TypeError)):
            sinpe.positional_encoding(L, d, base)
    if d >= 1 and L >= 1:
        x = np.full((2, L, d), 7.0, np.float32)
        if valid and off >= 0:
            sinpe.add_pe(x, base, offset=off)
        else:
            with pytest.raises((ValueError, TypeError)):
                sinpe.add_pe(x, base, offset=off)
            assert (x == 7.0).all()
