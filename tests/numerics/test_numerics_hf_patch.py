"""sinpe.torch.patch on whole tiny random-weight transformers models, bit for bit
(tools/hf_patch_coverage.py's harness, run in-process on a fixed sample of families): the
logits at float32, at bfloat16 cast before and after patching, and greedy generate(); a
dynamic rope's state through calls that grow and reset it; the backend='builtin' control
(correctly rounded tables change the logits, so the comparison can fail); unpatch; a family
patch refuses (left as it was); sinpe.torch.hf_rope's tensors."""
import copy

import pytest

from conftest import hf_patch_harness, tiny_causal_lm

pytestmark = [pytest.mark.oracle_packages, pytest.mark.needs_torch,
              pytest.mark.usefixtures("torch_two_threads")]

import torch  # noqa: E402  (a TORCH_MODULES module: not collected without torch)
import transformers  # noqa: E402,F401


H = hf_patch_harness()

#: family -> the rotation form patch must pick from the model's own code.
SAMPLE = {
    "llama": "apply_rotary_pos_emb -> apply_rotary_pos_emb",
    "helium": "apply_rotary_pos_emb -> apply_rotary_pos_emb_glm",
    "cohere2": "apply_rotary_pos_emb -> apply_rotary_pos_emb_cohere",
    "gpt_oss": "apply_rotary_pos_emb -> apply_rotary_pos_emb_half",
    "modernbert": "apply_rotary_pos_emb -> apply_rotary_pos_emb_float32",
    "ernie4_5": "apply_rotary_pos_emb -> apply_rotary_pos_emb_glm_float32",
    "gemma3": "apply_rotary_pos_emb -> apply_rotary_pos_emb",  # per layer type
    "olmo": "apply_rotary_pos_emb -> apply_rotary_pos_emb_olmo",
    "gpt_neox": "apply_rotary_pos_emb -> apply_rotary_pos_emb",  # partial rotary
    # forms added for issue 24's last families, and a hybrid the harness now builds
    "codegen": "hf_rope (sincos table)",  # embed_positions, float32 kept
    "gptj": "hf_rope (sincos table)",  # embed_positions cast to x's dtype
    "phimoe": "hf_rope (per-call mscale) (dynamic_rope_update)",
    "qwen3_next": "apply_rotary_pos_emb -> apply_rotary_pos_emb",  # linear + full attention
    # complex torch.polar tables: glibc's cosf/sinf (x86-64 Linux with AVX2 and FMA)
    "deepseek_v2": "hf_rope (complex polar table) (dynamic_rope_update)",
    "llama4": "hf_rope (complex polar table) (dynamic_rope_update)",
    # mrope and a vision tower's axial pairs: proven although the probe's other position
    # shapes are the modules' own to take (hf_rope refuses them: their own forward then)
    "qwen2_vl": "hf_rope (dynamic_rope_update)",
    "pixtral": "hf_rope",
}
POLAR = {"deepseek_v2", "llama4"}


@pytest.mark.parametrize("family", sorted(SAMPLE))
def test_family_bit_for_bit(family):
    from sinpe._torch import rotaries as TP
    if family in POLAR and not TP.glibc_like_torch():
        pytest.skip("torch.polar's C library is glibc's FMA variant only on x86-64 Linux "
                    "with AVX2 and FMA (test_polar_refused_where_the_c_library_differs)")
    row = H.check_family(family)
    assert row["status"] == H.BIT, row
    assert set(row["diffs"]) >= {"float32", "bfloat16 cast, patch", "bfloat16 patch, cast"}
    if family not in ("modernbert", "qwen2_vl", "pixtral"):  # no causal LM: no generate()
        assert "generate" in row["diffs"], row
    assert SAMPLE[family] in row["forms"], row["forms"]


_tiny = tiny_causal_lm


