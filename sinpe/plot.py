"""Pictures of the encoding (needs matplotlib: pip install 'sinpe[plot]').

    from sinpe import plot
    plot.heatmap(sinpe.positional_encoding(256, 128)).savefig("heatmap.png")
    plot.waves(200, 128, dims=(2, 10, 30, 60)).savefig("waves.png")
    plot.similarity(256, 128).savefig("similarity.png")

Each function returns a matplotlib Figure and draws nothing on screen by
itself, so it works under the Agg backend in scripts and tests.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from ._api import positional_encoding


def _figure(figsize: Any) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, layout="constrained")


#: Rows and columns a heatmap draws at most (a 4000-pixel figure has no more).
MAX_SAMPLES = 2048


def heatmap(table: Any = None, *, max_len: int = 256, d_model: int = 128,
            base: float = 10000.0, figsize: Any = (8, 4.5)) -> Any:
    """The table as an image: position down, dimension across.  table: any array of shape
    (max_len, d_model), or with leading axes of length 1 (a torch module's (1, L, d) pe);
    tables larger than MAX_SAMPLES rows or columns are drawn from every k-th one."""
    pe = np.asarray(table if table is not None else positional_encoding(max_len, d_model, base))
    while pe.ndim > 2 and pe.shape[0] == 1:
        pe = pe[0]
    if pe.ndim != 2:
        raise ValueError(f"table must have shape (max_len, d_model) (leading axes of length 1 "
                         f"are dropped), got shape {pe.shape}")
    # an image needs no more samples than the figure has pixels: every k-th row and column
    # (a view), so that a table of any size plots in bounded memory
    n0, n1 = pe.shape
    k0, k1 = (max(1, -(-n // MAX_SAMPLES)) for n in pe.shape)
    pe = np.asarray(pe[::k0, ::k1], dtype=np.float32)
    fig = _figure(figsize)
    ax = fig.add_subplot()
    im = ax.imshow(pe, aspect="auto", cmap="RdBu", vmin=-1, vmax=1, interpolation="nearest")
    ax.set_xlabel("dimension")
    ax.set_ylabel("position")
    ax.set_title(f"sinusoidal positional encoding ({n0} x {n1})")
    fig.colorbar(im, ax=ax, shrink=0.8)
    return fig


def waves(max_len: int = 200, d_model: int = 128, dims: Optional[Sequence[int]] = None,
          base: float = 10000.0, figsize: Any = (8, 4.5)) -> Any:
    """PE(pos, dim) against position for a few dimensions: low ones fast, high ones slow."""
    pe = positional_encoding(max_len, d_model, base)
    if dims is None:
        dims = sorted({min(d_model - 2, 2 * max(1, round(d_model * f / 2)))
                       for f in (0.02, 0.1, 0.25, 0.5)})
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) \
                or not 0 <= d < d_model:
            raise ValueError(f"dims must be integers in [0, {d_model}), got {d!r}")
    fig = _figure(figsize)
    ax = fig.add_subplot()
    pos = np.arange(max_len)
    for d in dims:
        ax.plot(pos, pe[:, d], label=f"dim {d} ({'sin' if d % 2 == 0 else 'cos'})", lw=1.2)
    ax.set_xlabel("position")
    ax.set_ylabel("PE(position, dim)")
    ax.set_title("low dimensions oscillate fast, high dimensions slowly")
    ax.legend(loc="upper right", fontsize="small")
    return fig


def similarity(max_len: int = 256, d_model: int = 128, base: float = 10000.0,
               figsize: Any = (5.5, 4.5)) -> Any:
    """PE(p) . PE(q) for all pairs: it depends (mostly) on p - q, the relative-position structure."""
    pe = positional_encoding(max_len, d_model, base).astype(np.float64)
    sim = pe @ pe.T
    fig = _figure(figsize)
    ax = fig.add_subplot()
    im = ax.imshow(sim, cmap="viridis", interpolation="nearest")
    ax.set_xlabel("position q")
    ax.set_ylabel("position p")
    ax.set_title("PE(p) . PE(q)")
    fig.colorbar(im, ax=ax, shrink=0.8)
    return fig


def save_readme_images(folder: str) -> None:
    """The three pictures of the README (docs/*.png)."""
    import os

    os.makedirs(folder, exist_ok=True)
    heatmap().savefig(os.path.join(folder, "heatmap.png"), dpi=80)
    waves().savefig(os.path.join(folder, "waves.png"), dpi=80)
    similarity().savefig(os.path.join(folder, "similarity.png"), dpi=80)
