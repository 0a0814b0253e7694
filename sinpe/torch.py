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
from typing import Any, Dict, Optional, Tuple

import torch
from torch import nn

from . import _dtypes, _sinpe
from ._backends import policy as _policy
from ._backends.policy import torch_kernels
from ._api import positional_encoding
from ._jobs import check_opts as _check_opts

_dtypes.torch_seen(torch)  # the binding takes torch's C-level export of a tensor from now on

__all__ = ["SinusoidalPositionalEncoding", "apply_rotary_pos_emb",
           "apply_rotary_pos_emb_interleave", "apply_rotary_pos_emb_glm",
           "apply_rotary_pos_emb_cohere", "apply_rotary_pos_emb_olmo"]


def _check_width(d_model: int, base: float) -> None:
    """The references' refusals of a width (both compute ``-math.log(base) / d_model``, then
    assign ``d_model // 2`` cosine columns from ``ceil(d_model / 2)`` angles): d_model 0 raises
    ZeroDivisionError (or math.log's ValueError for a base <= 0) and an odd d_model >= 3
    raises RuntimeError, as there; d_model 1 is a sine column alone, as there."""
    if d_model == 0:
        math.log(base)  # a base <= 0: math.log's ValueError first, as in the references
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
        return self.dropout(x)


# ---- transformers' apply_rotary_pos_emb and its variants --------------------------------------
#
# Each returns new tensors equal, bit for bit, to transformers' (5.24.0) function: q and k are
# cloned and rotated in place by sinpe's core (one pass, the ops in x's dtype as torch rounds
# them), with cos/sin as the core's float32 tables (widening is exact).  Whatever the core
# cannot take (autograd, a non-CPU device, float64, mixed dtypes, a broadcast the core's
# (batch, seq) tables cannot express) runs transformers' own torch ops instead.

_FAST = (torch.float32, torch.float16, torch.bfloat16)
#: a half-type cos/sin of more rows than this is widened to float32 before the core's call
_WIDE_ROWS = 16
_Pair = Tuple[torch.Tensor, torch.Tensor]


def _hf_rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def _pairs_rotate_half(x: torch.Tensor) -> torch.Tensor:
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


def _layout(x: torch.Tensor, cu_shape: Tuple[int, ...], r: int) -> Optional[Tuple[int, int]]:
    """(seq_axis, batch_axis) of x for a cos of shape cu_shape (unsqueezed, right-aligned
    broadcast against x, last axis r), or None when the core's tables cannot express it."""
    nd = x.dim()
    if len(cu_shape) > nd or nd < 2 or r < 2 or r % 2 or r > x.shape[-1]:
        return None
    cu = (1,) * (nd - len(cu_shape)) + tuple(cu_shape)
    rows = []
    for a in range(nd - 1):
        if cu[a] != 1 and cu[a] != x.shape[a]:
            return None  # cos larger than x there: the result is broadcast up
        if cu[a] == x.shape[a] and cu[a] > 1:
            rows.append(a)
    if len(rows) > 2:
        return None
    if not rows:  # one position: any axis of x of length 1 holds it
        ones = [a for a in range(nd - 1) if x.shape[a] == 1]
        return (ones[-1], -1) if ones else None
    return (rows[-1], rows[0] if len(rows) == 2 else -1)


def _wrapped(t: torch.Tensor) -> bool:
    """A tensor whose memory is not a plain strided CPU array: nested, sparse, or one of
    torch's function transforms' wrappers (vmap's batched tensors, grad's, functionalized)."""
    return bool(t.is_nested or t.layout != _STRIDED or _FUNCTORCH_WRAPPED(t))


_STRIDED = torch.strided
#: vmap's batched tensors, grad's tracking wrappers and functionalize's tensors alike
_FUNCTORCH_WRAPPED = torch._C._functorch.is_functorch_wrapped_tensor


def _fast_ok(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
             same_dtype: bool) -> bool:
    grad = torch.is_grad_enabled()
    for t in (q, k, cos, sin):
        if not isinstance(t, torch.Tensor) or not t.is_cpu or (grad and t.requires_grad) \
                or _wrapped(t):  # nested, or inside vmap/grad: torch's own ops
            return False
    if q.dtype not in _FAST or k.dtype != q.dtype or cos.dtype not in _FAST \
            or sin.dtype != cos.dtype or cos.shape != sin.shape:
        return False
    return not (same_dtype and cos.dtype != q.dtype)  # else torch promotes the products


