"""Layouts of x and out, one class per test (issue 8): odd buffer exporters (NULL strides,
NULL shape, suboffsets, memoryviews of every format), aliasing and interleaved views,
out sharing memory with positions, offsets at the edge of int64, unaligned buffers, and
add_pe at every offset of x within a cache line.

Every refused call must leave its buffers untouched; every accepted one must equal a
plain reference (NumPy's or torch's result on a contiguous copy) bit for bit."""
import ctypes
import time

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import sinpe
from conftest import (BF16, DTYPES, TIME_SCALE, TORCH_BITS, added, assert_bits_equal, bits, same,
                      torch_add)

PE = sinpe.positional_encoding


# ---- exporters with NULL strides / NULL shape / suboffsets, memoryviews of every format ---

def test_ctypes_array_null_strides():
    a = (ctypes.c_float * 8 * 4)()
    assert memoryview(a).c_contiguous
    sinpe.add_pe(a)
    got = np.frombuffer(bytes(a), np.float32).reshape(4, 8)
    assert_bits_equal(got, PE(4, 8), "ctypes add_pe")
    out = (ctypes.c_float * 8 * 4)()
    assert PE(4, 8, out=out) is out
    assert_bits_equal(np.frombuffer(bytes(out), np.float32).reshape(4, 8), PE(4, 8), "ctypes out")


def test_ctypes_double_and_unsupported():
    a = (ctypes.c_double * 8 * 3)()
    PE(3, 8, out=a)
    assert same(np.frombuffer(bytes(a), np.float64).reshape(3, 8), PE(3, 8, dtype="float64"))
    b = (ctypes.c_int * 8 * 3)()
    with pytest.raises(TypeError, match="dtype float32, float16, bfloat16 or float64, got int32"):
        sinpe.add_pe(b)
    assert bytes(b) == bytes(len(bytes(b)))


def test_exporters_without_strides_or_shape(odd_buffers):
    a = odd_buffers.Odd(0, 5, 6)  # shape (5, 6), NULL strides
    sinpe.add_pe(a, offset=3)
    assert_bits_equal(np.frombuffer(a.tobytes(), np.float32).reshape(5, 6), PE(5, 6, offset=3),
                      "NULL strides")
    b = odd_buffers.Odd(1, 3, 8)  # NULL shape: one axis of 24 floats
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        sinpe.add_pe(b)
    with pytest.raises(ValueError, match=r"out has shape \(24,\); expected \(3, 8\)"):
        PE(3, 8, out=b)
    PE(d_model=24, positions=np.float32(2.0), out=b)  # a 1-D table: one position
    assert_bits_equal(np.frombuffer(b.tobytes(), np.float32), PE(3, 24)[2], "NULL shape")
    c = odd_buffers.Odd(2, 3, 8)  # suboffsets: refused, untouched
    with pytest.raises(ValueError, match="indirect buffer"):
        sinpe.add_pe(c)
    with pytest.raises(ValueError, match="indirect buffer"):
        PE(3, 8, out=c)
    assert c.tobytes() == bytes(96)


@pytest.mark.parametrize("fmt,dt", [("f", np.float32), ("e", np.float16), ("d", np.float64)])
def test_memoryview_out_every_dtype(fmt, dt):
    # memoryview.cast knows no 'e' before Python 3.12: take NumPy's export then
    mv = memoryview(np.zeros((6, 8), dt)) if fmt == "e" else \
        memoryview(bytearray(6 * 8 * np.dtype(dt).itemsize)).cast(fmt, (6, 8))
    assert mv.format == fmt
    assert PE(6, 8, out=mv) is mv
    assert same(np.frombuffer(mv, dt).reshape(6, 8), PE(6, 8, dtype=dt))
    np.frombuffer(mv, dt)[...] = 0
    sinpe.add_pe(mv)
    assert same(np.frombuffer(mv, dt).reshape(6, 8), PE(6, 8, dtype=dt))


# ---- aliasing views: refused exactly, for every dtype and with positions -------------

