"""transformers' rotary modules (``*RotaryEmbedding.forward``) from a model's config, bit for
bit: :func:`hf_rope`.  Exported by :mod:`sinpe.presets`.

Every float32 step of transformers' init functions (modeling_rope_utils.py, 5.24.0) is
reproduced here with NumPy float32 operations that round as torch's CPU kernels round (each
was measured against torch, op by op): ``scalar / tensor`` is torch's
``tensor.reciprocal() * scalar`` (two roundings), ``tensor / scalar`` a true float32
division, a Python number meeting a float32 tensor (``*``, ``-``, ``/``, ``>``, ``<``) is
rounded to float32 first, ``base ** tensor`` is torch's pow (sinpe's "pow" frequency job),
a 0-d float32 tensor ``** python_float`` is the C library's double pow rounded to float32.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from . import _dtypes
from . import _hf_more
from ._jobs import COS, SIN, _admit, _freqs, _int, _opts, _round_to, _table

__all__ = ["hf_rope"]

F32 = np.float32

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
    "glmasr_encoder", "nemotron3_5_transcribe_asr_audio", "mimo_v2_flash"})
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
}
#: model types whose rotary is multimodal in a form hf_rope does not reproduce (refused even
#: when the config has no mrope_section: the module recomposes with an in-code default).
MROPE_REFUSED = {
    "neomme": "two axes (row, column) stacked pairwise per layer type",
}
#: families whose rotary module is something else (complex polar tables, per-call mscale
#: switches, learned scales, precomputed sincos tables).
OTHER = frozenset({"llama4_text", "llama4", "deepseek_v2", "phimoe", "mistral_large4",
                   "codegen", "gptj", "ernie4_5_vl_moe_text", "hunyuan_vl"})

ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional")


# ---- the config ---------------------------------------------------------------------------

def _getters(config: Any) -> Tuple[Callable[..., Any], Callable[[str], bool]]:
    """get(key, default) and has(key) of a config object or dict."""
    if isinstance(config, dict):
        d: Dict[str, Any] = config
        return (lambda k, dflt=None: d.get(k, dflt)), (lambda k: k in d)
    if not hasattr(config, "__dict__") or isinstance(config, type):
        raise TypeError(f"config must be a transformers config or its to_dict() dict, got "
                        f"{type(config).__name__}")
    return (lambda k, dflt=None: getattr(config, k, dflt)), (lambda k: hasattr(config, k))


def _text_part(config: Any) -> Any:
    """A composite (vision-language) config's text_config, when it has no hidden_size."""
    get, _ = _getters(config)
    sub = get("text_config")
    if get("hidden_size") is None and sub is not None and not isinstance(sub, (str, bytes)):
        _getters(sub)  # a config or a dict
        return sub
    return config


