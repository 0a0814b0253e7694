"""The API's inputs: every bad input raises a clear exception naming the value and writes
nothing; dtype spellings, loose input refused the same way for every dtype, messages that
name the right thing, bad environment variables, tables larger than memory refused first."""
import subprocess
import sys
import time

import ml_dtypes
import numpy as np
import pytest

import sinpe
from conftest import BF16, DTYPES, TIME_SCALE, physical_memory, run_python, same, torch
from sinpe._jobs import _round  # the rounding the tables use, private to sinpe

P = sinpe.presets

PE = sinpe.positional_encoding


@pytest.mark.parametrize("d_model", [3, 511, 1, 0, -2])
def test_d_model_odd_or_small(d_model):
    with pytest.raises(ValueError, match=f"d_model.*got {d_model}"):
        PE(10, d_model)


def test_max_len_negative():
    with pytest.raises(ValueError, match="max_len must be >= 0, got -1"):
        PE(-1, 8)


@pytest.mark.parametrize("bad", [5000.0, "5000", True, 2.5, np.float64(8)])
def test_sizes_not_integers(bad):
    with pytest.raises(TypeError, match="must be an integer"):
        PE(bad, 8)
    with pytest.raises(TypeError, match="d_model must be an integer"):
        PE(8, bad)


def test_sizes_missing():
    with pytest.raises(TypeError, match="exactly one of max_len and positions"):
        PE(None, 8)
    with pytest.raises(TypeError, match="exactly one of max_len and positions"):
        PE(4, 8, positions=[1, 2])
    with pytest.raises(TypeError, match="needs d_model"):
        PE(8, None)


def test_positions_bad():
    with pytest.raises(TypeError, match="positions must be integers or real numbers"):
        PE(d_model=8, positions=np.array([True, False]))
    with pytest.raises(TypeError, match="positions must be integers or real numbers"):
        PE(d_model=8, positions=["a", "b"])
    with pytest.raises(ValueError, match="d_model must be an even integer >= 2, got 7"):
        PE(d_model=7, positions=[1, 2])
    out = _sentinel((3, 8))
    with pytest.raises(ValueError, match=r"out has shape \(3, 8\); expected \(2, 8\)"):
        PE(d_model=8, positions=[1, 2], out=out)
    assert (out == 7).all()


def test_numpy_integers_accepted():
    assert PE(np.int64(3), np.int32(4)).shape == (3, 4)


@pytest.mark.parametrize("base", [float("nan"), float("inf"), -float("inf"), 0.0, -1.0, -10000])
def test_base_not_finite_or_not_positive(base):
    with pytest.raises(ValueError, match="base must be finite and > 0, got"):
        PE(4, 8, base)
    x = np.ones((2, 8), np.float32)
    with pytest.raises(ValueError, match="base"):
        sinpe.add_pe(x, base)
    assert (x == 1).all()


@pytest.mark.parametrize("base", ["10000", None, 1j, True])
def test_base_wrong_type(base):
    with pytest.raises(TypeError, match="base must be a real number"):
        PE(4, 8, base)


def test_table_too_large_for_size_t():
    with pytest.raises(OverflowError, match="larger than memory can address"):
        PE(2**62, 1024)
    with pytest.raises(OverflowError):
        PE(2**70, 8)  # not even an int64


def _sentinel(shape, dtype=np.float32):
    return np.full(shape, 7.0, dtype)


def test_out_wrong_dtype():
    out = _sentinel((4, 8), np.int32)
    with pytest.raises(TypeError, match="out must have dtype float32, float16, bfloat16 or "
                                        "float64, got int32"):
        PE(4, 8, out=out)
    assert (out == 7).all()
    out = _sentinel((4, 8), np.float16)
    with pytest.raises(TypeError, match="out has dtype float16 but dtype='float64' asks for float64"):
        PE(4, 8, out=out, dtype="float64")
    assert (out == 7).all()
    out = _sentinel((4, 8))
    with pytest.raises(TypeError, match="out has dtype float32 but dtype=.* asks for float16"):
        PE(4, 8, dtype=np.float16, out=out)
    assert (out == 7).all()


def test_out_dtype_is_the_result_dtype():
    out = _sentinel((4, 8), np.float64)
    assert PE(4, 8, out=out) is out
    assert (out.view(np.uint64) == PE(4, 8, dtype="float64").view(np.uint64)).all()


@pytest.mark.parametrize("shape", [(4, 10), (5, 8), (2, 4, 8), (32,), (1, 1, 4, 8)])
def test_out_wrong_shape(shape):
    out = _sentinel(shape)
    with pytest.raises(ValueError, match=r"out has shape .* expected \(4, 8\)"):
        PE(4, 8, out=out)
    assert (out == 7).all()