def test_builtin_control_changes_logits():
    import sinpe.torch as st
    model = _tiny()
    ids = H.inputs(model)
    with torch.no_grad():
        ref = H.output(model, ids)
        st.patch(model, backend="builtin")
        got = H.output(model, ids)
        st.patch(model)  # re-patching replaces the backend
        same = H.output(model, ids)
    assert H.ndiff(ref, got) > 0
    assert H.ndiff(ref, same) == 0


def test_dynamic_rope_state():
    """Grow past max_position_embeddings, grow more, drop back (transformers resets),
    grow less than before (transformers keeps the larger base): logits and the module's
    state equal to the unpatched model's at every call."""
    import sinpe.torch as st
    model = _tiny(max_position_embeddings=16,
                  rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0})
    patched_model = st.patch(copy.deepcopy(model))
    g = torch.Generator().manual_seed(3)
    for n in (20, 40, 8, 30):
        ids = torch.randint(3, 128, (1, n), generator=g)
        with torch.no_grad():
            a = H.output(model, ids)
            b = H.output(patched_model, ids)
        assert H.ndiff(a, b) == 0, n
        ra, rb = model.model.rotary_emb, patched_model.model.rotary_emb
        assert ra.max_seq_len_cached == rb.max_seq_len_cached
        assert torch.equal(ra.inv_freq, rb.inv_freq)


def test_unpatch_restores_and_patched_lists():
    import sinpe.torch as st
    model = _tiny("gpt_oss")
    assert st.patched(model) == []
    st.patch(model)
    recs = st.patched(model)
    kinds = {r["kind"] for r in recs}
    assert kinds == {"rotary", "rotation"}
    assert any(r["form"] == "apply_rotary_pos_emb -> apply_rotary_pos_emb_half" for r in recs)
    st.unpatch(model)
    assert st.patched(model) == []
    assert not any("forward" in m.__dict__ for m in model.modules())


def _refused_untouched(model, match):
    import sinpe.torch as st
    before = {id(m): dict(m.__dict__) for m in model.modules()}
    with pytest.raises(NotImplementedError, match=match):
        st.patch(model)
    assert st.patched(model) == []
    for m in model.modules():
        assert set(m.__dict__) == set(before[id(m)])


def test_refused_family_left_as_it_was():
    """A rotary hf_rope refuses (a multimodal section on a model type whose recomposition it
    does not know): patch raises and leaves every module as it was."""
    model = _tiny()
    for m in model.modules():
        if type(m).__name__.endswith("RotaryEmbedding"):
            m.config.rope_parameters = dict(m.config.rope_parameters, mrope_section=[2, 3, 3])
    _refused_untouched(model, "llama.*mrope_section.*not one hf_rope knows")


def test_polar_refused_where_the_c_library_differs(monkeypatch):
    """Where torch.polar's cosf/sinf are not glibc's FMA variants (another OS or CPU), the
    polar families are refused, the model untouched; backend= then takes that backend's."""
    from sinpe._torch import rotaries as TP
    import sinpe.torch as st
    monkeypatch.setattr(TP, "glibc_like_torch", lambda: False)
    model = _tiny("deepseek_v2")
    _refused_untouched(model, "deepseek_v2.*torch.polar.*cosf/sinf")
    st.patch(model, backend="builtin")
    assert any(r["form"].startswith("hf_rope (complex polar table)") for r in st.patched(model))


