"""Which form of transformers' (5.24.0) rotary module each model type has: the tables
:func:`sinpe._hf.hf_rope` dispatches on (by ``config.model_type``), read from each family's
own modeling file."""
from __future__ import annotations

#: model types whose own ``compute_default_rope_parameters`` honours partial_rotary_factor
#: (transformers 5.24.0; Llama's and most others' use the whole head_dim).
PARTIAL_DEFAULT = frozenset({
    "bamba", "deepseek_v4", "diffusion_gemma_text", "dots3_note_audio_encoder",
    "dots3_note_text", "glm", "glm4", "glm4_moe", "glm4_moe_lite", "glm4v_moe_text",
    "glm4v_text", "glm_image_text", "glm_ocr_text", "glmasr", "gpt_neox", "gpt_neox_japanese",
    "laguna", "mellum", "minimax_m2", "minimax_m3_vl", "moonshine", "moonshine_streaming",
    "nemotron", "neomme", "persimmon", "phi", "phi3", "phi4_multimodal", "qwen3_5_moe_text",
    "qwen3_5_text", "qwen3_next", "qwen4_exp_text", "recurrent_gemma", "solar_open",
    "stablelm", "step3p7", "zaya",
    # sub-configs of their own model type
    "glmasr_encoder", "nemotron3_5_transcribe_asr_audio", "nemotron3_5_transcribe_word_timestamp",
    "mimo_v2_flash"})
#: the default init's fallback when rope_parameters has no partial_rotary_factor.
PARTIAL_FALLBACK = {"mimo_v2_flash": 0.334}
#: ``emb = repeat_interleave(freqs, 2)`` instead of ``cat(freqs, freqs)`` (Cohere's pairs).
INTERLEAVED = frozenset({"cohere", "cohere2", "cohere2_moe", "blt",
                         "blt_local_encoder", "blt_local_decoder", "blt_global_transformer",
                         "blt_patcher"})
#: ``emb = freqs`` (no duplication: the tables are head_dim / 2 wide).
HALF_WIDTH = frozenset({"gpt_oss", "openai_privacy_filter", "deepseek_v4"})
#: modules that return float32 whatever x's dtype (no ``.to(x.dtype)``).
NO_CAST = frozenset({"olmo", "olmo2", "olmo3", "flex_olmo", "olmo_hybrid", "ernie4_5",
                     "ernie4_5_moe", "beam", "lfm3"})
#: multimodal rope: model type -> (recomposition, expanded half, default mrope_section).
MROPE = {
    "qwen2_vl_text": ("chunks", "cat", [16, 24, 24]),
    "qwen2_5_vl_text": ("chunks", "cat", [16, 24, 24]),
    "qwen2_vl": ("chunks", "cat", [16, 24, 24]),
    "qwen2_5_vl": ("chunks", "cat", [16, 24, 24]),
    "glm4v_text": ("chunks", "interleave", [8, 12, 12]),
    "qwen3_vl_text": ("thw", "cat", [24, 20, 20]),
    # Qwen3-VL: T everywhere, H at 1::3 and W at 2::3 up to 3 * section, then cat
    "qwen3_vl_moe_text": ("thw", "cat", [24, 20, 20]),
    "qwen3_omni_moe_text": ("thw", "cat", [24, 20, 20]),
    "cosmos3_edge_text": ("thw", "cat", [24, 20, 20]),
    "hy_v4_vl_text": ("thw", "cat", [24, 20, 20]),
    "cohere_compass_text": ("thw", "cat", [24, 20, 20]),  # per layer type
    "qwen3_5_text": ("thw", "cat", [11, 11, 10]),
    "qwen3_5_moe_text": ("thw", "cat", [11, 11, 10]),
    "qwen4_exp_text": ("thw", "cat", [11, 11, 10]),
    # Qwen2-VL: chunks m[i % 3] of split(mrope_section), then cat
    "paddleocr_vl_text": ("chunks", "cat", [16, 24, 24]),
    "qwen2_5_omni_text": ("chunks", "cat", [16, 24, 24]),
    "qwen2_5_omni_thinker": ("chunks", "cat", [16, 24, 24]),
    "glm4v_moe_text": ("chunks", "cat", [8, 12, 12]),
    "glm_image_text": ("chunks", "cat", [8, 12, 12]),
    # GLM-4V text: chunks, then repeat_interleave(2)
    "glm_ocr_text": ("chunks", "interleave", [8, 12, 12]),
    # HunYuan-VL: one row per mrope_section entry; cat(freqs, freqs), then chunks of widths
    # 2 * mrope_section from row i % len(mrope_section) (the section is required)
    "hunyuan_vl_text": ("full", "cat", None),
    # NeoMME: two axes (row, column) alternating column by column (row0-col0-row1-col1: half
    # column j from row j % 2), then cat; in code, whatever mrope_section says
    "neomme": ("alternate", "cat", None),
}
#: families whose rotary module is something else (complex polar tables, per-call mscale
#: switches, learned scales, precomputed sincos tables).
OTHER = frozenset({"llama4_text", "llama4", "deepseek_v2", "phimoe", "mistral_large4",
                   "codegen", "gptj", "ernie4_5_vl_moe_text"})
#: families whose module renames a "dynamic" rope with a fixed rope_parameters['alpha'] to
#: "ntk_alpha": the base stretched once (alpha ** (dim / (dim - 2))), never regrown.
NTK_ALPHA = frozenset({"hunyuan_vl_text"})
