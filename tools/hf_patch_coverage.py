"""Coverage of sinpe.torch.patch on whole tiny transformers models, bit for bit.

For every family of the installed transformers with a ``*RotaryEmbedding`` class (the families
of tools/hf_rope_coverage.py), builds a tiny random-weight model from the family's config
class (hidden 64, 4 heads, 2 KV heads, head_dim 16, 2 layers, vocabulary 128, the family's
own rope parameters), runs it on fixed input ids and compares, bit for bit (never a
tolerance), the model's output (logits, or the last hidden state for a model without a
language-model head) with the same model patched by ``sinpe.torch.patch``:

  float32                      patched at float32
  bfloat16, cast then patch    ``model.to(torch.bfloat16)`` then ``patch``
  bfloat16, patch then cast    ``patch`` then ``model.to(torch.bfloat16)``
  generate                     8 greedy new tokens (causal LMs), float32

Each family gets one status:
  bit-for-bit            every column equal in every bit
  differs                n of m values differ (the column named)
  refused: <reason>      patch raised NotImplementedError (the model is left as it was)
  no build: <reason>     no tiny model of the family runs on input ids alone (multimodal
                         models needing pixel or audio inputs, configs that do not shrink)

    python tools/hf_patch_coverage.py --markdown docs/hf_patch_coverage.md
    python tools/hf_patch_coverage.py --families llama,gemma3,gpt_oss
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import inspect
import os
import platform
import signal
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))

SMALL = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
         "vocab_size": 128, "max_position_embeddings": 128, "pad_token_id": 0,
         "bos_token_id": 1, "eos_token_id": 2, "moe_intermediate_size": 32,
         "num_experts": 4, "n_routed_experts": 4, "num_local_experts": 4,
         "num_experts_per_tok": 2, "q_lora_rank": 32, "kv_lora_rank": 16,
         "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
         "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1}
#: per model type: sizes its config's validators require of a tiny model.
FIXES: Dict[str, Dict[str, Any]] = {
    "esmc": {"num_key_value_heads": 4},
    "zaya": {"num_experts_per_tok": 1},
    "bamba": {"attn_layer_indices": [1]},
    # its forward builds DynamicCache(config=...), which reads a layer count BltConfig lacks
    "blt": {"encoder_hash_byte_group_vocab": 256, "num_hidden_layers": 2},
    # BLT's local encoder and decoder project to and from the global model's (small) width
    "blt_local_encoder": {"hidden_size_global": 64},
    "blt_local_decoder": {"hidden_size_global": 64},
    "gemma4_text": {"vocab_size_per_layer_input": 128, "hidden_size_per_layer_input": 16},
    "longcat_flash": {"num_layers": 1, "zero_expert_num": 2},
    "gemma3n_text": {"num_kv_shared_layers": 0, "vocab_size_per_layer_input": 128,
                     "hidden_size_per_layer_input": 16},
    "ernie4_5_vl_moe_text": {"moe_intermediate_size": [32, 32]},
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"],
                         "position_embedding_type": "rope"},
    "zamba2": {"use_mem_rope": True},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},
    "cohere_compass_text": {"rope_parameters": {
        "full_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
    "dots1": {"n_shared_experts": 1},
    "chameleon": {"vocabulary_map": {"<image>": 127}},
    "esm": {"position_embedding_type": "rotary"},
    "diffusion_gemma_text": {"top_k_experts": 2},
    "step3p5": {"sliding_window": 16},
    "qwen4_exp_text": {"indexer_budget": 16, "indexer_compress_ratio": 4,
                       "layer_types": ["linear_attention", "indexed_attention"],
                       "indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16},
    "DbrxAttentionConfig": {"rope_theta": 10000.0, "clip_qkv": 8.0},
    "moonshine_streaming": {"num_key_value_heads": 4},
    "deepseek_ocr2_text": {"mlp_layer_types": ["dense", "sparse"]},
    # its sliding layers take their sizes from a per-layer config the tool does not shrink
    "dots3_note_text": {"layer_types": ["indexed_attention", "indexed_attention"]},
    # its text layers are NoPE (the config's rule); the rotary is the vision tower's
    "glm5_next_text": {"qk_rope_head_dim": 0},
    "unlimited_ocr_text": {"num_key_value_heads": 4},  # its eager attention repeats no heads
    "granite4_vision": {"deepstack_layer_map": [[0, 0], [1, 1]], "downsample_rate": "1/2",
                        "spatial_target_layers": [0, 1, 0, 1]},
    # flow heads conditioned on the backbone's hidden states: its (small) width
    "PocketTTSFlowHeadConfig": {"condition_dim": 64},
    "GradiumPhononTTSFlowHeadConfig": {"condition_dim": 64},
    "emu3": {"vocabulary_map": {"<|extra_200|>": 120, "<image>": 121,
                                "<|visual token 000000|>": 122, "<|visual token 000001|>": 123}},
    # its VQ tokenizer at small sizes too (241 M parameters otherwise)
    "emu3_vqgan": {"codebook_size": 64, "base_channels": 32, "channel_multiplier": [1, 1],
                   "num_res_blocks": 1, "attn_resolutions": [], "hidden_size": 64},
    "kyutai_speech_to_text": {"audio_pad_token_id": 1},
    "dia_decoder": {"cross_hidden_size": 64},  # the (small) encoder's width
    # CSM: its backbone width in the depth decoder, its codec's upsampling at the small width
    "csm_depth_decoder_model": {"backbone_hidden_size": 64},
    "mimi@sub": {"upsample_groups": 64},
    # its backbone's last stage width is the attention's: the default sizes (a few M)
    # (its matcher keeps every match, so the random model's scores are not all zero)
    "efficientloftr": {"hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 8,
                       "coarse_matching_threshold": 0.0, "coarse_matching_border_removal": 0},
    # codecs whose quantizer reads the acoustic and semantic states side by side (64 + 64)
    "neucodec": {"quantization_dim": 128, "num_key_value_heads": 4},
    "xcodec2": {"quantization_dim": 128, "num_key_value_heads": 4},
    # its word-timestamp head's blank class must lie in the small vocabulary
    "nemotron3_5_transcribe_word_timestamp": {"blank_token_id": 127},
    # the diarization head reads its (small) audio encoder's states
    "Nemotron3DiarizationHeadConfig": {"audio_hidden_size": 64},
    "codegen": {"rotary_dim": 8},
    "gptj": {"rotary_dim": 8},
}
#: per model type: attributes (dotted paths) set on the family's default config (tiny_config
#: small=None) where its sizes are wired to each other but its backbone's depth and width
#: are not: SAM 3's tracker (466 M parameters otherwise, 16 M so; its ViT's global-attention
#: layer among the two kept)
DEFAULT_FIXES: Dict[str, Dict[str, Any]] = {
    "sam3_tracker_video": {"vision_config.backbone_config.num_hidden_layers": 2,
                           "vision_config.backbone_config.hidden_size": 256,
                           "vision_config.backbone_config.intermediate_size": 512,
                           "vision_config.backbone_config.num_attention_heads": 4,
                           "vision_config.backbone_config.global_attn_indexes": [1]},
}
#: families whose random init leaves layers at zero that cut the rotary off the outputs
#: (EfficientLoFTR: zeroing its cos/sin changed none of its scores, hidden states or
#: attentions): those parameters are drawn again (seeded) before the comparison
REINIT_ZEROS = {"efficientloftr"}
#: a candidate model with more parameters than this (counted on the meta device) is not built
#: (nemotron3_diarization's speech encoder does not shrink: 99 M, built in 2 s).
MAX_PARAMS = 120_000_000
SEQ = 24
NEW_TOKENS = 8
TIMEOUT = 120.0
BIT = "bit-for-bit"


def _rope_tool() -> Any:
    spec = importlib.util.spec_from_file_location("hf_rope_coverage",
                                                  os.path.join(HERE, "hf_rope_coverage.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


class Timeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: Optional[float]):
    if not hasattr(signal, "setitimer") or not seconds:
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Timeout(f"over {seconds:.0f} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def model_types(family: str) -> List[str]:
    """The model types whose config lives in the family's folder: the family's own first,
    then its sub-configs' (a text model inside a multimodal one)."""
    from transformers.models.auto.configuration_auto import (CONFIG_MAPPING_NAMES,
                                                             model_type_to_module_name)
    own = [mt for mt in CONFIG_MAPPING_NAMES if model_type_to_module_name(mt) == family]
    own.sort(key=lambda mt: ("text" not in mt, mt != family, mt))
    return own


