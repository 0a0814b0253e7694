"""transformers' rotation functions restated op for op (the rotation forms' graphs).

Each graph is the torch operations of one transformers 5.24.0 function (``apply_rotary_pos_emb``
and its variants), in the same order with the same dtype casts, so that whatever records or
transforms them (autograd, ``torch.vmap`` and the other ``torch.func`` transforms, meta tensors,
other devices) gets transformers' own result, gradients included.  :data:`GRAPHS` holds them by
the forms' public names (sinpe/_torch/forms.py pairs each with its core way).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

import torch


_Pair = Tuple[torch.Tensor, torch.Tensor]


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def _rotate_pairs(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., 0::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def _g_std(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
           unsqueeze_dim: int = 1) -> _Pair:
    """Llama's; GPT-NeoX's (Phi-3's, Nemotron's) when cos is narrower than q (the first
    cos.shape[-1] channels rotate, the rest pass through)."""
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    r = cos.shape[-1]
    if 1 < r < q.shape[-1]:
        q_rot, q_pass = q[..., :r], q[..., r:]
        k_rot, k_pass = k[..., :r], k[..., r:]
        q_embed = (q_rot * cos) + (rotate_half(q_rot) * sin)
        k_embed = (k_rot * cos) + (rotate_half(k_rot) * sin)
        return torch.cat([q_embed, q_pass], dim=-1), torch.cat([k_embed, k_pass], dim=-1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def _g_interleave(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                  position_ids: Any = None, unsqueeze_dim: int = 1) -> _Pair:
    """DeepSeek-V3's."""
    cos = cos[..., : cos.shape[-1] // 2].unsqueeze(unsqueeze_dim)
    sin = sin[..., : sin.shape[-1] // 2].unsqueeze(unsqueeze_dim)
    q1, q2 = q[..., 0::2], q[..., 1::2]
    k1, k2 = k[..., 0::2], k[..., 1::2]
    q_embed = torch.cat([q1 * cos - q2 * sin, q2 * cos + q1 * sin], dim=-1)
    k_embed = torch.cat([k1 * cos - k2 * sin, k2 * cos + k1 * sin], dim=-1)
    return q_embed, k_embed


def _g_glm(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
           unsqueeze_dim: int = 1) -> _Pair:
    """GLM's (Helium's is the same with no channel passed through)."""
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    cos = cos[..., : cos.shape[-1] // 2].repeat_interleave(2, dim=-1)
    sin = sin[..., : sin.shape[-1] // 2].repeat_interleave(2, dim=-1)
    rotary_dim = cos.shape[-1]
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    k_rot, k_pass = k[..., :rotary_dim], k[..., rotary_dim:]
    q_embed = (q_rot * cos) + (_rotate_pairs(q_rot) * sin)
    k_embed = (k_rot * cos) + (_rotate_pairs(k_rot) * sin)
    return torch.cat([q_embed, q_pass], dim=-1), torch.cat([k_embed, k_pass], dim=-1)


def _g_cohere(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
              unsqueeze_dim: int = 1) -> _Pair:
    """Cohere's."""
    dtype = q.dtype
    q = q.float()
    k = k.float()
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (_rotate_pairs(q) * sin)
    k_embed = (k * cos) + (_rotate_pairs(k) * sin)
    return q_embed.to(dtype=dtype), k_embed.to(dtype=dtype)


def _g_olmo(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            unsqueeze_dim: int = 1) -> _Pair:
    """OLMo's."""
    q_type, k_type = q.dtype, k.dtype
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed.to(q_type), k_embed.to(k_type)


def _half_rotation(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    first_half, second_half = torch.chunk(x, 2, dim=-1)
    first_ = first_half * cos - second_half * sin
    second_ = second_half * cos + first_half * sin
    return torch.cat((first_, second_), dim=-1)


def _g_half(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            unsqueeze_dim: int = 1) -> _Pair:
    """GPT-OSS's."""
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return _half_rotation(q, cos, sin), _half_rotation(k, cos, sin)


def _g_float32(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               unsqueeze_dim: int = 1) -> _Pair:
    """ModernBERT's."""
    original_dtype = q.dtype
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q.float() * cos) + (rotate_half(q.float()) * sin)
    k_embed = (k.float() * cos) + (rotate_half(k.float()) * sin)
    return q_embed.to(original_dtype), k_embed.to(original_dtype)


def _g_glm_float32(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   unsqueeze_dim: int = 1) -> _Pair:
    """ERNIE 4.5's."""
    original_dtype = q.dtype
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    cos = cos[..., : cos.shape[-1] // 2].repeat_interleave(2, dim=-1)
    sin = sin[..., : sin.shape[-1] // 2].repeat_interleave(2, dim=-1)
    q_embed = (q.float() * cos) + (_rotate_pairs(q).float() * sin)
    k_embed = (k.float() * cos) + (_rotate_pairs(k).float() * sin)
    return q_embed.to(original_dtype), k_embed.to(original_dtype)


def _g_single(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
              unsqueeze_dim: int = 1) -> torch.Tensor:
    """Gemma 3n's (one tensor)."""
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (x * cos) + (rotate_half(x) * sin)



#: the graphs by the forms' public names
GRAPHS: Dict[str, Callable[..., Any]] = {
    "apply_rotary_pos_emb": _g_std,
    "apply_rotary_pos_emb_interleave": _g_interleave,
    "apply_rotary_pos_emb_glm": _g_glm,
    "apply_rotary_pos_emb_cohere": _g_cohere,
    "apply_rotary_pos_emb_olmo": _g_olmo,
    "apply_rotary_pos_emb_half": _g_half,
    "apply_rotary_pos_emb_float32": _g_float32,
    "apply_rotary_pos_emb_glm_float32": _g_glm_float32,
    "apply_rotary_pos_emb_single": _g_single,
}
