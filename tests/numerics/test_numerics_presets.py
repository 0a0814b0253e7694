"""The presets, apply_rope and ALiBi, bit for bit:
  - on every backend that gives torch's bits here, against the libraries' operation lists run
    on torch (tests/preset_oracles.py: this torch's exp/sin/cos/pow on the library's tensors);
  - on the built-in backend, against the same lists with correctly rounded functions;
  - against the real packages where they install (the `oracle_packages` tests:
    transformers, diffusers, rotary-embedding-torch, positional-encodings, openai-whisper,
    keras-hub on the torch backend, timm's pos_embed_sincos module loaded alone), which also
    shows that the operation lists are right.
Grids: at least three sizes per preset, an odd dimension where the library allows one, and
each parameter's non-default values. Every comparison is of bit patterns."""
import importlib
import importlib.util
import math
import os
import sys
import types

import ml_dtypes
import numpy as np
import pytest
import torch

import preset_oracles as O
import sinpe
from conftest import PARITY_BACKENDS, bits
from sinpe import presets as P
from sinpe._jobs import _round  # the rounding the tables use, private to sinpe

BACKENDS = PARITY_BACKENDS
oracle_packages = pytest.mark.oracle_packages


def assert_same(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    bad = bits(got) != bits(want)
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {got.size} differ; first at "
                           f"{np.argwhere(bad)[0].tolist()}: {got[tuple(np.argwhere(bad)[0])]!r} vs "
                           f"{want[tuple(np.argwhere(bad)[0])]!r}")


def f32(a):
    return np.ascontiguousarray(a, np.float32)


# ---- the grids: (sinpe call, oracle call) per case, for a function provider F ---------------

