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

``batch_first=False`` holds the PyTorch nn.Transformer tutorial's seq-first buffer instead, of
shape (max_len, 1, d_model), and adds along axis 0 (``x + pe[:x.size(0)]``): the tutorial's
state_dict loads.  The tutorial computes in torch's default dtype (its aranges are int64 times
a Python float): under float32 its buffer is sinpe's table; under float64, float16 or bfloat16
it is torch's own exp, sin and cos in that dtype, which sinpe's core does not compute, so the
module then builds that table with torch's own ops, exactly as the tutorial (on the CPU, copied
to another default device).  Widths as both references take them: d_model 1 is a sine column
alone, d_model 0 raises ZeroDivisionError and an odd d_model >= 3 RuntimeError, as there.

Also transformers' ``apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)`` (with GPT-NeoX's
partial form) and its variants ``apply_rotary_pos_emb_interleave`` (DeepSeek-V3),
``apply_rotary_pos_emb_glm`` and ``apply_rotary_pos_emb_cohere``: new tensors, bit for bit
with transformers' functions, rotated by sinpe's core (the tables from
:func:`sinpe.presets.hf_rope` or from the model's own rotary module).
"""
from __future__ import annotations

import ctypes
import math
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

import torch
from torch import nn

from . import _dtypes, _torch_forms as _forms
from ._backends.policy import torch_kernels
from ._api import positional_encoding

_dtypes.torch_seen(torch)  # the binding takes torch's C-level export of a tensor from now on
_F = _forms.FORMS
_Pair = Tuple[torch.Tensor, torch.Tensor]

__all__ = ["SinusoidalPositionalEncoding", "apply_rotary_pos_emb",
           "apply_rotary_pos_emb_interleave", "apply_rotary_pos_emb_glm",
           "apply_rotary_pos_emb_cohere", "apply_rotary_pos_emb_olmo"]


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


# ---- transformers' apply_rotary_pos_emb and its variants (sinpe/_torch_forms.py) -------------
#
# Each returns new tensors equal, bit for bit, to transformers' (5.24.0) function, gradients
# included: a plain CPU call (nothing to record) is rotated by sinpe's core; whatever records
# or transforms the call (autograd, vmap, torch.func, meta tensors, other devices, layouts the
# core's tables cannot express) runs transformers' own graph; torch.compile and torch.export
# trace the form's operator.

def apply_rotary_pos_emb(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                         unsqueeze_dim: int = 1) -> "_Pair":
    """apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1) -> (q_embed, k_embed)

    transformers' ``apply_rotary_pos_emb`` (Llama and the families that copy it):
    ``q * cos + rotate_half(q) * sin`` with cos/sin unsqueezed at unsqueeze_dim (1 for q of
    shape (batch, heads, seq, dim), 2 for (batch, seq, heads, dim)); when cos is narrower than
    q (``rotary_dim = cos.shape[-1]``), GPT-NeoX's partial form: the first rotary_dim channels
    rotate, the rest pass through (GPT-NeoX, Phi, StableLM, Persimmon).  New tensors, bit for
    bit with transformers' at float32, float16 and bfloat16, gradients included."""
    out: _Pair = _forms.call(_F["apply_rotary_pos_emb"], (q, k, cos, sin, unsqueeze_dim), {})
    return out


def apply_rotary_pos_emb_interleave(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                                    sin: torch.Tensor, position_ids: Any = None,
                                    unsqueeze_dim: int = 1) -> "_Pair":
    """apply_rotary_pos_emb_interleave(q, k, cos, sin, position_ids=None, unsqueeze_dim=1)

    transformers' ``apply_rotary_pos_emb_interleave`` (DeepSeek-V3, GLM-4-MoE-Lite,
    Mistral 4, LongCat-Flash...): q's interleaved pairs ``q1, q2 = q[..., 0::2], q[...,
    1::2]`` rotated by the first half of cos/sin, the result in halves: ``cat(q1 * cos - q2 *
    sin, q2 * cos + q1 * sin)``.  position_ids is unused (as there).  Bit for bit at float32,
    float16 and bfloat16, gradients included."""
    out: _Pair = _forms.call(_F["apply_rotary_pos_emb_interleave"],
                             (q, k, cos, sin, position_ids, unsqueeze_dim), {})
    return out


def apply_rotary_pos_emb_olmo(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                              sin: torch.Tensor, unsqueeze_dim: int = 1) -> "_Pair":
    """apply_rotary_pos_emb_olmo(q, k, cos, sin, unsqueeze_dim=1) -> (q_embed, k_embed)

    transformers OLMo's ``apply_rotary_pos_emb`` (OLMo, OLMo 2, OLMo 3, FlexOlmo): its
    rotary module returns float32 cos/sin whatever q's dtype, so the products are promoted
    (q widened exactly), and the results are cast back: ``q_embed.to(q.dtype)``.  New tensors,
    bit for bit at float32, float16 and bfloat16; gradients are those of OLMo's graph (each
    branch's gradient rounded to q's dtype before their sum)."""
    out: _Pair = _forms.call(_F["apply_rotary_pos_emb_olmo"], (q, k, cos, sin, unsqueeze_dim), {})
    return out


