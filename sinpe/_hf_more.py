"""More of transformers' rotary modules for :func:`sinpe.presets.hf_rope` (transformers
5.24.0): the model types of multimodal and partial-factor families that share a form
:mod:`sinpe._hf` already reproduces, the per-layer view of heterogeneous configs (Gemma 4),
and the vision towers' axial 2D rope (``rope_type`` "axial").

Each entry was read from the family's own modeling file and checked bit for bit against its
``*RotaryEmbedding`` (tools/hf_rope_coverage.py; tests/numerics/test_numerics_hf_more.py).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from ._jobs import COS, SIN, _admit, _int, _round_to, _table

F32 = np.float32

# ---- heterogeneous (per-layer) configs ------------------------------------------------------

#: the config attributes transformers' init functions read (a layer type whose layers
#: differ in one of them has no single view).
_READ = frozenset({"head_dim", "hidden_size", "num_attention_heads", "rope_parameters",
                   "partial_rotary_factor", "max_position_embeddings",
                   "original_max_position_embeddings", "rope_scaling", "rope_theta"})


def layer_config(config: Any, layer_type: Optional[str]) -> Any:
    """The config transformers' init reads for layer_type: ``config.per_layer_config
    [layer_type]`` on a heterogeneous config (Gemma 4: head_dim differs per layer type),
    the config itself when that raises ValueError (the init functions' ``except ValueError:
    pass``); for a ``to_dict()`` dict, its ``per_layer_config`` overrides (keyed by layer
    index) of the layers of that type, merged over the dict (a ValueError when those layers
    differ in an attribute the init reads).  Any other config is returned as it is."""
    if layer_type is None:
        return config
    if isinstance(config, dict):
        over = config.get("per_layer_config")
        types = config.get("layer_types")
        if not isinstance(over, dict) or not over or not isinstance(types, (list, tuple)) or \
                layer_type not in types:
            return config
        try:
            by_index = {int(k): v for k, v in over.items()}
        except (TypeError, ValueError):
            raise ValueError("config['per_layer_config'] must be keyed by layer index") from None
        if not all(isinstance(v, dict) for v in by_index.values()):
            raise TypeError("config['per_layer_config'] entries must be dicts")
        ref = by_index.get(list(types).index(layer_type), {})
        mine = [by_index.get(i, {}) for i, t in enumerate(types) if t == layer_type]
        if any(m != ref for m in mine):
            keys = set().union(*mine) & _READ
            if keys:
                raise ValueError(f"layer type {layer_type!r} is not homogeneous across layers "
                                 f"in {sorted(keys)}: transformers' rotary has no single "
                                 "config for it")
            return config
        out = dict(config)
        out.update(ref)
        out.pop("per_layer_config", None)
        return out
    try:
        hetero = bool(getattr(config, "is_heterogeneous", False))
    except Exception:
        hetero = False
    if not hetero:
        return config
    try:
        return config.per_layer_config[layer_type]
    except ValueError:  # not homogeneous: transformers' init functions fall back likewise
        return config


# ---- vision axial 2D rope ---------------------------------------------------------------------

#: model type -> (layout, head-dim source, cast to x's dtype).  Layouts, with freqs
#: ``position_ids[..., None].float() * inv_freq`` (N, A, n) and fh, fw = freqs[:, 0], [:, 1]:
#:   hwhw     cat([fh, fw, fh, fw])                       (Qwen2-VL's vision tower and kin)
#:   sam      cat([fh, fw])[None].repeat_interleave(2)    (SAM 3, SAM 2 video)
#:   hhww     cat([fh, fh, fw, fw]), positions (batch, N, 2)  (Gemma 4)
#:   wh_pairs cat([fw, fh]).repeat_interleave(2)           (Inkling 2)
#:   kimi     freqs.transpose(1, 2).flip(-1).flatten(1) twice  (w, h per frequency)
#:   step     freqs.flip(1).flatten(1) twice                (all w, then all h)
#:   flat     freqs.flatten(1) twice, any A axes           (MiniMax-M3-VL)
#:   pixtral  inv over the whole head_dim as cat(inv[0::2], inv[1::2]); fh from the first
#:            chunk of axis 0, fw from the second chunk of axis 1; cat([fh, fw, fh, fw])
#: head-dim source: "head" ``head_dim or hidden_size // num_attention_heads``; "embed" the same
#: with embed_dim (Qwen2-VL); "memory" ``memory_attention_hidden_size //
#: (memory_attention_downsample_rate * memory_attention_num_attention_heads)`` (SAM 2 video).
AXIAL: Dict[str, Tuple[str, str, bool]] = {
    **{mt: ("hwhw", "head", False) for mt in (
        "cohere_compass_vision", "dots3_note_vision_encoder", "ernie4_5_vl_moe_vision",
        "exaone4_5_vision", "glm4v_vision", "glm4v_moe_vision", "glm5_next_vision",
        "glm_ocr_vision", "lfm3_vl_vision", "mlcd_vision_model", "paddleocr_vl_vision",
        "qwen2_5_omni_vision_encoder", "qwen2_5_vl_vision", "qwen3_5_vision",
        "qwen3_5_moe_vision", "qwen3_omni_moe_vision_encoder", "qwen3_vl_vision",
        "qwen3_vl_moe_vision", "qwen4_exp_vision", "video_llama_3_vision")},
    "qwen2_vl_vision": ("hwhw", "embed", False),
    "muse_glimmer_vision": ("hwhw", "head", True),
    "muse_spark_vision": ("hwhw", "head", True),
    "sam3_vit_model": ("sam", "head", False),
    "sam2_video": ("sam", "memory", False),
    "edgetam_video": ("sam", "memory", False),
    "sam3_tracker_video": ("sam", "memory", False),
    "gemma4_vision": ("hhww", "head", True),
    "inkling2_vision": ("wh_pairs", "head", False),
    "kimi_k25_vision": ("kimi", "head", False),
    "step3p5_vision": ("step", "head", False),  # Step3p7VisionConfig's model_type
    "minimax_m3_vl_vision": ("flat", "head", True),
    "pixtral": ("pixtral", "head", True),
}


def _get(config: Any, key: str) -> Any:
    if isinstance(config, dict):  # to_dict() keeps attribute_map's targets (num_heads)
        v = config.get(key)
        return config.get("num_heads") if v is None and key == "num_attention_heads" else v
    return getattr(config, key, None)


def _axial_dim(config: Any, src: str) -> int:
    if src == "memory":
        h = _int(_get(config, "memory_attention_hidden_size"),
                 "config.memory_attention_hidden_size")
        r = _int(_get(config, "memory_attention_downsample_rate"),
                 "config.memory_attention_downsample_rate", minimum=1)
        n = _int(_get(config, "memory_attention_num_attention_heads"),
                 "config.memory_attention_num_attention_heads", minimum=1)
        return h // (r * n)
    hd = _get(config, "head_dim")
    if hd:
        return _int(hd, "config.head_dim")
    key = "embed_dim" if src == "embed" else "hidden_size"
    h = _int(_get(config, key), f"config.{key}", minimum=1)
    n = _int(_get(config, "num_attention_heads"), "config.num_attention_heads", minimum=1)
    return h // n


def _columns(layout: str, n: int, axes: int) -> Tuple[np.ndarray, np.ndarray]:
    """(axis, frequency) of each output column."""
    k = np.arange(n)
    h, w = np.zeros(n, np.int64), np.ones(n, np.int64)
    if layout == "hwhw":
        a, f = np.concatenate([h, w] * 2), np.concatenate([k] * 4)
    elif layout == "sam":
        a, f = np.repeat(np.concatenate([h, w]), 2), np.repeat(np.concatenate([k, k]), 2)
    elif layout == "hhww":
        a, f = np.concatenate([h, h, w, w]), np.concatenate([k] * 4)
    elif layout == "wh_pairs":
        a, f = np.repeat(np.concatenate([w, h]), 2), np.repeat(np.concatenate([k, k]), 2)
    elif layout == "kimi":
        one_a = np.stack([w, h], axis=1).ravel()
        one_f = np.repeat(k, 2)
        a, f = np.concatenate([one_a] * 2), np.concatenate([one_f] * 2)
    elif layout == "step":
        a, f = np.concatenate([w, h] * 2), np.concatenate([k] * 4)
    elif layout == "flat":
        one_a = np.repeat(np.arange(axes), n)
        one_f = np.tile(k, axes)
        a, f = np.concatenate([one_a] * 2), np.concatenate([one_f] * 2)
    else:  # pixtral: chunk(2) of the n frequencies: ceil(n / 2), then the rest
        c = -(-n // 2)
        a = np.concatenate([h[:c], w[c:]] * 2)
        f = np.concatenate([k[:c], k[c:]] * 2)
    return a, f


def axial_rope(c: Any, position_ids: Any, inv_freq: Any, opts: Dict[str, Any], dtype: Any,
               layer_type: Optional[str]) -> Tuple[np.ndarray, np.ndarray]:
    """The (cos, sin) of a vision tower's axial rotary (c: sinpe._hf's view of the config):
    ``freqs = position_ids[..., None].float() * inv_freq`` (float32), ``freqs.cos()``,
    ``freqs.sin()`` (attention scaling 1.0), recomposed by the family's layout (see
    :data:`AXIAL`); float32, or cast to x's dtype where the module casts.  inv_freq: the
    module's buffer, or None: ``1.0 / base ** (arange(0, s, 2).float() / s)`` with s =
    head_dim // 2 (``2 * ((head_dim // 3) // 2)`` for MiniMax-M3-VL; head_dim, then
    reordered ``cat(inv[0::2], inv[1::2])``, for Pixtral)."""
    from . import _hf as H  # (imported here: _hf imports this module)
    model_type = c.model_type
    spec = AXIAL.get(model_type)
    if spec is None:
        raise NotImplementedError(f"model_type {model_type!r} with rope_type 'axial': its vision "
                                  "rotary's layout is not one hf_rope knows")
    if c.p["rope_type"] != "axial":
        raise ValueError(f"model_type {model_type!r} is a vision axial rotary: its module "
                         f"supports only rope_type 'axial', got {c.p['rope_type']!r}")
    if layer_type is not None:
        raise ValueError("layer_type given, but a vision axial rotary's forward takes none")
    config = c.raw
    layout, src, cast = spec
    dim = _axial_dim(config, src)
    sd = dim if layout == "pixtral" else 2 * ((dim // 3) // 2) if layout == "flat" else dim // 2
    n = (sd + 1) // 2
    theta = H._theta(c)
    H._pow(theta, 1, 2, opts)  # rope_theta itself: refused here, by name, when not usable
    if isinstance(position_ids, (bool, int, np.integer, np.bool_)):
        raise TypeError("position_ids must be an array of (h, w) coordinates for a vision "
                        f"axial rotary, got {position_ids!r}")
    pos = H._positions(position_ids)
    if inv_freq is not None:
        inv = H._inv_given(inv_freq, n)[0]
    else:
        inv = H._recip(H._pow(theta, n, sd, opts)) if n else np.zeros(0, F32)
        if layout == "pixtral":
            inv = np.concatenate([inv[0::2], inv[1::2]])
    inv = np.ascontiguousarray(inv, F32)
    if layout == "hhww":
        if pos.ndim != 3 or pos.shape[-1] != 2:
            raise ValueError(f"position_ids must have shape (batch, N, 2) (h, w) for "
                             f"{model_type!r}, got {pos.shape}")
    elif pos.ndim != 2 or (layout != "flat" and pos.shape[-1] != 2) or pos.shape[-1] < 1:
        want = "(N, axes)" if layout == "flat" else "(N, 2) (h, w)"
        raise ValueError(f"position_ids must have shape {want} for {model_type!r}, got "
                         f"{pos.shape}")
    if layout == "pixtral" and n < 2:
        raise ValueError(f"head_dim {dim} gives {n} frequencies: Pixtral's rotary chunks them "
                         "in two (it fails below 2)")
    axes = pos.shape[-1]
    a, f = _columns(layout, n, axes)
    lead = pos.shape[:-1]
    shape = ((1,) if layout == "sam" else ()) + lead + (len(a),)
    _admit((3,) + pos.shape + (max(n, 1),), dict(opts, dtype=np.float32))
    _admit(shape, dict(opts, dtype=np.float32 if not cast else dtype))
    p = np.ascontiguousarray(pos)
    out = []
    for kind in (COS, SIN):
        if p.size and n:
            t = _table(p, inv, [4 * j + kind for j in range(n)], dict(opts, dtype=None),
                       names=("out", "position_ids", "head_dim"))
        else:
            t = np.zeros(pos.shape + (n,), F32)
        full = t[..., a, f]  # (..., columns): column c from axis a[c], frequency f[c]
        full = np.ascontiguousarray(full.reshape(shape))
        out.append(_round_to(full, dtype) if cast else full)
    return out[0], out[1]