class _Cfg:
    """The attributes transformers' init functions read, from a config or its to_dict()."""

    def __init__(self, config: Any, layer_type: Optional[str]):
        # a heterogeneous config (Gemma 4): the layer type's view, as transformers' init reads it
        config = self.raw = _hf_more.layer_config(_text_part(config), layer_type)
        get, has = _getters(config)
        self.model_type = str(get("model_type", "") or "")
        self.hidden_size: Any = get("hidden_size")
        self.num_attention_heads: Any = get("num_attention_heads")
        self.max_position_embeddings: Any = get("max_position_embeddings")
        self.has_head_dim, self.head_dim = has("head_dim"), get("head_dim")
        self.omp_attr = get("original_max_position_embeddings") if has(
            "original_max_position_embeddings") else None
        rp = get("rope_parameters")
        if rp is None:
            rp = get("rope_scaling")
        if rp is not None and not isinstance(rp, dict):
            raise TypeError(f"config.rope_parameters must be a dict, got {type(rp).__name__}")
        rp = dict(rp or {})
        labels = get("_rope_type_labels") or get("layer_types") or ()
        nested = [k for k in rp if k in labels]
        theta = get("rope_theta", 10000.0)
        prf = get("partial_rotary_factor", None)
        if nested:
            if layer_type is None:
                raise ValueError(f"config.rope_parameters is keyed by layer type ({nested}): "
                                 "pass layer_type= (the module's forward takes it)")
            if layer_type not in nested:
                raise ValueError(f"layer_type={layer_type!r} is not one of the config's "
                                 f"rope_parameters keys {nested}")
            p = rp[layer_type]
            if p is None:
                raise ValueError(f"layer type {layer_type!r} has no rope (rope_parameters None)")
            if not isinstance(p, dict):
                raise TypeError(f"config.rope_parameters[{layer_type!r}] must be a dict, got "
                                f"{type(p).__name__}")
            p = dict(p)
            self.top_truncate = rp.get("truncate", True)  # yarn reads the top-level dict
        else:
            if layer_type is not None:
                raise ValueError(f"layer_type={layer_type!r} given, but config.rope_parameters "
                                 "is not keyed by layer type")
            p = rp
            self.top_truncate = None
        p.setdefault("rope_type", p.get("type", "default"))
        p.setdefault("rope_theta", theta)
        if prf is not None:
            p.setdefault("partial_rotary_factor", prf)
        if p["rope_type"] in ("llama3", "yarn", "longrope"):
            if self.omp_attr is not None and not nested:
                p["original_max_position_embeddings"] = self.omp_attr
            else:
                p.setdefault("original_max_position_embeddings", self.max_position_embeddings)
        self.p = p
        if self.top_truncate is None:
            self.top_truncate = p.get("truncate", True)

    def need(self, key: str) -> Any:
        if self.p.get(key) is None:
            raise ValueError(f"config.rope_parameters needs {key!r} for rope_type "
                             f"{self.p['rope_type']!r}")
        return self.p[key]

    def num(self, key: str, value: Any = None) -> Any:
        v = self.need(key) if value is None else value
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                                  np.floating)):
            raise TypeError(f"config.rope_parameters[{key!r}] must be a number, got {v!r}")
        return v

    def head(self, or_none: bool) -> int:
        """head_dim as the init reads it: ``getattr(config, "head_dim", None) or hidden //
        heads`` (or_none) or ``getattr(config, "head_dim", hidden // heads)`` (dynamic, yarn,
        longrope)."""
        if or_none:
            return _int(self.head_dim, "config.head_dim") if self.head_dim else self._derived()
        if self.has_head_dim:
            if self.head_dim is None:
                raise ValueError(f"config.head_dim is None: transformers' "
                                 f"{self.p['rope_type']!r} init multiplies it (a TypeError)")
            return _int(self.head_dim, "config.head_dim")
        return self._derived()

    def _derived(self) -> int:
        h = _int(self.hidden_size, "config.hidden_size", minimum=1)
        n = _int(self.num_attention_heads, "config.num_attention_heads", minimum=1)
        return h // n

    def dim(self, or_none: bool = True) -> int:
        prf = self.num("partial_rotary_factor", self.p.get("partial_rotary_factor", 1.0))
        head = self.head(or_none)
        if not (math.isfinite(prf) and prf >= 0):
            raise ValueError(f"config.partial_rotary_factor must be finite and >= 0, got {prf!r}")
        if head * prf >= 2.0 ** 62:
            raise OverflowError(f"config.partial_rotary_factor {prf!r} makes a rotary dim of "
                                f"{head * prf:g}")
        return int(head * prf)


# ---- the init functions, in float32 steps --------------------------------------------------

def _scalar(v: Any, key: str) -> Any:
    """A number transformers multiplies with (a bool is 0 or 1 there, as in torch)."""
    if not isinstance(v, (int, float, np.integer, np.floating, np.bool_)):
        raise TypeError(f"config.rope_parameters[{key!r}] must be a number, got {v!r}")
    return v


def _pow(base: float, n: int, b: float, opts: Dict[str, Any]) -> np.ndarray:
    """``base ** (arange(0, 2n, 2).float() / b)`` (torch's float32 pow)."""
    return _freqs("pow", n, opts, step=2, b=float(b), base=base, base_name="rope_theta")


def _recip(x: np.ndarray) -> np.ndarray:
    """``1.0 / x``: torch's ``x.reciprocal() * 1.0``."""
    return F32(1) / x


def _theta(c: _Cfg) -> float:
    return float(c.num("rope_theta"))