def _ud(t: torch.Tensor, unsqueeze_dim: Any) -> Optional[int]:
    """unsqueeze_dim as a non-negative axis of t.unsqueeze's result, or None where torch's own
    unsqueeze would refuse it (the torch ops then raise its error)."""
    if type(unsqueeze_dim) is not int:
        return None
    n = t.dim() + 1
    if -n <= unsqueeze_dim < 0:
        return unsqueeze_dim + n
    return unsqueeze_dim if 0 <= unsqueeze_dim < n else None  # below -n too: torch's IndexError


def _cu(t: torch.Tensor, ud: int) -> Tuple[int, ...]:
    """t's shape unsqueezed at ud (no tensor made)."""
    sh = tuple(t.shape)
    return sh[:ud] + (1,) + sh[ud:]


def _rope_table(t: torch.Tensor, ud: int, nd: int, shape: Tuple[int, int, int], sd: int,
                ba: int) -> torch.Tensor:
    """t, unsqueezed at ud and right-aligned against an x of nd axes, as the core's table of
    shape (tables, seq, rot): x's batch axis ba (-1: none) and seq axis sd; a view (no copy,
    in t's dtype), t itself when its layout is already that."""
    st = list(t.stride())
    st.insert(ud, 0)
    sh = _cu(t, ud)
    pad = nd - len(sh)
    st, sh = [0] * pad + st, (1,) * pad + sh
    want = (st[ba] if ba >= 0 and sh[ba] > 1 else 0, st[sd] if sh[sd] > 1 else 0, st[-1])
    if tuple(t.shape) == shape and all(n <= 1 or a == b
                                       for n, a, b in zip(shape, t.stride(), want)):
        return t
    return t.as_strided(shape, want)


class _Plan:
    """What _rotate_into works out from the tensors' shapes, strides and dtypes alone: x's
    (seq, batch) axes, whether half-type tables are widened, and for q and k the core's
    (tables, seq, rot) shape with the tables' strides (None: the table itself); kept per
    layout, as a model's layers call the rotation with the same layouts at every step."""
    __slots__ = ("lq", "lk", "r", "widen", "q", "k", "one")

    def __init__(self, q: torch.Tensor, k: Optional[torch.Tensor], cos: torch.Tensor,
                 sin: torch.Tensor, ud: int) -> None:
        cu = _cu(cos, ud)
        r = cu[-1]
        self.r = r
        self.lq = _layout(q, cu, r)
        self.lk = self.lq if k is None else _layout(k, cu, r)
        # rows of a half-type table of another type than q's are widened per vector where
        # they change, and past a decode step's few rows they change at almost every vector
        # (q's heads lie between its positions): widened once instead (exact; 2 x 16 x 256
        # x 64 float16 on a Zen 4: 2.2 ms -> 0.2 ms).  Contiguous rows of q's own type are
        # read as they are by the core's rotation (no copy, no rounding again); an expanded
        # table would become a full copy: its rows are widened as they come.
        self.widen = cos.dtype != torch.float32 \
            and (cos.dtype != q.dtype or sin.dtype != q.dtype) \
            and cos.numel() > r * _WIDE_ROWS and 0 not in cos.stride() \
            and 0 not in sin.stride()
        self.q = self.k = None
        self.one = False
        if self.lq is None or self.lk is None:
            return
        if q.numel():
            self.q = _Views(q, self.lq, r, cos, sin, ud, self.widen)
            self.one = k is not None and self.lk == self.lq and k.numel() > 0 \
                and k.shape[self.lq[0]] == self.q.shape[1]
        if k is not None and k.numel() and not self.one:
            self.k = _Views(k, self.lk, r, cos, sin, ud, self.widen)


