"""An interactive view of the encoding for notebooks (needs ipywidgets and matplotlib:
pip install 'sinpe[widget]').

    from sinpe.widget import explore
    explore(max_len=256, d_model=128)      # sliders: position, dimension

The waves are redrawn by :meth:`Explorer.update`, which needs no browser: it draws into a
matplotlib Figure (tests call it directly).
"""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from ._api import positional_encoding


class Explorer:
    """The state behind the widget: a table, and a figure that shows, for the chosen
    position and dimension, the wave of that dimension over all positions, the encoding
    vector of that position, and both marked where they cross."""

    def __init__(self, max_len: int = 256, d_model: int = 128, base: float = 10000.0,
                 backend: Any = None) -> None:
        self.table = positional_encoding(max_len, d_model, base, backend=backend)
        if self.table.shape[0] < 1:  # sliders need one position
            raise ValueError(f"max_len must be >= 1 for the explorer, got {max_len}")
        self.max_len, self.d_model, self.base = int(max_len), int(d_model), float(base)
        from matplotlib.figure import Figure

        self.figure = Figure(figsize=(9, 4.2), layout="constrained")
        self.wave_ax, self.vec_ax = self.figure.subplots(1, 2)
        self.pos = self.dim = 0

    def data(self, pos: int, dim: int) -> Dict[str, Any]:
        """What update draws: the wave PE(:, dim), the vector PE(pos, :), the value where
        they cross, and the wavelength 2 pi / div of dim's pair."""
        if not 0 <= pos < self.max_len or not 0 <= dim < self.d_model:
            raise ValueError(f"pos must be in [0, {self.max_len}) and dim in "
                             f"[0, {self.d_model}), got pos={pos}, dim={dim}")
        i = dim // 2
        div = float(np.exp(np.float32(2 * i) * np.float32(-np.log(self.base) / self.d_model)))
        return {"wave": self.table[:, dim], "vector": self.table[pos], "value":
                float(self.table[pos, dim]), "wavelength": 2 * np.pi / div,
                "kind": "sin" if dim % 2 == 0 else "cos"}

    def update(self, pos: int, dim: int) -> Dict[str, Any]:
        """Redraw for (pos, dim); returns data(pos, dim)."""
        d = self.data(pos, dim)
        self.pos, self.dim = pos, dim
        for ax in (self.wave_ax, self.vec_ax):
            ax.clear()
        self.wave_ax.plot(np.arange(self.max_len), d["wave"], lw=1)
        self.wave_ax.plot([pos], [d["value"]], "o", color="C3")
        self.wave_ax.set_title(f"dimension {dim} ({d['kind']}, wavelength "
                               f"{d['wavelength']:.4g})")
        self.wave_ax.set_xlabel("position")
        self.wave_ax.set_ylim(-1.1, 1.1)
        self.vec_ax.bar(np.arange(self.d_model), d["vector"], width=1.0)
        self.vec_ax.bar([dim], [d["value"]], width=1.0, color="C3")
        self.vec_ax.set_title(f"position {pos}")
        self.vec_ax.set_xlabel("dimension")
        self.vec_ax.set_ylim(-1.1, 1.1)
        return d


def explore(max_len: int = 256, d_model: int = 128, base: float = 10000.0,
            backend: Any = None) -> Any:
    """Sliders for position and dimension over the waves (ipywidgets). Returns the widget
    box (display it, or let the notebook cell show it); box.explorer is the Explorer."""
    try:
        import ipywidgets as W  # type: ignore[import-untyped]  # ships no types (ipywidgets 8)
    except ImportError:
        raise ImportError("sinpe.widget.explore needs ipywidgets: pip install "
                          "'sinpe[widget]'") from None
    ex = Explorer(max_len, d_model, base, backend)  # every argument checked here
    pos = W.IntSlider(0, 0, ex.max_len - 1, description="position", continuous_update=True)
    dim = W.IntSlider(0, 0, ex.d_model - 1, description="dimension", continuous_update=True)
    out = W.Output()

    def redraw(_: Any = None) -> None:
        ex.update(pos.value, dim.value)
        with out:
            out.clear_output(wait=True)
            from IPython.display import display

            display(ex.figure)  # type: ignore[no-untyped-call]  # IPython's is unannotated

    pos.observe(redraw, names="value")
    dim.observe(redraw, names="value")
    redraw()
    box = W.VBox([W.HBox([pos, dim]), out])
    box.explorer = ex
    return box