def test_out_strided_is_filled():
    big = _sentinel((4, 16))
    PE(4, 8, out=big[:, ::2])
    assert (big[:, ::2].view(np.uint32) == PE(4, 8).view(np.uint32)).all()
    assert (big[:, 1::2] == 7).all()  # nothing else written
    t = _sentinel((4, 8)).T
    PE(8, 4, out=t)
    assert (t.view(np.uint32) == PE(8, 4).view(np.uint32)).all()


def test_out_read_only():
    out = _sentinel((4, 8))
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        PE(4, 8, out=out)
    assert (out == 7).all()
    with pytest.raises(ValueError, match="read-only"):
        PE(4, 8, out=memoryview(bytes(128)).cast("f", (4, 8)))


def test_out_not_a_buffer():
    with pytest.raises(TypeError, match="out must be a writable array of float32, float16, "
                                        "bfloat16 or float64.*got list"):
        PE(4, 8, out=[[0.0] * 8] * 4)


def test_x_wrong_dtype():
    for dt in (np.int32, np.int64, np.complex64, np.uint8):
        x = _sentinel((4, 8), dt)
        with pytest.raises(TypeError, match="x must have dtype float32, float16, bfloat16 or float64"):
            sinpe.add_pe(x)
        assert (x == 7).all()
    with pytest.raises(TypeError, match="x must be a writable array of float32"):
        sinpe.add_pe([[1.0, 2.0]])


@pytest.mark.parametrize("shape", [(8,), ()])
def test_x_not_2d(shape):
    x = _sentinel(shape)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        sinpe.add_pe(x)
    assert (x == 7).all()


def test_x_read_only():
    x = _sentinel((4, 8))
    x.flags.writeable = False
    with pytest.raises(ValueError, match="x is read-only"):
        sinpe.add_pe(x)
    b = np.broadcast_to(np.float32(1), (4, 8))
    with pytest.raises(ValueError, match="read-only"):
        sinpe.add_pe(b)


def test_x_odd_d_model():
    x = _sentinel((4, 7))
    with pytest.raises(ValueError, match="d_model must be an even integer >= 2, got 7"):
        sinpe.add_pe(x)
    assert (x == 7).all()


def test_offset_negative_or_not_int():
    x = _sentinel((4, 8))
    with pytest.raises(ValueError, match="offset must be >= 0, got -3"):
        sinpe.add_pe(x, offset=-3)
    with pytest.raises(TypeError, match="offset must be an integer"):
        sinpe.add_pe(x, offset=1.5)
    with pytest.raises(OverflowError, match="does not fit in int64"):
        sinpe.add_pe(x, offset=2**63 - 2)
    assert (x == 7).all()


def test_backend_unknown():
    with pytest.raises(ValueError, match="unknown backend 'fast'"):
        PE(4, 8, backend="fast")
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        sinpe.set_backend("tpu")
    with pytest.raises(TypeError, match=r"backend must be a backend name \(str\) or None, got 1"):
        PE(4, 8, backend=1)


def test_empty_inputs_are_fine():
    assert PE(0, 8).shape == (0, 8)
    x = np.zeros((3, 0, 8), np.float32)
    assert sinpe.add_pe(x) is x
    x = np.zeros((0, 8), np.float32)
    assert sinpe.add_pe(x, offset=5) is x
    for shape in ((3, 0), (0, 3, 0), (0,)):  # empty arrays' strides are NumPy's own (0, 0)
        assert sinpe.elementwise("sin", np.zeros(shape, np.float32)).shape == shape


# ---- dtype spellings and refusals -----------------------------------------------------

@pytest.mark.parametrize("spelling,want", [
    ("f4", np.float32), ("<f4", np.float32), ("=f4", np.float32), ("float32", np.float32),
    ("single", np.float32), (np.float32, np.float32), ("e", np.float16), ("f2", np.float16),
    ("half", np.float16), ("float16", np.float16), ("d", np.float64), ("f8", np.float64),
    (float, np.float64), ("float", np.float64), ("double", np.float64),
    ("bfloat16", BF16), (ml_dtypes.bfloat16, BF16), (BF16, BF16)], ids=repr)
def test_dtype_spellings(spelling, want):
    t = PE(5, 8, dtype=spelling)
    assert t.dtype == np.dtype(want)
    assert same(t, _round(PE(5, 8).ravel(), want).reshape(5, 8))


