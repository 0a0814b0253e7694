"""Hostile input, one class per test (issue 8): odd buffer exporters, aliasing and
unaligned views, offsets at the edge of int64, memory, interrupts, dtype spellings,
messages, loose input, the numerics report, the CLI, the torch module, plots, imports.

Every refused call must leave its buffers untouched; every accepted one must equal a
plain reference (NumPy's result on a contiguous copy) bit for bit."""
import ctypes
import math
import os
import signal
import subprocess
import sys
import threading
import time

import ml_dtypes
import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import sinpe
from conftest import TORCH_BITS, X86_64, assert_bits_equal, run_python, torch, torch_add

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIME_SCALE = float(os.environ.get("SINPE_TEST_TIME_SCALE", "1"))
PE = sinpe.positional_encoding
BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16, np.dtype(np.float64)]


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(bits(a), bits(b))


def added(x, offset=0, base=10000.0):
    """What add_pe must give: torch's x.add_(pe) on a contiguous copy."""
    pe = PE(x.shape[-2], x.shape[-1], base, offset=offset)
    return torch_add(np.ascontiguousarray(x), pe)


# ---- 1. exporters with NULL strides / NULL shape / suboffsets ---------------------------

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


# ---- 2, 3. aliasing views: refused exactly, for every dtype and with positions -----------