def _default(c: _Cfg, opts: Dict[str, Any]) -> Tuple[np.ndarray, float]:
    fallback = PARTIAL_FALLBACK.get(c.model_type)  # MiMo-V2-Flash: 0.334
    if fallback is not None and c.p.get("partial_rotary_factor") is None:
        c.p["partial_rotary_factor"] = fallback
    dim = c.dim() if c.model_type in PARTIAL_DEFAULT else c.head(True)
    return _recip(_pow(_theta(c), (dim + 1) // 2, dim, opts)), 1.0


def _linear(c: _Cfg, opts: Dict[str, Any]) -> Tuple[np.ndarray, float]:
    dim = c.dim()
    inv = _recip(_pow(_theta(c), (dim + 1) // 2, dim, opts))
    return inv / F32(c.num("factor")), 1.0


def _dynamic(c: _Cfg, opts: Dict[str, Any], seq_len: Optional[int]) -> Tuple[np.ndarray, float]:
    base, dim = _theta(c), c.dim(False)
    factor = c.num("factor")
    mpe = _int(c.max_position_embeddings, "config.max_position_embeddings", minimum=1)
    theta = base
    _pow(theta, 1, 2, opts)  # rope_theta itself: refused here, by name, when it is not usable
    if dim <= 2:
        raise ValueError(f"the dynamic rope divides by dim - 2: dim = {dim}")
    if seq_len is None:  # at init: Python floats
        base = base * ((factor * mpe / mpe) - (factor - 1)) ** (dim / (dim - 2))
    else:  # regrown in forward: seq_len is an int64 tensor, so these are float32 0-d steps
        s = F32(factor) * F32(max(seq_len, mpe))
        s = s / F32(mpe)
        s = s - F32(factor - 1)
        try:
            s = F32(math.pow(float(s), dim / (dim - 2)))  # pow_tensor_scalar: double pow, rounded
        except (ValueError, OverflowError):
            s = F32(math.nan)
        with np.errstate(all="ignore"):
            base = float(F32(base) * s)
    if isinstance(base, complex) or not (math.isfinite(base) and base > 0 and
                                         math.isfinite(F32(base))):
        raise ValueError(f"config.rope_parameters['factor'] = {factor!r} makes the dynamic "
                         f"rope's base (rope_theta {theta!r} rescaled) {base!r}, not a finite "
                         "float32 > 0: transformers' tables would be NaN or inf there")
    return _recip(_pow(base, (dim + 1) // 2, dim, opts)), 1.0


def _omp_factor(c: _Cfg, rope_type: str, above: float) -> Tuple[float, float]:
    """original_max_position_embeddings (checked: finite, > above) and factor (default:
    max_position_embeddings / original_max_position_embeddings), as yarn and longrope read them."""
    omp = c.num("original_max_position_embeddings")
    if not (math.isfinite(omp) and omp > above):
        raise ValueError(f"config.rope_parameters['original_max_position_embeddings'] must be "
                         f"finite and > {above} for rope_type {rope_type!r}, got {omp!r}")
    factor = c.p.get("factor")
    if factor is None:
        factor = _int(c.max_position_embeddings, "config.max_position_embeddings") / omp
    return omp, c.num("factor", factor)


def _yarn(c: _Cfg, opts: Dict[str, Any]) -> Tuple[np.ndarray, float]:
    base, dim = _theta(c), c.dim(False)
    if dim % 2:
        raise ValueError(f"the yarn rope needs an even rotary dim (torch broadcasting fails), "
                         f"got {dim}")
    p = c.p
    omp, factor = _omp_factor(c, "yarn", 0)
    attention_factor, mscale, mscale_all_dim = (p.get("attention_factor"), p.get("mscale"),
                                                p.get("mscale_all_dim"))

    def get_mscale(scale: float, m: float = 1) -> float:
        if scale <= 1:
            return 1.0
        return 0.1 * m * math.log(scale) + 1.0

    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = float(get_mscale(factor, mscale)
                                     / get_mscale(factor, mscale_all_dim))
        else:
            attention_factor = get_mscale(factor)
    attention_factor = float(_scalar(attention_factor, "attention_factor"))
    beta_fast = _scalar(p.get("beta_fast") or 32, "beta_fast")
    beta_slow = _scalar(p.get("beta_slow") or 1, "beta_slow")
    _pow(base, 1, 2, opts)  # rope_theta itself: refused here, by name, when it is not usable

    def corr_dim(num_rot: float, key: str) -> float:
        try:
            v = (dim * math.log(omp / (num_rot * 2 * math.pi))) / (2 * math.log(base))
            if c.top_truncate:
                v = math.floor(v) if key == "beta_fast" else math.ceil(v)
            return v
        except (ValueError, ZeroDivisionError, OverflowError):
            raise ValueError(f"config.rope_parameters[{key!r}] = {num_rot!r} (with rope_theta "
                             f"{base!r}, original_max_position_embeddings {omp!r}): the yarn "
                             "correction range is not a finite number") from None

    low, high = corr_dim(beta_fast, "beta_fast"), corr_dim(beta_slow, "beta_slow")
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    pos_freqs = _pow(base, dim // 2, dim, opts)
    extra = _recip(pos_freqs)
    inter = _recip(F32(factor) * pos_freqs)
    ramp = (np.arange(dim // 2, dtype=F32) - F32(low)) / F32(high - low)
    ramp = np.clip(ramp, F32(0), F32(1))
    ef = F32(1) - ramp
    inv = inter * (F32(1) - ef) + extra * ef
    return inv.astype(F32), float(attention_factor)


def _longrope(c: _Cfg, opts: Dict[str, Any], long: bool) -> Tuple[np.ndarray, float]:
    base, dim = _theta(c), c.dim(False)
    p = c.p
    omp, factor = _omp_factor(c, "longrope", 1)
    attention_factor = p.get("attention_factor")
    if attention_factor is not None:
        attention_factor = _scalar(attention_factor, "attention_factor")
    if attention_factor is None:
        attention_factor = 1.0 if factor <= 1.0 else \
            math.sqrt(1 + math.log(factor) / math.log(omp))
    key = "long_factor" if long else "short_factor"
    try:
        ext = c.need(key)
        if isinstance(ext, (str, bytes)) or any(isinstance(v, (str, bytes)) for v in ext):
            raise TypeError
        ext = np.array(ext, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"config.rope_parameters[{key!r}] must be a list of numbers") from None
    n = (dim + 1) // 2
    if ext.ndim != 1 or len(ext) not in (1, n):
        raise ValueError(f"config.rope_parameters[{key!r}] must have {n} entries (dim / 2), "
                         f"got shape {ext.shape}")
    ext = ext.astype(F32)
    return _recip(ext * _pow(base, n, dim, opts)), float(attention_factor)


def _llama3(c: _Cfg, opts: Dict[str, Any]) -> Tuple[np.ndarray, float]:
    dim = c.dim()
    inv = _recip(_pow(_theta(c), (dim + 1) // 2, dim, opts))
    factor = c.num("factor")
    lff, hff = c.num("low_freq_factor"), c.num("high_freq_factor")
    old = c.num("original_max_position_embeddings")
    for key, v in (("low_freq_factor", lff), ("high_freq_factor", hff)):
        if v == 0:
            raise ValueError(f"config.rope_parameters[{key!r}] must not be 0 (transformers "
                             "divides original_max_position_embeddings by it)")
    low_wl, high_wl = old / lff, old / hff
    wavelen = _recip(inv) * F32(2 * math.pi)
    f_factor = F32(factor)
    ill = np.where(wavelen > F32(low_wl), inv / f_factor, inv)
    smooth = (_recip(wavelen) * F32(old) - F32(lff)) / F32(hff - lff)
    smoothed = ((F32(1) - smooth) * ill) / f_factor + smooth * ill
    medium = ~(wavelen < F32(high_wl)) & ~(wavelen > F32(low_wl))
    return np.where(medium, smoothed, ill).astype(F32), 1.0


def _proportional(c: _Cfg, opts: Dict[str, Any]) -> Tuple[np.ndarray, float]:
    head = c.head(True)
    base = _theta(c)
    factor = c.num("factor", c.p.get("factor", 1.0))
    prop = c.num("partial_rotary_factor", c.p.get("partial_rotary_factor", 1.0))
    angles = int(prop * head // 2)
    rot = _recip(_pow(base, max(angles, 0), head, opts)) if angles > 0 else np.zeros(0, F32)
    nope = head // 2 - angles
    inv = np.concatenate([rot, np.zeros(nope, F32)]) if nope > 0 else rot
    return (inv / F32(factor)).astype(F32), 1.0


# ---- inputs ----------------------------------------------------------------------------------

def _array(x: Any, name: str) -> np.ndarray:
    if type(x).__module__.startswith("torch"):
        if getattr(getattr(x, "device", None), "type", None) == "meta":
            raise ValueError(f"{name} is a meta tensor (it holds no data)")
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            import torch
            return np.asarray(x.view(torch.int16).numpy()).view(_dtypes.bfloat16())
        x = x.numpy()
    a = np.asarray(x)
    if a.dtype == object:
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__}")
    return a


def _positions(position_ids: Any) -> np.ndarray:
    if isinstance(position_ids, (bool, np.bool_, int, np.integer)) or \
            np.ndim(position_ids) == 0 and not hasattr(position_ids, "shape"):
        if isinstance(position_ids, (int, np.integer)) and not isinstance(position_ids, bool):
            n = _int(position_ids, "position_ids")  # arange(n)[None], made once admitted
            return np.broadcast_to(np.zeros((), np.int64), (1, n))
        raise TypeError(f"position_ids must be an integer array (batch, seq), got "
                        f"{position_ids!r}")
    a = _array(position_ids, "position_ids")
    if a.dtype.kind not in "iuf" and a.dtype.name != "bfloat16":
        raise TypeError(f"position_ids must hold integers (or floats), got dtype {a.dtype}")
    if a.ndim < 1:
        raise ValueError(f"position_ids must have shape (batch, seq), got shape {a.shape}")
    return a


def _inv_given(inv_freq: Any, n: int) -> Tuple[np.ndarray, Any]:
    a = _array(inv_freq, "inv_freq")
    if a.dtype.kind != "f" and a.dtype.name != "bfloat16":
        raise TypeError(f"inv_freq must hold floats, got dtype {a.dtype}")
    if a.ndim != 1 or len(a) != n:
        raise ValueError(f"inv_freq must have shape ({n},) for this config, got {a.shape}")
    return np.ascontiguousarray(a.astype(F32)), a.dtype  # .to(dtype=torch.float)


def _seq_len(pos: np.ndarray) -> Any:
    """The dynamic/longrope forwards' ``seq_len = torch.max(position_ids) + 1``, computed in
    position_ids' own dtype as torch computes it (int32 wraps, float16 rounds, NaN stays NaN
    and compares False), as a Python int or float; 0 for no positions."""
    if not pos.size:
        return 0
    with np.errstate(all="ignore"):
        top = np.add(np.max(pos), np.ones((), pos.dtype)).astype(pos.dtype)
    return int(top) if pos.dtype.kind in "iu" else float(top)


# ---- the forward --------------------------------------------------------------------------

def hf_rope(config: Any, position_ids: Any, *, inv_freq: Any = None, dtype: Any = None,
            backend: Optional[str] = None, threads: Optional[int] = None,
            torch_threads: Optional[int] = None,
            layer_type: Optional[str] = None) -> Tuple[np.ndarray, np.ndarray]:
    """hf_rope(config, position_ids, *, inv_freq=None, dtype=None, backend=None, threads=None,
    torch_threads=None, layer_type=None) -> (cos, sin)

    The ``(cos, sin)`` that transformers' (5.24.0) ``*RotaryEmbedding(config)`` returns from
    its FIRST ``forward(x, position_ids)`` call, bit for bit, as NumPy arrays of shape
    ``position_ids.shape + (width,)`` (width: head_dim, or the rotary dim with partial
    rotary) in dtype (x.dtype in the library: float32 default, float16, bfloat16 as an
    ml_dtypes array).  config: a transformers config (or its ``to_dict()``); a composite
    config (Qwen2-VL) is read through its text_config.  position_ids: (batch, seq) integers
    (a NumPy array or torch tensor), for mrope also (3, batch, seq); an int n means
    ``arange(n)[None]``.  inv_freq: the module's own buffer instead of the config's (any float
    dtype, e.g. bfloat16 after ``model.to(torch.bfloat16)``: the forward upcasts it with
    ``.float()``).  layer_type: for configs whose rope_parameters are keyed by layer type
    (Gemma 3: 'full_attention', 'sliding_attention'), the forward's layer_type.

    The forward (all families but the listed variants): ``freqs = position_ids[..., None]
    .float() * inv_freq.float()`` (one float32 product), ``emb = cat(freqs, freqs)``,
    ``cos = emb.cos() * attention_scaling`` (a float32 product, exact when 1.0), ``sin``
    alike, then ``.to(x.dtype)``.  Variants by ``config.model_type``: Cohere (and Cohere2,
    BLT) ``repeat_interleave(freqs, 2)``; GPT-OSS ``emb = freqs``; OLMo, ERNIE 4.5 no cast
    (float32 whatever dtype); mrope (Qwen2-VL, Qwen2.5-VL: chunks of mrope_section from
    position rows t, h, w then cat; GLM-4V the same then repeat_interleave; Qwen3-VL rows
    interleaved t, h, w) computed on the (3, batch, seq, dim/2) tensor as the module does.
    Families with other modules (Llama 4, DeepSeek-V2 complex tables, PhiMoE, GPT-J...)
    raise NotImplementedError.  More model types of the same forms, the per-layer view of a
    heterogeneous config (Gemma 4: ``config.per_layer_config[layer_type]``, as the init
    reads it) and the vision towers' axial 2D rope (rope_type "axial": position_ids (N, 2)
    h, w coordinates, (batch, N, 2) for Gemma 4's; each family's layout) are in
    :mod:`sinpe._hf_more`.

    inv_freq per rope_type (dim = int(head_dim * partial_rotary_factor); head_dim =
    ``config.head_dim or hidden_size // num_attention_heads``; ``A = arange(0, dim, 2)
    .float() / dim`` in float32; ``P = base ** A`` torch's float32 pow; ``1.0 / t`` is
    ``t.reciprocal() * 1.0``; Python numbers are rounded to float32 where they meet a tensor):
      default: ``1.0 / P`` with dim = head_dim (partial_rotary_factor honoured only by the
        families whose own default init reads it: GPT-NeoX, Phi, StableLM, GLM, Persimmon...).
      linear: ``(1.0 / P) / f32(factor)``.
      dynamic: at init ``base' = base * (factor * mpe / mpe - (factor - 1)) ** (dim / (dim -
        2))`` in Python floats, ``1.0 / base' ** A``; on a first call with ``max(position_ids)
        + 1 = s > max_position_embeddings`` the module regrows: ``t = f32(factor) * f32(s)``,
        ``t / f32(mpe)``, ``- f32(factor - 1)``, ``f32(double(t) ** (dim / (dim - 2)))``,
        ``f32(base) * t`` (float32 0-d steps), then ``1.0 / t ** A`` (the history of later
        calls is not modelled: this is the first call).  s, here and for longrope, is
        ``max(position_ids) + 1`` in position_ids' own dtype, as torch computes it (int32
        wraps, float16 rounds, NaN compares False); a regrowth from floating positions
        other than float32 raises NotImplementedError.
      yarn: Python floats for attention_factor (get_mscale), beta_fast/slow and
        find_correction_range (floor/ceil when truncate), ``P``; ``extra = 1.0 / P``,
        ``inter = 1.0 / (f32(factor) * P)``; ``ramp = clamp((arange(dim // 2) - f32(low)) /
        f32(high - low), 0, 1)``; ``ef = 1 - ramp``; ``inter * (1 - ef) + extra * ef``;
        cos/sin multiplied by f32(attention_factor).
      longrope: ``1.0 / (f32(ext) * P)`` with ext = long_factor when ``max(position_ids) + 1
        > original_max_position_embeddings`` (the module's per-call switch), short_factor
        otherwise (a given low-precision inv_freq: the long factors are rounded to its dtype,
        as the module's ``copy_`` into its buffer rounds them); attention_factor =
        ``sqrt(1 + log(factor) / log(omp))`` (Python floats) unless given.
      llama3: ``inv = 1.0 / P``; ``wl = (1.0 / inv) * f32(2 pi)``; ``ill = where(wl >
        f32(omp / low), inv / f32(factor), inv)``; ``s = ((1.0 / wl) * f32(omp) - f32(low)) /
        f32(high - low)``; ``((1 - s) * ill) / f32(factor) + s * ill`` where medium.
      proportional: ``a = int(prf * head_dim // 2)`` angles ``1.0 / base ** (arange(0, 2a, 2)
        / head_dim)``, then head_dim / 2 - a zeros, all ``/ f32(factor)``; full head_dim.
    """
    opts = _opts(dtype, None, backend, threads, torch_threads)
    c = _Cfg(config, layer_type)
    mt = c.model_type
    if mt in OTHER:
        raise NotImplementedError(f"model_type {mt!r}: its rotary module is not the "
                                  "cos/sin-of-cat(freqs) form hf_rope reproduces")
    rope_type = c.p["rope_type"]
    if rope_type == "axial" or mt in _hf_more.AXIAL:  # a vision tower's 2D rope
        return _hf_more.axial_rope(c, position_ids, inv_freq, opts, dtype, layer_type)
    if mt in MROPE_REFUSED:
        raise NotImplementedError(f"model_type {mt!r}: its multimodal rope ("
                                  f"{MROPE_REFUSED[mt]}) is not one hf_rope knows")
    if not isinstance(rope_type, str) or rope_type not in ROPE_TYPES:
        raise ValueError(f"rope_type {rope_type!r} is not one of {ROPE_TYPES}")
    pos = _positions(position_ids)
    mrope = MROPE.get(mt)
    if mrope is None and "mrope_section" in c.p and c.p.get("mrope_section") is not None:
        raise NotImplementedError(f"model_type {mt!r} with mrope_section: its multimodal "
                                  "recomposition is not one hf_rope knows")
    if mrope is not None:
        if pos.ndim == 2:
            pos = np.broadcast_to(pos[None], (3,) + pos.shape)
        if pos.ndim != 3 or pos.shape[0] != 3:
            raise ValueError(f"position_ids must have shape (batch, seq) or (3, batch, seq) "
                             f"for mrope, got {pos.shape}")
    # the first call's inv_freq and attention scaling
    lazy = isinstance(position_ids, (int, np.integer))  # arange(n)[None], not yet made
    given_dtype = None
    if rope_type == "default":
        inv, scaling = _default(c, opts)
    elif rope_type == "linear":
        inv, scaling = _linear(c, opts)
    elif rope_type == "dynamic":
        mpe = _int(c.max_position_embeddings, "config.max_position_embeddings", minimum=1)
        inv, scaling = _dynamic(c, opts, None)
    elif rope_type == "yarn":
        inv, scaling = _yarn(c, opts)
    elif rope_type == "longrope":
        omp = c.num("original_max_position_embeddings")
        inv, scaling = _longrope(c, opts, False)
    elif rope_type == "llama3":
        inv, scaling = _llama3(c, opts)
    else:
        inv, scaling = _proportional(c, opts)
    # the result must be makeable before position_ids are read (or an arange is made)
    _admit((2,) + pos.shape + (len(inv) if mt in HALF_WIDTH else 2 * len(inv),),
           dict(opts, dtype=np.float32))
    if lazy:
        pos = np.arange(pos.shape[-1], dtype=np.int64)[None]
        if mrope is not None:
            pos = np.broadcast_to(pos[None], (3,) + pos.shape)
    top = _seq_len(pos) if rope_type in ("dynamic", "longrope") else 0
    if rope_type == "dynamic" and top > mpe:
        if pos.dtype.kind not in "iu" and pos.dtype != np.float32:
            raise NotImplementedError(f"position_ids of dtype {pos.dtype} past "
                                      "max_position_embeddings: the dynamic rope's regrowth "
                                      f"then runs in {pos.dtype}; pass integer position_ids")
        if not math.isfinite(top):
            raise ValueError(f"position_ids reach {top}: the dynamic rope's regrowth from an "
                             "infinite seq_len has no finite base")
        inv, scaling = _dynamic(c, opts, top)
        inv_freq = None  # the module registers a new float32 buffer
    elif rope_type == "longrope" and top > omp:
        inv, scaling = _longrope(c, opts, True)
    if inv_freq is not None:
        given, given_dtype = _inv_given(inv_freq, len(inv))
        if rope_type == "longrope" and top > omp:
            inv = _round_to(inv, given_dtype) if given_dtype != np.float32 else inv
            inv = np.ascontiguousarray(np.asarray(inv).astype(F32))
        else:
            inv = given
    inv = np.ascontiguousarray(inv, F32)
    out_dtype = None if mt in NO_CAST else dtype
    h = len(inv)
    if mrope is not None:
        return _mrope(pos, inv, scaling, mrope, c, opts, out_dtype)
    if mt in INTERLEAVED:
        freq = np.repeat(inv, 2)
    elif mt in HALF_WIDTH:
        freq = inv
    else:
        freq = np.concatenate([inv, inv])
    return _cos_sin(pos, freq, scaling, opts, out_dtype, h)


def _cos_sin(pos: np.ndarray, freq: np.ndarray, scaling: float, opts: Dict[str, Any], dtype: Any,
             h: int) -> Tuple[np.ndarray, np.ndarray]:
    width = len(freq)
    shape = pos.shape + (width,)
    f32 = dtype is None or _dtypes.resolve(dtype) == np.float32
    _admit((2 if scaling == 1.0 or f32 else 3,) + shape, dict(opts, dtype=np.float32))
    direct = dict(opts, dtype=dtype if scaling == 1.0 else None)
    freq = np.ascontiguousarray(freq, F32)
    tables = []
    for kind in (COS, SIN):  # emb.cos(), emb.sin(): two tensors of emb's shape
        if width == 0 or pos.size == 0:
            t = np.zeros(shape, _dtypes.resolve(direct["dtype"]))
        else:
            t = _table(np.ascontiguousarray(pos), freq, [4 * k + kind for k in range(width)],
                       direct, names=("out", "position_ids", "head_dim"))
        if scaling != 1.0:
            t = t * F32(scaling)
            t = _round_to(t, dtype)
        tables.append(t)
    return tables[0], tables[1]


def _mrope(pos: np.ndarray, inv: np.ndarray, scaling: float, spec: Tuple[Any, ...], c: _Cfg,
           opts: Dict[str, Any], dtype: Any) -> Tuple[np.ndarray, np.ndarray]:
    how, expand, dflt = spec
    sec = c.p.get("mrope_section") or dflt
    try:
        sec = [_int(v, "mrope_section") for v in sec]
    except TypeError:
        raise TypeError(f"config.rope_parameters['mrope_section'] must be a list of ints, got "
                        f"{sec!r}") from None
    h = len(inv)
    row = np.zeros(h, np.int64)  # the position row (t, h, w) of each half column
    if how == "chunks":
        if sum(sec) != h:
            raise ValueError(f"mrope_section {sec} must sum to dim / 2 = {h}")
        j = 0
        for i, n in enumerate(sec):
            row[j:j + n] = i % 3
            j += n
    else:  # qwen3_vl: T everywhere, then H at 1::3 and W at 2::3 up to 3 * section
        if len(sec) < 3:
            raise ValueError(f"mrope_section must have 3 entries, got {sec}")
        for d, off in ((1, 1), (2, 2)):
            row[slice(off, sec[d] * 3, 3)] = d
    # freqs.cos() on the (3, batch, seq, dim/2) tensor, as the module computes it
    shape = pos.shape + (h,)
    _admit((3,) + shape, dict(opts, dtype=np.float32))
    p = np.ascontiguousarray(pos)
    out = []
    for kind in (COS, SIN):
        t = _table(p, inv, [4 * k + kind for k in range(h)], dict(opts, dtype=None),
                   names=("out", "position_ids", "head_dim")) if p.size and h else \
            np.zeros(shape, F32)
        if scaling != 1.0:
            t = t * F32(scaling)
        half = t[row, :, :, np.arange(h)].transpose(1, 2, 0)  # column j from row row[j]
        full = np.repeat(half, 2, axis=-1) if expand == "interleave" else \
            np.concatenate([half, half], axis=-1)
        out.append(_round_to(np.ascontiguousarray(full), dtype))
    return out[0], out[1]