def cases(F, small=False):
    """name -> (sinpe(**opts) -> array, oracle() -> array). small: the built-in's grid (the
    correctly rounded oracle evaluates mpmath per value)."""
    n = 40 if small else None
    c = {}

    def add(name, fn, orc):
        c[name] = (fn, orc)

    for N, d, pad in ([(30, 16, 1), (20, 9, None), (17, 12, 0)] if small else
                      [(1026, 512, 1), (100, 9, 1), (66, 1024, None), (300, 256, 0), (50, 16, -1)]):
        add(f"fairseq {N}x{d} pad={pad}", lambda o, N=N, d=d, p=pad: P.fairseq(N, d, p, **o),
            lambda N=N, d=d, p=pad: O.fairseq(F, N, d, p))
    add("musicgen", lambda o: P.musicgen(n or 200, 33, **o), lambda: O.fairseq(F, n or 200, 33, swap=True))
    for S, E, lp in ([(20, 16, None), (15, 10, 1), (9, 12, 3)] if small else
                     [(4096, 1024, None), (1024, 512, 1), (50, 10, None), (77, 64, 0)]):
        add(f"fairseq2 {S}x{E} pad={lp}",
            lambda o, S=S, E=E, lp=lp: P.fairseq2(E, S, _legacy_pad_idx=lp, **o),
            lambda S=S, E=E, lp=lp: O.fairseq2(F, E, S, lp))
    for L, C, kw in ([(20, 16, {}), (12, 9, {}), (10, 8, {"min_timescale": 2.0, "max_timescale": 1e3, "start_index": 5})]
                     if small else
                     [(1024, 512, {}), (100, 9, {}), (64, 256, {"start_index": 5}),
                      (50, 64, {"min_timescale": 2.0, "max_timescale": 1e3}), (30, 2, {})]):
        add(f"t2t {L}x{C} {kw}", lambda o, L=L, C=C, kw=kw: P.tensor2tensor(L, C, **kw, **o),
            lambda L=L, C=C, kw=kw: O.tensor2tensor(F, L, C, **kw))
    for shape, kw in ([((1, 20, 16), {}), ((1, 10, 9), {"start_index": 3}), ((2, 8, 8), {"max_wavelength": 100})]
                      if small else
                      [((1, 128, 64), {}), ((1, 256, 512), {}), ((1, 50, 9), {}),
                       ((1, 64, 32), {"start_index": 7}), ((3, 64, 32), {"max_wavelength": 100}),
                       ((1, 5, 6), {"positions": np.array([[0, 3, 9, 2, 100]])})]):
        add(f"keras_hub {shape} {list(kw)}", lambda o, s=shape, kw=kw: P.keras_hub(s, **kw, **o),
            lambda s=shape, kw=kw: O.keras_hub(F, s, **kw))
    rng = np.random.default_rng(26)
    for shape, kw in ([((1, 10, 8), {}), ((2, 6, 3, 4), {"max_wavelength": 500, "start_index": 3})]
                      if small else
                      [((2, 128, 64), {}), ((2, 100, 4, 32), {"max_wavelength": 500000}),
                       ((2, 64, 16), {"scaling_factor": 0.37, "start_index": 1000}),
                       ((2, 8, 64, 32), {"sequence_axis": 2}),
                       ((2, 32, 40, 6), {"sequence_axis": -2, "feature_axis": 1}),
                       ((3, 20, 16), {"positions": np.arange(60).reshape(3, 20) * 7})]):
        x = rng.standard_normal(shape).astype(np.float32)
        add(f"keras_hub_rotary {shape} {list(kw)}",
            lambda o, x=x, kw=kw: P.keras_hub_rotary(x, **kw, **o),
            lambda x=x, kw=kw: O.keras_hub_rotary(F, x, **kw))
    for L, C in ([(20, 8), (10, 12), (7, 4)] if small else [(1500, 384), (1500, 1280), (448, 512)]):
        add(f"whisper {L}x{C}", lambda o, L=L, C=C: P.whisper(L, C, **o),
            lambda L=L, C=C: O.whisper(F, L, C))
    add("whisper max_timescale", lambda o: P.whisper(n or 100, 64, 500, **o),
        lambda: O.whisper(F, n or 100, 64, 500))
    ts = np.arange(n or 1000) * 0.7 if True else None
    for d, kw in ([(16, {}), (9, {"downscale_freq_shift": 0}), (12, {"flip_sin_to_cos": True, "scale": 1000, "max_period": 500})]
                  if small else
                  [(320, {"flip_sin_to_cos": True, "downscale_freq_shift": 0}), (256, {}),
                   (256, {"flip_sin_to_cos": True, "downscale_freq_shift": 1}),
                   (33, {"downscale_freq_shift": 0}),
                   (1280, {"flip_sin_to_cos": True, "downscale_freq_shift": 0, "scale": 1000}),
                   (128, {"max_period": 500})]):
        for t in ([ts] if small else [np.arange(1000), ts]):
            add(f"diffusers {d} {kw} {t.dtype}", lambda o, d=d, kw=kw, t=t: P.diffusers_timestep(t, d, **kw, **o),
                lambda d=d, kw=kw, t=t: O.diffusers_timestep(F, t, d, **kw))
    for fs, d, kw in ([([4, 5], 16, {}), ([3, 4], 8, {"reverse_coord": True}), ([4, 4], 8, {"interleave_sin_cos": True, "temperature": 100.})]
                      if small else
                      [([14, 14], 768, {}), ([16, 12], 384, {}), ([16, 12], 384, {"reverse_coord": True}),
                       ([8, 8], 64, {"interleave_sin_cos": True}), ([8, 8], 64, {"temperature": 100.})]):
        add(f"timm {fs} {d} {kw}", lambda o, fs=fs, d=d, kw=kw: P.timm_2d(fs, d, **kw, **o),
            lambda fs=fs, d=d, kw=kw: O.timm_2d(F, fs, d, **kw))
    for dim, theta, S in ([(16, 1e4, 20), (8, 5e5, 30), (12, 1e4, 10)] if small else
                          [(128, 1e4, 4096), (128, 5e5, 4096), (64, 1e4, 4096), (96, 1e6, 1000)]):
        pid = np.arange(S)[None]
        add(f"llama cos {dim} {theta}", lambda o, d=dim, th=theta, p=pid: P.llama_rope(d, p, th, **o)[0],
            lambda d=dim, th=theta, p=pid: O.llama_rope(F, d, p, th)[0])
        add(f"llama sin {dim} {theta}", lambda o, d=dim, th=theta, p=pid: P.llama_rope(d, p, th, **o)[1],
            lambda d=dim, th=theta, p=pid: O.llama_rope(F, d, p, th)[1])
    for dim, S, kw in ([(16, 20, {}), (8, 10, {"theta": 500}), (9, 7, {})] if small else
                       [(64, 2048, {}), (32, 100, {}), (33, 10, {}), (64, 300, {"theta": 500000})]):
        t = np.arange(S, dtype=np.float32)
        add(f"rotary {dim} {S} {kw}", lambda o, d=dim, t=t, kw=kw: P.rotary_embedding_torch(d, t=t, **kw, **o),
            lambda d=dim, t=t, kw=kw: O.rotary_angles(F, d, t, **kw))
    for ch, shape in ([(8, (1, 10, 8)), (7, (2, 6, 7))] if small else
                      [(128, (2, 100, 128)), (7, (1, 50, 7)), (512, (1, 512, 512))]):
        add(f"tatp22_1d {ch} {shape}", lambda o, c=ch, s=shape: P.tatp22_1d(c, s, **o),
            lambda c=ch, s=shape: O.tatp22_1d(F, c, s))
    for ch, shape in ([(8, (1, 4, 5, 8)), (13, (1, 3, 4, 13))] if small else
                      [(768, (1, 14, 14, 768)), (10, (2, 8, 5, 10)), (13, (1, 6, 7, 13))]):
        add(f"tatp22_2d {ch} {shape}", lambda o, c=ch, s=shape: P.tatp22_2d(c, s, **o),
            lambda c=ch, s=shape: O.tatp22_2d(F, c, s))
    for ch, shape in ([(12, (1, 3, 4, 2, 12)), (7, (1, 2, 3, 4, 7))] if small else
                      [(96, (1, 8, 8, 8, 96)), (10, (2, 5, 4, 3, 10)), (13, (1, 3, 6, 7, 13))]):
        add(f"tatp22_3d {ch} {shape}", lambda o, c=ch, s=shape: P.tatp22_3d(c, s, **o),
            lambda c=ch, s=shape: O.tatp22_3d(F, c, s))
    for H in (8, 12) if small else (1, 8, 12, 40, 64):
        m = np.ones((2, n or 50), np.int64)
        m[1, :7] = 0
        add(f"alibi bloom {H}", lambda o, H=H, m=m: P.alibi_bias(m, H, backend=o["backend"]),
            lambda H=H, m=m: O.alibi_bloom(F, m, H))
    return c


def run_case(name, fn, orc, backend):
    got = fn({"backend": backend})
    assert_same(got, f32(orc()), f"{name} [{backend}]")


TORCH_CASES = cases(O.TorchF)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(TORCH_CASES))
def test_preset_equals_torch_ops(name, backend):
    fn, orc = TORCH_CASES[name]
    run_case(name, fn, orc, backend)


CR_CASES = cases(O.CRF, small=True)


@pytest.mark.parametrize("name", list(CR_CASES))
def test_builtin_equals_correctly_rounded_ops(name):
    fn, orc = CR_CASES[name]
    run_case(name, fn, orc, "builtin")


