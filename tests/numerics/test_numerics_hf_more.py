"""sinpe.presets.hf_rope on the families sinpe._hf.axial and sinpe._hf.families add, against the
installed transformers' own rotary modules, bit for bit (bit patterns, never a tolerance): the
vision towers' axial 2D rope (every layout: Qwen-VL-style h, w, h, w; SAM's interleaved pairs
with a leading axis; Gemma 4's h, h, w, w on (batch, N, 2) positions; Inkling 2; Kimi-K2.5;
Step3p7; MiniMax-M3-VL; Pixtral), multimodal rope under more model types (the in-code default
mrope_section applied when the config has none), the partial-factor and interleaved families
under their sub-configs' model types, and heterogeneous per-layer configs (Gemma 4 text), also
as ``to_dict()`` dicts. The module is the oracle: tools/hf_rope_coverage.py's harness, run
in-process on these families, and direct module calls for the rest."""
import copy

import numpy as np
import pytest

from conftest import TORCH_FREE, hf_coverage_harness, same

if not TORCH_FREE:  # the torch-free passes deselect every test here (needs_torch)
    import torch
    from sinpe.presets import hf_rope

pytestmark = [pytest.mark.needs_torch, pytest.mark.oracle_packages]

DTYPES = ["float32", "float16", "bfloat16"]
H = hf_coverage_harness()  # loaded once for the session, shared with the coverage tests

#: (family, rotary class): one per form added, run by the coverage harness (its configs,
#: positions, dtypes and both position sets) for the native and default columns (and every
#: scaled column for the text rotaries).
CASES = [
    ("qwen3_5", "Qwen3_5VisionRotaryEmbedding"),          # axial h, w, h, w
    ("qwen2_vl", "Qwen2VLVisionRotaryEmbedding"),         # the same, head_dim from embed_dim
    ("muse_spark", "MuseSparkVisionRotaryEmbedding"),     # the same, cast to x's dtype
    ("sam3", "Sam3ViTRotaryEmbedding"),                   # [h, w] pairs, leading axis
    ("sam2_video", "Sam2VideoVisionRotaryEmbedding"),     # the same, memory_attention dims
    ("gemma4", "Gemma4VisionRotaryEmbedding"),            # h, h, w, w on (batch, N, 2)
    ("inkling2", "Inkling2VisionRotaryEmbedding"),        # [w, h] pairs
    ("kimi_k25", "Kimi_K25VisionRotaryEmbedding"),        # w, h per frequency
    ("step3p7", "Step3p7VisionRotaryEmbedding"),          # all w, then all h
    ("minimax_m3_vl", "MiniMaxM3VLVisionRotaryEmbedding"),  # flatten, spatial 2*(d//3//2)
    ("pixtral", "PixtralVisionRotaryEmbedding"),          # full-dim inv_freq, reordered
    ("qwen3_5", "Qwen3_5TextRotaryEmbedding"),            # Qwen3-VL mrope, default [11,11,10]
    ("paddleocr_vl", "PaddleOCRRotaryEmbedding"),         # Qwen2-VL mrope
    ("glm_ocr", "GlmOcrTextRotaryEmbedding"),             # chunks, repeat_interleave
    ("glm4v_moe", "Glm4vMoeTextRotaryEmbedding"),         # chunks, cat, [8, 12, 12]
    ("cohere_compass", "CohereCompassRotaryEmbedding"),   # Qwen3-VL mrope per layer type
    ("gemma4", "Gemma4TextRotaryEmbedding"),              # heterogeneous per-layer config
    ("glmasr", "GlmAsrRotaryEmbedding"),                  # partial default, glmasr_encoder
    ("mimo_v2_flash", "MiMoV2FlashRotaryEmbedding"),      # partial fallback 0.334
    ("blt", "BltRotaryEmbedding"),                        # interleaved, blt_local_encoder
]
VISION = {c for _, c in CASES if "Vision" in c or c == "Sam3ViTRotaryEmbedding"}


@pytest.fixture(scope="module")
def rows():
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    out = {}
    try:
        for fam, cls in CASES:
            cols = ["native", "default"] if cls in VISION else H.COLUMNS
            for r in H.walk([fam], hf_rope, cols, H.DTYPES, {cls}):
                out[(r["family"], r["class"])] = r
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.mark.parametrize("family,cls", CASES, ids=[f"{f}-{c}" for f, c in CASES])
def test_family_bit_for_bit(rows, family, cls):
    row = rows.get((family, cls))
    assert row is not None, f"{family}/{cls} was not walked (renamed in this transformers?)"
    # (a config class whose own defaults make its module fail, GLM-4V-MoE's [8, 12, 12]
    # section on a small head_dim, has no native case)
    bad = {rt: c["status"] for rt, c in row["cases"].items()
           if H.category(c["status"]) not in (H.BIT, H.REJECTS)
           and not (rt == "native" and "own defaults do not run" in c["status"])}
    assert not bad, bad
    assert H.category(row["cases"]["default"]["status"]) == H.BIT


# ---- direct module calls ---------------------------------------------------------------------

def test_same_fails_on_a_short_result():
    """The comparison itself (tests/conftest.py's same): a result with fewer arrays than the
    module's is not the same (a zip over both would compare nothing past the shorter)."""
    pair = (torch.zeros(2, 3), torch.ones(2, 3))
    assert same((np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32)), pair)
    for short in ((), (np.zeros((2, 3), np.float32),)):
        assert not same(short, pair)
    assert not same((np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)), pair)
    assert not same(np.zeros((2, 3), np.float32), pair)


def _module(name, cls):
    import importlib
    return getattr(importlib.import_module(f"transformers.models.{name}.modeling_{name}"), cls)