@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_aliasing_views_refused_untouched(dt):
    s = dt.itemsize
    buf = np.full(64, 7, dt)
    cases = [((3, 4), (0, s)),           # three rows on one
             ((3, 2, 4), (0, 4 * s, s)),  # a zero batch stride
             ((8, 8), (2 * s, s)),        # rows overlap
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


# ---- 4. out sharing memory with positions ---------------------------------------------

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


# ---- 5. offsets at the end of int64, for every dtype -----------------------------------

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


# ---- 6. unaligned buffers: handled, for out= and x -------------------------------------

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


# ---- 7, 8. memory: formatted messages, every dtype refused before computing -------------

@pytest.mark.parametrize("dt", ["float32", "float16", "float64", "bfloat16"])
def test_tables_larger_than_memory_refused_first(dt):
    mem = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    item = np.dtype(BF16 if dt == "bfloat16" else dt).itemsize
    rows = mem // (1024 * item) + 1
    t0 = time.perf_counter()
    with pytest.raises(MemoryError, match=r"needs \d+\.\d GiB .*more than this machine's \d+\.\d GiB"):
        PE(rows, 1024, dtype=dt)
    with pytest.raises(MemoryError, match=r"\d+\.\d GiB"):
        sinpe._api.empty_table(rows, 1024, dtype=dt)
    assert time.perf_counter() - t0 < 0.5 * TIME_SCALE


def test_cli_refuses_a_table_larger_than_memory(tmp_path):
    r = subprocess.run([sys.executable, "-m", "sinpe", "--max-len", str(10**9), "--d-model", "1024",
                        "--dtype", "float64", "-o", "big.npy"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "GiB" in r.stderr and "%" not in r.stderr, r.stderr
    assert not (tmp_path / "big.npy").exists()


# ---- 9. Ctrl-C within 0.25 s for any shape, backend and dtype ----------------------------

def _latency(f, after=0.3):
    # Python's own handler, whatever this process inherited: a shell starts background jobs
    # with SIGINT ignored, and then no KeyboardInterrupt could come (seen running the suite
    # with nohup ... &)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(after, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            f()
    finally:
        timer.join()
        signal.signal(signal.SIGINT, old)
    return time.perf_counter() - t0 - after


@pytest.mark.parametrize("case", ["row_2^27_builtin", "row_2^27_mkl", "row_2^26_float16",
                                  "add_row_2^26_float64", "positions_40M_int64"])
def test_ctrl_c_latency_any_shape(case):
    old = sinpe.get_kernel()
    sinpe.set_kernel("scalar")
    try:
        if case == "row_2^27_builtin":
            f = lambda: PE(1, 2**27, backend="builtin", threads=1)  # noqa: E731
        elif case == "row_2^27_mkl":
            f = lambda: [PE(1, 2**27, backend=TORCH_BITS, threads=1) for _ in range(3)]  # noqa: E731
        elif case == "row_2^26_float16":
            f = lambda: PE(1, 2**26, dtype="float16", backend="builtin", threads=1)  # noqa: E731
        elif case == "add_row_2^26_float64":
            x = np.zeros((1, 2**26), np.float64)
            f = lambda: sinpe.add_pe(x, backend="builtin", threads=1)  # noqa: E731
        else:
            p = np.arange(40_000_000, dtype=np.int64)
            f = lambda: PE(d_model=2, positions=p, backend="builtin", threads=1)  # noqa: E731
        latency = _latency(f)
    finally:
        sinpe.set_kernel(old)
    assert latency < 0.25 * TIME_SCALE, f"{case}: KeyboardInterrupt {latency:.3f} s after the signal"


# ---- 10. dtype spellings, memoryview out for every dtype, bfloat16 NaN bits -------------

@pytest.mark.parametrize("spelling,want", [
    ("f4", np.float32), ("<f4", np.float32), ("=f4", np.float32), ("float32", np.float32),
    ("single", np.float32), (np.float32, np.float32), ("e", np.float16), ("f2", np.float16),
    ("half", np.float16), ("float16", np.float16), ("d", np.float64), ("f8", np.float64),
    (float, np.float64), ("float", np.float64), ("double", np.float64),
    ("bfloat16", BF16), (ml_dtypes.bfloat16, BF16), (BF16, BF16)], ids=repr)
def test_dtype_spellings(spelling, want):
    t = PE(5, 8, dtype=spelling)
    assert t.dtype == np.dtype(want)
    assert same(t, sinpe._round(PE(5, 8).ravel(), want).reshape(5, 8))


@pytest.mark.needs_torch
@pytest.mark.parametrize("name,want", [("float16", np.float16), ("bfloat16", BF16),
                                       ("float64", np.float64), ("float32", np.float32)])
def test_dtype_spellings_torch(name, want):
    test_dtype_spellings(getattr(torch, name), want)


@pytest.mark.parametrize("bad", ["int32", np.int64, "float8", "c8", ">f4", "S4", object, "bool"])
def test_dtype_refused(bad):
    with pytest.raises(TypeError, match="dtype"):
        PE(5, 8, dtype=bad)


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


@pytest.mark.needs_torch
def test_rounding_matches_torch_on_every_kind_of_value():
    rng = np.random.default_rng(5)
    u = np.concatenate([rng.integers(0, 2**32, 200_000, dtype=np.uint64),
                        np.arange(0x7f7fff00, 0x7f800200, dtype=np.uint64),       # to inf, NaN
                        np.arange(0x33000000 - 300, 0x33000000 + 300, dtype=np.uint64),  # f16 tiny
                        np.arange(0x477fe000, 0x47800100, dtype=np.uint64),        # f16 max
                        np.arange(0x387fff00, 0x38800100, dtype=np.uint64)]).astype(np.uint32)
    u = np.concatenate([u, u | 0x80000000])
    x = u.view(np.float32)
    t = torch.from_numpy(x)
    assert np.array_equal(sinpe._round(x, "float16").view(np.uint16),
                          t.half().view(torch.int16).numpy().view(np.uint16))
    assert np.array_equal(sinpe._round(x, "bfloat16").view(np.uint16),
                          t.bfloat16().view(torch.int16).numpy().view(np.uint16))
    assert np.array_equal(sinpe._round(x, "float64").view(np.uint64),
                          t.double().numpy().view(np.uint64))


@pytest.mark.needs_torch
def test_float16_add_nan_payloads():
    """Measured torch 2.13 rule, pinned: float16 x.add_(pe) keeps a NaN's payload (made
    quiet, as F16C does) in its vector loop, but its scalar tail (the last n % 8 elements
    of an inner loop, at every CPU capability) gives 0x7fff.  sinpe keeps the payload
    everywhere; NaN stays NaN either way (README, Numerics)."""
    h = np.full(9, 0x7d00, np.uint16)  # a signalling NaN with a payload
    t = torch.from_numpy(h.view(np.int16).copy()).view(torch.float16)
    t.add_(torch.from_numpy(PE(9, 2)[:, 0].copy()))
    torch_bits = t.view(torch.int16).numpy().view(np.uint16)
    x = h.view(np.float16).reshape(9, 1).repeat(2, axis=1)
    sinpe.add_pe(x)
    if X86_64:
        assert (torch_bits[:8] == 0x7f00).all() and torch_bits[8] == 0x7fff
        assert (x.view(np.uint16) == 0x7f00).all()
    else:  # torch on 64-bit Arm: 0x7fff for every NaN sum, and sinpe there too
        assert (torch_bits == 0x7fff).all()
        assert (x.view(np.uint16) == 0x7fff).all()


@pytest.mark.needs_torch
def test_bfloat16_nan_bits_equal_torch():
    p = np.array([0.0, np.inf, -np.inf, np.nan, 5.0], np.float32)
    f32 = PE(d_model=8, positions=p, backend=TORCH_BITS)
    want = torch.from_numpy(f32).bfloat16().view(torch.int16).numpy().view(np.uint16)
    got = PE(d_model=8, positions=p, dtype="bfloat16", backend=TORCH_BITS).view(np.uint16)
    assert np.array_equal(got, want)
    assert (got[1:4] == (0xffff if X86_64 else 0x7fc0)).all()  # torch's NaN on each platform
    want16 = torch.from_numpy(f32).half().view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(PE(d_model=8, positions=p, dtype="float16", backend=TORCH_BITS).view(np.uint16),
                          want16)


# ---- 11. messages that name the right thing --------------------------------------------

@pytest.mark.needs_torch
def test_messages():
    be = np.zeros((4, 8), ">f4")
    with pytest.raises(TypeError, match="native byte order, got big-endian float32"):
        PE(4, 8, out=be)
    with pytest.raises(TypeError, match="native byte order"):
        sinpe.add_pe(be)
    with pytest.raises(TypeError, match=r"got Tensor; for a torch CPU tensor pass t.numpy\(\)") as e:
        sinpe.add_pe(torch.zeros(2, 8))
    assert "positions" not in str(e.value)
    with pytest.raises(OverflowError, match="base=1000000.* is too large for a float64"):
        PE(4, 8, 10**400)
    with pytest.raises(OverflowError, match="d_model=4611686018427387904 is too large"):
        PE(0, 2**62)
    with pytest.raises(OverflowError, match="18446744073709551616 does not fit in int64 or uint64"):
        PE(d_model=8, positions=[2**64])
    with pytest.raises(TypeError, match=r"positions must be integers or real numbers, got None"):
        PE(d_model=8, positions=[1, None])
    for f in (sinpe.set_kernel, sinpe.set_backend):
        with pytest.raises(TypeError, match="must be"):
            f(1)
        with pytest.raises(ValueError, match="unknown"):
            f("nope")


@pytest.mark.parametrize("var,value,words", [
    ("SINPE_NUM_THREADS", "abc", "SINPE_NUM_THREADS='abc' is not valid: use an integer from 1 to 256"),
    ("SINPE_NUM_THREADS", "0", "SINPE_NUM_THREADS='0' is not valid"),
    ("SINPE_BACKEND", "fast", "SINPE_BACKEND='fast' is not valid: use auto or one of builtin, mkl, torch"),
    ("SINPE_KERNEL", "avx9000", "SINPE_KERNEL='avx9000' is not valid: unknown kernel 'avx9000'"),
])
def test_bad_environment_variables_are_named(var, value, words):
    r = run_python("import sinpe", **{var: value})
    assert r.returncode != 0 and words in r.stderr, r.stderr
    assert "invalid literal" not in r.stderr and r.stderr.count("Traceback") == 1


# ---- 12. loose input refused the same way for every dtype --------------------------------

@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_loose_input(dt):
    x = np.zeros((3, 8), dt)
    for off in (0.5, "0", True, None):
        with pytest.raises(TypeError, match="offset must be an integer"):
            sinpe.add_pe(x, offset=off, positions=[0, 1, 2])
        with pytest.raises(TypeError, match="offset must be an integer"):
            sinpe.add_pe(x, offset=off)
    for b in (True, np.True_, np.array(True), "1e4", 1j, np.complex64(1)):
        with pytest.raises(TypeError, match="base must be a real number"):
            sinpe.add_pe(x, b)
        with pytest.raises(TypeError, match="base must be a real number"):
            PE(3, 8, b, dtype=dt)
    assert not x.any()
    with pytest.raises(ValueError, match=r"out has shape \(1, 3, 8\); expected \(3, 8\)$"):
        PE(d_model=8, positions=[0, 1, 2], out=np.zeros((1, 3, 8), dt))
    out = np.zeros((1, 3, 8), dt)  # the (1, L, d) torch buffer shape: max_len tables only
    PE(3, 8, out=out)
    assert same(out[0], PE(3, 8, dtype=dt))
    with pytest.raises(ValueError, match="exclude each other"):
        PE(d_model=8, positions=[0, 1], offset=3, dtype=dt)


# ---- 13. numerics() describes the library in use ---------------------------------------

@pytest.mark.needs_torch
@pytest.mark.x86_64
def test_numerics_with_another_onemkl_release(monkeypatch):
    real = sinpe._choice.library_info
    other = "Intel(R) oneAPI Math Kernel Library Version 2025.3-Product Build 20251007 for " \
            "Intel(R) 64 architecture applications"

    def info(lib):
        d = real(lib)
        return dict(d, version=other) if lib == "mkl" and d else d
    monkeypatch.setattr(sinpe._choice, "library_info", info)
    old = sinpe._choice.get_default()
    sinpe.set_backend("mkl")
    try:
        n = sinpe.numerics()
    finally:
        sinpe.set_backend(old)
    assert n["backend"] == "mkl" and n["mkl"]["matches_torch"] is False
    assert "2025.3" in n["reproduces"] and "not torch's bits" in n["reproduces"]
    assert "vmsExp differs" in n["reproduces"] and "vmsExp differs" in n["mkl"]["why_not_chosen"]
    assert "2024.2 VML" not in n["reproduces"]
    from sinpe import _choice
    monkeypatch.delitem(sys.modules, "torch")  # as if torch were not imported
    assert _choice.auto() == "builtin"  # another release is never chosen automatically


# ---- 14. the command line ----------------------------------------------------------------

def _sinpe_cmd(*args):
    return [sys.executable, "-m", "sinpe", "--max-len", "10", "--d-model", "8", *args]


def test_cli_threads_pipe_full_and_bfloat16(tmp_path):
    r = subprocess.run(_sinpe_cmd("--threads", "1", "-o", "a.npy"), capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and "1 thread)" in r.stdout and "2 threads" not in r.stdout
    cmd = " ".join(f"'{c}'" for c in _sinpe_cmd("-o", "b.npy"))
    r = subprocess.run(["bash", "-c", f"set -o pipefail; {cmd} | true"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr
    with open("/dev/full", "w") as full:
        r = subprocess.run(_sinpe_cmd("-o", "c.npy"), stdout=full, stderr=subprocess.PIPE, text=True,
                           cwd=tmp_path, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "report could not be printed" in r.stderr
    assert (tmp_path / "c.npy").exists()
    r = subprocess.run(_sinpe_cmd("--dtype", "bfloat16", "-o", "d.npy"), capture_output=True,
                       text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and "np.load(path).view(ml_dtypes.bfloat16)" in r.stdout
    loaded = np.load(tmp_path / "d.npy").view(ml_dtypes.bfloat16)  # the documented line
    assert same(loaded, PE(10, 8, dtype="bfloat16"))


# ---- 15. the torch module under default dtypes, meta device, resize ----------------------

def _module(*a, **k):
    from sinpe.torch import SinusoidalPositionalEncoding
    return SinusoidalPositionalEncoding(*a, **k)


@pytest.mark.needs_torch
@pytest.mark.parametrize("default", ["float64", "float16", "bfloat16"])
def test_torch_module_follows_default_dtype(default, parity_backend):
    from reference import SinusoidalPositionalEncoding as Ref
    default = getattr(torch, default)
    old = torch.get_default_dtype()
    torch.set_default_dtype(default)
    try:
        ref, m = Ref(64, 50), _module(64, 50)
    finally:
        torch.set_default_dtype(old)
    assert m.pe.dtype == ref.pe.dtype == default
    assert torch.equal(m.pe.view(torch.uint8), ref.pe.view(torch.uint8))
    assert list(m.state_dict()) == ["pe"]
    x = torch.randn(2, 30, 64)
    ref.eval(), m.eval()
    a, b = ref(x), m(x)
    assert a.dtype == b.dtype and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


@pytest.mark.needs_torch
def test_torch_module_meta_and_resize():
    from reference import SinusoidalPositionalEncoding as Ref
    with torch.device("meta"):
        ref, m = Ref(32, 10), _module(32, 10)
    assert m.pe.device.type == ref.pe.device.type == "meta" and m.pe.shape == ref.pe.shape
    m = _module(32, 10)
    m.pe.resize_(1, 20, 32)  # the storage is torch's own
    assert m.pe.shape == (1, 20, 32)


# ---- 16. plots ---------------------------------------------------------------------------

@pytest.mark.needs_torch
def test_plots_take_a_module_buffer_and_refuse_bad_dims():
    import matplotlib
    matplotlib.use("Agg")
    from sinpe import plot
    assert plot.heatmap(_module(16, 20).pe.numpy()) is not None
    with pytest.raises(ValueError, match="dims must be integers"):
        plot.waves(10, 8, dims=[1.5])
    with pytest.raises(ValueError, match="shape"):
        plot.heatmap(np.zeros((2, 3, 4)))


# ---- 17. import from the source tree ----------------------------------------------------

def test_import_in_source_tree_says_what_to_do():
    if any(f.startswith("_sinpe") and not f.endswith((".pyi", ".py")) for f in os.listdir(
            os.path.join(ROOT, "sinpe"))):
        pytest.fail("a built extension lies in the source tree (pip install -e .?): "
                    "this test needs a clean tree")
    r = subprocess.run([sys.executable, "-c", "import sinpe"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode != 0
    assert "circular import" not in r.stderr and "pip install -e ." in r.stderr, r.stderr


# ---- 17. add_pe's tiles: every float offset of x within a cache line, padded rows ----------

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