# float64 presets: the library's NumPy code is the oracle on every backend. 1381 x 37 and
# 792 x 79: NumPy's float64 pow (SVML on an AVX-512 machine) and the C library's differ there
# after the cast to float32 (1 element each; the C library's pow gave them before).
NUMPY_VS_LIBM = [(1381, 37), (792, 79)]
F64_CASES = {
    **{f"xlm {n}x{d}": (lambda o, n=n, d=d: P.xlm(n, d, **o), lambda n=n, d=d: O.xlm(n, d))
       for n, d in [(512, 768), (514, 1024), (64, 7), (30, 1)] + NUMPY_VS_LIBM},
    **{f"marian {n}x{d}": (lambda o, n=n, d=d: P.marian(n, d, **o), lambda n=n, d=d: O.marian(n, d))
       for n, d in [(512, 768), (514, 1024), (64, 7), (30, 1)] + NUMPY_VS_LIBM},
    **{f"tf_tutorial {n}x{d}": (lambda o, n=n, d=d: P.tf_tutorial(n, d, **o),
                                lambda n=n, d=d: O.tf_tutorial(n, d))
       for n, d in [(2048, 512), (100, 7), (2048, 128)] + NUMPY_VS_LIBM},
    **{f"tf_tutorial legacy {n}x{d}": (lambda o, n=n, d=d: P.tf_tutorial(n, d, legacy=True, **o),
                                       lambda n=n, d=d: O.tf_tutorial_legacy(n, d))
       for n, d in [(2048, 512), (100, 7), (2048, 128)] + NUMPY_VS_LIBM},
    **{f"flax {n}x{d} {kw}": (lambda o, n=n, d=d, kw=kw: P.flax_sinusoidal_init(n, d, **kw, **o),
                              lambda n=n, d=d, kw=kw: O.flax_sinusoidal_init(n, d, **kw))
       for n, d, kw in [(2048, 512, {}), (256, 1024, {}), (100, 9, {}), (300, 64, {"max_scale": 500.0}),
                        (50, 30, {"min_scale": 2.0, "max_scale": 1e5}), (10, 1, {}), (4, 0, {}),
                        (2076, 48, {}), (184, 635, {})]},  # NumPy's exp and libm's differ there
    **{f"mae {D} {G} cls={c}": (lambda o, D=D, G=G, c=c: P.mae_2d(D, G, c, **o),
                                lambda D=D, G=G, c=c: O.mae_2d(D, G, c))
       for D, G, c in [(768, 14, False), (1024, 16, True), (512, 14, False), (64, 5, True)]},
}


@pytest.mark.parametrize("backend", BACKENDS + ["builtin"])
@pytest.mark.parametrize("name", list(F64_CASES))
def test_float64_preset_equals_library_numpy(name, backend):
    fn, orc = F64_CASES[name]
    run_case(name, fn, orc, backend)