class _Views:
    """The core's table shape for x and each table's strides (None: the table as it is)."""
    __slots__ = ("shape", "nd", "c", "s")

    def __init__(self, x: torch.Tensor, lx: Tuple[int, int], r: int, cos: torch.Tensor,
                 sin: torch.Tensor, ud: int, widen: bool) -> None:
        self.nd = x.dim()
        self.shape = (x.shape[lx[1]] if lx[1] >= 0 else 1, x.shape[lx[0]], r)
        self.c = self.s = None
        if not widen:  # (widened tables are fresh tensors: their strides are their own)
            self.c = _rope_strides(cos, ud, self.nd, self.shape, *lx)
            self.s = _rope_strides(sin, ud, self.nd, self.shape, *lx)

    def tables(self, cos: torch.Tensor, sin: torch.Tensor, ud: int,
               lx: Tuple[int, int], kept: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        if not kept:
            return _rope_table(cos, ud, self.nd, self.shape, *lx), \
                _rope_table(sin, ud, self.nd, self.shape, *lx)
        c = cos if self.c is None else cos.as_strided(self.shape, self.c)
        s = sin if self.s is None else sin.as_strided(self.shape, self.s)
        return c, s


def _rope_strides(t: torch.Tensor, ud: int, nd: int, shape: Tuple[int, int, int], sd: int,
                  ba: int) -> Optional[Tuple[int, int, int]]:
    """The strides of _rope_table's view of t, or None when that view is t itself."""
    v = _rope_table(t, ud, nd, shape, sd, ba)
    return None if v is t else tuple(v.stride())


_PLANS: Dict[Any, _Plan] = {}
#: the rope call's arrays (x, cos, sin, src, x2, src2) by the names the rotations' callers
#: know: q and k (the results are fresh tensors, or the caller's own copies of them)
_NAMES = ("q", "cos", "sin", "q", "k", "k")
_K_NAMES = ("k", "cos", "sin", "k", "x2", "src2")
_X_NAMES = ("x", "cos", "sin", "x", "x2", "src2")


def _plan(q: torch.Tensor, k: Optional[torch.Tensor], cos: torch.Tensor, sin: torch.Tensor,
          ud: int) -> _Plan:
    key = (ud, q.shape, q.stride(), q.dtype, None if k is None else (k.shape, k.stride()),
           cos.shape, cos.stride(), cos.dtype, sin.shape, sin.stride(), sin.dtype)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _Plan(q, k, cos, sin, ud)
        if len(_PLANS) >= 256:  # a bound for shapes that change at every call
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def _rotate_into(q: torch.Tensor, k: Optional[torch.Tensor], cos: torch.Tensor,
                 sin: torch.Tensor, ud: int, pairs: bool,
                 inplace: bool = False, one: str = "q") -> Optional[Tuple[Any, Any]]:
    """q (and k) rotated into fresh tensors (empty_like each, written once by the core, which
    reads cos/sin as they are: their dtype, their strides), or in place (fresh tensors the
    caller made); None when a layout does not fit the core (the caller runs torch's ops).
    one: the name of q in messages when k is None (the single form's x)."""
    plan = _plan(q, k, cos, sin, ud)
    lq, lk = plan.lq, plan.lk
    if lq is None or lk is None:
        return None
    opts = _core_opts()
    # grad mode off (checked by _fast_ok) with inputs that require grad, as a custom op's
    # kernel runs: the values are read as they are (torch's export refuses such tensors)
    q, k = _plain(q, one, not inplace), _plain(k, "k", not inplace)
    c0, s0 = cos, sin
    cos, sin = _plain(cos, "cos"), _plain(sin, "sin")
    # the kept strides hold for the tables as they came (detach keeps strides; a resolved
    # negative bit or a widened copy has its own)
    kept = not plan.widen and (cos is c0 or cos.stride() == c0.stride()) \
        and (sin is s0 or sin.stride() == s0.stride())
    if plan.widen:  # (torch's copy reads past a storage's end unchecked: checked first)
        cos, sin = _dtypes.float_copy(cos, "cos"), _dtypes.float_copy(sin, "sin")
    qe = q if inplace else torch.empty_like(q)
    ke = k if inplace or k is None else torch.empty_like(k)
    src_q, src_k = (None, None) if inplace else (q, k)
    if qe.numel():
        c, s = plan.q.tables(cos, sin, ud, lq, kept)
        if plan.one:
            _sinpe.rope(opts, qe, c, s, lq[0], lq[1], pairs, src_q, ke, src_k, _NAMES)
            return qe, ke
        _sinpe.rope(opts, qe, c, s, lq[0], lq[1], pairs, src_q, None, None,
                    _NAMES if one == "q" else _X_NAMES)
    if ke is not None and ke.numel():
        views = plan.k if plan.k is not None else _Views(ke, lk, plan.r, cos, sin, ud, True)
        c, s = views.tables(cos, sin, ud, lk, kept and plan.k is not None)
        _sinpe.rope(opts, ke, c, s, lk[0], lk[1], pairs, src_k, None, None, _K_NAMES)
    return qe, ke


def _plain(t: Any, name: str, resolve: bool = True) -> Any:
    """A read tensor as the core reads it: detached (grad mode is off here), its neg bit
    resolved as torch's own ops read it (resolve: not for a tensor written in place); one
    with elements and no memory (a freed storage: NULL data) refused by name."""
    if t is None:
        return t
    if t.requires_grad:
        t = t.detach()
    if resolve and t.is_neg():
        t = t.resolve_neg()
    if t.data_ptr() == 0 and t.numel():
        raise ValueError(f"{name}: the tensor has no memory (a NULL data pointer: its storage "
                         f"was freed or never allocated)")
    return t


def _core_opts() -> Any:
    return _check_opts(_policy.opts(None, None, None))


def apply_rotary_pos_emb(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                         unsqueeze_dim: int = 1) -> "_Pair":
    """transformers' ``apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)`` (Llama and
    the families that copy it): ``q * cos + rotate_half(q) * sin`` with cos/sin unsqueezed at
    unsqueeze_dim (1 for q of shape (batch, heads, seq, dim), 2 for (batch, seq, heads,
    dim)); when cos is narrower than q (``rotary_dim = cos.shape[-1]``), GPT-NeoX's partial
    form: the first rotary_dim channels rotate, the rest pass through (GPT-NeoX, Phi,
    StableLM, Persimmon).  New tensors (q_embed, k_embed), bit for bit with transformers'
    at float32, float16 and bfloat16."""
    ud = _ud(cos, unsqueeze_dim)
    # a table of width 1 is broadcast by torch over the whole head (no partial rotary)
    wide = cos.shape[-1] == 1 < q.shape[-1] if cos.dim() else True
    if ud is not None and not wide and _fast_ok(q, k, cos, sin, True):
        out = _rotate_into(q, k, cos, sin, ud, False)
        if out is not None:
            return out
    c, s = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    r = c.shape[-1]
    if 1 < r < q.shape[-1]:
        def one(x: torch.Tensor) -> torch.Tensor:
            xr, xp = x[..., :r], x[..., r:]
            return torch.cat([(xr * c) + (_hf_rotate_half(xr) * s), xp], dim=-1)
        return one(q), one(k)
    return (q * c) + (_hf_rotate_half(q) * s), (k * c) + (_hf_rotate_half(k) * s)


def _deinterleave(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x[..., 0::2], x[..., 1::2]], dim=-1)


