"""The engines' own rope tables: what MLX and llama.cpp compute from positions, where their
angles are not transformers' (docs/engines.md).

MLX: ``inv[i] = exp(-i * (logf(base) / (rot/2)))`` (a FREQS job: glibc's logf, MLX's exp),
positions ``float(t) + float(offset)``, ``theta = position * inv`` in float32, MLX's sin and
cos (the 'mlx' backend's table job).  llama.cpp (ggml's ``ggml_rope_cache_init``):
``theta_scale = powf(base, -2 / n_dims)`` (glibc's powf), per position ``theta_0 = (float) p``
and ``theta_{j+1} = theta_j * theta_scale`` (float32 products in sequence), YaRN's ramp and
attention factor as ggml computes them, glibc's sinf/cosf (the 'jax-0.10' profile's, which
are glibc's for every element), times the attention factor.  Every float32 step here is one
IEEE operation of NumPy's (the same bits on any machine); the transcendental ones are the
core's.  Tables are (tables, seq, rot) float32, in the layout's column order.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from . import _jobs
from ._backends.policy import call_opts
from ._jobs import COS, SIN, _freqs, _table
from ._types import PresetOpts

F32 = np.float32
_SIN_FN, _COS_FN, _LOG = 1, 2, 3  # the MAP job's functions (sinpe.h: sinpe_func)


def mlx_args(args: Optional[Mapping[str, Any]], rot: int) -> Optional[np.ndarray]:
    """engine_args for MLX: {'freqs': its freqs= argument (rot / 2 positive finite values,
    rounded to float32 as an MLX array of them is)}, or None."""
    if args is None:
        return None
    if not isinstance(args, Mapping):
        raise TypeError(f"engine_args must be a mapping, got {type(args).__name__}")
    extra = sorted(set(args) - {"freqs"})
    if extra or "freqs" not in args:
        raise ValueError(f"engine_args: MLX takes ['freqs'], got {sorted(args)}")
    return _f32_vector("freqs", args["freqs"], rot // 2)


def mlx_tables(opts: PresetOpts, pos: np.ndarray, rot: int, theta: float, layout: str,
               empty: bool, freqs: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """MLX's cos and sin for float32 positions pos (tables, seq), opts with the 'mlx'
    backend; freqs: its freqs= (the inverse frequencies are then 1 / freqs in float32);
    empty: x has no elements (the checks only)."""
    h = rot // 2
    if freqs is not None:
        inv = np.float32(1) / freqs
    else:
        inv = _freqs("exp_log", h, opts, start=0, step=-1, b=float(h), base=theta)
    t = np.arange(rot)
    freq = np.ascontiguousarray(inv[t // 2] if layout == "pairs" else inv[t % h], np.float32)
    both = np.empty((2,) + pos.shape + (rot,), np.float32)
    for i, kind in enumerate((COS, SIN)):
        col = [4 * k + kind for k in range(rot)]
        if empty:
            _table(pos, freq, col, opts._replace(out=None), fill=False)
        else:
            _table(pos, freq, col, opts._replace(out=both[i]))
    if empty:
        both = np.zeros((2, 1, 0, rot), np.float32)
    return both[0], both[1]


#: llama.cpp's rope parameters as it reads them from a GGUF (engine_args=), and their defaults
LLAMA_ARGS: Dict[str, Any] = {"freq_scale": 1.0, "ext_factor": 0.0, "attn_factor": 1.0,
                              "beta_fast": 32.0, "beta_slow": 1.0, "n_ctx_orig": 0,
                              "freq_factors": None}


def _f32(key: str, v: Any, positive: bool = False) -> float:
    """A real engine_args number as the engine's float32: finite there (and > 0, normal, when
    positive), else ValueError naming it; not a real number: TypeError."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"engine_args[{key!r}] must be a real number, got {v!r}")
    try:
        d = float(v)
    except OverflowError:  # an int beyond float64
        d = float("inf")
    with np.errstate(all="ignore"):
        f = F32(d) if abs(d) < 1e39 else F32(np.inf)
    if not np.isfinite(f) or (positive and not f >= np.finfo(F32).tiny):
        raise ValueError(f"engine_args[{key!r}] must be a {'positive ' if positive else ''}"
                         f"finite float32 number, got {v!r}")
    return float(f)