@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_aliasing_views_refused_untouched(dt):
    s = dt.itemsize
    buf = np.full(64, 7, dt)
    cases = [((3, 4), (0, s)),           # three rows on one
             ((3, 2, 4), (0, 4 * s, s)),  # a zero batch stride
             ((8, 8), (2 * s, s)),        # rows overlap
             ((8, 8), (4 * s, s)),        # rows overlap by half
             ((2, 4), (4 * s, 0))]        # zero column stride
    for shape, strides in cases:
        x = as_strided(buf, shape, strides, writeable=True)
        with pytest.raises(ValueError, match="share memory"):
            sinpe.add_pe(x)
        with pytest.raises(ValueError, match="share memory"):
            sinpe.add_pe(x, positions=np.zeros(shape[:-1], np.int64))
        if len(shape) == 2:
            with pytest.raises(ValueError, match="share memory"):
                PE(shape[0], shape[1], out=x)
            with pytest.raises(ValueError, match="share memory"):
                PE(d_model=shape[1], positions=np.arange(shape[0]), out=x)
        assert (buf == 7).all(), (shape, strides)


def test_huge_zero_stride_view_refused_at_once():
    buf = np.zeros(2, np.float32)
    x = as_strided(buf, (2**40, 1, 2), (0, 8, 4), writeable=True)
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="share memory"):
        sinpe.add_pe(x)
    assert time.perf_counter() - t0 < 0.1 * TIME_SCALE
    assert (buf == 0).all()


def test_partially_overlapping_elements_refused():
    raw = np.zeros(40, np.uint8)
    x = np.ndarray((2, 4), np.float32, raw, 0, (6, 4))  # rows 6 bytes apart: floats overlap
    with pytest.raises(ValueError, match="share memory"):
        sinpe.add_pe(x)
    with pytest.raises(ValueError, match="share memory"):
        PE(2, 4, out=x)
    assert (raw == 0).all()