def _first_half_twice(t: torch.Tensor) -> torch.Tensor:
    h = t[..., : t.shape[-1] // 2]
    return torch.cat([h, h], dim=-1)


def apply_rotary_pos_emb_interleave(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                                    sin: torch.Tensor, position_ids: Any = None,
                                    unsqueeze_dim: int = 1) -> "_Pair":
    """transformers' ``apply_rotary_pos_emb_interleave`` (DeepSeek-V3, GLM-4-MoE-Lite,
    Mistral 4, LongCat-Flash...): q's interleaved pairs ``q1, q2 = q[..., 0::2], q[...,
    1::2]`` rotated by the first half of cos/sin, the result in halves: ``cat(q1 * cos - q2 *
    sin, q2 * cos + q1 * sin)``.  position_ids is unused (as there).  Bit for bit at float32,
    float16 and bfloat16."""
    half = cos.shape[-1] // 2
    if _fast_ok(q, k, cos, sin, True) and 2 * half == q.shape[-1] == k.shape[-1]:
        c2, s2 = _first_half_twice(cos), _first_half_twice(sin)
        ud = _ud(c2, unsqueeze_dim)
        if ud is not None:
            out = _rotate_into(_deinterleave(q), _deinterleave(k), c2, s2, ud, False, True)
            if out is not None:
                return out
    c = cos[..., :half].unsqueeze(unsqueeze_dim)
    s = sin[..., :half].unsqueeze(unsqueeze_dim)

    def one(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
    return one(q), one(k)


def apply_rotary_pos_emb_olmo(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                              sin: torch.Tensor, unsqueeze_dim: int = 1) -> "_Pair":
    """transformers OLMo's ``apply_rotary_pos_emb`` (OLMo, OLMo 2, OLMo 3, FlexOlmo): its
    rotary module returns float32 cos/sin whatever q's dtype, so the products are promoted
    (q widened exactly), and the results are cast back: ``q_embed.to(q.dtype)``.  New tensors,
    bit for bit at float32, float16 and bfloat16."""
    dq, dk = torch.promote_types(q.dtype, cos.dtype), torch.promote_types(k.dtype, cos.dtype)
    qe, ke = apply_rotary_pos_emb(q.to(dq), k.to(dk), cos, sin, unsqueeze_dim)
    return qe.to(q.dtype), ke.to(k.dtype)


def apply_rotary_pos_emb_glm(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                             sin: torch.Tensor, unsqueeze_dim: int = 1) -> "_Pair":
    """transformers GLM's ``apply_rotary_pos_emb`` (models/glm, glm4): ``cos = cos[...,
    :d // 2].repeat_interleave(2)`` (d = cos.shape[-1]), the first d channels rotated in
    interleaved pairs (``rotate_half`` = ``stack(-x[1::2], x[0::2]).flatten``), the rest
    passed through; every op in q's dtype.  Bit for bit at float32, float16 and bfloat16."""
    half = cos.shape[-1] // 2
    r = 2 * half
    if _fast_ok(q, k, cos, sin, True) and 2 <= r <= min(q.shape[-1], k.shape[-1]):
        c2, s2 = _first_half_twice(cos), _first_half_twice(sin)
        ud = _ud(c2, unsqueeze_dim)
        outs = []
        for x in (q, k):
            xh = _deinterleave(x[..., :r])
            if ud is None or _rotate_into(xh, None, c2, s2, ud, False, True) is None:
                break
            y = torch.empty_like(x)
            y[..., :r] = torch.stack((xh[..., :half], xh[..., half:]), dim=-1).flatten(-2)
            y[..., r:] = x[..., r:]
            outs.append(y)
        if len(outs) == 2:
            return outs[0], outs[1]
    c = cos.unsqueeze(unsqueeze_dim)[..., :half].repeat_interleave(2, dim=-1)
    s = sin.unsqueeze(unsqueeze_dim)[..., :half].repeat_interleave(2, dim=-1)

    def one(x: torch.Tensor) -> torch.Tensor:
        xr, xp = x[..., :r], x[..., r:]
        return torch.cat([(xr * c) + (_pairs_rotate_half(xr) * s), xp], dim=-1)
    return one(q), one(k)


def apply_rotary_pos_emb_cohere(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                                sin: torch.Tensor, unsqueeze_dim: int = 1) -> "_Pair":
    """transformers Cohere's ``apply_rotary_pos_emb`` (cohere, cohere2): q and k upcast to
    float32, rotated in interleaved pairs with cos/sin as given (``CohereRotaryEmbedding``'s
    repeat_interleave layout), ``(q * cos) + (rotate_half(q) * sin)`` in float32, then
    rounded once to q's dtype.  Bit for bit at float32, float16 and bfloat16."""
    ud = _ud(cos, unsqueeze_dim)
    if ud is not None and _fast_ok(q, k, cos, sin, False) \
            and cos.shape[-1] == q.shape[-1] == k.shape[-1]:
        out = _rotate_into(q, k, cos, sin, ud, True)
        if out is not None:
            return out
    dtype = q.dtype
    qf, kf = q.float(), k.float()
    c, s = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    qe = (qf * c) + (_pairs_rotate_half(qf) * s)
    ke = (kf * c) + (_pairs_rotate_half(kf) * s)
    return qe.to(dtype=dtype), ke.to(dtype=dtype)


# ---- sinpe.torch.patch and the tensor-out hf_rope (sinpe/_torch_patch.py) ---------------------

from ._torch_patch import FORMS as _FORMS, patch, unpatch, patched, hf_rope  # noqa: E402

# ---- the rotation forms sinpe.torch.patch added -----------------------------------------------------------------

def apply_rotary_pos_emb_half(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                              sin: torch.Tensor, unsqueeze_dim: int = 1) -> "_Pair":
    """transformers GPT-OSS's ``apply_rotary_pos_emb`` (gpt_oss, openai_privacy_filter): cos/sin
    are half-width (the rotary returns ``emb = freqs``), x's halves ``x1, x2`` become
    ``cat(x1 * cos - x2 * sin, x2 * cos + x1 * sin)``.  Equal, bit for bit, to the standard form
    with the tables repeated (``a + (-b)`` is ``a - b`` exactly)."""
    return apply_rotary_pos_emb(q, k, torch.cat((cos, cos), dim=-1),
                                    torch.cat((sin, sin), dim=-1), unsqueeze_dim)


def _widened(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
             sin: torch.Tensor) -> Tuple[torch.Tensor, ...]:
    f = _dtypes.float_copy
    return f(q, "q"), f(k, "k"), f(cos, "cos"), f(sin, "sin")


def apply_rotary_pos_emb_float32(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                                 sin: torch.Tensor, unsqueeze_dim: int = 1) -> "_Pair":
    """transformers ModernBERT's ``apply_rotary_pos_emb`` (modernbert, modernbert_decoder, esm,
    evolla): q and k widened to float32 (exact), rotated in halves with cos/sin (widened by
    the products' promotion, exact), then rounded once to q's dtype."""
    qf, kf, c, s = _widened(q, k, cos, sin)
    qe, ke = apply_rotary_pos_emb(qf, kf, c, s, unsqueeze_dim)
    return qe.to(q.dtype), ke.to(k.dtype)


def apply_rotary_pos_emb_glm_float32(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                                     sin: torch.Tensor, unsqueeze_dim: int = 1) -> "_Pair":
    """transformers ERNIE 4.5's ``apply_rotary_pos_emb`` (ernie4_5, ernie4_5_moe, hy_v4_vl):
    GLM's interleaved pairs (the first half of cos/sin repeated pairwise) computed in float32
    (``rotate_half(q).float()``: a negation, exact in q's dtype), rounded once to q's dtype."""
    qf, kf, c, s = _widened(q, k, cos, sin)
    qe, ke = apply_rotary_pos_emb_glm(qf, kf, c, s, unsqueeze_dim)
    return qe.to(q.dtype), ke.to(k.dtype)


def apply_rotary_pos_emb_single(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                                unsqueeze_dim: int = 1) -> torch.Tensor:
    """transformers Gemma 3n's ``apply_rotary_pos_emb(x, cos, sin, unsqueeze_dim=1)`` (one
    tensor: gemma3n, gemma4, diffusion_gemma...): ``x * cos + rotate_half(x) * sin``."""
    return _single(x, cos, sin, unsqueeze_dim)


def _single(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            unsqueeze_dim: int) -> torch.Tensor:
    ud = _ud(cos, unsqueeze_dim)
    if ud is not None and _fast_ok(x, x, cos, sin, True):
        out = _rotate_into(x, None, cos, sin, ud, False, one="x")
        if out is not None:
            xe: torch.Tensor = out[0]
            return xe
    c, s = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return (x * c) + (_hf_rotate_half(x) * s)


_FORMS.update({f.__name__: f for f in (
    apply_rotary_pos_emb, apply_rotary_pos_emb_interleave, apply_rotary_pos_emb_glm,
    apply_rotary_pos_emb_cohere, apply_rotary_pos_emb_olmo, apply_rotary_pos_emb_half,
    apply_rotary_pos_emb_float32, apply_rotary_pos_emb_glm_float32,
    apply_rotary_pos_emb_single)})

__all__ += ["patch", "unpatch", "patched", "hf_rope", "apply_rotary_pos_emb_half",
            "apply_rotary_pos_emb_float32", "apply_rotary_pos_emb_glm_float32",
            "apply_rotary_pos_emb_single"]

# ---- the public names as torch custom operators (sinpe/_torch_ops.py) -------------------------
# Each form above becomes torch.ops.sinpe.<name> (fake kernel, autograd) behind its public name,
# so torch.compile(fullgraph=True) traces it as one node; sinpe.torch.patch routes to these too.

from ._torch_ops import (OPERATORS, publish as _publish, add_pe, to_torch,  # noqa: E402
                         preset)

_FORMS.update(_publish(_FORMS))
globals().update(_FORMS)
__all__ += ["add_pe", "to_torch", "preset", "OPERATORS"]
