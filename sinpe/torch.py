"""sinpe.torch: a drop-in for the reference ``SinusoidalPositionalEncoding``.

    from sinpe.torch import SinusoidalPositionalEncoding
    pe = SinusoidalPositionalEncoding(512, max_len=5000, dropout=0.1)

Same constructor arguments (plus ``base``), same persistent buffer ``pe`` of
shape (1, max_len, d_model), same forward (``x + pe[:, :seq_len]`` then
dropout, drawing from torch's RNG exactly as the reference does), so
state_dicts load both ways and outputs are bit for bit equal: the table is always
computed with the kernels of the torch in this process (on x86-64 its own oneMKL,
the 'torch' backend), whatever sinpe's default backend is.  The table is built by sinpe, which
is where the time goes in the reference.  torch is imported only by this
module.  Works with .to(dtype)/.half(), torch.jit.script and torch.compile.
Like the reference's, the buffer is made in torch's default dtype (values of
the float32 table, converted by torch: torch.set_default_dtype(torch.float64)
gives a float64 buffer and a float64 forward) and on its default device (under
``with torch.device('meta')`` it is a meta tensor with no data; on other
devices the CPU table is copied there).
"""
from __future__ import annotations

import ctypes

import torch
from torch import nn

from ._choice import torch_kernels
from ._api import positional_encoding

__all__ = ["SinusoidalPositionalEncoding"]


def _table(d_model: int, max_len: int, base: float) -> torch.Tensor:
    """The reference's buffer: shape (1, max_len, d_model), in torch's default dtype and on
    its default device, holding the float32 table's values (widened or rounded by torch's own
    conversion, as the reference's slice assignment does).  The storage is torch's, so the
    buffer can be resized like any tensor."""
    dtype = torch.get_default_dtype()
    device = torch.empty(0).device  # honours `with torch.device(...)` and set_default_device
    if device.type == "meta":  # no data, as the reference on meta
        return torch.empty(1, max_len, d_model, dtype=dtype, device=device)
    pe = torch.empty(1, max_len, d_model, dtype=dtype, device="cpu")
    if dtype == torch.float32 and pe.numel():
        # filled through a ctypes view of its memory: .numpy() would mark the storage as
        # not resizable, unlike the reference's
        rows = (ctypes.c_float * d_model) * max_len
        positional_encoding(max_len, d_model, base, out=rows.from_address(pe.data_ptr()),
                            backend=torch_kernels())
    elif pe.numel():
        table = positional_encoding(max_len, d_model, base, backend=torch_kernels())
        pe.copy_(torch.from_numpy(table)[None])
    return pe if device.type == "cpu" else pe.to(device)


class SinusoidalPositionalEncoding(nn.Module):
    """Sinusoidal positional encoding, with the table filled by sinpe."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.1,
                 base: float = 10000.0) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        self.register_buffer("pe", _table(d_model, max_len, base))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.pe[:, :x.size(1)]
        return self.dropout(x)