def model_classes(mt: str) -> List[Tuple[str, Any]]:
    import transformers
    from transformers.models.auto import modeling_auto as ma
    out = []
    for kind, mapping in (("causal", ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES),
                          ("masked", ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES),
                          ("keypoints", ma.MODEL_FOR_KEYPOINT_MATCHING_MAPPING_NAMES),
                          ("base", ma.MODEL_MAPPING_NAMES),
                          ("segmentation", ma.MODEL_FOR_UNIVERSAL_SEGMENTATION_MAPPING_NAMES)):
        name = mapping.get(mt)
        if isinstance(name, (list, tuple)):
            name = name[0]
        cls = getattr(transformers, name, None) if name else None
        if cls is not None:
            out.append((kind, cls))
    return out


def _fields(cfg_cls: Any) -> set:
    import dataclasses
    names = set()
    if dataclasses.is_dataclass(cfg_cls):
        names |= {f.name for f in dataclasses.fields(cfg_cls)}
    try:
        names |= set(inspect.signature(cfg_cls.__init__).parameters)
    except (TypeError, ValueError):
        pass
    return names


def _small_kwargs(cfg_cls: Any, depth: int = 0) -> Dict[str, Any]:
    """The small sizes for cfg_cls, and (as dicts) for its sub-configs: a multimodal model's
    vision or audio tower is built, though only input ids are fed."""
    fields = _fields(cfg_cls)
    amap = getattr(cfg_cls, "attribute_map", {}) or {}
    kw: Dict[str, Any] = {}
    for k, v in SMALL.items():
        name = k if k in fields else amap.get(k)
        if name in fields:
            kw[name] = v
    if "qk_rope_head_dim" in fields and "head_dim" in kw:  # MLA: the rotary's dim
        kw["head_dim"] = SMALL["qk_rope_head_dim"]
    if "qk_rope_head_dim" in fields and "num_key_value_heads" in kw:
        kw["num_key_value_heads"] = SMALL["num_attention_heads"]
    lt_name = "layer_types" if "layer_types" in fields else amap.get("layer_types")
    lts = _distinct_layer_types(cfg_cls) if lt_name in fields else None
    if lts:  # one layer of each kind (a hybrid's attention layers come after linear ones)
        kw[lt_name] = lts
        n = amap.get("num_hidden_layers", "num_hidden_layers")
        if n in fields:
            kw[n] = len(lts)
    if "rope_parameters" in fields:
        rp = _small_mrope(cfg_cls, kw)
        if rp is not None:
            kw["rope_parameters"] = rp
    name = getattr(cfg_cls, "model_type", "") or cfg_cls.__name__
    kw.update(FIXES.get(name, {}))
    if depth:  # fixes of a config only where another family's config holds it
        kw.update(FIXES.get(name + "@sub", {}))
    if depth < 3:
        for key, sub in _sub_configs(cfg_cls).items():
            if key in fields:
                sk = _small_kwargs(sub, depth + 1)
                for k in ("bos_token_id", "eos_token_id"):
                    sk.pop(k, None)
                if getattr(sub, "model_type", ""):
                    sk["model_type"] = sub.model_type
                kw[key] = sk
    return kw


