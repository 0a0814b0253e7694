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


def mlx_tables(opts: PresetOpts, pos: np.ndarray, rot: int, theta: float, layout: str,
               empty: bool) -> Tuple[np.ndarray, np.ndarray]:
    """MLX's cos and sin for float32 positions pos (tables, seq), opts with the 'mlx'
    backend; empty: x has no elements (the checks only)."""
    h = rot // 2
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


def llama_args(args: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """engine_args for llama.cpp, checked: known names, finite numbers."""
    out = dict(LLAMA_ARGS)
    if args is None:
        return out
    if not isinstance(args, Mapping):
        raise TypeError(f"engine_args must be a mapping, got {type(args).__name__}")
    for k, v in args.items():
        if k not in LLAMA_ARGS:
            raise ValueError(f"engine_args: llama.cpp takes {sorted(LLAMA_ARGS)}, got {k!r}")
        if k == "freq_factors":
            out[k] = None if v is None else np.asarray(v, np.float32)
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or not np.isfinite(float(v)):
            raise ValueError(f"engine_args[{k!r}] must be a finite number, got {v!r}")
        out[k] = int(v) if k == "n_ctx_orig" else float(v)
    if out["freq_scale"] == 0:
        raise ValueError("engine_args['freq_scale'] must not be 0")
    return out


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