def test_mae_where_numpy_and_libm_differ():
    """MAE at D=1864: one of NumPy's float64 pows (SVML on an AVX-512 machine) differs from the
    C library's there, and position 146's cosine then differs after the cast (G >= 147). The
    first G rows (h = 0) and the last G rows (h = 146) against MAE's own one-axis function."""
    D, G = 1864, 147
    got = P.mae_2d(D, G, cls_token=True)
    pos = np.arange(G, dtype=np.float32)
    w = O.mae_1d(D // 2, pos)
    for i in (0, G - 1):
        want = np.concatenate([w, np.repeat(w[i:i + 1], G, axis=0)], axis=1).astype(np.float32)
        assert_same(got[1 + i * G:1 + (i + 1) * G], want, f"mae rows of h = {i}")
    assert not got[0].any()


@pytest.mark.parametrize("name", ["tf_tutorial", "legacy", "xlm", "marian", "mae", "flax"])
def test_float64_presets_dtypes_and_out(name):
    """The NumPy-computed presets store as the tables do: dtype= rounds their float32 values
    by the core's rule, out= (any strides, a leading axis of 1 or none) is written and
    returned, a wrong out= is refused untouched."""
    make = {"tf_tutorial": lambda **k: P.tf_tutorial(300, 37, **k),
            "legacy": lambda **k: P.tf_tutorial(300, 37, legacy=True, **k),
            "xlm": lambda **k: P.xlm(300, 37, **k), "marian": lambda **k: P.marian(300, 37, **k),
            "mae": lambda **k: P.mae_2d(64, 9, True, **k),
            "flax": lambda **k: P.flax_sinusoidal_init(300, 37, **k)}[name]
    ref = make()
    for dt in ("float16", "bfloat16", "float64"):
        got = make(dtype=dt)
        assert_same(got, _round(ref.ravel(), dt).reshape(ref.shape), f"{name} {dt}")
    two = ref.reshape(ref.shape[-2:])
    buf = np.zeros(two.shape[::-1], np.float32).T  # a transposed out=
    assert make(out=buf) is buf
    assert_same(buf, two, f"{name} out=")
    if ref.ndim == 3:
        o3 = np.zeros(ref.shape, np.float32)
        assert make(out=o3) is o3
        assert_same(o3, ref, f"{name} out= with the leading axis")
    bad = np.full((two.shape[0], two.shape[1] + 1), 7.0, np.float32)
    with pytest.raises(ValueError, match="out has shape"):
        make(out=bad)
    assert (bad == 7.0).all()


def test_flax_and_keras_hub_rotary_refusals():
    with pytest.raises(ValueError, match="d_feature must not be 2 or 3"):
        P.flax_sinusoidal_init(10, 3)
    with pytest.raises(ValueError, match="max_scale must be"):
        P.flax_sinusoidal_init(10, 8, max_scale=-1.0)
    with pytest.raises(ValueError, match="max_scale / min_scale must be finite"):
        P.flax_sinusoidal_init(10, 8, min_scale=1e-300, max_scale=1e300)
    x = np.zeros((1, 8, 16), np.float32)
    for fw in ("onnxruntime", "onnxruntime-1.32"):  # no Keras backend
        with pytest.raises(NotImplementedError, match=f"backend='{fw}'"):
            P.keras_hub_rotary(x, backend=fw)
    old = sinpe.get_backend()
    try:  # the default backend as resolved, not only the argument (review of 2026-12-04)
        sinpe.set_backend("onnxruntime")
        with pytest.raises(NotImplementedError, match="the default, 'onnxruntime'"):
            P.keras_hub_rotary(x)
    finally:
        sinpe.set_backend(old)
    with pytest.raises(ValueError, match="Rotary dimension must be even, got 7"):
        P.keras_hub_rotary(np.zeros((1, 8, 7)))
    with pytest.raises(ValueError, match="at least 3 dimensions"):
        P.keras_hub_rotary(np.zeros((8, 16)))
    with pytest.raises(ValueError, match="sequence_axis and feature_axis must be different"):
        P.keras_hub_rotary(x, sequence_axis=2)
    with pytest.raises(ValueError, match="feature_axis 5 is out of range"):
        P.keras_hub_rotary(x, feature_axis=5)
    with pytest.raises(ValueError, match="positions must have shape"):
        P.keras_hub_rotary(x, positions=np.arange(9))
    # very wide tables: refused before any work (the table, or its float64 steps: 6 rows of
    # float64 at 2**33 are 384 GiB); empty ones need no steps however wide
    with pytest.raises(MemoryError):
        P.xlm(1, 2**33)
    with pytest.raises(MemoryError):
        P.flax_sinusoidal_init(1, 2**33)
    assert P.xlm(0, 2**40).shape == (0, 2**40) and P.tf_tutorial(0, 2**40).shape == (0, 2**40)
    assert P.keras_hub_rotary(np.zeros((2, 0, 16))).shape == (2, 0, 16)
    y = np.ones((1, 8, 16), np.float64)
    assert P.keras_hub_rotary(y).dtype == np.float32 and (y == 1).all()  # a new array


# ---- dtypes, out=, threads, errors ---------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_dtypes_out_threads(backend):
    ref = P.fairseq(300, 64, 1, backend=backend)
    for dt in ("float16", "bfloat16", "float64"):
        got = P.fairseq(300, 64, 1, dtype=dt, backend=backend)
        want = _round(ref.ravel(), dt).reshape(ref.shape)
        assert_same(got, want, f"fairseq dtype {dt}")
    for t in (1, 2, 3, 7):
        assert_same(P.whisper(1500, 384, threads=t, backend=backend), P.whisper(1500, 384, backend=backend),
                    f"threads={t}")
    buf = np.zeros((64, 300), np.float32).T  # a transposed out=
    assert P.fairseq(300, 64, 1, out=buf, backend=backend) is buf
    assert_same(buf, ref, "out=")
    o3 = np.zeros((1, 100, 9), np.float32)
    assert P.tensor2tensor(100, 9, out=o3, backend=backend) is o3
    assert_same(o3, P.tensor2tensor(100, 9, backend=backend), "t2t out=")
    c, s = P.llama_rope(64, np.arange(100), dtype="bfloat16", backend=backend)
    c32, s32 = P.llama_rope(64, np.arange(100), backend=backend)
    assert c.dtype == ml_dtypes.bfloat16
    assert_same(c, _round(c32.ravel(), "bfloat16").reshape(c32.shape), "llama bf16")
    x = torch.zeros(1, 20, 9, dtype=torch.float16)
    assert P.tatp22_1d(9, x, backend=backend).dtype == np.float16


def test_bad_arguments_name_the_value():
    with pytest.raises(ValueError, match="embedding_dim must be >= 4.*got 2"):
        P.fairseq(10, 2)
    with pytest.raises(IndexError, match="padding_idx 10 is out of bounds"):
        P.fairseq(10, 8, 10)
    with pytest.raises(ValueError, match="encoding_dim must be even, got 7"):
        P.fairseq2(7, 10)
    with pytest.raises(ValueError, match="channels must be even, got 9"):
        P.whisper(10, 9)
    with pytest.raises(ValueError, match="timesteps must be a 1-d array"):
        P.diffusers_timestep(np.zeros((2, 2)), 8)
    with pytest.raises(ValueError, match="multiple of 4, got 30"):
        P.mae_2d(30, 4)
    with pytest.raises(ValueError, match="dim must be a positive multiple of 4, got 10"):
        P.timm_2d([4, 4], 10)
    with pytest.raises(ValueError, match="The input tensor has to be 3d"):
        P.tatp22_1d(8, (2, 3))
    with pytest.raises(TypeError, match="num_embeddings must be an integer, got 2.5"):
        P.fairseq(2.5, 8)
    with pytest.raises(ValueError, match="head_dim must be even, got 7"):
        P.llama_rope(7, 10)
    with pytest.raises(ValueError, match="freqs_for='pixel' is not reproduced"):
        P.rotary_embedding_torch(8, 4, freqs_for="pixel")
    with pytest.raises(ValueError, match="out has shape"):
        P.fairseq(10, 8, out=np.zeros((10, 9), np.float32))
    with pytest.raises(ValueError, match="method must be 'bloom' or 'paper'"):
        P.alibi_slopes(8, method="x")


def test_fairseq_positions_and_variants():
    ids = np.array([[5, 6, 7, 1, 1]])
    assert P.fairseq_positions(ids, 1).tolist() == [[2, 3, 4, 1, 1]]
    assert P.fairseq_positions(ids, 1, cache_length=3).tolist() == [[5, 6, 7, 1, 1]]
    w = P.m2m100(100, 16, padding_idx=1)
    assert w.shape == (102, 16) and not w[1].any()
    assert_same(P.speech2text(100, 16, 1), w, "speech2text")
    assert_same(P.fsmt(102, 16, 1), w, "fsmt")


def test_alibi_paper_slopes_and_bias():
    for n in (8, 12, 16, 40):
        want = torch.Tensor(P._paper_slopes(n)).numpy()
        assert_same(P.alibi_slopes(n, method="paper"), want, f"paper slopes {n}")
        bias = torch.Tensor(P._paper_slopes(n)).unsqueeze(1).unsqueeze(1) * \
            torch.arange(50).unsqueeze(0).unsqueeze(0).expand(n, -1, -1)
        assert_same(P.alibi_bias(num_heads=n, seq_length=50, method="paper"),
                    bias.view(n, 1, 50).numpy(), f"paper bias {n}")
    # the reference values: 8 heads are 1/2 ... 1/256
    assert P.alibi_slopes(8, method="paper").tolist() == [2.0 ** -k for k in range(1, 9)]


# ---- apply_rope ----------------------------------------------------------------------------------

def torch_dtype_array(a, dt):
    return a.astype(dt)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", ["half", "pairs"])
def test_apply_rope_float32_equals_torch_ops(layout, backend):
    rng = np.random.default_rng(3)
    B, H, S, D = 2, 3, 200, 64
    x = rng.standard_normal((B, H, S, D)).astype(np.float32)
    if layout == "half":
        cos, sin = O.llama_rope(O.TorchF, D, np.arange(S)[None].repeat(B, 0), 10000.0)
        want = O.apply_half(x, cos, sin)
    else:
        a = O.rotary_angles(O.TorchF, D, np.arange(S, dtype=np.float32))
        want = O.apply_pairs(x, O.TorchF.cos(a), O.TorchF.sin(a))
    y = x.copy()
    assert sinpe.apply_rope(y, layout=layout, backend=backend) is y
    assert_same(y, want, f"apply_rope {layout}")
    # (batch, seq, heads, dim), in a transposed view
    y2 = x.transpose(0, 2, 1, 3).copy()
    sinpe.apply_rope(y2, layout=layout, seq_dim=1, backend=backend)
    assert_same(y2, want.transpose(0, 2, 1, 3), f"apply_rope {layout} seq_dim=1")


@oracle_packages
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("shape_kind", ["BHSD", "BSHD"])
def test_apply_rope_equals_transformers(dtype, shape_kind):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
    B, H, S, D = 2, 4, 129, 96
    rng = np.random.default_rng(1)
    x = rng.standard_normal((B, H, S, D)).astype(np.float32)
    tdt = getattr(torch, dtype)
    xt = torch.from_numpy(x).to(tdt)
    cfg = LlamaConfig(hidden_size=D * H, num_attention_heads=H,
                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    pid = torch.stack([torch.arange(S), torch.arange(S) + 17])  # per-batch positions
    cos, sin = LlamaRotaryEmbedding(cfg)(xt, pid)
    if shape_kind == "BSHD":
        xt = xt.transpose(1, 2).contiguous()
    q, _ = apply_rotary_pos_emb(xt, xt, cos, sin, unsqueeze_dim=1 if shape_kind == "BHSD" else 2)
    sd = -2 if shape_kind == "BHSD" else 1
    # float16/bfloat16: tables rounded to x's type once and kept (and rounded per call with
    # the cache off), on arrays and tensors alike
    for size in (64 << 20, 0, 64 << 20):
        old = sinpe.get_cache_size()
        sinpe.set_cache_size(size)
        try:
            y = to_numpy(xt)
            sinpe.apply_rope(y, pid.numpy(), seq_dim=sd)
            assert_same(y, to_numpy(q), f"HF apply_rotary_pos_emb {dtype} {shape_kind} {size}")
            yt = xt.clone()
            sinpe.apply_rope(yt, pid, seq_dim=sd)
            assert_same(to_numpy(yt), to_numpy(q), f"tensor {dtype} {shape_kind} {size}")
        finally:
            sinpe.set_cache_size(old)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_apply_rope_nan_payloads_equal_torch(dtype, backend):
    """q and cos with 20% NaNs (both signs, signalling and quiet) and infinities: HF's eager
    rotation keeps the second operand's NaN where both are NaN (torch's vector loops; the
    inner loop here, 64 x 80, has no scalar tail), and so does sinpe, bit for bit."""
    rng = np.random.default_rng(5)
    tdt, S, D = getattr(torch, dtype), 64, 80
    specials = {"float32": ([0x7fc01234, 0xffc05678, 0x7f800001, 0xff812345, 0x7f800000, 0], torch.int32),
                "float16": ([0x7e12, 0xfe34, 0x7c01, 0xfc05, 0x7c00, 0xfc00], torch.int16),
                "bfloat16": ([0x7fc1, 0xffc3, 0x7f81, 0xff85, 0x7f80, 0], torch.int16)}[dtype]

    def poke(t):
        raw = t.view(specials[1]).numpy()
        m = rng.random(raw.shape) < 0.2
        raw[m] = rng.choice(np.array(specials[0], np.uint32).astype(raw.dtype), m.sum())
        return t

    q = poke(torch.randn(1, 4, S, D).to(tdt))
    f = torch.arange(S)[:, None].float() * (1.0 / 10000 ** (torch.arange(0, D, 2).float() / D))
    emb = torch.cat((f, f), -1)
    cos, sin = poke(emb.cos().to(tdt)), emb.sin().to(tdt)
    h = D // 2
    want = q * cos + torch.cat((-q[..., h:], q[..., :h]), -1) * sin
    assert torch.isnan(want).float().mean() > 0.2  # the case is exercised
    y = q.clone()
    sinpe.apply_rope(y, cos=cos, sin=sin, backend=backend)
    assert torch.equal(y.view(specials[1]), want.view(specials[1])), dtype


@oracle_packages
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("rot", [64, 32])
def test_apply_rope_equals_rotary_embedding_torch(dtype, rot):
    from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb
    rng = np.random.default_rng(2)
    xt = torch.from_numpy(rng.standard_normal((2, 3, 100, 64)).astype(np.float32)).to(getattr(torch, dtype))
    freqs = RotaryEmbedding(rot)(torch.arange(100).float() + 5)
    q = apply_rotary_emb(freqs, xt)
    y = to_numpy(xt)
    sinpe.apply_rope(y, layout="pairs", rot_dim=rot, offset=5)
    assert_same(y, to_numpy(q), f"rotary apply_rotary_emb {dtype} rot {rot}")


def to_numpy(t):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
    return t.numpy().copy()


def test_apply_rope_refuses_bad_input_before_writing():
    x = np.ones((2, 5, 8), np.float32)
    with pytest.raises(ValueError, match="rot_dim must be even"):
        sinpe.apply_rope(x, rot_dim=3)
    with pytest.raises(ValueError, match="positions must have shape"):
        sinpe.apply_rope(x, positions=np.arange(4))
    with pytest.raises(ValueError, match="layout must be"):
        sinpe.apply_rope(x, layout="interleaved")
    with pytest.raises(ValueError, match="share memory"):
        base = np.ones((5, 8), np.float32)
        sinpe.apply_rope(np.lib.stride_tricks.as_strided(base, (2, 5, 8), (0, 32, 4)))
    with pytest.raises(TypeError):
        sinpe.apply_rope(np.ones((2, 5, 8), np.int32))
    with pytest.raises(ValueError, match="read-only|writable"):
        r = np.ones((2, 5, 8), np.float32)
        r.flags.writeable = False
        sinpe.apply_rope(r)
    assert (x == 1).all()


def test_apply_rope_threads_same_bits():
    x = np.random.default_rng(4).standard_normal((4, 8, 256, 128)).astype(np.float32)
    ref = sinpe.apply_rope(x.copy(), threads=1)
    for t in (2, 3, 8):
        assert_same(sinpe.apply_rope(x.copy(), threads=t), ref, f"threads={t}")


# ---- the real packages -----------------------------------------------------------------------------

def timm_pos_embed_sincos():
    """timm.layers.pos_embed_sincos without timm/__init__ (which needs torchvision)."""
    root = os.path.dirname(importlib.util.find_spec("timm").origin)  # not imported: no torchvision
    for name, path in (("timm", root), ("timm.layers", os.path.join(root, "layers"))):
        if name not in sys.modules:
            m = types.ModuleType(name)
            m.__path__ = [path]
            sys.modules[name] = m
    return importlib.import_module("timm.layers.pos_embed_sincos")


def package_cases():
    import diffusers.models.embeddings as de
    import whisper.model as wm
    from positional_encodings.torch_encodings import PositionalEncoding1D, PositionalEncoding2D, PositionalEncoding3D
    from rotary_embedding_torch import RotaryEmbedding
    from transformers import LlamaConfig
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    from transformers.models.fsmt.modeling_fsmt import SinusoidalPositionalEmbedding as FSMT
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding as M2M
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding as Marian
    from transformers.models.musicgen.modeling_musicgen import MusicgenSinusoidalPositionalEmbedding as MG
    from transformers.models.speech_to_text.modeling_speech_to_text import \
        Speech2TextSinusoidalPositionalEmbedding as S2T
    from transformers.models.whisper.modeling_whisper import sinusoids as hf_sinusoids
    from transformers.models.xlm.modeling_xlm import create_sinusoidal_embeddings
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras_hub
    timm = timm_pos_embed_sincos()
    c = {}
    for N, d, p in [(1026, 512, 1), (100, 9, 1), (66, 1024, None), (300, 256, 0)]:
        c[f"M2M100.get_embedding {N} {d} {p}"] = (lambda N=N, d=d, p=p: P.fairseq(N, d, p),
                                                  lambda N=N, d=d, p=p: M2M.get_embedding(N, d, p))
        c[f"FSMT {N} {d}"] = (lambda N=N, d=d: P.fsmt(N, d, 1), lambda N=N, d=d: FSMT.get_embedding(N, d, 1))
    c["M2M100 module weights"] = (lambda: P.m2m100(200, 64, 1), lambda: M2M(200, 64, padding_idx=1).weights)
    c["Speech2Text module weights"] = (lambda: P.speech2text(200, 64, 1), lambda: S2T(200, 64, padding_idx=1).weights)
    c["MusicGen get_embedding"] = (lambda: P.musicgen(300, 64), lambda: MG.get_embedding(300, 64))
    c["MusicGen odd"] = (lambda: P.musicgen(30, 9), lambda: MG.get_embedding(30, 9))
    for L, C in [(1500, 384), (1500, 1280), (448, 512)]:
        c[f"whisper {L} {C}"] = (lambda L=L, C=C: P.whisper(L, C), lambda L=L, C=C: wm.sinusoids(L, C))
        c[f"hf whisper {L} {C}"] = (lambda L=L, C=C: P.whisper(L, C), lambda L=L, C=C: hf_sinusoids(L, C))
    c["whisper max_timescale"] = (lambda: P.whisper(100, 64, 500), lambda: wm.sinusoids(100, 64, 500))
    for n, d in [(512, 768), (514, 1024), (64, 7)]:
        c[f"xlm {n} {d}"] = (lambda n=n, d=d: P.xlm(n, d),
                             lambda n=n, d=d: create_sinusoidal_embeddings(n, d, torch.empty(n, d)))
        c[f"marian {n} {d}"] = (lambda n=n, d=d: P.marian(n, d), lambda n=n, d=d: Marian(n, d).create_weight())
    ts = [torch.arange(0, 1000), torch.arange(0, 1000) * 0.37]
    for d, kw in [(320, dict(flip_sin_to_cos=True, downscale_freq_shift=0)), (256, {}),
                  (256, dict(flip_sin_to_cos=True, downscale_freq_shift=1)), (33, dict(downscale_freq_shift=0)),
                  (1280, dict(flip_sin_to_cos=True, downscale_freq_shift=0, scale=1000)), (128, dict(max_period=500))]:
        for t in ts:
            c[f"diffusers {d} {kw} {t.dtype}"] = (lambda d=d, kw=kw, t=t: P.diffusers_timestep(t.numpy(), d, **kw),
                                                  lambda d=d, kw=kw, t=t: de.get_timestep_embedding(t, d, **kw))
    for D, G, cls in [(768, 14, False), (1024, 16, True), (512, 14, False), (64, 5, True)]:
        c[f"mae via diffusers {D} {G} {cls}"] = (
            lambda D=D, G=G, cls=cls: P.mae_2d(D, G, cls),
            lambda D=D, G=G, cls=cls: de.get_2d_sincos_pos_embed(D, G, cls_token=cls, extra_tokens=int(cls),
                                                                 base_size=G).float())
    for fs, d, kw in [([14, 14], 768, {}), ([16, 12], 384, {}), ([16, 12], 384, {"reverse_coord": True}),
                      ([8, 8], 64, {"interleave_sin_cos": True}), ([8, 8], 64, {"temperature": 100.})]:
        c[f"timm {fs} {d} {kw}"] = (lambda fs=fs, d=d, kw=kw: P.timm_2d(fs, d, **kw),
                                    lambda fs=fs, d=d, kw=kw: timm.build_sincos2d_pos_embed(fs, d, **kw))
    for dim, th in [(128, 1e4), (128, 5e5), (64, 1e4)]:
        cfg = LlamaConfig(hidden_size=dim * 4, num_attention_heads=4,
                          rope_parameters={"rope_type": "default", "rope_theta": th})
        pid = torch.arange(4096)[None]
        re = LlamaRotaryEmbedding(cfg)
        c[f"llama inv_freq {dim} {th}"] = (lambda d=dim, th=th: P._rope_inv_freq(d, th, P._opts(None, None, None, None, None)),
                                           lambda re=re: re.inv_freq)
        c[f"llama cos {dim} {th}"] = (lambda d=dim, th=th: P.llama_rope(d, np.arange(4096)[None], th)[0],
                                      lambda re=re, pid=pid: re(torch.zeros(1), pid)[0])
        c[f"llama sin {dim} {th}"] = (lambda d=dim, th=th: P.llama_rope(d, np.arange(4096)[None], th)[1],
                                      lambda re=re, pid=pid: re(torch.zeros(1), pid)[1])
    for dim, n, kw in [(64, 2048, {}), (32, 100, {}), (33, 10, {}), (64, 300, {"theta": 500000}),
                       (64, 50, {"interpolate_factor": 2.0}), (64, 50, {"theta_rescale_factor": 2.0})]:
        def ours(dim=dim, n=n, kw=kw):
            ikw = {k: v for k, v in kw.items() if k != "interpolate_factor"}
            return P.rotary_embedding_torch(dim, n, interpolate_factor=kw.get("interpolate_factor", 1.), **ikw)

        def theirs(dim=dim, n=n, kw=kw):
            r = RotaryEmbedding(dim, **kw)
            return r(r.get_seq_pos(n), seq_len=None)
        c[f"rotary {dim} {n} {kw}"] = (ours, theirs)
        c[f"rotary freqs {dim} {kw}"] = (
            lambda dim=dim, kw=kw: P.rotary_embedding_torch_freqs(dim, **{k: v for k, v in kw.items() if k != "interpolate_factor"}),
            lambda dim=dim, kw=kw: RotaryEmbedding(dim, **kw).freqs.detach())
    for ch, shape in [(128, (2, 100, 128)), (7, (1, 50, 7)), (512, (1, 512, 512))]:
        c[f"tatp22_1d {ch} {shape}"] = (lambda ch=ch, s=shape: P.tatp22_1d(ch, s),
                                        lambda ch=ch, s=shape: PositionalEncoding1D(ch)(torch.zeros(s)))
    for ch, shape in [(768, (1, 14, 14, 768)), (10, (2, 8, 5, 10)), (13, (1, 6, 7, 13))]:
        c[f"tatp22_2d {ch} {shape}"] = (lambda ch=ch, s=shape: P.tatp22_2d(ch, s),
                                        lambda ch=ch, s=shape: PositionalEncoding2D(ch)(torch.zeros(s)))
    for ch, shape in [(96, (1, 8, 8, 8, 96)), (10, (2, 5, 4, 3, 10)), (13, (1, 3, 6, 7, 13)), (5, (1, 2, 2, 2, 5))]:
        c[f"tatp22_3d {ch} {shape}"] = (lambda ch=ch, s=shape: P.tatp22_3d(ch, s),
                                        lambda ch=ch, s=shape: PositionalEncoding3D(ch)(torch.zeros(s)))
    for (L, d), kw in [((128, 64), {}), ((256, 512), {}), ((50, 9), {}), ((64, 32), {"start_index": 7})]:
        c[f"keras_hub {L} {d} {kw}"] = (
            lambda L=L, d=d, kw=kw: P.keras_hub((1, L, d), **kw),
            lambda L=L, d=d, kw=kw: keras_hub.layers.SinePositionEncoding()(np.zeros((1, L, d), "float32"), **kw).cpu())
    rng = np.random.default_rng(26)
    for shape, lkw, ckw in [((2, 128, 64), {}, {}), ((2, 100, 4, 32), {"max_wavelength": 500000}, {}),
                            ((2, 64, 16), {"scaling_factor": 0.37}, {"start_index": 1000}),
                            ((2, 8, 64, 32), {"sequence_axis": 2}, {}),
                            ((2, 32, 40, 6), {"sequence_axis": -2, "feature_axis": 1}, {}),
                            ((3, 20, 16), {}, {"positions": np.arange(60).reshape(3, 20) * 7}),
                            ((1, 4096, 128), {}, {})]:
        x = rng.standard_normal(shape).astype(np.float32)
        c[f"keras_hub_rotary {shape} {lkw} {list(ckw)}"] = (
            lambda x=x, lkw=lkw, ckw=ckw: P.keras_hub_rotary(x, **lkw, **ckw),
            lambda x=x, lkw=lkw, ckw=ckw: keras_hub.layers.RotaryEmbedding(**lkw)(x, **ckw).cpu())
    c["keras_hub max_wavelength=100"] = (
        lambda: P.keras_hub((1, 64, 32), max_wavelength=100),
        lambda: keras_hub.layers.SinePositionEncoding(max_wavelength=100)(np.zeros((1, 64, 32), "float32")).cpu())
    for H in (1, 8, 12, 40, 64):
        m = torch.ones(2, 50, dtype=torch.int64)
        m[1, :7] = 0
        c[f"bloom alibi {H}"] = (lambda H=H, m=m: P.alibi_bias(m.numpy(), H),
                                 lambda H=H, m=m: build_alibi_tensor(m, H, torch.float32))
    return c


@oracle_packages
def test_keras_hub_odd_inputs_on_keras_torch_backend():
    """keras-hub's SinePositionEncoding on Keras' torch backend (a fresh process) at the odd
    inputs of tests/framework_oracles.py's KERAS_ODD (issue 35): start_index past 2^31 wraps
    as torch's int32 sum does (Python ints from -2^63 to 2^64, array scalars but uint64,
    which keras refuses), -0.0 positions give +0.0 sines (keras' masked sum), +-inf and NaN
    positions, hidden size 0 (an empty last axis: refused before), hidden 1 and 3, rank 4."""
    import framework_oracles as FO
    bad = []
    for (name, shape, lkw, ckw), want in zip(FO.KERAS_ODD, FO.keras_hub_odd_cases("torch")):
        try:
            y = P.keras_hub(shape, **lkw, **ckw)
            got = ["ok", list(y.shape), FO.digest(y)]
        except (TypeError, ValueError, OverflowError) as e:
            got = ["err", type(e).__name__]
        if got != want:
            bad.append((name, want[:2], got[:2]))
    assert not bad, bad


@oracle_packages
def test_presets_equal_the_real_packages():
    """Every preset with torch imported (the 'auto' backend then gives this torch's bits)
    against the library's own function."""
    failures = []
    cs = package_cases()
    for name, (ours, theirs) in cs.items():
        want = theirs()
        want = want.detach().numpy() if hasattr(want, "detach") else np.asarray(want)
        got = ours()
        if got.shape != want.shape or (bits(f32(got)) != bits(f32(want))).any():
            failures.append(f"{name}: {np.sum(bits(f32(got)) != bits(f32(want))) if got.shape == want.shape else 'shape'}")
    assert not failures, f"{len(failures)} of {len(cs)} differ: {failures}"
    assert len(cs) >= 60


# ---- shift matrix ------------------------------------------------------------------------------------

def test_shift_matrix_relative_position_property():
    """PE(pos + k) = R_k PE(pos) holds for the exact sinusoids; the float32 table meets it up
    to its roundings: the angle (pos + k) * div rounded to float32 moves by up to half an ulp
    of itself, so the error grows about linearly with pos + k (README, Numerics)."""
    d = 128
    pe = sinpe.positional_encoding(20000, d, backend="builtin").astype(np.float64)
    worst = {}
    for k in (1, 10, 100, 1000):
        R = sinpe.shift_matrix(k, d, backend="builtin")
        assert np.allclose(R @ R.T, np.eye(d), atol=1e-12)  # a rotation
        for pos in (0, 10, 100, 1000, 10000):
            err = np.abs(pe[pos + k] - R @ pe[pos]).max()
            # bound: roundings of both angles (half an ulp of each) plus the sin/cos roundings
            bound = (np.spacing(np.float32(pos + k)) + np.spacing(np.float32(max(pos, 1)))) + 2 ** -22
            assert err <= bound, (k, pos, err, bound)
            worst[(k, pos)] = err
    # it grows: far positions are much worse than near ones
    assert worst[(1000, 10000)] > 30 * worst[(1, 0)]
    assert worst[(1, 0)] < 2 ** -22
    # the exact sinusoids satisfy it to float64 rounding
    R = sinpe.shift_matrix(7, 8)
    div = sinpe._jobs._freqs("exp_mul", 4, sinpe._backends.policy.call_opts(None, None, None, None, None), step=2, a=-math.log(10000) / 8).astype(np.float64)
    exact = lambda p: np.stack([np.sin(p * div), np.cos(p * div)], 1).ravel()
    assert np.abs(exact(12.0 + 7) - R @ exact(12.0)).max() < 1e-12


# ---- hostile input ----------------------------------------------------------------------------------

def test_apply_rope_on_odd_buffers():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 40, 16)).astype(np.float32)
    want = sinpe.apply_rope(x.copy())
    # a view with negative strides on the batch and sequence axes
    y = x[::-1, :, ::-1].copy()[::-1, :, ::-1]
    sinpe.apply_rope(y)
    assert_same(y, want, "negative strides")
    # unaligned: float32 elements at an odd address
    raw = bytearray(x.nbytes + 1)
    u = np.frombuffer(memoryview(raw)[1:], np.float32).reshape(x.shape)
    u[...] = x
    sinpe.apply_rope(u)
    assert_same(u, want, "unaligned")
    # a memoryview and a ctypes array (no ndarray)
    m = x.copy()
    assert sinpe.apply_rope(memoryview(m)) is not None
    assert_same(m, want, "memoryview")
    import ctypes
    c = (ctypes.c_float * x.size)()
    ctypes.memmove(c, x.ctypes.data, x.nbytes)
    cv = np.ctypeslib.as_array(c).reshape(x.shape)
    sinpe.apply_rope(cv)
    assert_same(cv, want, "ctypes")
    # an empty sequence and an empty batch
    for shape in ((0, 3, 40, 16), (2, 3, 0, 16)):
        e = np.zeros(shape, np.float32)
        assert sinpe.apply_rope(e) is e