def _f32_vector(key: str, v: Any, n: int) -> np.ndarray:
    """n positive finite float32 values (a 1-D array-like of real numbers)."""
    a = np.asarray(v)
    if a.dtype.kind not in "iuf":
        raise TypeError(f"engine_args[{key!r}] must hold real numbers, got {a.dtype}")
    with np.errstate(all="ignore"):
        f = a.astype(F32)
    if f.ndim != 1 or f.size != n:
        raise ValueError(f"engine_args[{key!r}] must hold rot_dim / 2 = {n} values, got "
                         f"shape {f.shape}")
    if not (np.isfinite(f).all() and (f >= np.finfo(F32).tiny).all()):
        raise ValueError(f"engine_args[{key!r}] must be positive finite float32 values")
    return f


def llama_args(args: Optional[Mapping[str, Any]], rot: int) -> Dict[str, Any]:
    """engine_args for llama.cpp, checked (known names; float32 numbers finite there,
    freq_scale and attn_factor positive; n_ctx_orig an int32 >= 0; freq_factors rot / 2
    positive values), before anything is computed."""
    out = dict(LLAMA_ARGS)
    if args is None:
        return out
    if not isinstance(args, Mapping):
        raise TypeError(f"engine_args must be a mapping, got {type(args).__name__}")
    for k, v in args.items():
        if k not in LLAMA_ARGS:
            raise ValueError(f"engine_args: llama.cpp takes {sorted(LLAMA_ARGS)}, got {k!r}")
        if k == "freq_factors":
            out[k] = None if v is None else _f32_vector(k, v, rot // 2)
        elif k == "n_ctx_orig":
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"engine_args['n_ctx_orig'] must be an int, got {v!r}")
            if not 0 <= int(v) < 1 << 31:
                raise ValueError(f"engine_args['n_ctx_orig'] must be in 0 .. 2^31 - 1 "
                                 f"(ggml's int32), got {v!r}")
            out[k] = int(v)
        else:
            out[k] = _f32(k, v, positive=k in ("freq_scale", "attn_factor"))
    return out


def int32_positions(pos: np.ndarray, engine: str) -> np.ndarray:
    """Integer positions that fit in the engine's int32 (ggml's positions, MLX's offsets)."""
    if pos.dtype.kind not in "iu" or (pos.size and (int(pos.min()) < -(1 << 31)
                                                    or int(pos.max()) >= 1 << 31)):
        raise ValueError(f"positions for producer={engine!r} must be integers that fit in "
                         f"its int32 positions, got {pos.dtype}"
                         + (f" from {pos.min()} to {pos.max()}" if pos.size else ""))
    return pos


