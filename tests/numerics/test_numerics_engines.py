"""producer=: the inference engines' rotations, bit for bit (docs/engines.md).

Against the engines' recorded outputs (tests/data/engines.npz, tools/engines_record.py) in
every run; torch.compile (inductor) live where torch is installed; the engines themselves in
tests/numerics/test_numerics_engines_live.py (pytest -m engines).  Every comparison is of bits.
"""
import os
import sys

import numpy as np
import pytest

import sinpe

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import engine_oracles as E  # noqa: E402
from conftest import BF16, ROOT, torch  # noqa: E402

RECORDS = os.path.join(ROOT, "tests", "data", "engines.npz")


def _records():
    data = np.load(RECORDS)
    keys = sorted({k.rsplit("|", 1)[0] for k in data.files})
    return data, keys


def rotate(x, cos, sin, layout, producer):
    """sinpe's rotation of a copy of x (batch, seq, heads, head_dim) by the full-width
    tables, as producer computes it."""
    got = x.copy()
    sinpe.apply_rope(got, cos=cos, sin=sin, layout=layout, seq_dim=1, producer=producer)
    return got


def test_records_cover_every_recorded_engine():
    data, keys = _records()
    producers = {k.split("|")[1] for k in keys}
    engines = {k.split("|")[0] for k in keys}
    assert {"onnxruntime", "onnxruntime-opset23", "openvino", "mlx"} <= engines, engines
    assert {"onnxruntime", "openvino", "openvino-bf16", "mlx"} <= producers, producers
    assert len(keys) >= 130


@pytest.mark.parametrize("key", _records()[1])
def test_producer_matches_the_recorded_engine(key):
    data, _ = _records()
    engine, producer, dt, layout, _i = key.split("|")
    want_dt = E.np_dtype(dt)
    x = data[key + "|x"]
    x = x.view(want_dt) if dt == "bfloat16" else x
    y = data[key + "|y"]
    y = y.view(want_dt) if dt == "bfloat16" else y
    if producer == "mlx":  # MLX's own tables: rot, then (base, offset)
        rot, (base, offset) = data[key + "|cos"].shape[-1], data[key + "|sin"][0]
        got = x.copy()
        sinpe.apply_rope(got, base=float(base), offset=int(offset), rot_dim=rot,
                         layout=layout, seq_dim=1, producer="mlx")
    else:
        got = rotate(x, data[key + "|cos"], data[key + "|sin"], layout, producer)
    bad = E.differ(got, y, producer)
    assert bad == 0, (key, bad, x.size)


def test_the_records_are_not_transformers_bits():
    """The engines' bits are not transformers' (the records could not pass by accident): in
    float32 about a quarter of the values differ from the eager rotation."""
    data, keys = _records()
    key = next(k for k in keys if k.startswith("onnxruntime|") and "|float32|half|1" in k)
    x, c, s = data[key + "|x"], data[key + "|cos"], data[key + "|sin"]
    eager = rotate(x, c, s, "half", None)
    differ = np.count_nonzero(E.uint_view(eager) != E.uint_view(data[key + "|y"]))
    assert 0.1 * x.size < differ < 0.5 * x.size, differ


@pytest.mark.needs_torch
@pytest.mark.parametrize("layout", E.LAYOUTS)
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_inductor_live(dt, layout):
    """torch.compile's rotation (inductor's CPU code) at two shapes, against
    producer='inductor': float32 intermediates, one rounding (16-bit types)."""
    rng = np.random.default_rng(17)
    for (b, s, h, d, rot) in [(2, 9, 3, 64, 64), (1, 5, 2, 48, 24)]:
        pos = rng.integers(0, 4096, (b, s))
        c, s_ = E.transformers_tables(pos, rot, layout=layout)
        x = (rng.standard_normal((b, s, h, d)) * 3).astype(E.np_dtype(dt))
        want = E.inductor(x, c, s_, layout)
        tc, ts = (c.astype(x.dtype), s_.astype(x.dtype)) if layout == "half" else (c, s_)
        got = rotate(x, tc, ts, layout, "inductor")
        assert np.count_nonzero(E.uint_view(got) != E.uint_view(want)) == 0, (dt, layout, (b, s, h, d))


@pytest.mark.parametrize("producer, dt, word", [
    ("onnxruntime", BF16, "bfloat16"), ("onnxruntime", np.float64, "float64")])
def test_a_dtype_the_engine_does_not_run_is_refused(producer, dt, word):
    x = np.ones((1, 2, 1, 8), dt)
    before = x.copy()
    with pytest.raises(ValueError, match=f"producer='{producer}' does not run {word}"):
        sinpe.apply_rope(x, seq_dim=1, producer=producer)
    assert np.array_equal(E.uint_view(x), E.uint_view(before))  # nothing written