def test_mrope_without_section_uses_the_in_code_default():
    from transformers import Qwen3VLMoeTextConfig
    cfg = Qwen3VLMoeTextConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                               head_dim=16, rope_parameters={"rope_type": "default",
                                                             "rope_theta": 10000.0})
    assert "mrope_section" not in cfg.rope_parameters
    rot = _module("qwen3_vl_moe", "Qwen3VLMoeTextRotaryEmbedding")(copy.deepcopy(cfg))
    # the in-code default [24, 20, 20] indexes past dim / 2 = 8: the slices just stop there
    pos = np.stack([np.arange(12) + 3, np.arange(12) // 2, np.arange(12) % 5])[:, None]
    for dt in DTYPES:
        want = rot(torch.zeros(1, 12, 8, dtype=getattr(torch, dt)), torch.from_numpy(pos))
        assert same(hf_rope(cfg, pos, dtype=dt), want)
        assert hf_rope(cfg, pos, dtype=dt)[0].shape == (1, 12, 16)


def test_heterogeneous_config_as_a_dict():
    from transformers import Gemma4TextConfig
    cfg = Gemma4TextConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                           head_dim=16, global_head_dim=32, num_hidden_layers=6,
                           max_position_embeddings=128)
    assert cfg.is_heterogeneous
    rot = _module("gemma4", "Gemma4TextRotaryEmbedding")(copy.deepcopy(cfg))
    pos = np.stack([np.arange(20), np.arange(20) + 90])
    d = cfg.to_dict()
    for lt in sorted(set(cfg.layer_types)):
        want = rot(torch.zeros(1, 20, 8), torch.from_numpy(pos), lt)
        assert same(hf_rope(cfg, pos, layer_type=lt), want)
        assert same(hf_rope(d, pos, layer_type=lt), want)
    widths = {lt: hf_rope(cfg, pos, layer_type=lt)[0].shape[-1] for lt in set(cfg.layer_types)}
    assert widths == {"sliding_attention": 16, "full_attention": 32}


def test_axial_as_a_dict_and_with_a_module_buffer():
    from transformers import Qwen3VLVisionConfig
    cfg = Qwen3VLVisionConfig(hidden_size=64, num_heads=4)
    rot = _module("qwen3_vl", "Qwen3VLVisionRotaryEmbedding")(copy.deepcopy(cfg))
    hw = np.stack([np.arange(30) // 6 + 2, np.arange(30) % 6], axis=-1)
    want = rot(torch.zeros(1, 30, 8, dtype=torch.bfloat16), torch.from_numpy(hw))
    assert same(hf_rope(cfg.to_dict(), hw, dtype="bfloat16"), want)  # float32: the module's own
    assert same(hf_rope(cfg, hw, inv_freq=rot.inv_freq), want)


def test_refusals():
    from transformers import Qwen3VLVisionConfig
    vis = Qwen3VLVisionConfig(hidden_size=64, num_heads=4)
    hw = np.stack([np.arange(6), np.arange(6)], axis=-1)
    with pytest.raises(ValueError, match="shape"):
        hf_rope(vis, hw.T)  # (2, N): not the module's (N, 2)
    with pytest.raises(ValueError, match="shape"):
        hf_rope(vis, hw[None])
    with pytest.raises(TypeError, match="coordinates"):
        hf_rope(vis, 6)
    with pytest.raises(ValueError, match="layer_type"):
        hf_rope(vis, hw, layer_type="full_attention")
    lin = dict(vis.to_dict(), rope_parameters={"rope_type": "linear", "factor": 2.0,
                                               "rope_theta": 10000.0})
    with pytest.raises(ValueError, match="only rope_type 'axial'"):
        hf_rope(lin, hw)  # the module refuses it too
    d = dict(vis.to_dict(), model_type="some_new_vision")
    with pytest.raises(NotImplementedError, match="axial"):
        hf_rope(d, hw)
    odd = {"model_type": "neomme", "hidden_size": 24, "num_attention_heads": 4,
           "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
    with pytest.raises(ValueError, match="must be even"):  # NeoMME stacks even/odd halves
        hf_rope(odd, np.arange(8)[None])


@pytest.mark.parametrize("dtype", DTYPES)
def test_partial_factor_under_every_config_of_a_shared_rotary(dtype):
    """Nemotron 3.5 Transcribe's one rotary class serves two configs of their own model types
    (its ASR audio encoder's and its word-timestamp encoder's), both honouring
    partial_rotary_factor; hf_rope read only the first as partial (the word-timestamp one gave
    inv_freq of the whole head_dim: found by the patch coverage harness once it built the
    family)."""
    from transformers import AutoConfig
    from transformers.models.nemotron3_5_transcribe import modeling_nemotron3_5_transcribe as M
    for mt in ("nemotron3_5_transcribe_asr_audio", "nemotron3_5_transcribe_word_timestamp"):
        kw = {"hidden_size": 64, "num_attention_heads": 4,
              "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                  "partial_rotary_factor": 0.5}}
        if mt.endswith("timestamp"):
            kw.update(vocab_size=128, blank_token_id=127)
        cfg = AutoConfig.for_model(mt, **kw)
        m = M.Nemotron3_5TranscribeRotaryEmbedding(cfg)
        assert m.inv_freq.shape == (4,)
        x = torch.zeros(1, dtype=getattr(torch, dtype))
        pos = torch.arange(300)[None] * 7
        want = m(x, pos)
        got = hf_rope(cfg, pos, dtype=dtype)
        for g, w in zip(got, want):
            assert same(np.asarray(g.view(np.int16) if g.dtype.itemsize == 2 else g),
                        w.view(torch.int16).numpy() if w.element_size() == 2 else w.numpy()), mt
