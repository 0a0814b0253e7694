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

from typing import Any, Optional, Tuple

import torch

from ._torch.forms import FORMS as _F, call as _call
from ._torch.hf_rope import hf_rope
from ._torch.module import SinusoidalPositionalEncoding
from ._torch.operators import OPERATORS
from ._torch.patch import patch, patched, unpatch
from ._torch.rotate import produced as _produced
from ._tensors import to_torch
from ._torch.tables import add_pe, preset

__all__ = ["SinusoidalPositionalEncoding", "apply_rotary_pos_emb",
           "apply_rotary_pos_emb_interleave", "apply_rotary_pos_emb_glm",
           "apply_rotary_pos_emb_cohere", "apply_rotary_pos_emb_olmo",
           "apply_rotary_pos_emb_half", "apply_rotary_pos_emb_float32",
           "apply_rotary_pos_emb_glm_float32", "apply_rotary_pos_emb_single",
           "patch", "unpatch", "patched", "hf_rope", "add_pe", "to_torch", "preset", "OPERATORS"]

_Pair = Tuple[torch.Tensor, torch.Tensor]

# ---- transformers' apply_rotary_pos_emb and its variants (sinpe/_torch/forms.py) --------------
#
# Each returns new tensors equal, bit for bit, to transformers' (5.24.0) function, gradients
# included: a plain CPU call (nothing to record) is rotated by sinpe's core; whatever records
# or transforms the call (autograd, vmap, torch.func, meta tensors, other devices, layouts the
# core's tables cannot express) runs transformers' own graph; torch.compile and torch.export
# trace the form's operator.


def apply_rotary_pos_emb(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                         unsqueeze_dim: int = 1, *, producer: Optional[str] = None) -> "_Pair":
    """apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1, *, producer=None) -> (q_embed, k_embed)

    transformers' ``apply_rotary_pos_emb`` (Llama and the families that copy it):
    ``q * cos + rotate_half(q) * sin`` with cos/sin unsqueezed at unsqueeze_dim (1 for q of
    shape (batch, heads, seq, dim), 2 for (batch, seq, heads, dim)); when cos is narrower than
    q (``rotary_dim = cos.shape[-1]``), GPT-NeoX's partial form: the first rotary_dim channels
    rotate, the rest pass through (GPT-NeoX, Phi, StableLM, Persimmon).  New tensors, bit for
    bit with transformers' at float32, float16 and bfloat16, gradients included.

    producer: the bits an engine serving the model computes from the same q, k and tables
    (docs/engines.md): 'inductor' (torch.compile), 'onnxruntime'; forward only (no
    gradient), plain CPU tensors."""
    if producer is not None:
        made = _produced(q, k, cos, sin, unsqueeze_dim, producer)
        if made is not None:
            return made
    out: _Pair = _call(_F["apply_rotary_pos_emb"], (q, k, cos, sin, unsqueeze_dim), {})
    return out


def _engine(q: Any, k: Any, cos: Any, sin: Any, unsqueeze_dim: Any, producer: Any,
            layout: str) -> Optional[_Pair]:
    """A family's form as producer computes it (its layout: transformers' halves, or the
    interleaved pairs with their repeated tables), or None: transformers' own."""
    if producer is None:
        return None
    made: Optional[_Pair] = _produced(q, k, cos, sin, unsqueeze_dim, producer, layout)
    return made


def _glm_tables(cos: Any, sin: Any, producer: Any) -> Tuple[Any, Any]:
    """GLM's tables as its rotation reads them: the first half repeated pairwise."""
    if producer is None or not isinstance(cos, torch.Tensor) or not isinstance(sin, torch.Tensor):
        return cos, sin
    h = cos.shape[-1] // 2 if cos.dim() else 0
    return (cos[..., :h].repeat_interleave(2, dim=-1), sin[..., :h].repeat_interleave(2, dim=-1))


def apply_rotary_pos_emb_interleave(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                                    sin: torch.Tensor, position_ids: Any = None,
                                    unsqueeze_dim: int = 1) -> "_Pair":
    """apply_rotary_pos_emb_interleave(q, k, cos, sin, position_ids=None, unsqueeze_dim=1)

    transformers' ``apply_rotary_pos_emb_interleave`` (DeepSeek-V3, GLM-4-MoE-Lite,
    Mistral 4, LongCat-Flash...): q's interleaved pairs ``q1, q2 = q[..., 0::2], q[...,
    1::2]`` rotated by the first half of cos/sin, the result in halves: ``cat(q1 * cos - q2 *
    sin, q2 * cos + q1 * sin)``.  position_ids is unused (as there).  Bit for bit at float32,
    float16 and bfloat16, gradients included."""
    out: _Pair = _call(_F["apply_rotary_pos_emb_interleave"],
                             (q, k, cos, sin, position_ids, unsqueeze_dim), {})
    return out


