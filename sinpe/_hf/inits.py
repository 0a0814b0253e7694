"""transformers' rope init functions (modeling_rope_utils.py, 5.24.0), in float32 steps:
:data:`ROPE_INIT_FUNCTIONS`, one function per rope_type with one signature
``(c, opts, seq_len) -> (inv_freq, attention_factor)``, as transformers keeps them
(``ROPE_INIT_FUNCTIONS[rope_type](config, device, seq_len=..., layer_type=...)``).  seq_len is
None at the module's init; a first forward past the trained length calls the same function
again with it (dynamic: the regrowth; longrope: ``original_max_position_embeddings + 1``,
which picks the long factors).

Every step rounds as torch's CPU kernels round (each was measured against torch, op by op):
``scalar / tensor`` is torch's ``tensor.reciprocal() * scalar`` (two roundings), ``tensor /
scalar`` a true float32 division, a Python number meeting a float32 tensor (``*``, ``-``,
``/``, ``>``, ``<``) is rounded to float32 first, ``base ** tensor`` is torch's pow (sinpe's
"pow" frequency job, the one call into the core here), a 0-d float32 tensor ``**
python_float`` is the C library's double pow rounded to float32.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from .._jobs import _freqs, _int
from .._types import PresetOpts
from .config import Cfg, plain_number
from .families import PARTIAL_DEFAULT, PARTIAL_FALLBACK

F32 = np.float32
Init = Callable[[Cfg, PresetOpts, Optional[Any]], Tuple[np.ndarray, float]]


def f32(x: Any) -> Any:
    """x rounded to float32 (inf past its range, as torch rounds a Python number)."""
    with np.errstate(over="ignore"):
        return F32(x)


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:20] + "..." + r[-8:]


def _scalar(v: Any, key: str) -> Any:
    """A number transformers multiplies with (a bool is 0 or 1 there, as in torch)."""
    if not isinstance(v, (int, float, np.integer, np.floating, np.bool_)):
        raise TypeError(f"config.rope_parameters[{key!r}] must be a number, got {v!r}")
    return plain_number(v, key)


def theta(c: Cfg) -> float:
    """rope_theta as a Python float (transformers computes with it as one), > 0 and not NaN;
    its float32 (torch's pow rounds a Python base to float32) > 0.  Past float32's range it
    is infinite there: ``inf ** a`` is 1 at a = 0 and inf after, so inv_freq is 1, 0, 0, ...
    and the tables are finite, as transformers' are."""
    v = c.num("rope_theta")
    try:
        f = float(v)
    except OverflowError:
        raise OverflowError(f"config.rope_parameters['rope_theta'] = {_short(v)} does not fit "
                            "in a float (transformers computes with it as a float and "
                            "raises OverflowError)") from None
    if not f > 0:
        raise ValueError(f"config.rope_parameters['rope_theta'] must be > 0 (and not NaN), got "
                         f"{v!r}: transformers' inv_freq would be NaN or inf")
    if f32(f) == 0:
        raise ValueError(f"config.rope_parameters['rope_theta'] = {v!r} rounds to 0 in float32 "
                         "(torch's pow rounds it so): transformers' inv_freq would be inf and its "
                         "tables NaN")
    return f


def pow_(base: float, n: int, b: float, opts: PresetOpts) -> np.ndarray:
    """``base ** (arange(0, 2n, 2).float() / b)`` (torch's float32 pow, base rounded to float32
    first; base > 0 checked by the caller).  An infinite float32 base is IEEE's: 1 at
    exponent 0, inf after (no call into the core)."""
    if n == 0:
        return np.zeros(0, F32)
    if math.isinf(f32(base)):
        out = np.full(n, np.inf, F32)
        out[0] = 1
        return out
    return _freqs("pow", n, opts, step=2, b=float(b), base=base, base_name="rope_theta")


def recip(x: np.ndarray) -> np.ndarray:
    """``1.0 / x``: torch's ``x.reciprocal() * 1.0``."""
    with np.errstate(divide="ignore"):
        return F32(1) / x


def inv_freq(base: float, dim: int, opts: PresetOpts, n: Optional[int] = None) -> np.ndarray:
    """``1.0 / (base ** (arange(0, dim, 2).float() / dim))``: the inverse frequencies every
    init starts from (n of them: ceil(dim / 2) unless given)."""
    return recip(pow_(base, (dim + 1) // 2 if n is None else n, dim, opts))


# ---- one function per rope_type ---------------------------------------------------------------

def _default(c: Cfg, opts: PresetOpts, seq_len: Any = None) -> Tuple[np.ndarray, float]:
    fallback = PARTIAL_FALLBACK.get(c.model_type)  # MiMo-V2-Flash: 0.334
    if fallback is not None and c.p.get("partial_rotary_factor") is None:
        c.p["partial_rotary_factor"] = fallback
    dim = c.dim() if c.model_type in PARTIAL_DEFAULT else c.head(True)
    return inv_freq(theta(c), dim, opts), 1.0


def _linear(c: Cfg, opts: PresetOpts, seq_len: Any = None) -> Tuple[np.ndarray, float]:
    dim = c.dim()
    return inv_freq(theta(c), dim, opts) / F32(c.num("factor")), 1.0


def _dynamic(c: Cfg, opts: PresetOpts, seq_len: Any = None) -> Tuple[np.ndarray, float]:
    base, dim = theta(c), c.dim(False)
    factor = c.num("factor")
    mpe = _int(c.max_position_embeddings, "config.max_position_embeddings", minimum=1)
    if dim == 2:
        raise ValueError("the dynamic rope divides by dim - 2: dim = 2 (transformers raises "
                         "ZeroDivisionError)")
    if seq_len is None:  # at init: Python floats
        try:
            base = base * ((factor * mpe / mpe) - (factor - 1)) ** (dim / (dim - 2))
        except OverflowError:
            raise OverflowError(f"config.rope_parameters['factor'] = {factor!r}: the dynamic "
                                "rope's base overflows a float (transformers raises "
                                "OverflowError)") from None
    else:  # regrown in forward: seq_len is an int64 tensor, so these are float32 0-d steps
        with np.errstate(all="ignore"):
            s = F32(factor) * F32(max(seq_len, mpe))
            s = s / F32(mpe)
            s = s - F32(factor - 1)
        try:
            s = F32(math.pow(float(s), dim / (dim - 2)))  # pow_tensor_scalar: double pow, rounded
        except (ValueError, OverflowError):
            s = F32(math.nan)
        with np.errstate(all="ignore"):
            base = float(f32(base) * s)
    if isinstance(base, complex):  # (factor * mpe / mpe) - (factor - 1) < 0 by rounding
        raise NotImplementedError(f"config.rope_parameters['factor'] = {factor!r} makes the "
                                  "dynamic rope's base complex at init (a negative number to a "
                                  "fractional power): transformers then keeps the real part of "
                                  "a complex inv_freq, which hf_rope does not reproduce")
    if not (base > 0 and f32(base) > 0):
        raise ValueError(f"config.rope_parameters['factor'] = {factor!r} makes the dynamic "
                         f"rope's base (rope_theta rescaled) {base!r}, not > 0 in float32: "
                         "transformers' inv_freq would be NaN or inf and its tables NaN")
    return inv_freq(base, dim, opts), 1.0


def omp_factor(c: Cfg, rope_type: str, above: float) -> Tuple[float, float]:
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


def _yarn_attention(c: Cfg, factor: float) -> float:
    p = c.p
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
    return float(_scalar(attention_factor, "attention_factor"))


def _yarn(c: Cfg, opts: PresetOpts, seq_len: Any = None) -> Tuple[np.ndarray, float]:
    base, dim = theta(c), c.dim(False)
    if dim % 2:
        raise ValueError(f"the yarn rope needs an even rotary dim (torch broadcasting fails), "
                         f"got {dim}")
    omp, factor = omp_factor(c, "yarn", 0)
    attention_factor = _yarn_attention(c, factor)
    beta_fast = _scalar(c.p.get("beta_fast") or 32, "beta_fast")
    beta_slow = _scalar(c.p.get("beta_slow") or 1, "beta_slow")

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
    pos_freqs = pow_(base, dim // 2, dim, opts)
    extra = recip(pos_freqs)
    inter = recip(F32(factor) * pos_freqs)
    ramp = (np.arange(dim // 2, dtype=F32) - F32(low)) / F32(high - low)
    ramp = np.clip(ramp, F32(0), F32(1))
    ef = F32(1) - ramp
    with np.errstate(invalid="ignore"):
        inv = inter * (F32(1) - ef) + extra * ef
    return inv.astype(F32), attention_factor


def _factors(c: Cfg, key: str, n: int) -> np.ndarray:
    """longrope's short_factor or long_factor: a list of numbers (``torch.tensor(list)``
    raises TypeError on anything else, None included)."""
    ext = c.need(key)
    if isinstance(ext, (str, bytes)) or not hasattr(ext, "__iter__"):
        raise TypeError(f"config.rope_parameters[{key!r}] must be a list of numbers, got "
                        f"{type(ext).__name__}")
    vals = list(ext)
    for i, v in enumerate(vals):
        if not isinstance(v, numbers.Real):
            raise TypeError(f"config.rope_parameters[{key!r}] must be a list of numbers, got "
                            f"{_short(v)} at index {i} (transformers raises TypeError)")
    try:
        ext = np.array(vals, dtype=np.float64)
    except OverflowError:
        raise OverflowError(f"config.rope_parameters[{key!r}] holds a number that does not fit "
                            "in a float") from None
    if ext.ndim != 1 or len(ext) not in (1, n):
        raise ValueError(f"config.rope_parameters[{key!r}] must have {n} entries (dim / 2), "
                         f"got shape {ext.shape}")
    return ext


def _longrope(c: Cfg, opts: PresetOpts, seq_len: Any = None) -> Tuple[np.ndarray, float]:
    base, dim = theta(c), c.dim(False)
    omp, factor = omp_factor(c, "longrope", 1)
    attention_factor = c.p.get("attention_factor")
    if attention_factor is not None:
        attention_factor = _scalar(attention_factor, "attention_factor")
    if attention_factor is None:
        attention_factor = 1.0 if factor <= 1.0 else \
            math.sqrt(1 + math.log(factor) / math.log(omp))
    n = (dim + 1) // 2
    # the first forward makes both (transformers' longrope_frequency_update), then picks one
    short, long = (_factors(c, key, n) for key in ("short_factor", "long_factor"))
    ext = long if seq_len and seq_len > omp else short
    with np.errstate(over="ignore"):
        ext = ext.astype(F32)
    return recip(ext * pow_(base, n, dim, opts)), float(attention_factor)


def _llama3(c: Cfg, opts: PresetOpts, seq_len: Any = None) -> Tuple[np.ndarray, float]:
    dim = c.dim()
    inv = inv_freq(theta(c), dim, opts)
    factor = c.num("factor")
    lff, hff = c.num("low_freq_factor"), c.num("high_freq_factor")
    old = c.num("original_max_position_embeddings")
    for key, v in (("low_freq_factor", lff), ("high_freq_factor", hff)):
        if v == 0:
            raise ValueError(f"config.rope_parameters[{key!r}] must not be 0 (transformers "
                             "divides original_max_position_embeddings by it)")
    low_wl, high_wl = old / lff, old / hff
    wavelen = recip(inv) * F32(2 * math.pi)
    f_factor = F32(factor)
    ill = np.where(wavelen > F32(low_wl), inv / f_factor, inv)
    with np.errstate(invalid="ignore"):
        smooth = (recip(wavelen) * F32(old) - F32(lff)) / F32(hff - lff)
        smoothed = ((F32(1) - smooth) * ill) / f_factor + smooth * ill
    medium = ~(wavelen < F32(high_wl)) & ~(wavelen > F32(low_wl))
    return np.where(medium, smoothed, ill).astype(F32), 1.0


def _proportional(c: Cfg, opts: PresetOpts, seq_len: Any = None) -> Tuple[np.ndarray, float]:
    head = c.head(True)
    base = theta(c)
    factor = c.num("factor", c.p.get("factor", 1.0))
    prop = c.num("partial_rotary_factor", c.p.get("partial_rotary_factor", 1.0))
    angles = int(prop * head // 2)
    rot = inv_freq(base, head, opts, max(angles, 0))
    nope = head // 2 - angles
    inv = np.concatenate([rot, np.zeros(nope, F32)]) if nope > 0 else rot
    return (inv / F32(factor)).astype(F32), 1.0


def _ntk_alpha(c: Cfg, opts: PresetOpts, seq_len: Any = None) -> Tuple[np.ndarray, float]:
    """HunYuan-VL's ``compute_ntk_alpha_rope_parameters``: ``base = rope_theta * alpha ** (dim
    / (dim - 2))`` in Python floats with dim = config.head_dim, then the default form."""
    if c.head_dim is None:
        raise ValueError("config.head_dim is None: the ntk_alpha init divides by it "
                         "(transformers raises TypeError)")
    dim = _int(c.head_dim, "config.head_dim")
    if dim == 2:
        raise ValueError("the ntk_alpha rope divides by head_dim - 2: head_dim = 2 "
                         "(transformers raises ZeroDivisionError)")
    alpha = c.num("alpha")
    try:
        base = theta(c) * alpha ** (dim / (dim - 2))
    except (OverflowError, ZeroDivisionError) as exc:
        raise OverflowError(f"config.rope_parameters['alpha'] = {alpha!r}: the ntk_alpha "
                            f"rope's base cannot be computed ({exc})") from None
    if isinstance(base, complex) or not (math.isfinite(base) and base > 0):
        raise ValueError(f"the ntk_alpha rope's base rope_theta * alpha ** (dim / (dim - 2)) "
                         f"= {base!r} is not a finite positive number")
    return inv_freq(base, dim, opts), 1.0


#: a family's own rope types (its rotary class's init functions, not transformers' dict):
#: _rope_type maps a config to them only for those families
FAMILY_INITS: Dict[str, Init] = {"ntk_alpha": _ntk_alpha}


#: rope_type -> its init function, as transformers' ``ROPE_INIT_FUNCTIONS`` (plus "default",
#: which transformers keeps on each model's rotary class).  The coverage tool
#: (tools/hf_rope_coverage.py) takes its columns from these keys.
ROPE_INIT_FUNCTIONS: Dict[str, Init] = {
    "default": _default,
    "linear": _linear,
    "dynamic": _dynamic,
    "yarn": _yarn,
    "longrope": _longrope,
    "llama3": _llama3,
    "proportional": _proportional,
}
