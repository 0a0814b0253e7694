"""The drop-in ``nn.Module`` (:class:`SinusoidalPositionalEncoding`, public as
``sinpe.torch.SinusoidalPositionalEncoding``): the reference module's buffer and forward, the
table filled by sinpe with the kernels of the torch in this process."""
from __future__ import annotations

import ctypes
import math
from typing import TYPE_CHECKING

import torch
from torch import nn

from .._api import positional_encoding
from .._backends.policy import torch_kernels



def _check_width(d_model: int, base: float) -> None:
    """The references' refusals of a width (both compute ``-math.log(base) / d_model``, then
    assign ``d_model // 2`` cosine columns from ``ceil(d_model / 2)`` angles): d_model 0 raises
    ZeroDivisionError (or math.log's ValueError for a base <= 0) and an odd d_model >= 3
    raises RuntimeError, as there; d_model 1 is a sine column alone, as there.  A base
    <= 0 raises math.log's ValueError before any of these, whatever the width and length
    (an empty table, a module on meta: the references take the logarithm all the same)."""
    math.log(base)  # a base <= 0: math.log's ValueError first, as in the references
    if d_model == 0:
        raise ZeroDivisionError("float division by zero")
    if d_model >= 3 and d_model % 2:
        raise RuntimeError(
            f"d_model {d_model} is odd: the reference's {d_model // 2} cosine columns cannot "
            f"take its {(d_model + 1) // 2} angles (torch's shape mismatch in the reference)")


def _tutorial_ops(d_model: int, max_len: int, base: float) -> torch.Tensor:
    """The nn.Transformer tutorial's buffer as the tutorial computes it, with torch's own ops
    in torch's default dtype, on the CPU (sinpe's core computes float32 only: torch's float64,
    float16 and bfloat16 exp, sin and cos are torch's to give)."""
    positional_encoding(0, 2, base, backend=torch_kernels())  # base checked as elsewhere
    position = torch.arange(max_len, device="cpu").unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2, device="cpu")
                         * (-math.log(base) / d_model))
    pe = torch.zeros(max_len, 1, d_model, device="cpu")
    pe[:, 0, 0::2] = torch.sin(position * div_term)
    pe[:, 0, 1::2] = torch.cos(position * div_term)
    return pe


def _table(d_model: int, max_len: int, base: float, seq_first: bool = False) -> torch.Tensor:
    """The reference's buffer: shape (1, max_len, d_model), in torch's default dtype and on
    its default device, holding the float32 table's values (widened or rounded by torch's own
    conversion, as the reference's slice assignment does).  The storage is torch's, so the
    buffer can be resized like any tensor.  seq_first: the tutorial's (max_len, 1, d_model),
    whose arithmetic runs in the default dtype: float32 is sinpe's table, another dtype
    torch's own ops (_tutorial_ops)."""
    dtype = torch.get_default_dtype()
    device = torch.empty(0).device  # honours `with torch.device(...)` and set_default_device
    shape = (max_len, 1, d_model) if seq_first else (1, max_len, d_model)
    # torch's checks of the sizes first, as the references' first tensors make them
    pe = torch.empty(*shape, dtype=dtype, device="meta" if device.type == "meta" else "cpu")
    _check_width(d_model, base)
    if device.type == "meta":  # no data, as the reference on meta
        return pe
    if seq_first and dtype != torch.float32:
        pe = _tutorial_ops(d_model, max_len, base)
    elif dtype == torch.float32 and pe.numel() and d_model > 1:
        # filled through a ctypes view of its memory: .numpy() would mark the storage as
        # not resizable, unlike the reference's
        rows = (ctypes.c_float * d_model) * max_len
        positional_encoding(max_len, d_model, base, out=rows.from_address(pe.data_ptr()),
                            backend=torch_kernels())
    elif pe.numel():  # d_model 1: the sine column of the width-2 table, as the references'
        table = positional_encoding(max_len, max(d_model, 2), base, backend=torch_kernels())
        pe.copy_(torch.from_numpy(table[:, :d_model]).reshape(shape))
    return pe if device.type == "cpu" else pe.to(device)


class SinusoidalPositionalEncoding(nn.Module):
    """Sinusoidal positional encoding, with the table filled by sinpe."""

    if TYPE_CHECKING:  # the buffer (nn.Module types attributes Tensor | Module); for mypy
        pe: torch.Tensor  # only: TorchScript cannot resolve the class's (postponed) annotations

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.1,
                 base: float = 10000.0, batch_first: bool = True) -> None:
        super().__init__()
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first must be a bool, got {type(batch_first).__name__}")
        self.batch_first = batch_first
        self.dropout = nn.Dropout(p=dropout)
        # batch-first: (1, max_len, d_model); the PyTorch tutorial's seq-first: (max_len, 1, d_model)
        self.register_buffer("pe", _table(d_model, max_len, base, seq_first=not batch_first))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.batch_first:
            x = x + self.pe[:, :x.size(1)]
        else:  # x: (seq, batch, d_model), positions along axis 0
            x = x + self.pe[:x.size(0)]
        out: torch.Tensor = self.dropout(x)
        return out


# pickles and torch.save of a whole model name the public module, as before the wing had parts
SinusoidalPositionalEncoding.__module__ = "sinpe.torch"
