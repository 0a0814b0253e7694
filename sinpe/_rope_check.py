"""rope_check: where the engines serving a model would rotate it differently from
transformers (``sinpe rope-check CONFIG``; docs/engines.md).

For a transformers config, a seeded q of the config's head_dim is rotated by transformers'
eager rotation with the tables its rotary module returns in q's dtype (sinpe.presets.hf_rope:
what an exported graph holds), and by each
producer (sinpe._producers): the engines that read a cache get those tables; MLX and
llama.cpp compute their own from the config where sinpe reproduces their reading of it
(sinpe._angles.config_args: MLX's default rope; llama.cpp's default, linear, yarn and llama3
as its GGUF converter and llama_context read them), else their entry says why not.  Per producer: how many values differ in their bits, the largest absolute
difference and the first position where one differs.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from . import _angles, _producers
from ._backends.policy import call_opts
from ._hf import config as _config
from ._rope import apply_rope

#: families whose tables are interleaved (repeat_interleave), rotated in float32 and rounded once
_PAIRS = frozenset({"cohere", "cohere2", "blt"})
#: families whose tables are half width (emb = freqs), rotated by halves
_HALF_WIDTH = frozenset({"gpt_oss"})
DTYPES = ("float32", "float16", "bfloat16")


def load_config(path: Any) -> Dict[str, Any]:
    """A transformers config.json (a file, or a folder holding one) as a dict."""
    p = os.fspath(path)
    if os.path.isdir(p):
        p = os.path.join(p, "config.json")
    with open(p, encoding="utf-8") as f:
        try:
            cfg = json.load(f)
        except ValueError as exc:
            raise ValueError(f"{p}: not a JSON config ({exc})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{p}: a config.json holds a JSON object, got {type(cfg).__name__}")
    return cfg


def _array(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise ValueError("dtype='bfloat16' needs ml_dtypes (pip install ml_dtypes)") from None
        return x.astype(ml_dtypes.bfloat16)
    return x.astype(dtype)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def rope_check(config: Any, *, positions: int = 512, dtype: str = "float32",
               producers: Optional[Sequence[str]] = None, heads: int = 4,
               layer_type: Optional[str] = None, seed: int = 0,
               keep: bool = False) -> Dict[str, Dict[str, Any]]:
    """rope_check(config, *, positions=512, dtype='float32', producers=None, heads=4,
    layer_type=None, seed=0) -> {producer: result}

    Rotates a seeded q of shape (1, positions, heads, head_dim) (standard normal values in
    dtype) at positions 0 .. positions-1 by transformers' eager rotation and by each producer
    (default: every one sinpe has but transformers), and compares the bits.  config: a
    transformers config, its dict, or the path of a config.json (or of its folder).  Each
    result: {"differ", "total", "max_abs", "first_position"} (first_position None when none
    differs), or {"refused": why} where the engine does not run the case or sinpe does not
    reproduce its reading of the config.  keep=True adds "diff": |got - want| as float64 of
    q's shape (for a plot)."""
    if isinstance(config, (str, bytes, os.PathLike)):
        config = load_config(config)
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if isinstance(positions, bool) or not isinstance(positions, int) or positions < 1:
        raise ValueError(f"positions must be an int >= 1, got {positions!r}")
    if isinstance(heads, bool) or not isinstance(heads, int) or not 1 <= heads <= 256:
        raise ValueError(f"heads must be an int in 1..256, got {heads!r}")
    names: List[str] = [n for n in _producers.PRODUCERS if n != "transformers"] \
        if producers is None else list(producers)
    if not names:
        raise ValueError("producers: name at least one producer")
    for name in names:  # an unknown name (or serving CPU) is the caller's error, not a refusal
        if not isinstance(name, str) or name.partition(":")[0] not in _producers.PRODUCERS:
            raise ValueError(f"producer must be one of {sorted(_producers.PRODUCERS)}, got "
                             f"{name!r}")
        if ":" in name:
            _producers.producer(name, "float32", "half", 2, 4)
    cfg = _config.read(config, layer_type)
    opts = call_opts(None, None, None, None, None)
    from . import presets
    q = _array(np.zeros(1, np.float32), dtype)  # (bfloat16 needs ml_dtypes: said first)
    # the tables the rotary module returns, in q's dtype: what an exported graph holds
    cos, sin = presets.hf_rope(config, np.arange(positions)[None], layer_type=layer_type,
                               dtype=q.dtype)
    if not (np.isfinite(np.asarray(cos, np.float32)).all()
            and np.isfinite(np.asarray(sin, np.float32)).all()):
        raise ValueError("the config's rotary tables are not finite (transformers' own tables "
                         "for it hold NaN or infinity): nothing to compare")
    head = cfg.head(True)
    if cfg.model_type in _HALF_WIDTH:
        cos, sin = np.concatenate((cos, cos), -1), np.concatenate((sin, sin), -1)
    layout = "pairs" if cfg.model_type in _PAIRS else "half"
    rot = cos.shape[-1]
    rng = np.random.default_rng(seed)
    q = _array(rng.standard_normal((1, positions, heads, head)).astype(np.float32), dtype)
    want = q.copy()
    apply_rope(want, cos=cos, sin=sin, layout=layout, seq_dim=1)
    out: Dict[str, Dict[str, Any]] = {}
    for name in names:
        got = q.copy()
        try:
            p = _producers.producer(name, dtype, layout, rot, head)
            if p is not None and p.p.angles:
                kw, why = _angles.config_args(p.p.angles, cfg, opts)
                if kw is None:
                    out[name] = {"refused": why}
                    continue
                apply_rope(got, layout=layout, seq_dim=1, rot_dim=rot, producer=name,
                           base=float(cfg.p["rope_theta"]), **kw)
            else:
                apply_rope(got, cos=cos, sin=sin, layout=layout, seq_dim=1, producer=name)
        except (ValueError, TypeError, NotImplementedError, OverflowError) as exc:
            out[name] = {"refused": str(exc)}
            continue
        out[name] = _compare(got, want, keep)
    return out