def test_unknown_and_unmade_producers_are_named():
    x = np.ones((1, 2, 1, 8), np.float32)
    with pytest.raises(ValueError, match="producer must be one of .*'onnxruntime'.*got 'ort'"):
        sinpe.apply_rope(x, producer="ort")
    with pytest.raises(TypeError, match="producer must be a str or None, got 3"):
        sinpe.apply_rope(x, producer=3)
    for name, word in (("openvino:sse4", "serving CPU must be one of"),
                       ("openvino:", "producer must be one of"),
                       ("onnxruntime:avx2", "producer must be one of"),
                       ("openvino-bf16:avx2", "only on CPUs with AVX512-BF16")):
        with pytest.raises(ValueError, match=word):
            sinpe.apply_rope(x, producer=name)
    assert np.all(x == 1)


def test_openvino_refuses_what_it_does_not_reproduce():
    """OpenVINO does not fuse the interleaved pairs of a bfloat16 x; its op-by-op graph then
    is not reproduced: refused, x untouched."""
    x = np.ones((1, 2, 1, 16), BF16)
    with pytest.raises(ValueError, match="does not fuse the interleaved rotation of a bfloat16"):
        sinpe.apply_rope(x, seq_dim=1, layout="pairs", producer="openvino", rot_dim=8)
    assert np.all(np.asarray(x, np.float32) == 1)


def test_openvino_interleaved_kernel_follows_the_serving_cpu():
    """OpenVINO's interleaved JIT kernel (FMA) runs when rot_dim is a multiple of two vectors
    (32 on AVX-512, 16 on AVX2), else its C++ loop (no FMA): rot_dim 16 differs between the
    two named CPUs, rot_dim 32 does not."""
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((2, 40, 4, 64)) * 30).astype(np.float32)
    outs = {}
    for rot in (16, 32):
        for isa in ("avx2", "avx512"):
            y = x.copy()
            sinpe.apply_rope(y, offset=300, rot_dim=rot, layout="pairs", seq_dim=1,
                             producer=f"openvino:{isa}")
            outs[rot, isa] = E.uint_view(y)
    assert not np.array_equal(outs[16, "avx2"], outs[16, "avx512"])
    assert np.array_equal(outs[32, "avx2"], outs[32, "avx512"])


@pytest.mark.parametrize("producer", [None, "transformers"])
def test_transformers_producer_is_todays_rotation(producer):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 3, 32)).astype(np.float32)
    a, b = x.copy(), x.copy()
    sinpe.apply_rope(a, seq_dim=1, offset=7)
    sinpe.apply_rope(b, seq_dim=1, offset=7, producer=producer)
    assert np.array_equal(E.uint_view(a), E.uint_view(b))


