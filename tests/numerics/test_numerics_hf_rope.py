"""sinpe.presets.hf_rope and sinpe.torch.apply_rotary_pos_emb (and its variants) against
transformers' own rotary modules and functions, bit for bit (every comparison is of bit
patterns): every rope_type of ROPE_INIT_FUNCTIONS on Llama configs, float32, float16 and
bfloat16, per-batch position_ids on both sides of max_position_embeddings (dynamic's regrowth,
longrope's long/short switch), a module's own bfloat16 inv_freq, the partial rotary families,
Cohere's interleaved tables, OLMo's uncast ones, Gemma 3's per-layer-type parameters,
Qwen2-VL/Qwen3-VL/GLM-4V mrope, and a whole tiny Llama in bfloat16 whose rotary module is
replaced by hf_rope."""
import importlib

import numpy as np
import pytest

from conftest import TORCH_FREE, bits, to_np

if not TORCH_FREE:  # the torch-free passes deselect every test here (needs_torch)
    import torch
    import sinpe.torch as ST
    from sinpe.presets import hf_rope

pytestmark = [pytest.mark.needs_torch, pytest.mark.oracle_packages]

DTYPES = ["float32", "float16", "bfloat16"]
TDT = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}


def tdtype(name):
    return getattr(torch, name)


def assert_same(got, want, what):
    """What tests/conftest.py's same checks, asserted with a message that counts the
    elements that differ."""
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    bad = int(np.count_nonzero(bits(got) != bits(want)))
    assert bad == 0, f"{what}: {bad} of {got.size} elements differ"


def module(path, cls):
    return getattr(importlib.import_module("transformers.models." + path), cls)


def check_module(cfg, mod, pos, dtype, *, as_dict=False, to_bf16=False, **fw):
    """hf_rope against the module's first forward call."""
    m = mod(cfg)
    kw = {}
    if to_bf16:
        m = m.to(torch.bfloat16)
        kw["inv_freq"] = m.inv_freq
        assert m.inv_freq.dtype == torch.bfloat16
    c, s = m(torch.zeros(1, dtype=tdtype(dtype)), torch.as_tensor(pos), **fw)
    mc, ms = hf_rope(cfg.to_dict() if as_dict else cfg, pos, dtype=dtype, **fw, **kw)
    assert_same(mc, to_np(c), f"cos {dtype}")
    assert_same(ms, to_np(s), f"sin {dtype}")


def positions(n, top, seed=0):
    """(2, n): arange, and random positions below top (batch rows differ)."""
    rng = np.random.default_rng(seed)
    return np.stack([np.arange(n), rng.integers(0, top, n)]).astype(np.int64)


def llama_cases():
    rng = np.random.default_rng(3)
    return {
        "default": {"rope_type": "default", "rope_theta": 500000.0},
        "linear": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
        "dynamic": {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.5},
        "yarn": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 8.0,
                 "original_max_position_embeddings": 2048},
        "yarn_mscale": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40,
                        "original_max_position_embeddings": 4096, "mscale": 0.707,
                        "mscale_all_dim": 0.707, "beta_fast": 32, "beta_slow": 1,
                        "truncate": False},
        "longrope": {"rope_type": "longrope", "rope_theta": 10000.0,
                     "short_factor": list(1 + rng.random(32)),
                     "long_factor": list(1 + 9 * rng.random(32)),
                     "original_max_position_embeddings": 4096},
        "llama3": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192},
        "proportional": {"rope_type": "proportional", "rope_theta": 10000.0,
                         "partial_rotary_factor": 0.25, "factor": 2.0},
        "linear_partial": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0,
                           "partial_rotary_factor": 0.5},
    }


def llama_config(name, **kw):
    from transformers import LlamaConfig
    mpe = 131072 if name == "longrope" else 4096
    args = dict(hidden_size=256, num_attention_heads=4, max_position_embeddings=mpe,
                rope_parameters=dict(llama_cases()[name]))
    args.update(kw)
    return LlamaConfig(**args)


LLAMA = "llama.modeling_llama", "LlamaRotaryEmbedding"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(llama_cases()))
def test_every_rope_type(name, dtype):
    cfg = llama_config(name)
    for top in (40000, 4000):  # past max_position_embeddings (regrowth, long factors), and not
        check_module(cfg, module(*LLAMA), positions(160, top), dtype)