def _fma(a: Any, b: Any, c: Any) -> np.ndarray:
    """float32 fma(a, b, c), one rounding (finite values): the product is exact in float64,
    the sum's error found exactly (two-sum) and folded in by rounding to odd before the one
    rounding to float32."""
    a64, b64, c64 = (np.asarray(v, F32).astype(np.float64) for v in (a, b, c))
    with np.errstate(all="ignore"):
        p = a64 * b64
        s = p + c64
        bb = s - p
        e = (p - (s - bb)) + (c64 - bb)
        odd = np.isfinite(s) & (e != 0) & ((s.view(np.int64) & 1) == 0)
        s = np.where(odd, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
    r: np.ndarray = s.astype(F32)
    return r


def _logf(core: Any, v: Any) -> Any:
    """glibc's logf of a float32 scalar (the core's MAP job)."""
    return _jobs.map_job(core, _LOG, np.array([v], F32))[0]


def _corr_dims(core: Any, n_dims: int, n_ctx: int, base: Any, fast: Any,
               slow: Any) -> Tuple[Any, Any]:
    """ggml_rope_yarn_corr_dims: the first and last pair YaRN's ramp runs over, in float32
    without FMA (ggml's base library), MAX/MIN as C's conditional macros."""
    def dim(n_rot: Any) -> Any:
        with np.errstate(all="ignore"):
            num = F32(n_ctx) / F32(F32(F32(n_rot) * F32(2)) * F32(np.pi))
            return F32(F32(n_dims) * _logf(core, num)) / F32(F32(2) * _logf(core, F32(base)))
    start, end = F32(np.floor(dim(fast))), F32(np.ceil(dim(slow)))
    return (F32(0) if F32(0) > start else start,
            F32(n_dims - 1) if F32(n_dims - 1) < end else end)


def llama_tables(opts: PresetOpts, pos: np.ndarray, rot: int, theta: float, layout: str,
                 args: Dict[str, Any]) -> Tuple[np.ndarray, np.ndarray]:
    """llama.cpp's cos and sin for integer positions pos (tables, seq): n_dims = rot; the
    core computes glibc's powf (the 'onnxruntime-1.32' profile's pow), logf and sinf/cosf
    ('jax-0.10'); opts: the call's threads."""
    h = rot // 2
    pow_opts = _jobs_opts(opts, "onnxruntime-1.32")
    scale = _freqs("pow", 1, pow_opts, start=-2, step=1, b=float(rot), base=theta)[0]
    p = np.asarray(pos, np.int64).astype(np.int32).astype(F32)  # ggml's int32 positions
    th = np.empty(pos.shape + (h,), F32)
    t = p
    with np.errstate(all="ignore"):
        for j in range(h):
            th[..., j] = t
            t = t * scale
        ff = args["freq_factors"]
        if ff is not None:
            if ff.ndim != 1 or ff.size < h:
                raise ValueError(f"engine_args['freq_factors'] must hold rot_dim / 2 = {h} "
                                 f"values, got shape {ff.shape}")
            te = th / ff[:h]
        else:
            te = th
        fs, ext, mscale = F32(args["freq_scale"]), F32(args["ext_factor"]), F32(args["attn_factor"])
        ti = fs * te
        if ext != 0:
            core = pow_opts.core
            lo, hi = _corr_dims(core, rot, args["n_ctx_orig"], theta, args["beta_fast"],
                                args["beta_slow"])
            y = (np.arange(h, dtype=F32) - lo) / (F32(0.001) if F32(0.001) > F32(hi - lo)
                                                  else F32(hi - lo))
            rm = np.where(y < 0, ext, np.where(y > 1, F32(0) * ext, (F32(1) - y) * ext)).astype(F32)
            ang = _fma(ti, (F32(1) - rm)[None], (te * rm).astype(F32))
            mscale = F32(_fma(F32(0.1), _logf(core, F32(F32(1) / fs)), F32(1.0)) * mscale)
        else:
            ang = ti
    jax = _jobs_opts(opts, "jax-0.10")
    flat = np.ascontiguousarray(ang, F32).reshape(-1)
    c = (_jobs.map_job(jax.core, _COS_FN, flat).reshape(ang.shape) * mscale).astype(F32)
    s = (_jobs.map_job(jax.core, _SIN_FN, flat).reshape(ang.shape) * mscale).astype(F32)
    t_ = np.arange(rot)
    cols = t_ // 2 if layout == "pairs" else t_ % h
    return np.ascontiguousarray(c[..., cols]), np.ascontiguousarray(s[..., cols])


def _jobs_opts(opts: PresetOpts, backend: str) -> PresetOpts:
    """The call's options with another backend (its threads kept)."""
    return call_opts(None, None, backend, opts.core.threads, None)


# ---- an engine's reading of a transformers config -------------------------------------------

def config_args(engine: str, c: Any, opts: PresetOpts) -> Tuple[Optional[Dict[str, Any]], str]:
    """(apply_rope's keywords for engine's own tables of config c (a sinpe._hf.config.Cfg),
    or None, why not).  llama.cpp: its GGUF converter's reading (convert_hf_to_gguf) and
    llama_context's: default; linear (freq_scale = 1 / factor); yarn (ext_factor 1,
    n_ctx_orig = original_max_position_embeddings, beta_fast/slow as given, the attention
    factor as llama_context computes it, in float32 through glibc's logf); llama3 (the
    converter's rope_freqs, computed with torch's float32 ops: freq_factors).  MLX: the
    default rope only (mlx-lm's readings of the others are not reproduced)."""
    p = c.p
    kind = str(p.get("rope_type", "default"))
    scaled = p.get("attention_factor") is not None and kind == "default"
    if kind == "default" and not scaled:
        return {}, ""
    if engine == "llama.cpp":
        if kind in ("linear", "yarn"):
            factor = F32(c.num("factor"))
            if not (np.isfinite(factor) and factor >= 1e-30 and F32(1) / factor > 0):
                raise ValueError(f"config.rope_parameters['factor'] must be positive and "
                                 f"finite in float32 for llama.cpp, got {p['factor']!r}")
        if kind == "linear":
            return {"engine_args": {"freq_scale": float(F32(1) / factor)}}, ""
        if kind == "yarn":
            c.num("original_max_position_embeddings")
            return {"engine_args": _yarn_args(p, opts)}, ""
        if kind == "llama3":
            return {"engine_args": {"freq_factors": _llama3_factors(c, opts)}}, ""
    return None, (f"{engine}'s reading of rope_type {kind!r} (its converter's or its model "
                  "code's parameters) is not reproduced yet")


def _yarn_args(p: Mapping[str, Any], opts: PresetOpts) -> Dict[str, Any]:
    """llama.cpp's YaRN parameters from a config's rope parameters: freq_scale = 1 / factor;
    llama_context's attention factor get_mscale(1 / freq_scale) * (1 / (1 + 0.1 logf(1 /
    freq_scale))) in float32 (no FMA: llama.cpp's own library is built without -march),
    which cancels ggml's own YaRN factor but for the roundings."""
    core = _jobs_opts(opts, "builtin").core
    fs = F32(1) / F32(p["factor"])
    factor = F32(1) / fs
    with np.errstate(all="ignore"):
        lg = _logf(core, factor)
        mscale = F32(1) if factor <= F32(1) else F32(F32(F32(0.1) * lg) + F32(1))
        attn = F32(mscale * F32(F32(1) / F32(F32(1) + F32(F32(0.1) * lg))))
    out: Dict[str, Any] = {"freq_scale": float(fs), "ext_factor": 1.0, "attn_factor": float(attn),
                           "n_ctx_orig": int(p["original_max_position_embeddings"])}
    for key in ("beta_fast", "beta_slow"):
        if p.get(key) is not None:
            out[key] = float(F32(p[key]))
    if p.get("extrapolation_factor") is not None:
        out["ext_factor"] = float(F32(p["extrapolation_factor"]))
    return out


def _llama3_factors(c: Any, opts: PresetOpts) -> np.ndarray:
    """llama.cpp's converter's rope_freqs for rope_type llama3: freqs = 1 / base ** (arange(0,
    dim, 2) / dim) (torch's float32 ops: sinpe's inverse frequencies with the call's
    backend), then per frequency with float32 0-d tensor steps (a Python number over a tensor
    is torch's t.reciprocal() * number): wavelen = 2 pi / freq; 1
    below high_freq_wavelen, factor above low_freq_wavelen, else smooth = (omp / wavelen -
    low) / (high - low) and 1 / ((1 - smooth) / factor + smooth).  dim: head_dim."""
    p = c.p
    dim = c.head(True)
    inv = _jobs._rope_inv_freq(dim, float(p["rope_theta"]), opts)
    factor = float(c.num("factor", p.get("factor", 8.0)))
    low = float(c.num("low_freq_factor", p.get("low_freq_factor", 1.0)))
    high = float(c.num("high_freq_factor", p.get("high_freq_factor", 4.0)))
    omp = float(c.num("original_max_position_embeddings",
                      p.get("original_max_position_embeddings") or 8192))
    if not (factor > 0 and high != low and omp > 0):
        raise ValueError("config.rope_parameters: llama3 needs factor > 0, "
                         "original_max_position_embeddings > 0 and high_freq_factor != "
                         "low_freq_factor")
    low_wl, high_wl = omp / low, omp / high
    out = np.empty(inv.size, F32)
    with np.errstate(all="ignore"):
        for i, freq in enumerate(inv):
            wl = F32(F32(F32(1) / F32(freq)) * F32(2 * np.pi))  # scalar / t: t.reciprocal() * scalar
            if wl < high_wl:
                out[i] = 1.0
            elif wl > low_wl:
                out[i] = F32(factor)
            else:
                sm = F32(F32(F32(F32(1) / wl) * F32(omp)) - F32(low)) / F32(high - low)
                out[i] = F32(1) / F32(F32(F32(F32(1) - sm) / F32(factor)) + sm)
    return out