def test_producer_from_positions_uses_transformers_tables():
    """From positions, an engine that reads a cache (ONNX Runtime) gets transformers' tables:
    the same bits as with the tables given."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 6, 2, 64)).astype(np.float32)
    pos = np.array([[3, 9, 100, 101, 4000, 5]])
    c, s = sinpe.presets.hf_rope({"head_dim": 64, "rope_theta": 10000.0}, pos)
    a = rotate(x, c, s, "half", "onnxruntime")
    b = x.copy()
    sinpe.apply_rope(b, pos, seq_dim=1, producer="onnxruntime")
    assert np.array_equal(E.uint_view(a), E.uint_view(b))


def test_the_core_refuses_an_unknown_form():
    from sinpe import _jobs
    from sinpe._backends import policy
    x = np.ones((1, 2, 8), np.float32)
    c = np.ones((1, 2, 8), np.float32)
    with pytest.raises(ValueError, match="form"):
        _jobs.rope_job(policy.opts(), x, c, c, 1, -1, False, form=512)
    with pytest.raises(ValueError, match="form"):  # bfloat16 inference of a bfloat16 x
        _jobs.rope_job(policy.opts(), x.astype(BF16), c, c, 1, -1, False, form=32 | 2)
    with pytest.raises(ValueError, match="form"):  # OpenVINO's bfloat16 store, float32 out
        _jobs.rope_job(policy.opts(), x, c, c, 1, -1, False, form=128)
    with pytest.raises(ValueError, match="form"):  # an engine's form on float64
        _jobs.rope_job(policy.opts(), x.astype(np.float64), c, c, 1, -1, False, form=2)
    assert np.all(x == 1)


@pytest.mark.needs_torch
def test_torch_form_with_producer_matches_the_arrays():
    """sinpe.torch.apply_rotary_pos_emb(..., producer=) gives apply_rope's bits (q and k of
    shape (batch, heads, seq, dim)), refuses recorded gradients and bad dtypes by name."""
    import sinpe.torch as st
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 4, 7, 64, generator=g)
    k = torch.randn(2, 2, 7, 64, generator=g)
    pos = np.arange(7)[None].repeat(2, 0) + np.array([[0], [50]])
    c, s = sinpe.presets.hf_rope({"head_dim": 64, "rope_theta": 10000.0}, pos)
    tc, ts = torch.from_numpy(c), torch.from_numpy(s)
    for producer in ("onnxruntime", "inductor"):
        qe, ke = st.apply_rotary_pos_emb(q, k, tc, ts, producer=producer)
        for x, y in ((q, qe), (k, ke)):
            want = x.numpy().transpose(0, 2, 1, 3).copy()
            sinpe.apply_rope(want, cos=c, sin=s, seq_dim=1, producer=producer)
            assert np.array_equal(E.uint_view(want.transpose(0, 2, 1, 3)), E.uint_view(y.numpy()))
    qg = q.clone().requires_grad_()
    with pytest.raises(ValueError, match="no gradient here"):
        st.apply_rotary_pos_emb(qg, k, tc, ts, producer="onnxruntime")
    with torch.no_grad():
        st.apply_rotary_pos_emb(qg, k, tc, ts, producer="onnxruntime")
    with pytest.raises(ValueError, match="does not run bfloat16"):
        st.apply_rotary_pos_emb(q.bfloat16(), k.bfloat16(), tc.bfloat16(), ts.bfloat16(),
                                producer="onnxruntime")


def test_specials_keep_the_engines_nan_signs():
    """A hostile probe: a NaN in x1 came out with its sign flipped (sinpe negated the product
    that ONNX Runtime's fused multiply-subtract subtracts): the recorded case of specials
    (NaNs of both signs, infinities, -0, subnormals) holds them bit for bit."""
    data, keys = _records()
    special = [k for k in keys if k.startswith("onnxruntime|") and k.endswith("|5")]
    assert len(special) == 4
    for key in special:
        x = data[key + "|x"]
        assert np.isnan(x).any() and np.isinf(x).any()
        got = rotate(x, data[key + "|cos"], data[key + "|sin"], key.split("|")[3], "onnxruntime")
        assert np.array_equal(E.uint_view(got), E.uint_view(data[key + "|y"])), key


def test_a_type_that_is_not_a_float_gets_the_calls_usual_error():
    """A hostile probe: with producer= an int x was refused as "does not run int32" where the
    call names x's dtype: the usual rule speaks first."""
    for producer in (None, "onnxruntime", "inductor"):
        with pytest.raises(TypeError, match="x must"):
            sinpe.apply_rope(np.ones((1, 2, 1, 8), np.int32), seq_dim=1, producer=producer)
        with pytest.raises(TypeError, match="byte order"):
            sinpe.apply_rope(np.ones((1, 2, 1, 8), ">f4"), seq_dim=1, producer=producer)


@pytest.mark.needs_torch
def test_torch_form_producer_rules():
    """A hostile probe's findings on the torch form: inductor with float32 tables for a
    16-bit q (transformers' graph would promote to float32) is refused, not rounded into q's
    dtype; float64 in one rounding is transformers' own bits; unsqueeze_dim as torch takes it
    (NumPy integers; out of range: IndexError; bool or float: TypeError); a list q: TypeError."""
    import sinpe.torch as st
    g = torch.Generator().manual_seed(8)
    q, k = torch.randn(1, 2, 3, 16, generator=g), torch.randn(1, 2, 3, 16, generator=g)
    c, s = torch.randn(1, 3, 16, generator=g), torch.randn(1, 3, 16, generator=g)
    with pytest.raises(ValueError, match="of q's dtype"):
        st.apply_rotary_pos_emb(q.half(), k.half(), c, s, producer="inductor")
    a = st.apply_rotary_pos_emb(q.double(), k.double(), c.double(), s.double(), producer="inductor")
    b = st.apply_rotary_pos_emb(q.double(), k.double(), c.double(), s.double())
    assert all(torch.equal(x.view(torch.int64), y.view(torch.int64)) for x, y in zip(a, b))
    a = st.apply_rotary_pos_emb(q, k, c, s, np.int64(1), producer="onnxruntime")
    b = st.apply_rotary_pos_emb(q, k, c, s, 1, producer="onnxruntime")
    assert all(torch.equal(x.view(torch.int32), y.view(torch.int32)) for x, y in zip(a, b))
    with pytest.raises(IndexError, match="unsqueeze_dim=5"):
        st.apply_rotary_pos_emb(q, k, c, s, 5, producer="onnxruntime")
    for bad in (True, 1.0, None):
        with pytest.raises(TypeError, match="unsqueeze_dim must be an integer"):
            st.apply_rotary_pos_emb(q, k, c, s, bad, producer="onnxruntime")
    with pytest.raises(TypeError, match="q must be a torch.Tensor"):
        st.apply_rotary_pos_emb([1.0], k, c, s, producer="onnxruntime")


def test_openvino_reads_rot_dim_as_the_call_does():
    """A hostile probe: a NumPy-integer rot_dim was read as head_dim by OpenVINO's rule (and a
    float or bool one blamed on the producer): rot_dim is checked first, as without it."""
    x = np.random.default_rng(2).random((2, 3, 5, 8)).astype(np.float32)
    a, b = x.copy(), x.copy()
    sinpe.apply_rope(a, seq_dim=1, layout="pairs", rot_dim=4, producer="openvino")
    sinpe.apply_rope(b, seq_dim=1, layout="pairs", rot_dim=np.int64(4), producer="openvino")
    assert np.array_equal(E.uint_view(a), E.uint_view(b))
    for bad, err in ((True, TypeError), (2.0, TypeError), (9, ValueError), (10, ValueError)):
        with pytest.raises(err, match="rot_dim"):
            sinpe.apply_rope(x.copy(), seq_dim=1, layout="pairs", rot_dim=bad, producer="openvino")
    with pytest.raises(ValueError, match="backend"):  # checked though MLX's functions compute
        sinpe.apply_rope(x.copy(), seq_dim=1, producer="mlx", backend="bogus")


@pytest.mark.needs_torch
@pytest.mark.parametrize("producer", ["onnxruntime", "openvino", "inductor", "llama.cpp", "mlx"])
def test_the_family_forms_take_producer(producer):
    """producer= on the family forms: each is the engine's rotation of the same tensors with
    the family's layout and the tables its rotation reads (GPT-OSS's half-width tables
    repeated; Cohere's and GLM's interleaved pairs, GLM's first half repeated pairwise; Gemma
    3n's one tensor), equal to apply_rope's bits for them."""
    import sinpe.torch as st
    g = torch.Generator().manual_seed(11)
    q, k = torch.randn(2, 4, 6, 32, generator=g), torch.randn(2, 2, 6, 32, generator=g)
    pos = np.arange(6)[None].repeat(2, 0) + np.array([[0], [40]])
    ch, sh = E.transformers_tables(pos, 32, layout="half")
    cp, sp = E.transformers_tables(pos, 32, layout="pairs")

    def arrays(x, c, s, layout):
        want = x.numpy().transpose(0, 2, 1, 3).copy()
        sinpe.apply_rope(want, cos=c, sin=s, seq_dim=1, layout=layout, producer=producer)
        return E.uint_view(want.transpose(0, 2, 1, 3))

    tc, ts = torch.from_numpy(ch), torch.from_numpy(sh)
    for fn, c, s, layout in ((st.apply_rotary_pos_emb_half, tc[..., :16], ts[..., :16], "half"),
                             (st.apply_rotary_pos_emb_float32, tc, ts, "half"),
                             (st.apply_rotary_pos_emb_olmo, tc, ts, "half"),
                             (st.apply_rotary_pos_emb_cohere, torch.from_numpy(cp),
                              torch.from_numpy(sp), "pairs"),
                             (st.apply_rotary_pos_emb_glm, tc, ts, "pairs"),
                             (st.apply_rotary_pos_emb_glm_float32, tc, ts, "pairs")):
        qe, ke = fn(q, k, c, s, producer=producer)
        if fn in (st.apply_rotary_pos_emb_glm, st.apply_rotary_pos_emb_glm_float32):
            c, s = (t[..., :16].repeat_interleave(2, dim=-1) for t in (c, s))
        if fn is st.apply_rotary_pos_emb_half:
            c, s = torch.cat((c, c), -1), torch.cat((s, s), -1)
        for x, y in ((q, qe), (k, ke)):
            assert np.array_equal(arrays(x, c.numpy(), s.numpy(), layout), E.uint_view(y.numpy())), fn
    xe = st.apply_rotary_pos_emb_single(q, tc, ts, producer=producer)
    assert np.array_equal(arrays(q, ch, sh, "half"), E.uint_view(xe.numpy()))
    # and not transformers' own bits where the engine's float32 arithmetic differs (the
    # producer is in the loop; torch.compile's and MLX's float32 rotation of given tables
    # are transformers' own)
    if producer not in ("inductor", "mlx"):
        own = st.apply_rotary_pos_emb_single(q, tc, ts)
        assert not torch.equal(own, xe)
