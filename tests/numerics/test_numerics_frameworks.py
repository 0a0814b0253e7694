"""The frameworks' backends against the frameworks' own recorded results, in every pass.

tests/data/frameworks.json holds what NumPy 2.4, TensorFlow 2.21, jaxlib 0.10 and ONNX Runtime
1.32 computed on x86-64 (tools/fwrecord.py): exp, sin and cos over specials, subnormals and
NaNs (bit patterns), a dense sample of every 4099th float32 bit pattern and the tutorial tables
at a few shapes and bases (SHA-256 digests), tensor2tensor's timing signal under
TensorFlow and keras-hub's SinePositionEncoding and RotaryEmbedding under JAX and TensorFlow.  sinpe's 'numpy-2.4', 'tensorflow-2.21', 'jax-0.10' and 'onnxruntime-1.32' are
portable C, so these hold on any machine: a changed bit fails here.  The live comparison with
the installed frameworks is tests/numerics/test_numerics_frameworks_live.py (-m frameworks).
"""
import contextlib
import json
import os
import sys

import numpy as np
import pytest

import sinpe
from sinpe import presets
from sinpe._backends import policy

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import framework_oracles as O  # noqa: E402
from conftest import bits  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                    "frameworks.json")
with open(DATA) as fh:
    REC = json.load(fh)
SPECIALS = np.array(REC["specials"], np.uint32).view(np.float32)


def test_the_record_is_of_the_measured_releases():
    v = REC["versions"]
    assert v["numpy"].startswith("2.4.") and v["tensorflow-cpu"].startswith("2.21.")
    assert v["jaxlib"].startswith("0.10.") and v["onnxruntime"].startswith("1.32.")
    assert np.array_equal(bits(SPECIALS), bits(O.specials()))  # the same inputs as recorded


@pytest.mark.parametrize("fw", O.FRAMEWORKS)
@pytest.mark.parametrize("func", O.FUNCS)
def test_elementwise_specials_bit_for_bit(fw, func):
    want = np.array(REC["frameworks"][fw]["specials"][func], np.uint32)
    # the plain name too where it stands for the recorded profile (an older installed
    # release has a profile of its own: NumPy 1.26's is numpy-2.0, CI's NumPy 1.26 pass)
    plain = [fw] if policy.resolve(fw, warn=False)[0] == O.PROFILE[fw] else []
    for name in [O.PROFILE[fw]] + plain:
        got = bits(sinpe.elementwise(func, SPECIALS, backend=name))
        bad = np.nonzero(got != want)[0]
        assert bad.size == 0, (name, func, [(hex(bits(SPECIALS)[i]), hex(want[i]), hex(got[i]))
                                            for i in bad[:5]])


@pytest.mark.parametrize("fw", O.FRAMEWORKS)
@pytest.mark.parametrize("func", O.FUNCS)
def test_elementwise_dense_sample_digest(fw, func):
    got = sinpe.elementwise(func, O.dense(), backend=O.PROFILE[fw])
    assert O.digest(got) == REC["frameworks"][fw]["dense"][func]


@pytest.mark.parametrize("fw", O.FRAMEWORKS)
@pytest.mark.parametrize("L,d,base", O.TABLES)
def test_tutorial_table_digest(fw, L, d, base):
    got = sinpe.positional_encoding(L, d, base, backend=O.PROFILE[fw])
    assert O.digest(got) == REC["frameworks"][fw]["tables"][f"{L}x{d}@{base!r}"]


@pytest.mark.parametrize("key", sorted(REC["tensor2tensor"]))
def test_tensor2tensor_under_tensorflow_digest(key):
    args = [float(v) if "." in v or "e" in v else int(v) for v in key.split(",")]
    args[0], args[1], args[4] = int(args[0]), int(args[1]), int(args[4])
    got = presets.tensor2tensor(*args, backend="tensorflow-2.21")
    assert O.digest(got) == REC["tensor2tensor"][key]