def _small_mrope(cfg_cls: Any, kw: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The default config's rope_parameters with each mrope_section rescaled to the small
    rotary width (configs that validate the sections when they are made); None when the
    default has no mrope_section."""
    global _ROPE_TOOL
    import copy
    try:
        rp = copy.deepcopy(getattr(cfg_cls(), "rope_parameters", None))
    except Exception:
        return None
    if not isinstance(rp, dict):
        return None
    dicts = [rp] if "mrope_section" in rp else [v for v in rp.values() if isinstance(v, dict)]
    dicts = [d for d in dicts if d.get("mrope_section")]
    if not dicts:
        return None
    if _ROPE_TOOL is None:
        _ROPE_TOOL = _rope_tool()
    dim = kw.get("qk_rope_head_dim") or kw.get("head_dim") or SMALL["head_dim"]
    for d in dicts:
        half = int(dim * d.get("partial_rotary_factor", 1.0)) // 2
        d["mrope_section"] = _ROPE_TOOL.mrope_sections(half, list(d["mrope_section"]))
    return rp


def _distinct_layer_types(cfg_cls: Any) -> Optional[List[str]]:
    """The kinds of layer of the family's default config, in order of first appearance."""
    try:
        lts = getattr(cfg_cls(), "layer_types", None)
    except Exception:
        return None
    if not isinstance(lts, (list, tuple)) or not lts or not all(isinstance(t, str) for t in lts):
        return None
    out: List[str] = []
    for t in lts:
        if t not in out:
            out.append(t)
    return out if len(out) > 1 else None


def _sub_configs(cfg_cls: Any) -> Dict[str, Any]:
    """key -> the concrete config class of each sub-config (a vision or audio tower, a text
    model given as ``AutoConfig`` with a model type, or a hybrid's attention config)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    out: Dict[str, Any] = {}
    specs = getattr(cfg_cls, "sub_configs_defaults", None) or {}
    for key, spec in specs.items():
        cls = getattr(spec, "config_class", spec)
        mt = getattr(spec, "model_type", None)
        if not isinstance(cls, type) or (mt and not getattr(cls, "model_type", "")):
            cls = CONFIG_MAPPING[mt] if mt in CONFIG_MAPPING else None
        if isinstance(cls, type):
            out[key] = cls
    if not specs:
        for key, sub in (getattr(cfg_cls, "sub_configs", None) or {}).items():
            if isinstance(sub, type):
                out[key] = sub
    return out


_ROPE_TOOL: Any = None


def _fit_mrope(cfg: Any) -> None:
    """A multimodal rope's mrope_section rescaled to the small rotary dim (it must sum to
    rot_dim / 2), in the config and its text config."""
    global _ROPE_TOOL
    if _ROPE_TOOL is None:
        _ROPE_TOOL = _rope_tool()
    seen = set()
    for c in (cfg, cfg.get_text_config() if hasattr(cfg, "get_text_config") else None):
        if c is None or id(c) in seen:
            continue
        seen.add(id(c))
        rp = getattr(c, "rope_parameters", None)
        if not isinstance(rp, dict):
            continue
        dicts = [(None, rp)] if "rope_type" in rp or "mrope_section" in rp else \
            [(k, v) for k, v in rp.items() if isinstance(v, dict)]
        for lt, d in dicts:
            sec = d.get("mrope_section")
            if not sec and _mentions_mrope(c):  # the module's in-code default is too wide
                sec = [2, 3, 3]
            if sec:
                half = _ROPE_TOOL.rotary_dim(c, lt) // 2
                d["mrope_section"] = _ROPE_TOOL.mrope_sections(half, list(sec))


def _mentions_mrope(cfg: Any) -> bool:
    import importlib
    from transformers.models.auto.configuration_auto import model_type_to_module_name
    mod = model_type_to_module_name(getattr(cfg, "model_type", "") or "")
    try:
        m = importlib.import_module(f"transformers.models.{mod}.modeling_{mod}")
        return "mrope_section" in inspect.getsource(m)
    except Exception:
        return False


def tiny_config(mt: str, small: Optional[bool] = True) -> Any:
    """small True: every size small; False: the family's own layer counts; None: the
    family's default config (a model whose sizes are wired to each other, a video tracker's:
    tried last, under the parameter bound)."""
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    if small is None:
        cfg = AutoConfig.for_model(mt)
        cfg._attn_implementation = "eager"
        for path, value in DEFAULT_FIXES.get(mt, {}).items():
            *outer, last = path.split(".")
            obj = cfg
            for name in outer:
                obj = getattr(obj, name)
            setattr(obj, last, value)
        return cfg
    cfg_cls = CONFIG_MAPPING[mt]
    fields = _fields(cfg_cls)
    try:
        cfg = AutoConfig.for_model(mt, **_small_kwargs(cfg_cls))
        if small:
            cfg._attn_implementation = "eager"
            _fit_mrope(cfg)
            return cfg
    except Exception:
        pass
    amap = getattr(cfg_cls, "attribute_map", {}) or {}
    kw = {}
    for k, v in SMALL.items():
        name = k if k in fields else amap.get(k)
        if name in fields:
            kw[name] = v
    if "qk_rope_head_dim" in fields and "head_dim" in kw:  # MLA: the rotary's dim
        kw["head_dim"] = SMALL["qk_rope_head_dim"]
    if "qk_rope_head_dim" in fields and "num_key_value_heads" in kw:
        kw["num_key_value_heads"] = SMALL["num_attention_heads"]
    if not small:  # the family's own layer count (hybrids whose attention layers come later)
        kw.pop(amap.get("num_hidden_layers", "num_hidden_layers"), None)
        kw.pop("num_hidden_layers", None)
    cfg = AutoConfig.for_model(mt, **kw)
    cfg._attn_implementation = "eager"
    return cfg


def build(family: str) -> Tuple[Any, str, str]:
    """(model, kind, model_type) of the first tiny model of the family that runs on ids:
    each candidate class at the small sizes, then at its own layer counts; only when none
    runs so, each at the family's default config (so a class that runs only at full size
    never displaces one that runs small)."""
    import torch
    errors = []
    no_rotary = set()
    candidates = [(mt, kind, cls) for mt in model_types(family)
                  for kind, cls in model_classes(mt)]
    for sizes in ((True, False), (None,)):
        for mt, kind, cls in candidates:
            for small in sizes:
                if cls in no_rotary:
                    break
                try:
                    cfg = tiny_config(mt, small)
                    with torch.device("meta"):
                        n = sum(p.numel() for p in cls._from_config(
                            cfg, attn_implementation="eager").parameters())
                    if n > MAX_PARAMS:
                        raise ValueError(f"{n / 1e6:.0f}M parameters at the small sizes "
                                         "(a sub-config that does not shrink)")
                    torch.manual_seed(0)
                    model = cls._from_config(cfg, attn_implementation="eager").eval()
                    if family in REINIT_ZEROS:
                        _reinit_zeros(model)
                    ids = inputs(model)
                    _run_some_feed(model, ids)
                    if not any(type(m).__name__.endswith("RotaryEmbedding")
                               for m in model.modules()):
                        errors.append(f"{cls.__name__}: no rotary module")
                        no_rotary.add(cls)
                        continue
                    return model, kind, mt
                except Timeout:
                    raise
                except Exception as e:  # the next candidate
                    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
                    first = " ".join(lines[:2]) if lines and lines[0].endswith(":") else \
                        (lines[0] if lines else "")
                    how = "" if small else " (own layer count)" if small is False else \
                        " (default config)"
                    errors.append(f"{cls.__name__}{how}: {type(e).__name__}: {first[:120]}")
    raise RuntimeError(errors[0] if errors else "no model class for input ids")


def _reinit_zeros(model: Any) -> None:
    import torch
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() and not p.abs().max():
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)


def inputs(model: Any) -> Any:
    import torch
    g = torch.Generator().manual_seed(1)
    vocab = int(getattr(model.config, "vocab_size", None) or
                getattr(model.config.get_text_config(), "vocab_size", 128) or 128)
    return torch.randint(3, max(4, min(vocab, 128)), (2, SEQ), generator=g)


#: model class name -> the index in FEEDS of the inputs its tiny model runs on.
_FEED: Dict[str, int] = {}


def _sub(cfg: Any, *names: str) -> Any:
    for n in names:
        c = getattr(cfg, n, None)
        if c is not None and not isinstance(c, (dict, str)):
            return c
    return cfg


def _feed(model: Any, ids: Any, variant: int) -> Dict[str, Any]:
    """The inputs of one call: input ids where the forward takes them; where it needs
    pixels, audio or a time series instead (or as well), the smallest valid random ones
    (variant: which of the layouts to try, the first that runs is kept)."""
    import torch
    params = inspect.signature(model.forward).parameters
    cfg = model.config
    dtype = next(model.parameters()).dtype
    g = torch.Generator().manual_seed(2)
    b = ids.shape[0]
    kw: Dict[str, Any] = {}
    if "inference_session" in params:  # a video tracker: frames and a first mask (_call)
        return {SESSION: variant}
    if "input_ids" in params:
        kw["input_ids"] = ids
        if variant == 2 and getattr(cfg, "codebook_vocab_size", None):  # text + audio streams
            kw["input_ids"] = ids[..., None].repeat(1, 1, 1 + int(cfg.num_codebooks))
    channels = getattr(getattr(cfg, "decoder_config", None), "num_channels", None)
    if "decoder_input_ids" in params and (getattr(cfg, "is_encoder_decoder", False) or
                                          "input_ids" not in params):
        kw["decoder_input_ids"] = ids
        if variant == 2 and channels:  # one decoder stream per audio channel
            kw["decoder_input_ids"] = ids[..., None].repeat(1, 1, int(channels))

    def need(name: str) -> bool:
        p = params.get(name)
        return p is not None and (p.default is inspect.Parameter.empty or
                                  "input_ids" not in params)
    if need("pixel_values") or (variant == 2 and "pixel_values" in params):  # 2: images too
        v = _sub(cfg, "vision_config")
        patch = int(getattr(v, "patch_size", 16) or 16)
        size = getattr(v, "image_size", 4 * patch)
        size = size if variant in (1, 2) and isinstance(size, int) else \
            8 * patch if variant == 3 else 4 * patch  # 3: a matcher's grid of 4 x 4 tokens
        kw["pixel_values"] = torch.randn(b, int(getattr(v, "num_channels", 3) or 3), size,
                                         size, generator=g).to(dtype)
        if variant == 2 and "image_attention_mask" in params:  # one image per sequence
            kw["pixel_values"] = kw["pixel_values"][:, None]
            kw["image_attention_mask"] = torch.ones(b, ids.shape[1], 1, dtype=torch.long)
        if variant == 3:  # image pairs (a keypoint matcher's)
            kw["pixel_values"] = torch.stack([kw["pixel_values"]] * 2, 1)
            kw["pixel_values"][:, 1] = torch.randn(kw["pixel_values"][:, 1].shape,
                                                   generator=g).to(dtype)
        if "image_sizes" in params:
            kw["image_sizes"] = torch.tensor([[size, size]] * b)
    if need("image_grid_thw"):  # a vision tower fed patches of a grid of 1 x 2 x 2 tokens
        merge = int(getattr(cfg, "spatial_merge_size", 1) or 1)
        patch = int(getattr(cfg, "patch_size", 14) or 14)
        chans = int(getattr(cfg, "num_channels", None) or getattr(cfg, "in_channels", 3) or 3)
        grid = torch.tensor([[1, 2, 2]])
        if variant == 0:  # one row per language-model token: (tokens, P m, P m, C) (Inkling 2)
            shape = (4, patch * merge, patch * merge, chans)
        else:  # one row per patch, flattened (Qwen2-VL's towers)
            tp = int(getattr(cfg, "temporal_patch_size", 1) or 1)
            grid = grid * torch.tensor([1, merge, merge])
            shape = (int(grid.prod()), chans * tp * patch * patch)
        kw["pixel_values"] = torch.randn(*shape, generator=g).clamp(-1, 1).to(dtype)
        kw["image_grid_thw"] = grid
    if need("input_features"):
        a = _sub(cfg, "audio_config", "encoder_config", "semantic_model_config")
        mel = int(getattr(a, "num_mel_bins", None) or getattr(a, "feature_size", None) or
                  getattr(a, "feature_projection_input_dim", None) or 80)  # (a codec's
        # semantic encoder reads stacked mel frames: their width)
        shape = (b, mel, 64) if variant == 0 else (b, 64, mel)
        if variant == 2 and need("input_values"):  # a codec: as many semantic frames as the
            shape = (b, 10, mel)                   # acoustic ones (3200 samples, hop 320)
        kw["input_features"] = torch.randn(*shape, generator=g).to(dtype)
    if need("input_values"):
        codec = variant == 2 and need("input_features")  # with (b, time, mel) features
        shape = (b, 1, 3200) if variant == 0 or codec else (b, 3200)
        kw["input_values"] = torch.randn(*shape, generator=g).to(dtype)
    if need("noise_embeds") and need("context_hidden_states"):  # a drafter (DFlash)
        hid = int(cfg.hidden_size)
        layers = len(getattr(cfg, "target_layer_ids", None) or [0])
        kw["noise_embeds"] = torch.randn(b, int(getattr(cfg, "block_size", 4) or 4), hid,
                                         generator=g).to(dtype)
        kw["context_hidden_states"] = torch.randn(b, 8, hid * layers, generator=g).to(dtype)
    if need("past_values"):
        kw["past_values"] = torch.randn(b, 64, generator=g).to(dtype)
    return kw


def _run_some_feed(model: Any, ids: Any) -> None:
    import torch
    err: Optional[BaseException] = None
    for variant in range(4):
        try:
            with torch.no_grad():
                _call(model, _feed(model, ids, variant))
            _FEED[type(model).__name__] = variant
            return
        except Timeout:
            raise
        except Exception as e:
            err = err or e
    assert err is not None
    raise err


#: _feed's key for a video tracker's call: _call makes the session and runs the frames
SESSION = "__inference_session__"
#: frames a tracker runs: the first with its mask prompt, the second through the memory
#: attention (the model's rotary) over the first's memory
FRAMES = 2


def _session_call(model: Any) -> Any:
    """A fresh inference session (the model module's own class) of FRAMES random frames at
    the config's image size, one object prompted by a random mask on frame 0, every frame
    run; the last frame's mask logits."""
    import importlib
    import types as _types
    import torch
    mod = importlib.import_module(type(model).__module__)
    sess = next(getattr(mod, n) for n in dir(mod) if n.endswith("InferenceSession"))
    dtype = next(model.parameters()).dtype
    size = int(getattr(model.config, "image_size", 1024))
    g = torch.Generator().manual_seed(2)
    video = torch.randn(FRAMES, 3, size, size, generator=g)
    s = sess(video=video, video_height=size, video_width=size, dtype=dtype)
    s.add_mask_inputs(s.obj_id_to_idx(0), 0,
                      (torch.randn(1, 1, size, size, generator=g) > 0).float())
    s.obj_with_new_inputs = [0]
    out = None
    for i in range(FRAMES):
        out = model(inference_session=s, frame_idx=i)
    return _types.SimpleNamespace(logits=out.pred_masks)


def _call(model: Any, kw: Dict[str, Any]) -> Any:
    if SESSION in kw:
        return _session_call(model)
    return model(**kw)


def output(model: Any, ids: Any) -> Any:
    """The model's output on the fixed inputs; torch's generator seeded first, so a model
    that draws noise in its forward (a diffusion model) draws the same noise every call."""
    import torch
    torch.manual_seed(0)
    out = _call(model, _feed(model, ids, _FEED.get(type(model).__name__, 0)))
    for name in ("logits", "last_hidden_state"):
        t = getattr(out, name, None)
        if t is not None:
            return t
    if hasattr(out, "values"):  # a ModelOutput's first float tensor (a matcher's scores),
        for t in out.values():    # or first tuple of tensors, flattened and joined
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                return t
            if isinstance(t, (tuple, list)) and t and all(isinstance(u, torch.Tensor)
                                                          for u in t):
                return torch.cat([u.flatten() for u in t])
    return out[0]


def bits(t: Any) -> Any:
    import torch
    t = t.detach()
    return t.view(torch.int16) if t.element_size() == 2 else t.view(torch.int32)


def ndiff(a: Any, b: Any) -> int:
    if a.shape != b.shape or a.dtype != b.dtype:
        return a.numel()
    return int((bits(a) != bits(b)).sum())


def check_family(family: str, backend: Optional[str] = None) -> Dict[str, Any]:
    import copy
    import torch
    import sinpe.torch as st
    row: Dict[str, Any] = {"family": family}
    try:
        model, kind, mt = build(family)
    except Timeout:
        raise
    except Exception as e:
        row.update(status="no build", reason=str(e))
        return row
    row.update(model=type(model).__name__, model_type=mt)
    ids = inputs(model)
    try:
        with torch.no_grad():
            ref32 = output(model, ids)
            st.patch(model, backend=backend)
            row["forms"] = sorted({r["form"] for r in st.patched(model)})
            got32 = output(model, ids)
            st.unpatch(model)
            m16 = copy.deepcopy(model).to(torch.bfloat16)
            ref16 = output(m16, ids)
            st.patch(m16, backend=backend)
            got16a = output(m16, ids)
            m16b = st.patch(copy.deepcopy(model), backend=backend).to(torch.bfloat16)
            got16b = output(m16b, ids)
    except NotImplementedError as e:
        row.update(status="refused", reason=str(e))
        return row
    diffs = {"float32": ndiff(ref32, got32), "bfloat16 cast, patch": ndiff(ref16, got16a),
             "bfloat16 patch, cast": ndiff(ref16, got16b)}
    if kind == "causal" and hasattr(model, "generate"):
        try:
            gen = dict(max_new_tokens=NEW_TOKENS, do_sample=False, min_new_tokens=NEW_TOKENS,
                       attention_mask=torch.ones_like(ids[:, :8]), pad_token_id=0)
            g0 = model.generate(ids[:, :8], **gen)
            st.patch(model, backend=backend)
            g1 = model.generate(ids[:, :8], **gen)
            st.unpatch(model)
            diffs["generate"] = 0 if torch.equal(g0, g1) else max(1, int((g0 != g1).sum()))
        except Exception as e:
            row["generate"] = f"not run: {type(e).__name__}"
    row["diffs"] = diffs
    row["values"] = ref32.numel()
    bad = {k: v for k, v in diffs.items() if v}
    row["status"] = BIT if not bad else "differs"
    if bad:
        row["reason"] = ", ".join(f"{k}: {v} of {ref32.numel()}" for k, v in bad.items())
    return row


def quiet() -> None:
    import logging
    import warnings
    warnings.filterwarnings("ignore")
    try:
        from transformers.utils import logging as hf_logging
        hf_logging.set_verbosity_error()
    except Exception:
        pass
    logging.getLogger("transformers").setLevel(logging.ERROR)


def markdown(rows: List[Dict[str, Any]], seconds: float, run: Optional[List[str]] = None,
             merged: Optional[List[str]] = None) -> str:
    import torch
    import transformers
    n = len(rows)
    ok = [r for r in rows if r["status"] == BIT]
    by = {s: [r for r in rows if r["status"] == s] for s in ("differs", "refused", "no build")}
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# sinpe.torch.patch coverage",
        "",
        f"Generated by `python tools/hf_patch_coverage.py` on {now}: transformers "
        f"{transformers.__version__}, torch {torch.__version__}, Python "
        f"{platform.python_version()}; walk time {seconds:.0f} s"
        + (f" for the {len(run)} families run now; the other rows come from "
           f"{len(merged)} earlier tables of this tool merged in (`--merge`)"
           if merged and run is not None else "") + ".",
        "",
        f"Families whose tiny model is bit for bit patched (float32, bfloat16 cast before and "
        f"after patching, greedy generate() of causal LMs): **{len(ok)} of {n}**; differs: "
        f"{len(by['differs'])}; refused by patch (NotImplementedError): {len(by['refused'])}; "
        f"no tiny model built: {len(by['no build'])}.",
        "",
        "| family | model | status | forms / reason |",
        "|---|---|---|---|",
    ]
    for r in rows:
        what = "; ".join(r.get("forms", [])) if r["status"] == BIT else r.get("reason", "")
        what = what.replace("|", "\\|").replace("\n", " ")
        out.append(f"| {r['family']} | {r.get('model', '')} | {r['status']} | {what} |")
    out.append("")
    return "\n".join(out)