def _compare(got: np.ndarray, want: np.ndarray, keep: bool) -> Dict[str, Any]:
    bad = _bits(got) != _bits(want)
    g, w = got.astype(np.float64), want.astype(np.float64)
    bad &= ~(np.isnan(g) & np.isnan(w))
    diff = np.abs(g - w)
    rows = np.nonzero(bad.any(axis=(0, 2, 3)))[0]
    r: Dict[str, Any] = {"differ": int(bad.sum()), "total": int(bad.size),
                         "max_abs": float(np.nanmax(np.where(bad, diff, 0.0))) if bad.size else 0.0,
                         "first_position": int(rows[0]) if rows.size else None}
    if keep:
        r["diff"] = np.where(bad, diff, 0.0)
    return r


def report(results: Mapping[str, Mapping[str, Any]]) -> str:
    """The text table of rope_check's results."""
    lines = [f"{'producer':<16} {'differ / total':>24} {'max |diff|':>12} {'first position':>15}"]
    for name, r in results.items():
        if "refused" in r:
            lines.append(f"{name:<16} refused: {r['refused']}")
            continue
        share = 100.0 * r["differ"] / r["total"] if r["total"] else 0.0
        first = "-" if r["first_position"] is None else str(r["first_position"])
        lines.append(f"{name:<16} {r['differ']:>10} / {r['total']:<8} ({share:5.1f}%) "
                     f"{r['max_abs']:>10.3g} {first:>15}")
    return "\n".join(lines)


def plot(results: Mapping[str, Mapping[str, Any]], path: str) -> None:
    """One panel per producer that ran: the largest |difference| per position (rows) and
    rotated column (columns) over the heads (needs results made with keep=True)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ran = [(n, r) for n, r in results.items() if "diff" in r]
    fig, axes = plt.subplots(1, max(1, len(ran)), figsize=(3.2 * max(1, len(ran)), 3.6),
                             squeeze=False)
    for ax, (name, r) in zip(axes[0], ran):
        m = r["diff"].max(axis=(0, 2))
        ax.imshow(m, aspect="auto", interpolation="nearest", cmap="magma")
        ax.set_title(f"{name}\n{r['differ']} differ", fontsize=8)
        ax.set_xlabel("column (frequency)", fontsize=7)
        ax.set_ylabel("position", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