def apply_rotary_pos_emb_glm(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                             sin: torch.Tensor, unsqueeze_dim: int = 1) -> "_Pair":
    """apply_rotary_pos_emb_glm(q, k, cos, sin, unsqueeze_dim=1) -> (q_embed, k_embed)

    transformers GLM's ``apply_rotary_pos_emb`` (models/glm, glm4, helium): ``cos = cos[...,
    :d // 2].repeat_interleave(2)`` (d = cos.shape[-1]), the first d channels rotated in
    interleaved pairs (``rotate_half`` = ``stack(-x[1::2], x[0::2]).flatten``), the rest
    passed through; every op in q's dtype.  Bit for bit at float32, float16 and bfloat16,
    gradients included."""
    out: _Pair = _forms.call(_F["apply_rotary_pos_emb_glm"], (q, k, cos, sin, unsqueeze_dim), {})
    return out


def apply_rotary_pos_emb_cohere(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                                sin: torch.Tensor, unsqueeze_dim: int = 1) -> "_Pair":
    """apply_rotary_pos_emb_cohere(q, k, cos, sin, unsqueeze_dim=1) -> (q_embed, k_embed)

    transformers Cohere's ``apply_rotary_pos_emb`` (cohere, cohere2): q and k upcast to
    float32, rotated in interleaved pairs with cos/sin as given (``CohereRotaryEmbedding``'s
    repeat_interleave layout), ``(q * cos) + (rotate_half(q) * sin)`` in float32, then
    rounded once to q's dtype.  Bit for bit at float32, float16 and bfloat16, gradients
    included."""
    out: _Pair = _forms.call(_F["apply_rotary_pos_emb_cohere"], (q, k, cos, sin, unsqueeze_dim), {})
    return out


def apply_rotary_pos_emb_half(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                              sin: torch.Tensor, unsqueeze_dim: int = 1) -> "_Pair":
    """apply_rotary_pos_emb_half(q, k, cos, sin, unsqueeze_dim=1) -> (q_embed, k_embed)

    transformers GPT-OSS's ``apply_rotary_pos_emb`` (gpt_oss, openai_privacy_filter): cos/sin
    are half-width (the rotary returns ``emb = freqs``), x's halves ``x1, x2`` become
    ``cat(x1 * cos - x2 * sin, x2 * cos + x1 * sin)``.  Equal, bit for bit, to the standard form
    with the tables repeated (``a + (-b)`` is ``a - b`` exactly); gradients are GPT-OSS's."""
    out: _Pair = _forms.call(_F["apply_rotary_pos_emb_half"], (q, k, cos, sin, unsqueeze_dim), {})
    return out


def apply_rotary_pos_emb_float32(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                                 sin: torch.Tensor, unsqueeze_dim: int = 1) -> "_Pair":
    """apply_rotary_pos_emb_float32(q, k, cos, sin, unsqueeze_dim=1) -> (q_embed, k_embed)

    transformers ModernBERT's ``apply_rotary_pos_emb`` (modernbert, modernbert_decoder, esm,
    evolla): q and k widened to float32 (exact), rotated in halves with cos/sin (widened by
    the products' promotion, exact), then rounded once to q's dtype; gradients are
    ModernBERT's (each ``q.float()`` branch's gradient rounded to q's dtype before the sum)."""
    out: _Pair = _forms.call(_F["apply_rotary_pos_emb_float32"],
                             (q, k, cos, sin, unsqueeze_dim), {})
    return out


def apply_rotary_pos_emb_glm_float32(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                                     sin: torch.Tensor, unsqueeze_dim: int = 1) -> "_Pair":
    """apply_rotary_pos_emb_glm_float32(q, k, cos, sin, unsqueeze_dim=1) -> (q_embed, k_embed)

    transformers ERNIE 4.5's ``apply_rotary_pos_emb`` (ernie4_5, ernie4_5_moe, hy_v4_vl):
    GLM's interleaved pairs (the first half of cos/sin repeated pairwise) computed in float32
    (``rotate_half(q).float()``: a negation, exact in q's dtype), rounded once to q's dtype;
    gradients are ERNIE's."""
    out: _Pair = _forms.call(_F["apply_rotary_pos_emb_glm_float32"],
                             (q, k, cos, sin, unsqueeze_dim), {})
    return out


def apply_rotary_pos_emb_single(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                                unsqueeze_dim: int = 1) -> torch.Tensor:
    """apply_rotary_pos_emb_single(x, cos, sin, unsqueeze_dim=1) -> x_embed

    transformers Gemma 3n's ``apply_rotary_pos_emb(x, cos, sin, unsqueeze_dim=1)`` (one
    tensor: gemma3n, gemma4, diffusion_gemma...): ``x * cos + rotate_half(x) * sin``."""
    out: torch.Tensor = _forms.call(_F["apply_rotary_pos_emb_single"],
                                    (x, cos, sin, unsqueeze_dim), {})
    return out


_core_opts = _forms._core_opts  # the core's options of a rotation (tests call the core alike)

# ---- sinpe.torch.patch (sinpe/_torch_patch.py), operators and tensors out (sinpe/_torch_ops.py) -

from ._torch_patch import patch, unpatch, patched  # noqa: E402
from ._torch_ops import OPERATORS, add_pe, hf_rope, to_torch, preset  # noqa: E402
from . import _torch_ops as _ops  # noqa: E402

if OPERATORS:  # add_pe's and hf_rope's operators too: at import, never inside a trace
    _ops._add_pe_op()
    _ops._hf_op()

__all__ += ["patch", "unpatch", "patched", "hf_rope", "apply_rotary_pos_emb_half",
            "apply_rotary_pos_emb_float32", "apply_rotary_pos_emb_glm_float32",
            "apply_rotary_pos_emb_single", "add_pe", "to_torch", "preset", "OPERATORS"]