def test_presets_into_buffers_and_extremes():
    want = P.fairseq(50, 16, 1)
    m = bytearray(want.nbytes)
    P.fairseq(50, 16, 1, out=np.frombuffer(m, np.float32).reshape(50, 16))
    assert_same(np.frombuffer(m, np.float32).reshape(50, 16), want, "bytearray out")
    with pytest.raises(MemoryError, match="needs .* GiB"):
        P.fairseq(10 ** 12, 1024)
    with pytest.raises(OverflowError, match="larger than memory can address"):
        P.whisper(1 << 62, 1 << 40)
    with pytest.raises(MemoryError, match=r"a table of shape \(1, 1, 274877906944\) \(float32\) needs"):
        P.keras_hub((1, 1, 1 << 38))  # refused before its frequency vector is made
    with pytest.raises((MemoryError, OverflowError)):
        P.xlm(10, 1 << 62)
    # non-finite and huge timesteps: torch's values (NaN where torch gives NaN)
    t = np.array([np.inf, -np.inf, np.nan, 1e30, -1e30, 3.4e38, 0.0, -0.0], np.float32)
    for be in BACKENDS:
        got = P.diffusers_timestep(t, 16, backend=be)
        want = O.diffusers_timestep(O.TorchF, t, 16)
        assert np.array_equal(np.isnan(got), np.isnan(want))
        fin = ~np.isnan(want)
        assert_same(got[fin], want[fin], f"extreme timesteps [{be}]")


def test_presets_from_many_threads_at_once():
    import threading
    want = {k: P.whisper(300, 64 + 8 * k) for k in range(8)}
    got, errors = {}, []

    def work(k):
        try:
            for _ in range(5):
                got[k] = P.whisper(300, 64 + 8 * k, threads=2)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    for k in range(8):
        assert_same(got[k], want[k], f"thread {k}")


def test_keras_hub_rotary_start_index_rounds_once():
    """start_index is cast to float32 once, as the frameworks and torch cast an int64
    (np.float32(int) goes through a double: two roundings above 2^53)."""
    start = 2 ** 53 + 2 ** 29 + 1
    once = np.array(start, np.int64).astype(np.float32)
    assert once != np.float32(float(start))  # the case tells the two apart
    x = np.ones((1, 2, 4), np.float32)
    got = P.keras_hub_rotary(x, start_index=start, backend="builtin")
    want = P.keras_hub_rotary(x, positions=np.array([once, once + np.float32(1)]),
                              backend="builtin")
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