@pytest.mark.needs_torch
@pytest.mark.parametrize("name,want", [("float16", np.float16), ("bfloat16", BF16),
                                       ("float64", np.float64), ("float32", np.float32)])
def test_dtype_spellings_torch(name, want):
    test_dtype_spellings(getattr(torch, name), want)


@pytest.mark.parametrize("bad", ["int32", np.int64, "float8", "c8", ">f4", "S4", object, "bool",
                                 pytest.param(np.int32, id="np.int32"),
                                 # NumPy's parser raises SyntaxError on these (the fuzzer's)
                                 "4orc,,float16", "f4,(", "f4, 3)"])
def test_dtype_refused(bad):
    with pytest.raises(TypeError, match="dtype") as e:
        PE(5, 8, dtype=bad)
    if bad == ">f4":
        assert "native byte order" in str(e.value), e.value
    else:
        assert "dtype must be float32, float16, bfloat16 or float64" in str(e.value), e.value


# ---- messages that name the right thing --------------------------------------------------

@pytest.mark.needs_torch
def test_messages():
    be = np.zeros((4, 8), ">f4")
    with pytest.raises(TypeError, match="native byte order, got big-endian float32"):
        PE(4, 8, out=be)
    with pytest.raises(TypeError, match="native byte order"):
        sinpe.add_pe(be)
    with pytest.raises(TypeError, match=r"x must be a writable array .*a torch CPU tensor.*"
                                        r"got list") as e:
        sinpe.add_pe([[0.0] * 8] * 2)
    assert "positions" not in str(e.value)
    with pytest.raises(TypeError, match="x must have dtype float32.*got int64"):
        sinpe.add_pe(torch.zeros(2, 8, dtype=torch.int64))  # tensors are taken (DLPack)
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


# ---- loose input refused the same way for every dtype ------------------------------------

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


# ---- memory: formatted messages, every dtype refused before computing ---------------------

@pytest.mark.parametrize("dt", ["float32", "float16", "float64", "bfloat16"])
def test_tables_larger_than_memory_refused_first(dt):
    with pytest.raises(MemoryError, match="GiB"):
        PE(10**7, 10**5)  # 3.6 TiB, refused before allocating
    mem = physical_memory()
    item = np.dtype(BF16 if dt == "bfloat16" else dt).itemsize
    rows = mem // (1024 * item) + 1
    t0 = time.perf_counter()
    with pytest.raises(MemoryError, match=r"needs \d+\.\d GiB .*more than this machine's \d+\.\d GiB"):
        PE(rows, 1024, dtype=dt)
    with pytest.raises(MemoryError, match=r"\d+\.\d GiB"):
        sinpe._jobs.empty_table(sinpe._backends.policy.opts(), rows, 1024, dtype=dt)
    assert time.perf_counter() - t0 < 0.5 * TIME_SCALE