def read_table(path: str) -> List[Dict[str, Any]]:
    """The rows of a table this tool wrote (for --merge)."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("| ") or line.startswith("| family "):
                continue
            cells = [c.strip().replace("\\|", "|") for c in
                     line.rstrip("\n").strip("|").replace("\\|", "\0").split("|")]
            cells = [c.replace("\0", "|") for c in cells]
            if len(cells) != 4:
                continue
            fam, model, status, what = cells
            row: Dict[str, Any] = {"family": fam, "model": model, "status": status}
            if status == BIT:
                row["forms"] = what.split("; ") if what else []
            else:
                row["reason"] = what
            rows.append(row)
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", "--only", dest="families",
                    help="comma-separated families (default: all)")
    ap.add_argument("--markdown", help="write the table to this file")
    ap.add_argument("--backend", default=None, help="patch's backend (default: torch's)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=TIMEOUT)
    ap.add_argument("-q", action="store_true", help="no progress lines")
    ap.add_argument("--merge", action="append", default=[],
                    help="a table this tool wrote: its rows stand for the families not run "
                         "now (repeatable, later files win); the output is the whole table")
    a = ap.parse_args(argv)
    import torch
    torch.set_num_threads(a.threads)
    quiet()
    fams = sorted(_rope_tool().families())
    if a.families:
        want = a.families.split(",")
        fams = [f for f in fams if f in want]
    rows = []
    t0 = time.time()
    for fam in fams:
        t = time.time()
        try:
            with time_limit(a.timeout):
                row = check_family(fam, a.backend)
        except Timeout as e:
            row = {"family": fam, "status": "no build", "reason": f"timeout ({e})"}
        except Exception as e:  # the harness's own failure, reported per family
            row = {"family": fam, "status": "no build",
                   "reason": f"harness: {type(e).__name__}: {str(e)[:160]}"}
        rows.append(row)
        if not a.q:
            print(f"{fam}: {row['status']} {row.get('reason', '')[:200]} "
                  f"({time.time() - t:.1f} s)", file=sys.stderr, flush=True)
    seconds = time.time() - t0
    if a.merge:
        merged: Dict[str, Dict[str, Any]] = {}
        for path in a.merge:
            merged.update({r["family"]: r for r in read_table(path)})
        run = [r["family"] for r in rows]
        merged.update({r["family"]: r for r in rows})
        rows = [merged[f] for f in sorted(merged)]
        md = markdown(rows, seconds, run, a.merge)
    else:
        md = markdown(rows, seconds)
    if a.markdown:
        with open(a.markdown, "w", encoding="utf-8") as f:
            f.write(md)
    else:
        print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