@pytest.mark.needs_torch
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_disjoint_interleavings_accepted(dt):
    s = dt.itemsize
    store = np.arange(200, dtype=np.float64).astype(dt)
    # rows 3 and 2 apart in units of a 2-element row: addresses {0,2,4} + {0,3} disjoint
    for shape, strides in [((3, 2, 2), (4 * s, 6 * s, s)), ((2, 3, 2), (6 * s, 4 * s, s)),
                           ((4, 2), (-2 * s, s)), ((3, 4), (s, 3 * s))]:
        base = store.copy()
        start = 100 * s if strides[0] < 0 else 0
        x = np.ndarray(shape, dt, base, start, strides)
        want = added(x)
        keep = base.copy()
        sinpe.add_pe(x)
        assert same(x, want), (shape, strides)
        touched = np.zeros(base.size, bool)
        idx = np.ndarray(shape, np.int64, np.arange(base.size, dtype=np.int64), start // s * 8,
                         tuple(st // s * 8 for st in strides))
        touched[idx.ravel()] = True
        assert np.array_equal(bits(base[~touched]), bits(keep[~touched]))


@pytest.mark.needs_torch
def test_any_layout_of_x_and_out():
    big = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    x = big[:, ::2]  # strided last axis
    want = added(x)
    sinpe.add_pe(x)
    assert same(x, want)
    base = np.random.default_rng(1).standard_normal((3, 4, 5, 8)).astype(np.float32)
    y = base[:, :, ::2].transpose(1, 0, 2, 3)[:, :, :2]  # leading axes not one batch axis
    want = added(y)
    sinpe.add_pe(y)
    assert same(y, want)
    out = np.zeros((8, 4), np.float32).T  # a transposed out
    PE(4, 8, out=out)
    assert same(out, PE(4, 8))
    wide = np.zeros((5, 20), np.float16)
    PE(5, 8, dtype="float16", out=wide[:, 4:12])
    assert same(wide[:, 4:12], PE(5, 8, dtype="float16")) and not wide[:, :4].any()


# ---- out sharing memory with positions -----------------------------------------------

@pytest.mark.needs_torch
@pytest.mark.parametrize("backend", ["builtin", TORCH_BITS])
def test_out_sharing_memory_with_positions(backend):
    d = 16
    want = PE(d_model=d, positions=np.arange(10)[::-1], backend=backend)
    out = np.zeros((10, d), np.float32)
    out.ravel()[:10] = np.arange(10)[::-1]       # the positions live in the first row
    pos = out.ravel()[:10]
    PE(d_model=d, positions=pos, out=out, backend=backend)
    assert same(out, want)
    out64 = np.zeros((10, d), np.float64)
    out64[:, 0] = np.arange(10) + 5.0            # positions in the first column
    PE(d_model=d, positions=out64[:, 0], out=out64, backend=backend)
    assert same(out64, PE(d_model=d, positions=np.arange(5, 15), dtype="float64", backend=backend))
    x = np.ones((10, d), np.float32)
    x[:, 0] = np.arange(10)
    want = torch_add(x, PE(d_model=d, positions=np.arange(10), backend=backend))
    sinpe.add_pe(x, positions=x[:, 0], backend=backend)
    assert same(x, want)


# ---- offsets at the end of int64, for every dtype ------------------------------------

@pytest.mark.needs_torch
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_offset_bounds(dt):
    x = np.zeros((4, 8), dt)
    with pytest.raises(OverflowError, match=r"offset=9223372036854775806 is too large for 4 rows"):
        sinpe.add_pe(x, offset=2**63 - 2)
    assert not x.any()
    y = np.zeros((3, 8), dt)
    sinpe.add_pe(y, offset=2**63 - 3)  # positions 2**63-3 .. 2**63-1 all fit
    assert same(y, added(np.zeros((3, 8), dt), offset=2**63 - 3))
    with pytest.raises(OverflowError, match="offset"):
        PE(4, 8, offset=2**63 - 2, dtype=dt)
    assert PE(3, 8, offset=2**63 - 3, dtype=dt).shape == (3, 8)
    with pytest.raises(ValueError, match="offset must be >= 0, got -1"):
        sinpe.add_pe(x, offset=-1)
    with pytest.raises(OverflowError, match="offset=.* does not fit in a 64-bit integer"):
        sinpe.add_pe(x, offset=2**63)


# ---- unaligned buffers: handled, for out= and x --------------------------------------

@pytest.mark.parametrize("dt", DTYPES, ids=str)
@pytest.mark.parametrize("backend", ["builtin", TORCH_BITS])
def test_unaligned_out_and_x(dt, backend):
    L, d = 31, 64
    n = L * d * dt.itemsize
    raw = bytearray(n + 1)
    out = np.ndarray((L, d), dt, raw, 1)
    assert not out.flags.aligned or dt.itemsize == 1
    PE(L, d, out=out, backend=backend)
    assert same(out, PE(L, d, dtype=dt, backend=backend))
    x0 = np.random.default_rng(2).standard_normal((2, L, d)).astype(dt)
    raw2 = bytearray(x0.nbytes + 3)
    x = np.ndarray(x0.shape, dt, raw2, 3)
    x[...] = x0
    sinpe.add_pe(x, offset=7, backend=backend)
    ref = x0.copy()
    sinpe.add_pe(ref, offset=7, backend=backend)
    assert same(x, ref)
    # a memoryview of the unaligned array
    if dt != BF16:
        out[...] = 0
        mv = memoryview(out)
        PE(L, d, out=mv, backend=backend)
        assert same(out, PE(L, d, dtype=dt, backend=backend))


# ---- add_pe's tiles: every float offset of x within a cache line, padded rows --------

@pytest.mark.parametrize("d,pad", [(1024, 0), (1000, 0), (1024, 16), (998, 7), (8, 0)])
def test_add_pe_at_every_offset_in_a_cache_line(d, pad):
    """The PE scratch copies x's offset modulo 64 bytes and the add kernels peel to align
    x: every offset 0..15 floats, rows of any length and padding, on every kernel path, adds
    exactly the table (0 + pe is pe) and writes nothing outside x."""
    L, B = 70, 3
    want = PE(L, d, backend="builtin")
    old = sinpe.get_kernel()
    try:
        for k in sinpe.kernels():
            sinpe.set_kernel(k)
            for off in range(16):
                buf = np.full(off + B * L * (d + pad) + 32, 7.0, np.float32)
                x = buf[off:off + B * L * (d + pad)].reshape(B, L, d + pad)[..., :d]
                x[...] = 0
                sinpe.add_pe(x, backend="builtin")
                assert same(x, np.broadcast_to(want, x.shape)), (k, off)
                assert (buf[:off] == 7).all() and (buf[off + B * L * (d + pad):] == 7).all()
                if pad:
                    assert (buf[off:off + B * L * (d + pad)].reshape(B, L, d + pad)[..., d:] == 7).all()
    finally:
        sinpe.set_kernel(old)