def test_cli_refuses_a_table_larger_than_memory(tmp_path):
    r = subprocess.run([sys.executable, "-m", "sinpe", "--max-len", str(10**9), "--d-model", "1024",
                        "--dtype", "float64", "-o", "big.npy"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "GiB" in r.stderr and "%" not in r.stderr, r.stderr
    assert not (tmp_path / "big.npy").exists()


# ---- issue 25: an empty x is checked as add_pe checks it; base named with its rule ---------

EMPTY_X = [(0, 4, 16, 64), (1, 4, 3, 64), (2, 0, 3, 64)]


@pytest.mark.parametrize("shape", EMPTY_X)
@pytest.mark.parametrize("kw,exc,msg", [
    ({"offset": 2**63 - 2}, OverflowError, "offset"),
    ({"offset": 2**63 - 1}, OverflowError, "offset"),
    ({"offset": -1}, ValueError, "offset"),
    ({"positions": np.array(["a", "b", "c"])}, TypeError, "positions"),
    ({"positions": [2**64, 1, 2]}, OverflowError, "positions"),
    ({"positions": [1.0, 2.0, None]}, TypeError, "positions"),
    ({"positions": np.array([True, False, True])}, TypeError, "positions"),
    ({"base": 3.5e38}, ValueError, "base must be at most the largest float32"),
    ({"base": -1.0}, ValueError, "base"),
])
def test_apply_rope_on_empty_x_checks_like_add_pe(shape, kw, exc, msg):
    """Issue 25, 9: an empty x skipped apply_rope's checks (offset=2**63-2, string
    positions, integers past uint64 accepted) where add_pe on the same x raises."""
    if "positions" in kw:  # three positions: seq = 3 (x stays empty)
        shape = shape[:2] + (3,) + shape[3:]
    x = np.zeros(shape, np.float32)
    with pytest.raises(exc, match=msg):
        sinpe.apply_rope(x, **kw)
    if "offset" in kw and kw["offset"] >= 0:
        with pytest.raises(exc, match=msg):
            sinpe.add_pe(np.zeros(shape[1:], np.float32)[:0], offset=kw["offset"])


def test_apply_rope_base_past_float32_names_base():
    """Issue 25, 10: base=3.5e38 said 'theta must be finite' (another name, and it is
    finite); the largest float32 is still taken, a value that rounds to it too."""
    x = np.ones((1, 2, 3, 8), np.float32)
    with pytest.raises(ValueError, match=r"base must be at most the largest float32.*3\.5e\+38"):
        sinpe.apply_rope(x.copy(), base=3.5e38)
    for b in (float(np.finfo(np.float32).max), 3.4028235e38):
        y = sinpe.apply_rope(x.copy(), base=b)
        assert np.isfinite(y).all()


def test_apply_rope_empty_x_valid_calls_still_pass():
    for shape in EMPTY_X:
        x = np.zeros(shape, np.float32)
        assert sinpe.apply_rope(x, offset=2**62) is x
        if shape[2] == 3:
            assert sinpe.apply_rope(x, positions=[1, 2, 2**63]) is x


@pytest.mark.parametrize("call,message", [
    (lambda: P.llama_rope(8, 4, rope_theta=1e39), r"rope_theta=1e\+39 is outside float32's range"),
    (lambda: P.rotary_embedding_torch_freqs(8, theta=1e39), r"theta=1e\+39 is outside float32"),
    (lambda: P.rotary_embedding_torch_freqs(8, theta=1e38, theta_rescale_factor=100.0),
     r"theta \* theta_rescale_factor \*\* \(dim / \(dim - 2\)\)=4.6\d*e\+40 is outside"),
    (lambda: P.timm_2d((2, 2), 8, temperature=1e39), r"temperature=1e\+39 is outside float32"),
    (lambda: P.keras_hub((1, 2, 8), max_wavelength=1e-46), r"1 / max_wavelength=1e\+46 is outside"),
    (lambda: P.keras_hub_rotary(np.zeros((1, 2, 8), np.float32), max_wavelength=1e39),
     r"max_wavelength=1e\+39 is outside float32's range"),
])
def test_bases_past_float32_refused_with_the_true_rule(call, message):
    """A second probe: finite bases past float32's range (their float32 is inf) were refused
    as "must be finite and > 0", and derived bases under a name the caller never passed."""
    with pytest.raises(ValueError, match=message):
        call()


def test_keras_hub_rotary_empty_input_checks_its_base():
    """A second probe: an empty input skipped the frequencies and with them max_wavelength's
    rule."""
    with pytest.raises(ValueError, match=r"max_wavelength=1e\+39 is outside float32's range"):
        P.keras_hub_rotary(np.zeros((0, 1, 8), np.float32), max_wavelength=1e39)
    assert P.keras_hub_rotary(np.zeros((0, 1, 8), np.float32)).shape == (0, 1, 8)


def test_given_tables_shapes_checked_before_any_copy():
    """A second probe: apply_rope(cos=, sin=) copied broadcast tables before checking their
    shape (1 GiB for a (2, 8192, 8192) view; NumPy's MemoryError for (2^20, 2^20))."""
    x = np.zeros((1, 4, 8), np.float32)
    huge = np.broadcast_to(np.float32(0.5), (1 << 20, 1 << 20))
    with pytest.raises(ValueError, match="cos and sin must have one shape"):
        sinpe.apply_rope(x, cos=huge, sin=huge)
    c = np.ones((4, 8), np.float32)
    sinpe.apply_rope(x, cos=c, sin=c * 0)  # a valid pair still rotates


def test_alibi_bias_half_precision_masks():
    """A second probe: transformers' cumsum runs in the mask's dtype, so a float16 mask past
    2048 positions (a bfloat16 one past 256) gets rounded positions; sinpe refused nothing and
    differed.  Within the exact range they equal an integer mask's; past it, ValueError."""
    import ml_dtypes
    m16 = np.ones((1, 2048), np.float16)
    assert same(P.alibi_bias(m16, 2), P.alibi_bias(m16.astype(np.int64), 2))
    with pytest.raises(ValueError, match="attention_mask of dtype float16 and 2049 positions"):
        P.alibi_bias(np.ones((1, 2049), np.float16), 2)
    with pytest.raises(ValueError, match="bfloat16 and 300 positions"):
        P.alibi_bias(np.ones((1, 300), ml_dtypes.bfloat16), 2)