def test_the_frameworks_differ_from_each_other_and_from_builtin():
    """The record tells the frameworks apart (a test that could not fail otherwise)."""
    digests = {fw: REC["frameworks"][fw]["tables"]["64x512@10000.0"] for fw in O.FRAMEWORKS}
    assert len(set(digests.values())) == 4
    assert O.digest(sinpe.positional_encoding(64, 512, backend="builtin")) not in digests.values()


def test_plain_names_mean_a_measured_profile_and_auto_never_picks_them():
    """The plain name is the installed release's profile (the recorded one where the measured
    release is installed or none is; NumPy 1.26's own in CI's NumPy 1.26 pass)."""
    from sinpe._backends import records
    for fw in O.FRAMEWORKS:
        profile = records.framework_release(fw)[0]
        assert profile in records.FRAMEWORKS[fw]
        assert policy.resolve(fw)[0] == profile
        assert records.BY_NAME[fw].auto is None
        assert profile in policy.reproduces(fw)
        if records.installed_release(fw) in (None, REC["versions"].get(fw)):
            assert profile == O.PROFILE[fw]
    assert policy.auto() not in O.FRAMEWORKS


def _numpy_keras_hub(shape, wl, start):
    """keras-hub's SinePositionEncoding as Keras' NumPy backend runs it: NumPy's float32 pow
    (its own loop on this machine), then the 'numpy' profile's sin and cos."""
    L, d = shape[-2], shape[-1]
    pos = np.arange(start, start + L).astype(np.float32)
    ts = np.power(np.float32(1 / wl), (2 * (np.arange(d) // 2)).astype(np.float32) / np.float32(d))
    ang = pos[:, None] * ts[None]
    sin, cos = (sinpe.elementwise(f, ang, backend="numpy") for f in ("sin", "cos"))
    return np.broadcast_to(np.where(np.arange(d) % 2 == 0, sin, cos), shape)


@pytest.mark.parametrize("backend", ["numpy", "numpy-2.4"])
@pytest.mark.parametrize("shape,wl,start", [((2, 50, 64), 10000, 0), ((1, 33, 30), 500, 3),
                                             ((1, 300, 1030), 1e6, -7), ((4, 1, 2), 77, 0)])
def test_numpy_pow_is_the_installed_numpys(backend, shape, wl, start):
    """NumPy's float32 power is Intel SVML's on AVX-512 machines and the C library's powf
    elsewhere: the 'numpy' backend's pow is np.power itself (2,262,172 values of the live
    test's cases differed with glibc's powf on an Intel AVX-512 machine)."""
    want = _numpy_keras_hub(shape, wl, start)
    got = presets.keras_hub(shape, wl, start, backend=backend)
    assert np.array_equal(bits(got), bits(want)), int((bits(got) != bits(want)).sum())
    # and the RoPE presets' inverse frequencies: 1 / theta ** (arange(0, dim, 2) / dim)
    inv = np.float32(1) / np.power(np.float32(wl), np.arange(0, 64, 2).astype(np.float32)
                                   / np.float32(64))
    cos, _ = presets.llama_rope(64, 40, rope_theta=wl, backend=backend)
    ang = np.arange(40, dtype=np.float32)[:, None] * np.concatenate([inv, inv])[None]
    assert np.array_equal(bits(cos), bits(sinpe.elementwise("cos", ang, backend="numpy")))


@pytest.mark.parametrize("case", REC["keras_hub_tf"], ids=str)
def test_keras_hub_under_tensorflow_digest(case):
    """Eigen's float pow (and its glibc tail: hidden sizes 1 to 1030), then sin/cos, as
    Keras' TensorFlow backend runs the layer."""
    shape, wl, start, want = case
    for name in ("tensorflow", "tensorflow-2.21"):
        assert O.digest(presets.keras_hub(tuple(shape), wl, start, backend=name)) == want, name


def test_tensorflow_pow_is_not_glibcs():
    """The record tells Eigen's pow from glibc's (the profile used glibc's powf before):
    the same layer under 'jax' (glibc's powf, XLA's exp) has another digest."""
    for shape, wl, start, want in REC["keras_hub_tf"][:2]:
        assert O.digest(presets.keras_hub(tuple(shape), wl, start, backend="jax")) != want


@pytest.mark.parametrize("case", REC["keras_hub_jax"], ids=str)
def test_keras_hub_under_jax_digest(case):
    shape, wl, start, want = case
    assert O.digest(presets.keras_hub(tuple(shape), wl, start, backend="jax")) == want


# ---- keras-hub's SinePositionEncoding at odd inputs (issue 35) ---------------------------------
#
# tests/data/keras_hub_odd.json: the layer at each case of O.KERAS_ODD under Keras' TensorFlow,
# JAX and NumPy backends (O.keras_hub_odd_cases; keras 3.15.1, keras-hub 0.32.0, TensorFlow
# 2.21, jaxlib 0.10.2, NumPy 2.4; AMD EPYC Zen 4, 2026-12): the digest of its output, or the
# name of the exception it raised.  The framework's own exception types (TensorFlow's
# InvalidArgumentError) are TypeError in sinpe; the others are the same.

with open(os.path.join(os.path.dirname(DATA), "keras_hub_odd.json")) as fh:
    ODD = json.load(fh)
ODD_IDS = [c[0] for c in O.KERAS_ODD]
SAME_EXCEPTION = {"InvalidArgumentError": "TypeError"}


def _keras_odd_sinpe(i, backend):
    name, shape, lkw, ckw = O.KERAS_ODD[i]
    try:
        y = presets.keras_hub(shape, **lkw, **ckw, backend=backend)
    except (TypeError, ValueError, OverflowError) as e:
        return ["err", type(e).__name__]
    return ["ok", list(y.shape), O.digest(y)]


def _keras_odd_check(want, got):
    if want[0] == "err":
        assert got == ["err", SAME_EXCEPTION.get(want[1], want[1])], got
    else:
        assert got == want


def test_the_odd_record_is_of_these_cases():
    assert ODD["cases"] == ODD_IDS and ODD["versions"]["keras-hub"] == "0.32.0"


@pytest.mark.parametrize("fw", ["tensorflow", "jax"])
@pytest.mark.parametrize("i", range(len(O.KERAS_ODD)), ids=ODD_IDS)
def test_keras_hub_odd_inputs_under_tensorflow_and_jax(fw, i):
    """Positions past 2^31 wrap as keras-hub's int32 sum wraps them (or are refused as the
    backend refuses the start_index), +-inf and NaN angles keep the sine's NaN in both
    columns (TensorFlow's cos gives other NaN signs: the cosine columns differed before),
    -0.0 positions give +0.0 sines, hidden size 0 an empty last axis (was refused)."""
    _keras_odd_check(ODD[fw][i], _keras_odd_sinpe(i, fw))


@contextlib.contextmanager
def _numpy2_promotion():
    """NumPy 2's promotion rules (NEP 50) on whatever NumPy is installed: the 'numpy' profiles
    are NumPy 2.4's (on NumPy 1.26 the alias says so in a warning), and NumPy 1.26 adds an
    out-of-range Python int or an int64 scalar to an int32 array by value (no wrap, no
    OverflowError), where NumPy 2 refuses the int and promotes to the scalar's type."""
    if not hasattr(np, "_set_promotion_state"):  # NumPy 2: NEP 50 is the only rule
        yield
        return
    old = np._get_promotion_state()
    np._set_promotion_state("weak")
    try:
        yield
    finally:
        np._set_promotion_state(old)


def _numpy_layer(shape, max_wavelength=10000, start_index=0, positions=None, backend="numpy"):
    """keras-hub's layer as Keras' NumPy backend runs it on NumPy 2, restated with NumPy itself
    (its int32 arange plus start_index: NumPy 2's promotion, wrap and OverflowError; 64-bit
    integer positions converted to 32 bits as keras converts them), NumPy's float32 pow and the
    'numpy' profile's sin and cos over the whole angle tensor, then keras' masked sum."""
    L, d = shape[-2], shape[-1]
    if positions is None:
        pos = (np.arange(L, dtype=np.int32) + start_index).astype(np.float32)
    else:
        p = np.asarray(positions)
        if p.dtype.kind in "iu" and p.dtype.itemsize == 8:
            p = p.astype(p.dtype.kind + "4")
        pos = p.astype(np.float32)
    pos = pos[None] if pos.ndim == 1 else pos
    ts = np.power(np.float32(1 / max_wavelength),
                  (2 * (np.arange(d) // 2)).astype(np.float32) / np.float32(d))
    ang = pos[..., None] * ts
    sin, cos = (sinpe.elementwise(f, ang, backend=backend) for f in ("sin", "cos"))
    cos_mask = (np.arange(d) % 2).astype(np.float32)
    return np.broadcast_to(sin * (np.float32(1) - cos_mask) + cos * cos_mask, shape)


@pytest.mark.parametrize("i", range(len(O.KERAS_ODD)), ids=ODD_IDS)
def test_keras_hub_odd_inputs_under_numpy(i):
    """The same cases under Keras' NumPy backend: its pow is the installed NumPy's (machine
    dependent), so against the layer restated with NumPy here; where NumPy itself refuses,
    as recorded (the recorded digests are this project's machine's)."""
    name, shape, lkw, ckw = O.KERAS_ODD[i]
    for backend in ("numpy", "numpy-2.4"):  # each against the layer with its own sin/cos
        try:
            with np.errstate(all="ignore"), _numpy2_promotion():
                want = _numpy_layer(shape, **lkw, **ckw, backend=backend)
            want = ["ok", list(want.shape), O.digest(want)]
        except OverflowError:
            want = ["err", "OverflowError"]
        assert (want[0] == "err") == (ODD["numpy"][i][0] == "err")
        _keras_odd_check(want, _keras_odd_sinpe(i, backend))


@pytest.mark.parametrize("n", range(1, 16))
def test_jax_exp_of_fewer_than_16_elements(n):
    """XLA's exp below 16 elements: 3, 5, 6 or 7 left over go to glibc's expf, 1, 2 or 4 (one
    4-lane vector) are XLA's own polynomial; inputs where the two differ, at every place."""
    x = O.jax_short_input(n)
    want = np.array(REC["jax_exp_short"][str(n)], np.uint32)
    assert np.array_equal(bits(sinpe.elementwise("exp", x, backend="jax")), want)
    xla = bits(sinpe.elementwise("exp", np.resize(x, 16), backend="jax"))[:n]  # no tail
    assert (xla != want).any() == (n < 16 and n % 8 in (3, 5, 6, 7))


@pytest.mark.parametrize("shape", [(1, 3), (3, 5), (1, 11), (1, 1, 14), (2, 7)])
def test_jax_exp_of_a_short_array_of_rank_2_has_no_tail(shape):
    """XLA leaves a short exp's tail to glibc for vectors only: an array of rank 2 or more is
    its polynomial throughout (measured with jaxlib 0.10.2; review of 2026-12-04)."""
    n = int(np.prod(shape))
    x = O.jax_short_input(n)
    got = bits(sinpe.elementwise("exp", x.reshape(shape), backend="jax")).ravel()
    xla = bits(sinpe.elementwise("exp", np.resize(x, 16), backend="jax"))[:n]
    assert np.array_equal(got, xla)
    if n < 16 and n % 8 in (3, 5, 6, 7):  # the same values as a vector do take the tail
        assert not np.array_equal(bits(sinpe.elementwise("exp", x, backend="jax")), xla)


def test_keras_hub_rotary_refuses_onnxruntime_keras_has_no_such_backend():
    x = np.zeros((1, 4, 8), np.float32)
    for fw in ("onnxruntime", "onnxruntime-1.32"):
        with pytest.raises(NotImplementedError, match="onnxruntime"):
            presets.keras_hub_rotary(x, backend=fw)


@pytest.mark.parametrize("i", range(len(O.ROTARY)), ids=lambda i: str(O.ROTARY[i][:2]))
def test_keras_hub_rotary_under_numpy(i):
    """Keras' NumPy backend runs the layer with torch's operations (true divisions, no FTZ,
    separate products and sum) and NumPy's pow, cos and sin."""
    x, kw = O.rotary_case(*O.ROTARY[i])
    kw = dict(kw)
    pos = kw.pop("positions", None)
    start = kw.pop("start_index", 0)
    xm = np.moveaxis(x, (kw.get("feature_axis", -1), 1), (-1, 1))
    d, S = xm.shape[-1], xm.shape[1]
    inv = np.power(np.float32(kw.get("max_wavelength", 10000)),
                   -(np.arange(0, d, 2).astype(np.float32) / np.float32(d)))
    inv = inv / np.float32(kw.get("scaling_factor", 1.0))
    p = (np.arange(S).astype(np.float32) + np.float32(start))[None] if pos is None else \
        np.atleast_2d(np.asarray(pos, np.float32))
    emb = np.concatenate([p[..., None] * inv] * 2, axis=-1)
    emb = emb.reshape(emb.shape[:2] + (1,) * (xm.ndim - 3) + emb.shape[-1:])
    cos, sin = (sinpe.elementwise(f, np.ascontiguousarray(emb), backend="numpy")
                for f in ("cos", "sin"))
    x1, x2 = np.split(xm, 2, axis=-1)
    want = np.moveaxis(xm * cos + np.concatenate([-x2, x1], axis=-1) * sin, (-1, 1),
                       (kw.get("feature_axis", -1), 1))
    got = presets.keras_hub_rotary(x, backend="numpy", start_index=start, positions=pos, **kw)
    assert np.array_equal(bits(got), bits(want)), int((bits(got) != bits(want)).sum())


@pytest.mark.parametrize("fw", ["jax", "tensorflow"])
@pytest.mark.parametrize("i", range(len(O.ROTARY)), ids=lambda i: str(O.ROTARY[i][:2]))
def test_keras_hub_rotary_under_the_frameworks_digest(fw, i):
    """keras-hub's RotaryEmbedding under Keras' JAX / TensorFlow backends: the framework's pow,
    cos and sin with their tails, XLA's reciprocal products or TF's divisions, FTZ (the
    'tiny' case: subnormal products are zeros)."""
    x, kw = O.rotary_case(*O.ROTARY[i])
    want = REC["keras_hub_rotary"][fw][i]
    for name in (fw, O.PROFILE[fw]):
        assert O.digest(presets.keras_hub_rotary(x, backend=name, **kw)) == want, name


def test_keras_hub_rotary_frameworks_differ_from_torchs():
    """The records are not the torch Keras backend's bits (nor each other's) at these cases."""
    x, kw = O.rotary_case(*O.ROTARY[6])
    torch_like = O.digest(presets.keras_hub_rotary(x, backend="builtin", **kw))
    assert len({torch_like, REC["keras_hub_rotary"]["jax"][6],
                REC["keras_hub_rotary"]["tensorflow"][6]}) == 3


def test_add_pe_is_the_table_added():
    x = np.random.default_rng(3).standard_normal((2, 37, 26)).astype(np.float32)
    for fw in O.FRAMEWORKS:
        pe = sinpe.positional_encoding(5000, 26, backend=fw)[:37]  # the tutorial's max_len
        want = x + pe
        assert np.array_equal(bits(sinpe.add_pe(x.copy(), backend=fw)), bits(want)), fw
