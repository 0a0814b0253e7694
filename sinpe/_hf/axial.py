"""The vision towers' axial 2D rope of :func:`sinpe.presets.hf_rope` (``rope_type``
"axial", transformers 5.24.0), and the array conversion hf_rope's inputs share.

Each layout was read from the family's own modeling file and checked bit for bit against its
``*RotaryEmbedding`` (tools/hf_rope_coverage.py; tests/numerics/test_numerics_hf_more.py).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, Optional, Tuple

import numpy as np

from .. import _tensors
from .._jobs import COS, SIN, _int, _table
from .._types import PresetOpts
from .inits import inv_freq as _inv_freq, theta as _theta

F32 = np.float32

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
#:   hw_repeat  stack([fh, fw], -1).flatten(-2).repeat_interleave(2): per frequency h, h,
#:            w, w (EfficientLoFTR's grid, whose forward takes the feature map: sinpe.torch.patch)
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


def array(x: Any, name: str) -> np.ndarray:
    """x (a NumPy array-like or a torch tensor of any device, bfloat16 as ml_dtypes') as a
    NumPy array (a tensor's values as torch's ops read them: sinpe._tensors.values)."""
    a = np.asarray(_tensors.values(x, name, keep_bfloat16=True, any_device=True))
    if a.dtype == object:
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__}")
    return a


def positions(position_ids: Any) -> np.ndarray:
    """position_ids as an array of numbers, at least 1-d."""
    a = array(position_ids, "position_ids")
    if a.dtype.kind not in "iuf" and a.dtype.name != "bfloat16":
        raise TypeError(f"position_ids must hold integers (or floats), got dtype {a.dtype}")
    if a.ndim < 1:
        raise ValueError(f"position_ids must have shape (batch, seq), got shape {a.shape}")
    return a


def given_inv(inv_freq: Any, n: Optional[int]) -> Tuple[np.ndarray, Any]:
    """A given inv_freq buffer as float32 (``.float()``), of n frequencies (any number when n
    is None), and its own dtype."""
    a = array(inv_freq, "inv_freq")
    if a.dtype.kind != "f" and a.dtype.name != "bfloat16":
        raise TypeError(f"inv_freq must hold floats, got dtype {a.dtype}")
    if n is None and a.ndim != 1:
        raise ValueError(f"inv_freq must be one-dimensional (a module's buffer), got shape "
                         f"{a.shape}")
    if a.ndim != 1 or (n is not None and len(a) != n):
        raise ValueError(f"inv_freq must have shape ({n},) for this config, got {a.shape}")
    return np.ascontiguousarray(a.astype(F32)), a.dtype  # .to(dtype=torch.float)


def _get(config: Any, key: str) -> Any:
    if isinstance(config, Mapping):  # to_dict() keeps attribute_map's targets (num_heads)
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
    elif layout == "hw_repeat":  # per frequency h, w, each twice (EfficientLoFTR's grid)
        a, f = np.repeat(np.stack([h, w], axis=1).ravel(), 2), np.repeat(k, 4)
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


def axial_rope(c: Any, position_ids: Any, inv_freq: Any, opts: PresetOpts, dtype: Any,
               layer_type: Optional[str],
               scaling: Optional[float] = None) -> Tuple[np.ndarray, np.ndarray]:
    """The (cos, sin) of a vision tower's axial rotary (c: sinpe._hf's view of the config):
    ``freqs = position_ids[..., None].float() * inv_freq`` (float32), ``freqs.cos()``,
    ``freqs.sin()`` (attention scaling 1.0), recomposed by the family's layout (see
    :data:`AXIAL`); float32, or cast to x's dtype where the module casts.  inv_freq: the
    module's buffer, or None: ``1.0 / base ** (arange(0, s, 2).float() / s)`` with s =
    head_dim // 2 (``2 * ((head_dim // 3) // 2)`` for MiniMax-M3-VL; head_dim, then
    reordered ``cat(inv[0::2], inv[1::2])``, for Pixtral).  scaling (a module's state: its
    attention_scaling, with its inv_freq buffer, whose length is then the width's, whatever
    the config says): ``freqs.cos() * scaling`` in float32, as the modules that multiply by
    it compute it (the others' is 1.0)."""
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
    layout, src, cast = spec
    inv: Any = None
    if scaling is not None:  # a module's state: its buffer's frequencies, whatever their count
        inv = given_inv(inv_freq, None)[0]
        n = len(inv)
    else:
        dim = _axial_dim(c.raw, src)
        sd = dim if layout == "pixtral" else 2 * ((dim // 3) // 2) if layout == "flat" \
            else dim // 2
        n = (sd + 1) // 2
        base = _theta(c)
    if isinstance(position_ids, (bool, int, np.integer, np.bool_)):
        raise TypeError("position_ids must be an array of (h, w) coordinates for a vision "
                        f"axial rotary, got {position_ids!r}")
    pos = positions(position_ids)
    _check_shape(pos, layout, model_type)
    if layout == "pixtral" and n < 2:
        raise ValueError(f"{n} frequencies: Pixtral's rotary chunks them in two (it fails "
                         "below 2)")
    if inv is not None:
        pass
    elif inv_freq is not None:
        inv = given_inv(inv_freq, n)[0]
    else:
        inv = _inv_freq(base, sd, opts, n)
        if layout == "pixtral":
            inv = np.concatenate([inv[0::2], inv[1::2]])
    return _tables(pos, np.ascontiguousarray(inv, F32), layout, opts, dtype if cast else None,
                   None if scaling is None or scaling == 1.0 else scaling)


def _check_shape(pos: np.ndarray, layout: str, model_type: str) -> None:
    if layout == "hhww":
        if pos.ndim != 3 or pos.shape[-1] != 2:
            raise ValueError(f"position_ids must have shape (batch, N, 2) (h, w) for "
                             f"{model_type!r}, got {pos.shape}")
    elif pos.ndim != 2 or (layout != "flat" and pos.shape[-1] != 2) or pos.shape[-1] < 1:
        want = "(N, axes)" if layout == "flat" else "(N, 2) (h, w)"
        raise ValueError(f"position_ids must have shape {want} for {model_type!r}, got "
                         f"{pos.shape}")


def _tables(pos: np.ndarray, inv: np.ndarray, layout: str, opts: PresetOpts,
            dtype: Any, out_scale: Optional[float] = None) -> Tuple[np.ndarray, np.ndarray]:
    """freqs.cos() and freqs.sin() of the (..., axes, n) freqs in one table job (rounded to
    dtype there: the layouts only move values), recomposed by the layout."""
    n = len(inv)
    a, f = _columns(layout, n, pos.shape[-1])
    shape = ((1,) if layout == "sam" else ()) + pos.shape[:-1] + (len(a),)
    k = 4 * np.arange(n, dtype=np.int64)
    col: Any = np.concatenate([k + COS, k + SIN])
    t = _table(pos, inv, col, opts._replace(dtype=dtype),
               names=("out", "position_ids", "head_dim"), out_scale=out_scale)
    t = t.reshape(pos.shape + (2 * n,))
    # column c from axis a[c], frequency f[c]; cos first, then sin
    return (np.ascontiguousarray(t[..., a, f].reshape(shape)),
            np.ascontiguousarray(t[..., a, n + f].reshape(shape)))