def test_polar_builtin_control_changes_logits():
    """The polar form's comparison can fail: correctly rounded cos/sin change the logits."""
    from sinpe._torch import rotaries as TP
    import sinpe.torch as st
    if not TP.glibc_like_torch():
        pytest.skip("the polar form is refused here (test_polar_refused_where_the_c_library_differs)")
    model = _tiny("deepseek_v2")
    # 256 positions: glibc's cosf/sinf are correctly rounded but for about 1.3% of angles,
    # so a short input may hold none that differ; torch.cos/sin differ in about 4%
    ids = torch.randint(3, 128, (1, 256), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = H.output(model, ids)
        st.patch(model)
        same = H.output(model, ids)
        st.patch(model, backend="builtin")
        got = H.output(model, ids)
        st.patch(model, backend="torch")
        got_torch = H.output(model, ids)
    assert H.ndiff(ref, same) == 0
    assert H.ndiff(ref, got) > 0 and H.ndiff(ref, got_torch) > 0


@pytest.mark.parametrize("family,dtype,form", [
    ("llama", torch.float32, "apply_rotary_pos_emb"),
    ("gpt_oss", torch.bfloat16, "apply_rotary_pos_emb_half")])
def test_patched_model_compiles_fullgraph(family, dtype, form):
    """A patched tiny model under torch.compile(fullgraph=True): no graph break, sinpe's
    hf_rope and rotation are nodes of the one graph, and the compiled logits are the eager
    ones, bit for bit, with the graph run by torch's eager kernels (inductor may change the
    bits of the matmuls and softmax around sinpe's operators, not theirs)."""
    import sinpe.torch as st
    from torch._dynamo.utils import counters
    model = st.patch(_tiny(family)).to(dtype)
    assert any(r["kind"] == "rotation" for r in st.patched(model))
    ids = H.inputs(model)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    counters.clear()
    with torch.no_grad():
        want = H.output(model, ids)
        got = torch.compile(lambda i: model(i).logits, fullgraph=True, backend=backend)(ids)
    assert not counters["graph_break"] and len(graphs) == 1
    targets = {str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"}
    assert {"sinpe.hf_rope.default", f"sinpe.{form}.default"} <= targets, targets
    assert H.ndiff(want, got) == 0


def test_patch_rejects_non_module():
    import sinpe.torch as st
    with pytest.raises(TypeError, match="model"):
        st.patch(object())
    with pytest.raises(TypeError, match="backend"):
        st.patch(torch.nn.Linear(1, 1), backend=3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_hf_rope_tensors(dtype):
    """sinpe.torch.hf_rope returns torch tensors in dtype (bfloat16 included), on
    position_ids' device, equal to the module's; with the module's own buffer after a cast."""
    import sinpe.torch as st
    model = _tiny("gemma3_text").to(dtype)
    rot = model.model.rotary_emb
    pos = torch.arange(30)[None].repeat(2, 1) + torch.tensor([[0], [90]])
    x = torch.zeros(1, dtype=dtype)
    for lt in rot.rope_type:
        want = rot(x, pos, layer_type=lt)
        got = st.hf_rope(model.config, pos, dtype=dtype, layer_type=lt,
                         inv_freq=getattr(rot, f"{lt}_inv_freq"))
        for w, g in zip(want, got):
            assert isinstance(g, torch.Tensor) and g.dtype == w.dtype == dtype
            assert g.device == pos.device
            assert H.ndiff(w, g) == 0


def test_phimoe_per_call_mscale():
    """PhiMoE's longrope: short_mscale below original_max_position_embeddings, long_mscale
    past it, inv_freq recomputed from the config on every call (not the buffer): logits equal
    at float32 and bfloat16 for a short and a long call; builtin tables change them."""
    import sinpe.torch as st
    cfg = H.tiny_config("phimoe")
    cfg.rope_parameters = {"rope_type": "longrope", "rope_theta": 10000.0,
                           "short_factor": [1.0 + i / 8 for i in range(8)],
                           "long_factor": [2.0 + i / 4 for i in range(8)],
                           "short_mscale": 1.1, "long_mscale": 1.3,
                           "original_max_position_embeddings": 32}
    cfg.max_position_embeddings = 128
    from transformers import AutoModelForCausalLM
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    g = torch.Generator().manual_seed(4)
    for n in (16, 48):
        ids = torch.randint(3, 128, (1, n), generator=g)
        with torch.no_grad():
            ref = H.output(model, ids)
            m16 = copy.deepcopy(model).to(torch.bfloat16)
            ref16 = H.output(m16, ids)
            st.patch(model)
            got = H.output(model, ids)
            st.patch(model, backend="builtin")
            ctl = H.output(model, ids)
            st.unpatch(model)
            st.patch(m16)
            got16 = H.output(m16, ids)
        assert H.ndiff(ref, got) == 0, n
        assert H.ndiff(ref16, got16) == 0, n
        assert H.ndiff(ref, ctl) > 0, n


def test_sincos_buffer_checked():
    """GPT-J's embed_positions is recomputed whole at patch time: a buffer that is not the
    table (here one value changed) refuses the family and leaves the model as it was."""
    import sinpe.torch as st
    model = _tiny("gptj", rotary_dim=8)
    rot = model.transformer.rotary_emb
    with torch.no_grad():
        rot.embed_positions[5, 1] += 1.0
    with pytest.raises(NotImplementedError, match="embed_positions.*1 of"):
        st.patch(model)
    assert st.patched(model) == []
    assert "forward" not in rot.__dict__


import sinpe.torch  # noqa: E402


def _pair_bits(a, b):
    return [int((x.view(torch.int16) != y.view(torch.int16)).sum()) if x.element_size() == 2
            else int((x.view(torch.int32) != y.view(torch.int32)).sum()) for x, y in zip(a, b)]


class _Holder(torch.nn.Module):
    def __init__(self, rotary, config):
        super().__init__()
        self.rotary_emb, self.config = rotary, config


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_dinov3_patch_centres_form(dtype):
    """EoMT-DINOv3's rotary, forward(pixel_values): the patch centres of the image's grid
    (2 pi c * inv_freq, tiled), bit for bit at square and oblong images and head dims 16 and
    64; the 'builtin' backend differs (the comparison can fail); in training mode the module's
    own forward (it jitters the centres with torch's generator)."""
    from transformers import AutoConfig
    from transformers.models.eomt_dinov3 import modeling_eomt_dinov3 as M
    for hid, heads in ((64, 4), (384, 6)):
        cfg = AutoConfig.for_model("eomt_dinov3", hidden_size=hid, num_attention_heads=heads,
                                   patch_size=16)
        rot = M.EomtDinov3RotaryEmbedding(cfg).eval()
        holder = _Holder(rot, cfg)
        for h, w in ((64, 64), (640, 480), (48, 1024)):
            px = torch.zeros(2, 3, h, w, dtype=dtype)
            want = rot(px)
            sinpe.torch.patch(holder)
            assert sinpe.torch.patched(holder)[0]["form"] == "hf_rope (patch centres)"
            assert _pair_bits(rot(px), want) == [0, 0], (hid, h, w)
            sinpe.torch.unpatch(holder)
        sinpe.torch.patch(holder, backend="builtin")  # (float32: a half type's rounding
        assert sum(_pair_bits(rot(torch.zeros(1, 3, 640, 480)),  # may hide last bits)
                              M.EomtDinov3RotaryEmbedding(cfg).eval()(
                                  torch.zeros(1, 3, 640, 480)))) > 0
        sinpe.torch.unpatch(holder)
    rot.train()
    sinpe.torch.patch(holder)
    torch.manual_seed(0)
    a = rot(torch.zeros(1, 3, 64, 64))
    sinpe.torch.unpatch(holder)
    torch.manual_seed(0)
    assert _pair_bits(a, rot(torch.zeros(1, 3, 64, 64))) == [0, 0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_efficientloftr_grid_form(dtype):
    """EfficientLoFTR's rotary, forward(x) of the coarse feature map: the aggregated grid's
    1-based (row, column) positions, angles interleaved per frequency, each repeated twice,
    bit for bit at several map sizes; the 'builtin' backend differs."""
    from transformers import AutoConfig
    from transformers.models.efficientloftr import modeling_efficientloftr as M
    cfg = AutoConfig.for_model("efficientloftr")
    rot = M.EfficientLoFTRRotaryEmbedding(cfg)
    holder = _Holder(rot, cfg)
    for fh, fw in ((16, 16), (60, 80), (4, 100)):
        x = torch.zeros(2, cfg.hidden_size, fh, fw, dtype=dtype)
        want = rot(x)
        sinpe.torch.patch(holder)
        assert sinpe.torch.patched(holder)[0]["form"] == "hf_rope (feature-map grid)"
        got = rot(x)
        assert got[0].shape == want[0].shape and _pair_bits(got, want) == [0, 0], (fh, fw)
        sinpe.torch.unpatch(holder)
    sinpe.torch.patch(holder, backend="builtin")  # float32: see the DINOv3 test
    assert sum(_pair_bits(rot(torch.zeros(1, cfg.hidden_size, 60, 80)),
                          M.EfficientLoFTRRotaryEmbedding(cfg)(
                              torch.zeros(1, cfg.hidden_size, 60, 80)))) > 0
    sinpe.torch.unpatch(holder)


@pytest.mark.parametrize("cast", [torch.bfloat16, torch.float16, torch.float64])
def test_grid_forms_after_model_to(cast):
    """After ``model.to(dtype)`` the modules compute their angles in inv_freq's new type
    (EfficientLoFTR in it; EoMT-DINOv3 promoted): the patched forwards give the module's own
    bits there (a review found 2,320-30,720 of 30,720 values differing), and on the edge
    cases the module raises or broadcasts on (no patch in the image, an inv_freq of another
    length than the grid's, meta tensors) they behave as it does."""
    from transformers import AutoConfig
    from transformers.models.efficientloftr import modeling_efficientloftr as L
    from transformers.models.eomt_dinov3 import modeling_eomt_dinov3 as E
    cfg = AutoConfig.for_model("efficientloftr")
    rot = L.EfficientLoFTRRotaryEmbedding(cfg).to(cast)
    holder = _Holder(rot, cfg)
    x = torch.zeros(1, cfg.hidden_size, 48, 40, dtype=cast)
    want = rot(x)
    sinpe.torch.patch(holder)
    assert _pair_bits(rot(x), want) == [0, 0]
    sinpe.torch.unpatch(holder)
    ecfg = AutoConfig.for_model("eomt_dinov3", hidden_size=64, num_attention_heads=4,
                                patch_size=16)
    erot = E.EomtDinov3RotaryEmbedding(ecfg).eval().to(cast)
    eholder = _Holder(erot, ecfg)
    px = torch.zeros(1, 3, 96, 64, dtype=cast)
    want = erot(px)
    sinpe.torch.patch(eholder)
    assert _pair_bits(erot(px), want) == [0, 0]
    small = torch.zeros(1, 3, 15, 15)  # no patch: the module's arange raises, and so do we
    with pytest.raises(RuntimeError):
        erot(small)
    sinpe.torch.unpatch(eholder)
    one = L.EfficientLoFTRRotaryEmbedding(cfg)  # an inv_freq of length 1: broadcast there
    one.inv_freq = one.inv_freq[:1].clone()
    want = one(torch.zeros(1, cfg.hidden_size, 48, 40))
    h1 = _Holder(one, cfg)
    sinpe.torch.patch(h1)
    got = one(torch.zeros(1, cfg.hidden_size, 48, 40))
    assert got[0].shape == want[0].shape and _pair_bits(got, want) == [0, 0]


def test_width_one_tables_broadcast_as_torch():
    """cos/sin of last dim 1 are broadcast by torch over the whole head (not a partial rotary
    of width 1: a review found 432 of 432 values differing)."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as hf
    for dt in (torch.float32, torch.bfloat16):
        q, k = torch.randn(2, 3, 9, 8).to(dt), torch.randn(2, 1, 9, 8).to(dt)
        c, s = torch.randn(2, 9, 1).to(dt), torch.randn(2, 9, 1).to(dt)
        assert _pair_bits(sinpe.torch.apply_rotary_pos_emb(q, k, c, s), hf(q, k, c, s)) == [0, 0]