@pytest.mark.parametrize("name", ["default", "yarn", "llama3", "dynamic"])
def test_rope_types_on_each_torch_bits_backend(name, parity_backend):
    cfg = llama_config(name)
    pos = positions(300, 40000, seed=5)
    c, s = module(*LLAMA)(cfg)(torch.zeros(1), torch.as_tensor(pos))
    mc, ms = hf_rope(cfg, pos, backend=parity_backend)
    assert_same(mc, c.numpy(), f"cos {parity_backend}")
    assert_same(ms, s.numpy(), f"sin {parity_backend}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_positions_broadcast_over_the_batch(dtype, parity_backend):
    """position_ids expanded over the batch (stride 0, as generate() and the benchmarks pass
    them; the core writes such rows straight into the result, as contiguous ones), and
    positions broadcast along the sequence too, against the module on the same tensor."""
    cfg = llama_config("llama3")
    m = module(*LLAMA)(cfg)
    x = torch.zeros(1, dtype=tdtype(dtype))
    cases = [(torch.arange(L)[None] + at).expand(B, -1)
             for B, L, at in ((2, 256, 0), (16, 1, 300), (3, 37, 5000))]
    cases += [torch.tensor(7).expand(4, 9), torch.arange(40).view(2, 20)[:, ::2],
              torch.arange(6)[:, None].expand(6, 5)]
    for pos in cases:
        c, s = m(x, pos)
        mc, ms = hf_rope(cfg, pos, dtype=dtype, backend=parity_backend)
        what = f"{parity_backend} {tuple(pos.shape)} strides {pos.stride()}"
        assert_same(mc, to_np(c), f"cos {what}")
        assert_same(ms, to_np(s), f"sin {what}")
        nc, ns = hf_rope(cfg, pos.contiguous().numpy(), dtype=dtype, backend=parity_backend)
        assert_same(mc, nc, f"cos {what} against contiguous positions")
        assert_same(ms, ns, f"sin {what} against contiguous positions")


@pytest.mark.parametrize("name", ["default", "linear", "dynamic", "llama3", "yarn", "longrope"])
def test_inv_freq_of_a_bfloat16_module(name):
    cfg = llama_config(name)
    for dtype in ("bfloat16", "float32"):
        for top in (40000, 3000):
            check_module(cfg, module(*LLAMA), positions(100, top, seed=1), dtype, to_bf16=True)


def test_head_dim_dict_config_and_int_positions():
    cfg = llama_config("yarn", hidden_size=192, num_attention_heads=2, head_dim=64)
    check_module(cfg, module(*LLAMA), positions(50, 9000), "bfloat16", as_dict=True)
    c, s = module(*LLAMA)(cfg)(torch.zeros(1), torch.arange(33)[None])
    mc, ms = hf_rope(cfg, 33)
    assert_same(mc, c.numpy(), "cos of arange")
    assert_same(ms, s.numpy(), "sin of arange")


def test_float64():
    cfg = llama_config("yarn")
    check_module(cfg, module(*LLAMA), positions(40, 9000), "float64")


@pytest.mark.parametrize("family", ["gpt_neox", "phi", "stablelm", "glm", "persimmon",
                                    "phi3_longrope", "cohere", "olmo", "gpt_oss"])
def test_families(family):
    import transformers as T
    rng = np.random.default_rng(2)
    cfgs = {
        "gpt_neox": (T.GPTNeoXConfig(hidden_size=256, num_attention_heads=4, rotary_pct=0.25),
                     "gpt_neox.modeling_gpt_neox", "GPTNeoXRotaryEmbedding"),
        "phi": (T.PhiConfig(hidden_size=256, num_attention_heads=4, partial_rotary_factor=0.4),
                "phi.modeling_phi", "PhiRotaryEmbedding"),
        "stablelm": (T.StableLmConfig(hidden_size=256, num_attention_heads=4),
                     "stablelm.modeling_stablelm", "StableLmRotaryEmbedding"),
        "glm": (T.GlmConfig(hidden_size=256, num_attention_heads=4, head_dim=64),
                "glm.modeling_glm", "GlmRotaryEmbedding"),
        "persimmon": (T.PersimmonConfig(hidden_size=256, num_attention_heads=4),
                      "persimmon.modeling_persimmon", "PersimmonRotaryEmbedding"),
        "phi3_longrope": (T.Phi3Config(
            hidden_size=256, num_attention_heads=4, max_position_embeddings=131072,
            original_max_position_embeddings=4096, partial_rotary_factor=0.75,
            rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                             "short_factor": list(1 + rng.random(24)),
                             "long_factor": list(1 + 9 * rng.random(24))}),
            "phi3.modeling_phi3", "Phi3RotaryEmbedding"),
        "cohere": (T.CohereConfig(hidden_size=256, num_attention_heads=4),
                   "cohere.modeling_cohere", "CohereRotaryEmbedding"),
        "olmo": (T.OlmoConfig(hidden_size=256, num_attention_heads=4),
                 "olmo.modeling_olmo", "OlmoRotaryEmbedding"),
        "gpt_oss": (T.GptOssConfig(hidden_size=256, num_attention_heads=4, head_dim=64,
                                   num_local_experts=4),
                    "gpt_oss.modeling_gpt_oss", "GptOssRotaryEmbedding"),
    }
    cfg, path, cls = cfgs[family]
    for dtype in DTYPES:
        check_module(cfg, module(path, cls), positions(120, 30000, seed=4), dtype)
    check_module(cfg, module(path, cls), positions(30, 3000), "bfloat16", as_dict=True)


def test_gemma3_layer_types():
    from transformers import Gemma3TextConfig
    cfg = Gemma3TextConfig(hidden_size=256, num_attention_heads=4, head_dim=64,
                           rope_parameters={"full_attention": {"rope_type": "linear",
                                                               "factor": 8.0,
                                                               "rope_theta": 1000000.0},
                                            "sliding_attention": {"rope_type": "default",
                                                                  "rope_theta": 10000.0}})
    mod = module("gemma3.modeling_gemma3", "Gemma3RotaryEmbedding")
    for lt in ("full_attention", "sliding_attention"):
        for dtype in ("float32", "bfloat16"):
            check_module(cfg, mod, positions(100, 20000), dtype, layer_type=lt)
        check_module(cfg, mod, positions(20, 200), "float16", as_dict=True, layer_type=lt)
    with pytest.raises(ValueError, match="layer_type"):
        hf_rope(cfg, positions(4, 10))
    with pytest.raises(ValueError, match="layer_type"):
        hf_rope(cfg, positions(4, 10), layer_type="nope")