def apply_rotary_pos_emb_olmo(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                              sin: torch.Tensor, unsqueeze_dim: int = 1, *,
                              producer: Optional[str] = None) -> "_Pair":
    """apply_rotary_pos_emb_olmo(q, k, cos, sin, unsqueeze_dim=1) -> (q_embed, k_embed)

    transformers OLMo's ``apply_rotary_pos_emb`` (OLMo, OLMo 2, OLMo 3, FlexOlmo): its
    rotary module returns float32 cos/sin whatever q's dtype, so the products are promoted
    (q widened exactly), and the results are cast back: ``q_embed.to(q.dtype)``.  New tensors,
    bit for bit at float32, float16 and bfloat16; gradients are those of OLMo's graph (each
    branch's gradient rounded to q's dtype before their sum).

    producer: an engine's bits from the same tensors and tables (docs/engines.md),
    as for apply_rotary_pos_emb (forward only, plain CPU tensors).
    """
    made = _engine(q, k, cos, sin, unsqueeze_dim, producer, "half")
    if made is not None:
        return made
    out: _Pair = _call(_F["apply_rotary_pos_emb_olmo"], (q, k, cos, sin, unsqueeze_dim), {})
    return out


def apply_rotary_pos_emb_glm(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                             sin: torch.Tensor, unsqueeze_dim: int = 1, *,
                             producer: Optional[str] = None) -> "_Pair":
    """apply_rotary_pos_emb_glm(q, k, cos, sin, unsqueeze_dim=1) -> (q_embed, k_embed)

    transformers GLM's ``apply_rotary_pos_emb`` (models/glm, glm4, helium): ``cos = cos[...,
    :d // 2].repeat_interleave(2)`` (d = cos.shape[-1]), the first d channels rotated in
    interleaved pairs (``rotate_half`` = ``stack(-x[1::2], x[0::2]).flatten``), the rest
    passed through; every op in q's dtype.  Bit for bit at float32, float16 and bfloat16,
    gradients included.

    producer: an engine's bits from the same tensors and tables (docs/engines.md),
    as for apply_rotary_pos_emb (forward only, plain CPU tensors).
    """
    made = _engine(q, k, *_glm_tables(cos, sin, producer), unsqueeze_dim, producer, "pairs")
    if made is not None:
        return made
    out: _Pair = _call(_F["apply_rotary_pos_emb_glm"], (q, k, cos, sin, unsqueeze_dim), {})
    return out


def apply_rotary_pos_emb_cohere(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                                sin: torch.Tensor, unsqueeze_dim: int = 1, *,
                                producer: Optional[str] = None) -> "_Pair":
    """apply_rotary_pos_emb_cohere(q, k, cos, sin, unsqueeze_dim=1) -> (q_embed, k_embed)

    transformers Cohere's ``apply_rotary_pos_emb`` (cohere, cohere2): q and k upcast to
    float32, rotated in interleaved pairs with cos/sin as given (``CohereRotaryEmbedding``'s
    repeat_interleave layout), ``(q * cos) + (rotate_half(q) * sin)`` in float32, then
    rounded once to q's dtype.  Bit for bit at float32, float16 and bfloat16, gradients
    included.

    producer: an engine's bits from the same tensors and tables (docs/engines.md),
    as for apply_rotary_pos_emb (forward only, plain CPU tensors).
    """
    made = _engine(q, k, cos, sin, unsqueeze_dim, producer, "pairs")
    if made is not None:
        return made
    out: _Pair = _call(_F["apply_rotary_pos_emb_cohere"], (q, k, cos, sin, unsqueeze_dim), {})
    return out


