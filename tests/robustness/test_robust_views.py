"""Strided views against a brute-force model (hypothesis): any shape, any byte strides
(zero, negative, unaligned, interleaved), any dtype, for add_pe's x and for out=.

The model lists every element's bytes.  If two elements share a byte, sinpe must raise
ValueError and leave the buffer untouched; otherwise the buffer must equal, byte for
byte, the buffer with each element replaced by the NumPy/torch result computed on a
contiguous copy (and nothing else changed)."""
import itertools
import os

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sinpe
from conftest import TORCH_BITS, torch, torch_add

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16, np.dtype(np.float64)]
NBYTES = 512
SETTINGS = settings(max_examples=int(os.environ.get("SINPE_VIEW_EXAMPLES", "1000")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@st.composite
def layouts(draw, min_nd=2, max_nd=4):
    dt = draw(st.sampled_from(DTYPES))
    nd = draw(st.integers(min_nd, max_nd))
    sizes = st.sampled_from([0] + [1, 2, 3, 4] * 4)  # empty views now and then
    shape = [draw(sizes) for _ in range(nd - 1)] + [draw(st.sampled_from([2, 4]))]
    unit = draw(st.sampled_from([dt.itemsize, dt.itemsize, 1]))  # aligned, or any byte stride
    strides = [draw(st.integers(-10, 10)) * unit for _ in range(nd)]
    offset = draw(st.integers(0, NBYTES // 2))
    return dt, tuple(shape), tuple(strides), offset


def starts(shape, strides, offset):
    """Byte offset of every element, in C order."""
    return [offset + sum(i * s for i, s in zip(idx, strides))
            for idx in itertools.product(*[range(n) for n in shape])]


def aliases(addr, itemsize):
    a = sorted(addr)
    return any(b - a0 < itemsize for a0, b in zip(a, a[1:]))


def make_view(raw, dt, shape, strides, offset):
    try:
        return np.ndarray(shape, dt, raw, offset, strides)
    except (ValueError, TypeError):
        return None  # reaches outside the buffer


def fresh_raw(seed):
    vals = np.random.default_rng(seed).uniform(-4, 4, NBYTES // 2).astype(np.float16)
    return np.frombuffer(bytearray(vals.tobytes()), np.uint8).copy()


def scatter(raw, addr, values):
    want = raw.copy()
    flat = np.ascontiguousarray(values).reshape(-1)
    item = flat.dtype.itemsize
    b = flat.view(np.uint8).reshape(-1, item)
    for a, v in zip(addr, b):
        want[a:a + item] = v
    return want


def equal_bytes(got, want, addr, dt):
    """Byte equality, except that a float16 NaN sum only has to be a NaN: torch's float16
    x.add_(pe) gives NaN payloads that depend on where an element falls in its vector
    loop (0x7fff in scalar tails; sinpe keeps the payload as the vector body does);
    numerics/test_numerics_torch.py::test_float16_add_nan_payloads pins both rules."""
    if dt != np.float16:
        return np.array_equal(got, want)
    got, want = got.copy(), want.copy()
    for a in addr:
        g, w = got[a:a + 2].view(np.float16)[0], want[a:a + 2].view(np.float16)[0]
        if np.isnan(g) and np.isnan(w):
            got[a:a + 2] = want[a:a + 2]
    return np.array_equal(got, want)


@pytest.mark.needs_torch
@pytest.mark.parametrize("backend", ["builtin", TORCH_BITS])
@SETTINGS
@given(layout=layouts(), seed=st.integers(0, 2**16), off=st.integers(0, 3))
def test_add_pe_on_any_view(backend, layout, seed, off):
    dt, shape, strides, offset = layout
    raw = fresh_raw(seed)
    x = make_view(raw, dt, shape, strides, offset)
    if x is None:
        return
    addr = starts(shape, strides, offset)
    before = raw.copy()
    if aliases(addr, dt.itemsize):
        with pytest.raises(ValueError, match="share memory"):
            sinpe.add_pe(x, offset=off, backend=backend)
        assert np.array_equal(raw, before)
        return
    pe = sinpe.positional_encoding(shape[-2], shape[-1], offset=off, backend=backend)
    want = scatter(before, addr, torch_add(np.ascontiguousarray(x), pe))
    assert sinpe.add_pe(x, offset=off, backend=backend) is x
    assert equal_bytes(raw, want, addr, dt)


@pytest.mark.needs_torch
@SETTINGS
@given(layout=layouts(), seed=st.integers(0, 2**16))
def test_add_pe_with_positions_on_any_view(layout, seed):
    dt, shape, strides, offset = layout
    raw = fresh_raw(seed)
    x = make_view(raw, dt, shape, strides, offset)
    if x is None:
        return
    pos = np.random.default_rng(seed).integers(-50, 50, shape[-2])  # broadcast over batch
    addr = starts(shape, strides, offset)
    before = raw.copy()
    if aliases(addr, dt.itemsize):
        with pytest.raises(ValueError, match="share memory"):
            sinpe.add_pe(x, positions=pos)
        assert np.array_equal(raw, before)
        return
    pe = sinpe.positional_encoding(d_model=shape[-1], positions=pos)
    want = scatter(before, addr, torch_add(np.ascontiguousarray(x), pe))
    sinpe.add_pe(x, positions=pos)
    assert equal_bytes(raw, want, addr, dt)


@SETTINGS
@given(layout=layouts(min_nd=2, max_nd=3), seed=st.integers(0, 2**16), off=st.integers(0, 9))
def test_out_on_any_view(layout, seed, off):
    dt, shape, strides, offset = layout
    if len(shape) == 3:
        shape, strides = (1,) + shape[1:], strides  # (1, max_len, d_model): a torch buffer
    raw = fresh_raw(seed)
    out = make_view(raw, dt, shape, strides, offset)
    if out is None:
        return
    L, d = shape[-2], shape[-1]
    addr = starts(shape, strides, offset)
    before = raw.copy()
    if aliases(addr, dt.itemsize):
        with pytest.raises(ValueError, match="share memory"):
            sinpe.positional_encoding(L, d, offset=off, out=out)
        assert np.array_equal(raw, before)
        return
    want = scatter(before, addr, sinpe.positional_encoding(L, d, offset=off, dtype=dt))
    assert sinpe.positional_encoding(L, d, offset=off, out=out) is out
    assert np.array_equal(raw, want)
