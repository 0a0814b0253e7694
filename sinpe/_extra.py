"""Rotary embeddings applied in place, and the tables' relative-position property.

apply_rope builds its cos/sin rows in the C core (as the presets do) and rotates x there
in one pass; shift_matrix is plain NumPy (float64), for inspection.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from . import _sinpe
from .presets import COS, SIN, _admit, _freqs, _int, _opts, _positive, _rope_inv_freq, _table


def apply_rope(x: Any, positions: Any = None, *, base: float = 10000.0, layout: str = "half",
               offset: int = 0, seq_dim: int = -2, rot_dim: Optional[int] = None,
               backend: Optional[str] = None, threads: Optional[int] = None,
               torch_threads: Optional[int] = None) -> Any:
    """Rotate x in place by the rotary position embedding (RoPE) and return it.

    x: a writable array (float32, float16, bfloat16 or float64) of shape
       (..., seq, head_dim), seq on axis seq_dim: (batch, heads, seq, head_dim) with the
       default -2, (batch, seq, heads, head_dim) with seq_dim=-3 (or 1).
    positions: (seq,) or (batch, seq) (HF's position_ids; batch = x.shape[0]); default
       offset + arange(seq). Rounded to float32 as torch's .float() does.
    layout: 'half': transformers' ``apply_rotary_pos_emb`` with ``LlamaRotaryEmbedding``'s
       default cos/sin (``x * cos + rotate_half(x) * sin``, rotate_half = cat(-x2, x1); in
       x's dtype with cos/sin cast to it, every op rounded as torch does);
       'pairs': rotary-embedding-torch's ``apply_rotary_emb(RotaryEmbedding(rot)(t), x)``
       (pairwise rotate_half; computed in float32 and rounded once to x's dtype).
    rot_dim: rotate only the first rot_dim columns (even; default head_dim), as partial
       rotary models and rotary-embedding-torch with a smaller dim do.
    base: theta (rope_theta). backend, threads, torch_threads: as for the tables.
    """
    a = x if isinstance(x, np.ndarray) else np.asarray(x)
    if a.ndim < 2:
        raise ValueError(f"x must have shape (..., seq, head_dim), got shape {a.shape}")
    if layout not in ("half", "pairs"):
        raise ValueError(f"layout must be 'half' or 'pairs', got {layout!r}")
    sdim = _int(seq_dim, "seq_dim", minimum=-a.ndim)
    sd = sdim + a.ndim if sdim < 0 else sdim
    if not 0 <= sd < a.ndim - 1:
        raise ValueError(f"seq_dim={sdim} is not an axis of x before the last "
                         f"(x has shape {a.shape})")
    seq, d = a.shape[sd], a.shape[-1]
    rot = d if rot_dim is None else _int(rot_dim, "rot_dim")
    if rot % 2 or rot > d or rot < 2:
        raise ValueError(f"rot_dim must be even, >= 2 and <= head_dim = {d}, got {rot}")
    theta = _positive(base, "base")
    off = _int(offset, "offset")
    opts = _opts(None, None, backend, threads, torch_threads)
    if positions is None:
        pos, tables = None, 1
    else:
        if off:
            raise ValueError("offset and positions exclude each other")
        pos = np.asarray(positions)
        pos = pos[None] if pos.ndim == 1 else pos
        if pos.ndim != 2 or pos.shape[1] != seq or pos.shape[0] not in (1, a.shape[0]) \
                or (pos.shape[0] > 1 and sd == 0):
            raise ValueError(f"positions must have shape (seq,) or (batch, seq) = "
                             f"({a.shape[0]}, {seq}) for x of shape {a.shape}, got "
                             f"{np.shape(positions)}")
        tables = pos.shape[0]
    _admit((2, tables, seq, rot), dict(opts, dtype=np.float32), "its cos and sin tables",
           np.float32)
    inv = _rope_inv_freq(rot, theta, opts)
    h = rot // 2
    t = np.arange(rot)
    freq = np.ascontiguousarray(inv[t // 2] if layout == "pairs" else inv[t % h], np.float32)
    cs = []
    for kind in (COS, SIN):  # emb.cos(), emb.sin(): two tensors of emb's shape
        col = [4 * k + kind for k in range(rot)]
        if pos is None:  # arange(offset, offset + seq): the core checks the last position
            cs.append(_table(seq, freq, col, opts, offset=off, own=True)[None])
        else:
            cs.append(_table(pos, freq, col, opts))
    return _sinpe.rope(opts["core"], x, cs[0], cs[1], sd, 0 if tables > 1 else -1,
                       layout == "pairs")


def shift_matrix(k: int, d_model: int, base: float = 10000.0, *,
                 backend: Optional[str] = None) -> np.ndarray:
    """The relative-position property of the seeds: the block-diagonal rotation R_k
    (float64, d_model x d_model) with PE(pos + k) = R_k @ PE(pos) for the exact sinusoids of
    the table's frequencies (div[i], the table's float32 values on `backend`). Block i acts
    on (sin, cos) of pair i: [[cos k w_i, sin k w_i], [-sin k w_i, cos k w_i]]. The float32
    table meets it up to its roundings, which grow with pos and k (docs/presets.md)."""
    d = _int(d_model, "d_model", minimum=2)
    if d % 2:
        raise ValueError(f"d_model must be an even integer >= 2, got {d}")
    kk = _int(k, "k", minimum=-(1 << 62))
    b = _positive(base, "base")
    opts = _opts(None, None, backend, None, None)
    _admit((d, d), opts, "the matrix", np.float64)
    div = _freqs("exp_mul", d // 2, opts, step=2, a=-math.log(b) / d).astype(np.float64)
    th = kk * div
    c, s = np.cos(th), np.sin(th)
    R = np.zeros((d, d))
    i = np.arange(d // 2)
    R[2 * i, 2 * i], R[2 * i, 2 * i + 1] = c, s
    R[2 * i + 1, 2 * i], R[2 * i + 1, 2 * i + 1] = -s, c
    return R