def apply_rotary_pos_emb_half(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                              sin: torch.Tensor, unsqueeze_dim: int = 1, *,
                              producer: Optional[str] = None) -> "_Pair":
    """apply_rotary_pos_emb_half(q, k, cos, sin, unsqueeze_dim=1) -> (q_embed, k_embed)

    transformers GPT-OSS's ``apply_rotary_pos_emb`` (gpt_oss, openai_privacy_filter): cos/sin
    are half-width (the rotary returns ``emb = freqs``), x's halves ``x1, x2`` become
    ``cat(x1 * cos - x2 * sin, x2 * cos + x1 * sin)``.  Equal, bit for bit, to the standard form
    with the tables repeated (``a + (-b)`` is ``a - b`` exactly); gradients are GPT-OSS's.

    producer: an engine's bits from the same tensors and tables (docs/engines.md),
    as for apply_rotary_pos_emb (forward only, plain CPU tensors).
    """
    if producer is not None and isinstance(cos, torch.Tensor) and isinstance(sin, torch.Tensor):
        made = _engine(q, k, torch.cat((cos, cos), -1), torch.cat((sin, sin), -1),
                       unsqueeze_dim, producer, "half")
        if made is not None:
            return made
    out: _Pair = _call(_F["apply_rotary_pos_emb_half"], (q, k, cos, sin, unsqueeze_dim), {})
    return out


def apply_rotary_pos_emb_float32(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                                 sin: torch.Tensor, unsqueeze_dim: int = 1, *,
                                 producer: Optional[str] = None) -> "_Pair":
    """apply_rotary_pos_emb_float32(q, k, cos, sin, unsqueeze_dim=1) -> (q_embed, k_embed)

    transformers ModernBERT's ``apply_rotary_pos_emb`` (modernbert, modernbert_decoder, esm,
    evolla): q and k widened to float32 (exact), rotated in halves with cos/sin (widened by
    the products' promotion, exact), then rounded once to q's dtype; gradients are
    ModernBERT's (each ``q.float()`` branch's gradient rounded to q's dtype before the sum).

    producer: an engine's bits from the same tensors and tables (docs/engines.md),
    as for apply_rotary_pos_emb (forward only, plain CPU tensors).
    """
    made = _engine(q, k, cos, sin, unsqueeze_dim, producer, "half")
    if made is not None:
        return made
    out: _Pair = _call(_F["apply_rotary_pos_emb_float32"],
                             (q, k, cos, sin, unsqueeze_dim), {})
    return out


def apply_rotary_pos_emb_glm_float32(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                                     sin: torch.Tensor, unsqueeze_dim: int = 1, *,
                                     producer: Optional[str] = None) -> "_Pair":
    """apply_rotary_pos_emb_glm_float32(q, k, cos, sin, unsqueeze_dim=1) -> (q_embed, k_embed)

    transformers ERNIE 4.5's ``apply_rotary_pos_emb`` (ernie4_5, ernie4_5_moe, hy_v4_vl):
    GLM's interleaved pairs (the first half of cos/sin repeated pairwise) computed in float32
    (``rotate_half(q).float()``: a negation, exact in q's dtype), rounded once to q's dtype;
    gradients are ERNIE's.

    producer: an engine's bits from the same tensors and tables (docs/engines.md),
    as for apply_rotary_pos_emb (forward only, plain CPU tensors).
    """
    made = _engine(q, k, *_glm_tables(cos, sin, producer), unsqueeze_dim, producer, "pairs")
    if made is not None:
        return made
    out: _Pair = _call(_F["apply_rotary_pos_emb_glm_float32"],
                             (q, k, cos, sin, unsqueeze_dim), {})
    return out


def apply_rotary_pos_emb_single(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                                unsqueeze_dim: int = 1, *,
                                producer: Optional[str] = None) -> torch.Tensor:
    """apply_rotary_pos_emb_single(x, cos, sin, unsqueeze_dim=1) -> x_embed

    transformers Gemma 3n's ``apply_rotary_pos_emb(x, cos, sin, unsqueeze_dim=1)`` (one
    tensor: gemma3n, gemma4, diffusion_gemma...): ``x * cos + rotate_half(x) * sin``.

    producer: an engine's bits from the same tensors and tables (docs/engines.md),
    as for apply_rotary_pos_emb (forward only, plain CPU tensors).
    """
    made = _engine(x, None, cos, sin, unsqueeze_dim, producer, "half")
    if made is not None:
        x_embed: torch.Tensor = made[0]
        return x_embed
    out: torch.Tensor = _call(_F["apply_rotary_pos_emb_single"],
                                    (x, cos, sin, unsqueeze_dim), {})
    return out