def test_mrope():
    import transformers as T
    pos = positions(100, 20000)
    p3 = np.stack([pos, pos // 3, pos % 17])
    q2 = T.Qwen2VLTextConfig(hidden_size=256, num_attention_heads=2,
                             rope_parameters={"rope_type": "default", "rope_theta": 1e6,
                                              "mrope_section": [16, 24, 24]})
    q3 = T.Qwen3VLTextConfig(hidden_size=256, num_attention_heads=2, head_dim=128,
                             rope_parameters={"rope_type": "default", "rope_theta": 5e6,
                                              "mrope_section": [24, 20, 20]})
    g4 = T.Glm4vTextConfig(hidden_size=256, num_attention_heads=4, head_dim=64,
                           rope_parameters={"rope_type": "default", "rope_theta": 1e4,
                                            "mrope_section": [4, 6, 6],
                                            "partial_rotary_factor": 0.5})
    cases = [(q2, "qwen2_vl.modeling_qwen2_vl", "Qwen2VLRotaryEmbedding"),
             (q3, "qwen3_vl.modeling_qwen3_vl", "Qwen3VLTextRotaryEmbedding"),
             (g4, "glm4v.modeling_glm4v", "Glm4vTextRotaryEmbedding")]
    for cfg, path, cls in cases:
        for dtype in DTYPES:
            check_module(cfg, module(path, cls), p3, dtype)
        check_module(cfg, module(path, cls), pos, "bfloat16")  # (batch, seq): expanded to 3
    top = T.Qwen2VLConfig(text_config=q2.to_dict())  # a composite config: its text part
    m = module("qwen2_vl.modeling_qwen2_vl", "Qwen2VLRotaryEmbedding")(top.text_config)
    c, _ = m(torch.zeros(1), torch.as_tensor(p3))
    assert_same(hf_rope(top, p3)[0], c.numpy(), "composite config")
    assert_same(hf_rope(top.to_dict(), p3)[0], c.numpy(), "composite dict")


@pytest.mark.parametrize("sec,extra,hd", [
    ([2, 3, 3], {}, 16), ([4, 4, 4, 4], {}, 32), ([0, 4, 4], {}, 16),
    ([16, 24, 24], {"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0}, 128),
    ([3, 5], {"rope_type": "dynamic", "alpha": 7.5, "factor": 2.0}, 16)])
def test_hunyuan_vl_recomposition_and_ntk_alpha(sec, extra, hd):
    """HunYuan-VL: one axis per mrope_section entry (2 to 4), cat(freqs, freqs) cut in chunks
    of 2 * section from row i; a 'dynamic' rope with a fixed alpha is its own ntk_alpha (the
    base stretched once, never regrown, even past max_position_embeddings)."""
    import transformers as T
    rp = dict({"rope_type": "default", "rope_theta": 1e4, "mrope_section": sec}, **extra)
    cfg = T.HunYuanVLTextConfig(hidden_size=4 * hd, num_attention_heads=4, head_dim=hd,
                                num_key_value_heads=4, rope_parameters=rp,
                                max_position_embeddings=64)
    mod = module("hunyuan_vl.modeling_hunyuan_vl", "HunYuanVLRotaryEmbedding")
    pos = positions(37, 3000)
    axes = np.stack([pos + k for k in range(len(sec))])
    for dtype in DTYPES:
        check_module(cfg, mod, pos, dtype)
    check_module(cfg, mod, axes, "float32")


@pytest.mark.parametrize("hd,prf,extra", [(16, 0.25, {}), (64, 0.5, {}), (128, 1.0, {}),
                                          (32, 0.25, {"rope_type": "linear", "factor": 2.0})])
def test_neomme_alternating_axes_per_layer_type(hd, prf, extra):
    """NeoMME: two axes (row, column), half column j from row j % 2, then cat; partial rotary
    and rope parameters per layer type."""
    import transformers as T
    rp = {"full_attention": dict({"rope_type": "default", "rope_theta": 1e6,
                                  "partial_rotary_factor": prf}, **extra),
          "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
    cfg = T.NeoMMEConfig(hidden_size=4 * hd, num_attention_heads=4, num_key_value_heads=4,
                         head_dim=hd, layer_types=["sliding_attention", "full_attention"],
                         num_hidden_layers=2, rope_parameters=rp)
    mod = module("neomme.modeling_neomme", "NeoMMERotaryEmbedding")
    pos = positions(29, 5000)
    for lt in ("full_attention", "sliding_attention"):
        for dtype in DTYPES:
            check_module(cfg, mod, pos, dtype, layer_type=lt)
        check_module(cfg, mod, np.stack([pos, pos // 7]), "float32", layer_type=lt)


def test_hunyuan_vl_needs_its_sections():
    with pytest.raises(ValueError, match="mrope_section"):
        hf_rope({"model_type": "hunyuan_vl_text", "hidden_size": 64, "num_attention_heads": 4,
                 "head_dim": 16, "rope_theta": 1e4}, np.arange(4)[None])
    with pytest.raises(ValueError, match="sum to dim / 2 = 8"):
        hf_rope({"model_type": "hunyuan_vl_text", "hidden_size": 64, "num_attention_heads": 4,
                 "head_dim": 16, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4,
                                                     "mrope_section": [2, 3, 4]}},
                np.arange(4)[None])
    with pytest.raises(ValueError, match="rope_type 'ntk_alpha'"):  # not for other families
        hf_rope({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
                 "rope_parameters": {"rope_type": "ntk_alpha", "rope_theta": 1e4,
                                     "alpha": 2.0}}, np.arange(4)[None])


def test_bad_input():
    cfg = llama_config("default")
    pos = positions(4, 10)
    with pytest.raises(TypeError, match="config"):
        hf_rope(42, pos)
    with pytest.raises(TypeError, match="position_ids"):
        hf_rope(cfg, np.array(["a", "b"]))
    with pytest.raises(TypeError, match="position_ids"):
        hf_rope(cfg, 2.5)
    with pytest.raises(ValueError, match="position_ids"):
        hf_rope(cfg, -3)
    with pytest.raises(ValueError, match="inv_freq"):
        hf_rope(cfg, pos, inv_freq=np.ones(5, np.float32))
    with pytest.raises(TypeError, match="inv_freq"):
        hf_rope(cfg, pos, inv_freq=np.ones(32, np.int32))
    with pytest.raises(TypeError, match="dtype"):
        hf_rope(cfg, pos, dtype="int8")
    with pytest.raises(ValueError, match="rope_type"):
        hf_rope({"hidden_size": 64, "num_attention_heads": 2,
                 "rope_parameters": {"rope_type": "weird"}}, pos)
    with pytest.raises(ValueError, match="factor"):
        hf_rope({"hidden_size": 64, "num_attention_heads": 2,
                 "rope_parameters": {"rope_type": "linear", "rope_theta": 1e4}}, pos)
    with pytest.raises(ValueError, match="short_factor"):
        hf_rope({"hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 99,
                 "rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4,
                                     "short_factor": [1.0] * 5, "long_factor": [1.0] * 5}},
                pos)
    with pytest.raises(ValueError, match="rope_theta"):
        hf_rope({"hidden_size": 64, "num_attention_heads": 2,
                 "rope_parameters": {"rope_type": "default", "rope_theta": -1.0}}, pos)
    with pytest.raises(NotImplementedError, match="llama4"):
        hf_rope({"model_type": "llama4_text", "hidden_size": 64, "num_attention_heads": 2}, pos)


# ---- apply_rotary_pos_emb -----------------------------------------------------------------

def _tables(B, S, R, dtype, g, interleave=False):
    ang = torch.randn(B, S, R // 2, generator=g) * 50
    if interleave:
        c, s = ang.cos().repeat_interleave(2, -1), ang.sin().repeat_interleave(2, -1)
    else:
        c, s = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    return (c * 1.1).to(dtype), (s * 1.1).to(dtype)


def _same_pair(got, want, what):
    got, want = tuple(got), tuple(want)
    assert len(got) == len(want) == 2, f"{what}: {len(got)} and {len(want)} arrays"
    for a, b, n in zip(got, want, ("q", "k")):
        assert_same(to_np(a), to_np(b), f"{what} {n}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("R", [64, 32, 16])
def test_apply_rotary_pos_emb(dtype, R):
    from transformers.models.cohere import modeling_cohere as MC
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as MD
    from transformers.models.glm import modeling_glm as MG
    from transformers.models.gpt_neox import modeling_gpt_neox as MN
    from transformers.models.llama import modeling_llama as ML
    g = torch.Generator().manual_seed(R)
    dt = tdtype(dtype)
    B, H, S, D = 2, 4, 37, 64
    q = (torch.randn(B, H, S, D, generator=g) * 3).to(dt)
    k = torch.randn(B, 2, S, D, generator=g).to(dt)
    cos, sin = _tables(B, S, R, dt, g)
    ref = ML.apply_rotary_pos_emb if R == D else MN.apply_rotary_pos_emb
    qt, kt = q.transpose(1, 2), k.transpose(1, 2)  # BSHD views (strided)
    cases = [
        ("BHSD", ST.apply_rotary_pos_emb, ref, (q, k, cos, sin), 1),
        ("BSHD", ST.apply_rotary_pos_emb, ref, (qt.contiguous(), kt.contiguous(), cos, sin), 2),
        ("BSHD view", ST.apply_rotary_pos_emb, ref, (qt, kt, cos, sin), 2),
        ("cos batch 1", ST.apply_rotary_pos_emb, ref, (q, k, cos[:1], sin[:1]), 1),
        ("cos (seq, dim)", ST.apply_rotary_pos_emb, ref, (q, k, cos[0], sin[0]), 0),
        ("one position", ST.apply_rotary_pos_emb, ref,
         (q[:1, :, 5:6], k[:1, :, 5:6], cos[:1, 5:6], sin[:1, 5:6]), 1),
        ("glm", ST.apply_rotary_pos_emb_glm, MG.apply_rotary_pos_emb, (q, k, cos, sin), 1),
        ("glm BSHD", ST.apply_rotary_pos_emb_glm, MG.apply_rotary_pos_emb, (qt, kt, cos, sin), 2),
    ]
    if R == D:
        ci, si = _tables(B, S, R, dt, g, interleave=True)
        cases += [
            ("cohere", ST.apply_rotary_pos_emb_cohere, MC.apply_rotary_pos_emb, (q, k, ci, si), 1),
            ("cohere BSHD", ST.apply_rotary_pos_emb_cohere, MC.apply_rotary_pos_emb,
             (qt, kt, ci, si), 2),
            ("interleave", ST.apply_rotary_pos_emb_interleave, MD.apply_rotary_pos_emb_interleave,
             (q, k, cos, sin), 1),
            ("interleave BSHD", ST.apply_rotary_pos_emb_interleave,
             MD.apply_rotary_pos_emb_interleave, (qt, kt, cos, sin), 2),
        ]
    for what, mine, theirs, args, u in cases:
        before = [a.clone() for a in args]
        _same_pair(mine(*args, unsqueeze_dim=u), theirs(*args, unsqueeze_dim=u), what)
        for a, b in zip(args, before):
            assert torch.equal(a, b), f"{what}: an input was written"


@pytest.mark.parametrize("dtype", DTYPES)
def test_apply_rotary_pos_emb_layouts_in_turn(dtype):
    """The layouts kept between calls (per shapes, strides and dtypes): tables of one shape in
    other layouts in turn (contiguous, expanded over the batch, a strided view, a negative
    view, requiring grad under no_grad), twice each, against transformers each time."""
    from transformers.models.llama import modeling_llama as ML
    g = torch.Generator().manual_seed(11)
    dt = tdtype(dtype)
    B, H, S, D = 3, 4, 5, 32
    q = torch.randn(B, H, S, D, generator=g).to(dt)
    k = torch.randn(B, 2, S, D, generator=g).to(dt)
    cos, sin = _tables(B, S, D, dt, g)
    wide = torch.zeros(S, B, 2 * D, dtype=dt)
    wide[..., :D], wide[..., D:] = cos.transpose(0, 1), sin.transpose(0, 1)
    layouts = {
        "contiguous": (cos, sin),
        "expanded": (cos[:1].expand(B, -1, -1), sin[:1].expand(B, -1, -1)),
        "strided": (wide[..., :D].transpose(0, 1), wide[..., D:].transpose(0, 1)),
        "negative view": (torch._neg_view(-cos), torch._neg_view(-sin)),
        "requires grad": (cos.clone().requires_grad_(), sin.clone().requires_grad_()),
    }
    with torch.no_grad():
        for _ in range(2):
            for what, (c, s) in layouts.items():
                _same_pair(ST.apply_rotary_pos_emb(q, k, c, s),
                           ML.apply_rotary_pos_emb(q, k, c, s), what)
                _same_pair(ST.apply_rotary_pos_emb(q[:, :, :1], k[:, :, :1], c[:, :1], s[:, :1]),
                           ML.apply_rotary_pos_emb(q[:, :, :1], k[:, :, :1], c[:, :1], s[:, :1]),
                           f"{what}, one position")


def test_apply_rotary_pos_emb_fallbacks():
    """What the core does not take runs transformers' torch ops: mixed dtypes (torch promotes),
    float64, autograd."""
    from transformers.models.llama import modeling_llama as ML
    g = torch.Generator().manual_seed(7)
    q = torch.randn(2, 4, 9, 32, generator=g).to(torch.bfloat16)
    k = torch.randn(2, 4, 9, 32, generator=g).to(torch.bfloat16)
    cos, sin = _tables(2, 9, 32, torch.float32, g)
    _same_pair(ST.apply_rotary_pos_emb(q, k, cos, sin), ML.apply_rotary_pos_emb(q, k, cos, sin),
               "mixed")
    q64, k64 = q.double(), k.double()
    _same_pair(ST.apply_rotary_pos_emb(q64, k64, cos.double(), sin.double()),
               ML.apply_rotary_pos_emb(q64, k64, cos.double(), sin.double()), "float64")
    qg = q.float().requires_grad_()
    mine = ST.apply_rotary_pos_emb(qg, k.float(), cos, sin)
    theirs = ML.apply_rotary_pos_emb(qg, k.float(), cos, sin)
    _same_pair(mine, theirs, "autograd")
    mine[0].sum().backward()
    assert qg.grad is not None


# ---- the headline: a whole model -----------------------------------------------------------

def test_tiny_llama_logits_with_hf_rope():
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                      max_position_embeddings=512,
                      rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0,
                                       "factor": 8.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0,
                                       "original_max_position_embeddings": 128})
    model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    ids = torch.randint(0, 256, (2, 48))
    pos = torch.stack([torch.arange(48), torch.arange(48) + 300])
    with torch.no_grad():
        want = model(input_ids=ids, position_ids=pos).logits
    original = model.model.rotary_emb
    buffer = original.inv_freq
    assert buffer.dtype == torch.bfloat16

    class SinpeRope(torch.nn.Module):
        def forward(self, x, position_ids):
            c, s = hf_rope(cfg, position_ids, inv_freq=buffer, dtype=x.dtype)
            as_t = (lambda a: torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)) \
                if x.dtype == torch.bfloat16 else torch.from_numpy
            return as_t(c), as_t(s)

    model.model.rotary_emb = SinpeRope()
    with torch.no_grad():
        got = model(input_ids=ids, position_ids=pos).logits
    model.model.rotary_emb = original
    assert got.dtype == want.dtype == torch.bfloat16
    assert torch.equal(got, want)


# ---- more families, their own config classes and rotary modules ------------------------------

FAMILIES = ["mistral", "qwen3", "gemma2", "granite", "starcoder2", "falcon", "deepseek_v3",
            "exaone4", "nemotron", "helium", "smollm3", "ernie4_5", "olmo2", "cohere2", "glm4"]


@pytest.mark.parametrize("family", FAMILIES)
def test_more_families(family):
    """Each family's own config class (small sizes) and rotary module, rope types dynamic
    (regrown), yarn and longrope (long factors), int32 per-batch positions, every dtype."""
    import inspect
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    mod = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    rot = next(c for n, c in vars(mod).items() if n.endswith("RotaryEmbedding")
               and inspect.isclass(c) and c.__module__ == mod.__name__)
    cfg = CONFIG_MAPPING[family](hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
                                 max_position_embeddings=2048)
    prf = cfg.rope_parameters.get("partial_rotary_factor")
    n = int((getattr(cfg, "head_dim", None) or 64) * (prf or 1.0)) // 2
    rng = np.random.default_rng(9)
    for rp in ({"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 3.0},
               {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 8.0,
                "original_max_position_embeddings": 512},
               {"rope_type": "longrope", "rope_theta": 10000.0,
                "short_factor": list(1 + rng.random(n)), "long_factor": list(2 + rng.random(n)),
                "original_max_position_embeddings": 512}):
        if prf is not None:
            rp["partial_rotary_factor"] = prf
        cfg.rope_parameters = rp
        pos = positions(64, 6000, seed=3).astype(np.int32)
        for dtype in DTYPES:
            check_module(cfg, rot, pos, dtype)
        check_module(cfg, rot, positions(64, 400), "bfloat16", to_bf16=True)


def test_apply_rotary_pos_emb_helium_is_glm_form():
    """Helium's apply_rotary_pos_emb (GLM's interleaved form, whole head) is
    apply_rotary_pos_emb_glm; transposed q/k views, GQA, bfloat16."""
    from transformers.models.helium import modeling_helium as MH
    g = torch.Generator().manual_seed(11)
    q = torch.randn(2, 19, 8 * 64, generator=g).to(torch.bfloat16).view(2, 19, 8, 64)
    k = torch.randn(2, 19, 2 * 64, generator=g).to(torch.bfloat16).view(2, 19, 2, 64)
    cos, sin = _tables(2, 19, 64, torch.bfloat16, g)
    q, k = q.transpose(1, 2), k.transpose(1, 2)
    _same_pair(ST.apply_rotary_pos_emb_glm(q, k, cos, sin), MH.apply_rotary_pos_emb(q, k, cos, sin),
               "helium")


@pytest.mark.parametrize("family", ["olmo", "olmo2"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_apply_rotary_pos_emb_olmo(family, dtype):
    """OLMo's form: float32 cos/sin (its module does not cast) promote bf16/f16 q, the results
    are cast back to q's dtype; also cos in q's own dtype."""
    hf = importlib.import_module(f"transformers.models.{family}.modeling_{family}").apply_rotary_pos_emb
    g = torch.Generator().manual_seed(4)
    qd = tdtype(dtype)
    for cd in (torch.float32, qd):
        q = torch.randn(2, 4, 33, 64, generator=g).to(qd)
        k = torch.randn(2, 2, 33, 64, generator=g).to(qd)
        cos, sin = (torch.randn(2, 33, 64, generator=g).to(cd) for _ in range(2))
        for want, got in zip(hf(q, k, cos, sin), ST.apply_rotary_pos_emb_olmo(q, k, cos, sin)):
            assert got.dtype == want.dtype == qd
            assert torch.equal(got.view(torch.int16 if got.element_size() == 2 else torch.int32),
                               want.view(torch.int16 if want.element_size() == 2 else torch.int32))


# ---- a module's state; the config's snapshot and text ----------------------------------------

def _module_runs(H, fams, family, cls_name, rope_type, dtypes=DTYPES):
    """Rotary modules of a sampled family built and called as the coverage harness builds and
    calls them (its configs, positions and dtypes): (config, position_ids, layer_type, dtype,
    the module after its call, its (cos, sin) as arrays), or [] when the config refuses the
    rope type."""
    import copy
    cls = next(c for _, c in H.rotary_classes(family, fams[family])
               if c.__name__ == cls_name)
    cfg_cls = H.config_class(cls)
    for small in (True, False, None):
        try:
            config = H.build_config(cfg_cls, rope_type, small, family, cls)
            cls(copy.deepcopy(config))
        except Exception:
            continue
        kind = H.variant(cls, config)
        layer_types = H._nested_keys(config) or [None]
        forms = [H.positions(kind, H._source(cls), o) for o in H.OFFSET_SETS]
        for i in range(len(forms[0])):
            try:
                runs = []
                for cands in forms:
                    for lt in layer_types:
                        for dt in dtypes:
                            m = cls(copy.deepcopy(config))
                            out, why = H.pair(H.call_module(m, cands[i], dt, lt))
                            runs.append((config, cands[i], lt, dt, m, out))
                return runs
            except Exception:
                continue
    return []


def _edit_in_place(config):
    """What a rotary module fixed at init, changed in the config after it was built."""
    def bump(p):
        if isinstance(p, dict):
            if isinstance(p.get("rope_theta"), (int, float)):
                p["rope_theta"] = p["rope_theta"] * 3.0 + 1
            for k in ("factor", "attention_factor"):
                p[k] = (p.get(k) or 1.0) * 1.7 + 0.5
            p["partial_rotary_factor"] = 0.25
    rp = config.rope_parameters
    bump(rp)
    for v in list(rp.values()):
        bump(v)
    for k, v in (("partial_rotary_factor", 0.25), ("head_dim", 8)):
        setattr(config, k, v)


def test_module_state_tables_equal_the_module_after_config_edits():
    """hf_rope(config, position_ids, inv_freq=module's buffer, attention_scaling=module's)
    gives the module's own (cos, sin) bit for bit, for each sampled family and rope type
    (dynamic regrown and longrope switched by the module's first call, Gemma 3's per-layer-type
    buffers and scalings, Qwen2-VL's mrope), and still does after rope_theta, factor,
    attention_factor, partial_rotary_factor and head_dim are edited in the config (which the
    module read at init only): the tables of the module's state, not of the config's."""
    import copy
    from conftest import hf_coverage_harness
    H = hf_coverage_harness()
    H.quiet()
    fams = H.families()
    checked = set()
    for family, cls_name in H.SAMPLE:
        for rope_type in H.COLUMNS:
            edited = None
            for config, pos, lt, dt, m, want in _module_runs(H, fams, family, cls_name,
                                                             rope_type, DTYPES):
                inv = getattr(m, f"{lt}_inv_freq" if lt else "inv_freq")
                scaling = getattr(m, f"{lt}_attention_scaling" if lt else "attention_scaling")
                kw = {"dtype": dt, "layer_type": lt, "inv_freq": inv,
                      "attention_scaling": scaling}
                if edited is None:
                    edited = copy.deepcopy(config)
                    _edit_in_place(edited)
                for what, cfg in (("config", config), ("edited config", edited)):
                    c, s = hf_rope(cfg, pos, **kw)
                    tag = f"{family} {rope_type} {lt} {dt} {tuple(pos.shape)} {what}"
                    assert_same(c, want[0], f"cos {tag}")
                    assert_same(s, want[1], f"sin {tag}")
                checked.add((family, rope_type, scaling != 1.0))
    # the walk reached every sampled family, and scalings other than 1.0 (yarn, longrope)
    assert {f for f, _, _ in checked} == {f for f, _ in H.SAMPLE}
    assert ("llama", "yarn", True) in checked and ("llama", "longrope", True) in checked


def test_module_state_of_a_yarn_config_edited_after_the_model_was_built():
    """The issue's case: a yarn model whose config's attention_factor and factor change after
    it was built keeps its tables (transformers computed inv_freq and attention_scaling at
    init); the config's own tables (no module state) follow the edit."""
    cfg = llama_config("yarn")
    m = module(*LLAMA)(cfg)
    pos = positions(64, 3000)
    want = m(torch.zeros(1, dtype=torch.bfloat16), torch.as_tensor(pos))
    before = hf_rope(cfg, pos, dtype="bfloat16")
    cfg.rope_parameters["attention_factor"] = 2.5
    cfg.rope_parameters["factor"] = 3.0
    got = hf_rope(cfg, pos, dtype="bfloat16", inv_freq=m.inv_freq,
                  attention_scaling=m.attention_scaling)
    assert_same(got[0], to_np(want[0]), "cos")
    assert_same(got[1], to_np(want[1]), "sin")
    after = hf_rope(cfg, pos, dtype="bfloat16")
    assert np.count_nonzero(bits(after[0]) != bits(before[0])) > 0


def test_module_state_bad_input():
    cfg = llama_config("default")
    m = module(*LLAMA)(cfg)
    with pytest.raises(ValueError, match="attention_scaling given without inv_freq"):
        hf_rope(cfg, 4, attention_scaling=1.0)
    for bad in ("1.0", True, torch.tensor(1.0), None.__class__):
        with pytest.raises(TypeError, match="attention_scaling must be a real number"):
            hf_rope(cfg, 4, inv_freq=m.inv_freq, attention_scaling=bad)
    with pytest.raises(ValueError, match="inv_freq must be one-dimensional"):
        hf_rope(cfg, 4, inv_freq=m.inv_freq[None], attention_scaling=1.0)
    with pytest.raises(TypeError, match="inv_freq must hold floats"):
        hf_rope(cfg, 4, inv_freq=torch.arange(32), attention_scaling=1.0)
    from transformers import Llama4TextConfig  # a refused form stays refused
    with pytest.raises(NotImplementedError, match="llama4_text"):
        hf_rope(Llama4TextConfig(), 4, inv_freq=m.inv_freq, attention_scaling=1.0)


def _through(kind):
    """hf_rope reading the config through its snapshot, its text, or its to_dict()'s."""
    from sinpe._hf.config import config_from_text, config_text, snapshot

    def fn(config, position_ids, **kw):
        lt = kw.get("layer_type")
        if kind == "snapshot":
            config = snapshot(config, lt)
        elif kind == "text":
            config = config_from_text(config_text(config, lt))
        else:
            config = config_from_text(config_text(config.to_dict(), lt))
        return hf_rope(config, position_ids, **kw)
    return fn


#: the sample, with vision towers (axial layouts), Gemma 4's heterogeneous per-layer config and
#: more mrope forms
SNAPSHOT_FAMILIES = ["gemma4", "qwen2_5_vl", "qwen3_vl", "glm4v", "pixtral", "sam3",
                     "minimax_m3_vl", "gemma3"]


@pytest.mark.parametrize("kind", ["snapshot", "text", "dict text"])
def test_snapshot_and_text_read_as_the_config(kind):
    """hf_rope of snapshot(config, layer_type), of config_from_text(config_text(...)) and of
    the text of config.to_dict() gives what hf_rope of the config gives (the same bits, or
    the same refusal), over the coverage sample's families and a few more (vision axial
    layouts, Gemma 4's heterogeneous per-layer views, mrope), every rope type column."""
    from conftest import hf_coverage_harness
    H = hf_coverage_harness()
    fams = [f for f, _ in H.SAMPLE] + [f for f in SNAPSHOT_FAMILIES
                                       if f not in {g for g, _ in H.SAMPLE}]
    want = {(r["family"], r["class"]): r for r in H.walk(fams, hf_rope, H.COLUMNS, ["bfloat16"])}
    got = {(r["family"], r["class"]): r for r in H.walk(fams, _through(kind), H.COLUMNS,
                                                        ["bfloat16"])}
    assert set(got) == set(want)
    bit = 0
    for key, row in want.items():
        for rt, case in row["cases"].items():
            assert got[key]["cases"][rt]["status"] == case["status"], (key, rt)
            bit += case["status"] == H.BIT
    assert bit > 150  # most cases are bit for bit (the rest: refused alike)


def test_config_text_keeps_types_and_values():
    import math
    from sinpe._hf import config as C
    nan = float.fromhex("-0x1.8p+1023") * 0 + float("nan")
    d = {"rope_parameters": {"t": (1, 1.0, True, None, "s"), "l": [1, 2.5, False],
                             "f": [float("inf"), -float("inf"), -0.0, 1e-320],
                             "np": [np.float32(1.5), np.int64(-3), np.bool_(True),
                                    np.float16(0.1), np.uint8(7)],
                             "a": np.arange(6, dtype=np.float32).reshape(2, 3),
                             "keys": {0: "int key", "$tag": "dollar key", (1, 2): [3]},
                             "nan": nan},
         "model_type": "llama", "hidden_size": 64}
    snap = C.snapshot(d)
    text = C.config_text(d)
    assert text == C.config_text(C.config_from_text(text))  # canonical
    back = C.config_from_text(text)
    assert back is C.config_from_text(text)  # one dict per text: its reading is kept

    def same(a, b):
        if type(a) is not type(b):
            return False
        if isinstance(a, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        if isinstance(a, (list, tuple)):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        if isinstance(a, np.ndarray):
            return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
        if isinstance(a, (float, np.generic)):
            return np.asarray(a).tobytes() == np.asarray(b).tobytes()
        return a == b
    assert same(back, snap)
    assert math.copysign(1, back["rope_parameters"]["f"][2]) == -1
    assert json_loadable(text)
    # the same values in another key order: the same text
    shuffled = {"hidden_size": 64, "model_type": "llama",
                "rope_parameters": dict(reversed(list(d["rope_parameters"].items())))}
    assert C.config_text(shuffled) == text
    # ints, floats and bools are told apart
    texts = {C.config_text({"hidden_size": v}) for v in (1, 1.0, True, np.int64(1),
                                                         np.float64(1))}
    assert len(texts) == 5
    for bad, where in (({"rope_parameters": {"x": [1, object()]}}, r"\['x'\]\[1\]"),
                       ({"head_dim": torch.tensor(64)}, r"\['head_dim'\]"),
                       ({"rope_theta": type("F", (float,), {})(1.0)}, r"\['rope_theta'\]")):
        with pytest.raises(TypeError, match=where):
            C.config_text(bad)
    for bad in ("not json", "[1, 2]"):
        with pytest.raises(ValueError, match="config is not a config's text"):
            C.config_from_text(bad)
    with pytest.raises(TypeError, match="config must be a config's text"):
        C.config_from_text(b"{}")
    for i in range(C._FROM_TEXT_MAX + 10):  # bounded
        C.config_from_text(C.config_text({"hidden_size": i}))
    assert len(C._FROM_TEXT) == C._FROM_TEXT_MAX


def json_loadable(text):
    import json
    json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    return True


def test_snapshot_keeps_what_is_absent_absent_and_is_a_copy():
    from transformers import Gemma3TextConfig, Qwen2VLConfig
    from sinpe._hf.config import snapshot
    d = {"hidden_size": 64, "num_attention_heads": 4, "rope_theta": None, "id2label": {},
         "rope_parameters": {"rope_type": "default"}}
    s = snapshot(d)
    assert s == {"hidden_size": 64, "num_attention_heads": 4, "rope_theta": None,
                 "rope_parameters": {"rope_type": "default"}}  # no head_dim key, None kept
    d["rope_parameters"]["rope_type"] = "linear"
    assert s["rope_parameters"]["rope_type"] == "default"
    q = snapshot(Qwen2VLConfig())  # the text part's view
    assert q["model_type"] == "qwen2_vl_text" and "text_config" not in q
    g = Gemma3TextConfig()
    assert set(snapshot(g, "full_attention")["rope_parameters"]) == \
        {"full_attention", "sliding_attention"}
