"""sinpe.torch: a drop-in for the reference ``SinusoidalPositionalEncoding``.

    from sinpe.torch import SinusoidalPositionalEncoding
    pe = SinusoidalPositionalEncoding(512, max_len=5000, dropout=0.1)

Same constructor arguments (plus ``base``), same persistent buffer ``pe`` of
shape (1, max_len, d_model), same forward (``x + pe[:, :seq_len]`` then
dropout, drawing from torch's RNG exactly as the reference does), so
state_dicts load both ways and outputs are bit for bit equal (with the 'mkl'
backend on x86-64; see sinpe.numerics()).  The table is built by sinpe, which
is where the time goes in the reference.  torch is imported only by this
module.  Works with .to(dtype)/.half(), torch.jit.script and torch.compile.
"""
from __future__ import annotations

import torch
from torch import nn

from ._api import positional_encoding

__all__ = ["SinusoidalPositionalEncoding"]


class SinusoidalPositionalEncoding(nn.Module):
    """Sinusoidal positional encoding, with the table filled by sinpe."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.1,
                 base: float = 10000.0) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        table = positional_encoding(max_len, d_model, base)
        self.register_buffer("pe", torch.from_numpy(table).unsqueeze(0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.pe[:, :x.size(1)]
        return self.dropout(x)
