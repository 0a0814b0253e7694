"""transformers' rotation functions (``apply_rotary_pos_emb`` and its variants) as sinpe.torch
computes them.

Each form has two ways, chosen per call by :func:`call`:

- **transformers' graph**: the function's own torch operations, restated here op for op
  (the same ops in the same order, the same dtype casts), so that whatever records or
  transforms them gets transformers' own result: autograd (each gradient is the one
  transformers' graph gives, its casts and the order of its sums included), ``torch.vmap``
  and the other ``torch.func`` transforms, meta tensors, devices other than the CPU,
  sparse or nested tensors, and whatever the core's layouts cannot express.  A model
  patched by ``sinpe.torch.patch`` runs the model's own function there instead (the one it
  replaced, :func:`route`): its graph *is* transformers'.
- **the core**: a plain CPU call with nothing to record (no input that requires grad while
  grad mode is on): q and k rotated by sinpe's core in one pass each, bit for bit with the
  graph's forward.

While ``torch.compile`` or ``torch.export`` traces a call, the form is its operator
``torch.ops.sinpe.<form>`` (:mod:`sinpe._torch_ops`): its kernel is the core way (the graph
for what the core declines), its backward the vector-Jacobian product of the graph.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Tuple, cast

import torch

from . import _dtypes, _sinpe, _torch_ops
from ._backends import policy as _policy
from ._jobs import check_opts as _check_opts

__all__ = ["FORMS", "PUBLIC", "call", "route", "graph_of"]

_Pair = Tuple[torch.Tensor, torch.Tensor]


# ---- transformers' graphs (5.24.0), op for op ----------------------------------------------------

def _rotate_half(x: torch.Tensor) -> torch.Tensor:
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
        q_embed = (q_rot * cos) + (_rotate_half(q_rot) * sin)
        k_embed = (k_rot * cos) + (_rotate_half(k_rot) * sin)
        return torch.cat([q_embed, q_pass], dim=-1), torch.cat([k_embed, k_pass], dim=-1)
    return (q * cos) + (_rotate_half(q) * sin), (k * cos) + (_rotate_half(k) * sin)


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
    q_embed = (q * cos) + (_rotate_half(q) * sin)
    k_embed = (k * cos) + (_rotate_half(k) * sin)
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
    q_embed = (q.float() * cos) + (_rotate_half(q.float()) * sin)
    k_embed = (k.float() * cos) + (_rotate_half(k.float()) * sin)
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
    return (x * cos) + (_rotate_half(x) * sin)


# ---- the core's way ----------------------------------------------------------------------------
#
# Each returns the rotated tensors, or None where the core does not take the call (its graph
# then runs).  q and k are cloned and rotated in place by sinpe's core (one pass, the ops in
# x's dtype as torch rounds them), with cos/sin read in their dtype and strides.

_FAST = (torch.float32, torch.float16, torch.bfloat16)
#: a half-type cos/sin of more rows than this is widened to float32 before the core's call
_WIDE_ROWS = 16


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


_STRIDED = torch.strided
#: vmap's batched tensors, grad's tracking wrappers and functionalize's tensors alike
_FUNCTORCH_WRAPPED = torch._C._functorch.is_functorch_wrapped_tensor

def _autocast_on() -> bool:
    return bool(torch.is_autocast_enabled("cpu"))


_AUTOCAST: Callable[[], bool] = _autocast_on
try:
    torch.is_autocast_enabled("cpu")
except TypeError:  # a torch whose is_autocast_enabled takes no device (before 2.4)
    _AUTOCAST = torch.is_autocast_cpu_enabled

import torch.autograd.forward_ad as _FORWARD_AD  # noqa: E402  (its dual level, read per call)

#: how a call runs (_way): the core's way, transformers' graph, or a training call (the core's
#: forward, autograd's own backward of the graph replayed)
_CORE, _GRAPH, _TRAIN = 0, 1, 2


def _way(ts: Tuple[Any, ...]) -> int:
    """The graph for an argument that is not a tensor (the graph raises what transformers
    raises), a tensor inside a torch function transform (vmap, grad, functionalize), nested
    or sparse, on the meta device or any other device than the CPU, or tables that require
    grad while grad mode is on; a training call where autograd records q or k only; else
    the core."""
    if _AUTOCAST() or _FORWARD_AD._current_level >= 0:
        return _GRAPH  # (autocast may cast or refuse the graph's ops; dual tensors' tangents)
    grad = torch.is_grad_enabled()
    records = False
    for t in ts:
        if type(t) is not torch.Tensor and not isinstance(t, torch.Tensor):
            return _GRAPH
        if not t.is_cpu or t.is_nested or t.layout != _STRIDED or _FUNCTORCH_WRAPPED(t):
            return _GRAPH
        if grad and t.requires_grad:
            records = True
    if not records:
        return _CORE
    return _GRAPH if ts[-1].requires_grad or ts[-2].requires_grad else _TRAIN


def _dtypes_ok(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               same_dtype: bool) -> bool:
    if q.dtype not in _FAST or k.dtype != q.dtype or cos.dtype not in _FAST \
            or sin.dtype != cos.dtype or cos.shape != sin.shape:
        return False
    return not (same_dtype and cos.dtype != q.dtype)  # else torch promotes the products


def _ud(t: torch.Tensor, unsqueeze_dim: Any) -> Optional[int]:
    """unsqueeze_dim as a non-negative axis of t.unsqueeze's result, or None where torch's own
    unsqueeze would refuse it (the graph then raises its error)."""
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
    # a view of the 3-axis shape: three strides (torch types stride() as any length)
    return None if v is t else cast(Tuple[int, int, int], tuple(v.stride()))


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
    caller made); None when a layout does not fit the core (the caller runs the graph).
    one: the name of q in messages when k is None (the single form's x)."""
    plan = _plan(q, k, cos, sin, ud)
    lq, lk = plan.lq, plan.lk
    if lq is None or lk is None:
        return None
    opts = _core_opts()
    # grad mode off, or no input that requires grad: the values are read as they are
    # (torch's export refuses tensors that require grad)
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
        assert plan.q is not None  # (_Plan makes it for every q with elements)
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
    """A read tensor as the core reads it: detached (nothing records this call), its neg bit
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


def _deinterleave(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x[..., 0::2], x[..., 1::2]], dim=-1)


def _first_half_twice(t: torch.Tensor) -> torch.Tensor:
    h = t[..., : t.shape[-1] // 2]
    return torch.cat([h, h], dim=-1)


def _c_std(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
           unsqueeze_dim: Any, partial: bool = True) -> Optional[_Pair]:
    """partial: GPT-NeoX's narrower tables rotate the first channels; without it (the
    functions that have no partial width: OLMo's, ModernBERT's) a narrower table is
    torch's broadcast error, the graph's to raise."""
    ud = _ud(cos, unsqueeze_dim)
    # a table of width 1 is broadcast by torch over the whole head (no partial rotary)
    if ud is None or not cos.dim() or cos.shape[-1] == 1 < q.shape[-1] \
            or not _dtypes_ok(q, k, cos, sin, True) \
            or not partial and not cos.shape[-1] == q.shape[-1] == k.shape[-1]:
        return None
    return _rotate_into(q, k, cos, sin, ud, False)


def _c_interleave(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                  unsqueeze_dim: Any) -> Optional[_Pair]:
    if not cos.dim() or not _dtypes_ok(q, k, cos, sin, True) \
            or not 2 * (cos.shape[-1] // 2) == q.shape[-1] == k.shape[-1]:
        return None
    c2, s2 = _first_half_twice(cos), _first_half_twice(sin)
    ud = _ud(c2, unsqueeze_dim)
    if ud is None:
        return None
    return _rotate_into(_deinterleave(q), _deinterleave(k), c2, s2, ud, False, True)


def _c_glm(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
           unsqueeze_dim: Any) -> Optional[_Pair]:
    if not cos.dim() or not _dtypes_ok(q, k, cos, sin, True):
        return None
    half = cos.shape[-1] // 2
    r = 2 * half
    if not 2 <= r <= min(q.shape[-1], k.shape[-1]):
        return None
    c2, s2 = _first_half_twice(cos), _first_half_twice(sin)
    ud = _ud(c2, unsqueeze_dim)
    if ud is None:
        return None
    outs = []
    for x in (q, k):
        xh = _deinterleave(x[..., :r])
        if _rotate_into(xh, None, c2, s2, ud, False, True) is None:
            return None
        y = torch.empty_like(x)
        y[..., :r] = torch.stack((xh[..., :half], xh[..., half:]), dim=-1).flatten(-2)
        y[..., r:] = x[..., r:]
        outs.append(y)
    return outs[0], outs[1]


def _c_cohere(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
              unsqueeze_dim: Any) -> Optional[_Pair]:
    ud = _ud(cos, unsqueeze_dim)
    if ud is None or not cos.dim() or not _dtypes_ok(q, k, cos, sin, False) \
            or not cos.shape[-1] == q.shape[-1] == k.shape[-1]:
        return None
    return _rotate_into(q, k, cos, sin, ud, True)


def _c_olmo(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            unsqueeze_dim: Any) -> Optional[_Pair]:
    """The products promote q to cos's float32 (exact), rounded back once: the standard
    form on float32 copies, cast."""
    if q.dtype not in _FAST or k.dtype not in _FAST or cos.dtype not in _FAST:
        return None
    dq, dk = torch.promote_types(q.dtype, cos.dtype), torch.promote_types(k.dtype, cos.dtype)
    if dq not in (q.dtype, torch.float32) or dk not in (k.dtype, torch.float32):
        return None
    qf = q if dq == q.dtype else _dtypes.float_copy(q, "q")
    kf = k if dk == k.dtype else _dtypes.float_copy(k, "k")
    out = _c_std(qf, kf, cos, sin, unsqueeze_dim, partial=False)
    if out is None:
        return None
    return out[0].to(q.dtype), out[1].to(k.dtype)


def _c_half(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            unsqueeze_dim: Any) -> Optional[_Pair]:
    # x1 * cos - x2 * sin is x1 * cos + (-x2) * sin exactly: the standard form with the
    # tables repeated, where the tables are the halves' full width (GPT-OSS rotates no
    # partial width: a narrower table broadcasts over each half there)
    if not cos.dim() or not 2 * cos.shape[-1] == q.shape[-1] == k.shape[-1]:
        return None
    return _c_std(q, k, torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1),
                  unsqueeze_dim)


def _widened(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
             sin: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    f = _dtypes.float_copy
    return f(q, "q"), f(k, "k"), f(cos, "cos"), f(sin, "sin")


def _c_float32(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               unsqueeze_dim: Any) -> Optional[_Pair]:
    if q.dtype not in _FAST or k.dtype != q.dtype or cos.dtype not in _FAST \
            or sin.dtype != cos.dtype:
        return None
    if not cos.dim() or not cos.shape[-1] == q.shape[-1] == k.shape[-1]:
        return None  # (ModernBERT's function has no partial width: the graph raises)
    out = _c_std(*_widened(q, k, cos, sin), unsqueeze_dim, partial=False)
    if out is None:
        return None
    return out[0].to(q.dtype), out[1].to(q.dtype)


def _c_glm_float32(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   unsqueeze_dim: Any) -> Optional[_Pair]:
    if q.dtype not in _FAST or k.dtype != q.dtype or cos.dtype not in _FAST \
            or sin.dtype != cos.dtype or not cos.dim() or cos.shape[-1] != q.shape[-1] \
            or k.shape[-1] != q.shape[-1] or cos.shape[-1] % 2:
        return None  # (an odd width: ERNIE's repeated half is narrower than q, which raises)
    out = _c_glm(*_widened(q, k, cos, sin), unsqueeze_dim)
    if out is None:
        return None
    return out[0].to(q.dtype), out[1].to(q.dtype)


def _c_single(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
              unsqueeze_dim: Any) -> Optional[torch.Tensor]:
    ud = _ud(cos, unsqueeze_dim)
    if ud is None or not cos.dim() or cos.shape[-1] != x.shape[-1] \
            or not _dtypes_ok(x, x, cos, sin, True):
        return None  # (Gemma 3n's function has no partial width)
    out = _rotate_into(x, None, cos, sin, ud, False, one="x")
    return None if out is None else out[0]


# ---- the forms -----------------------------------------------------------------------------------

class Form:
    """One rotation form: its name, parameters (transformers' own), graph, core way, and
    operator (None without custom operators)."""
    __slots__ = ("name", "params", "graph", "core", "op", "tensors", "ud", "exact", "train")

    def __init__(self, name: str, params: Tuple[str, ...], graph: Callable[..., Any],
                 core: Callable[..., Any], exact: bool = True, train: bool = True) -> None:
        self.name, self.params, self.graph, self.core = name, params, graph, core
        #: whether the core gives the graph's bits for every input (NaN signs included)
        self.exact = exact
        #: whether a training call takes the core's forward and the captured backward (the
        #: forms whose core is faster than the graph's ops: the halves, not the pairs' or
        #: those whose core NaN signs differ)
        self.train = train and exact
        self.tensors = params[:3] if params[0] == "x" else params[:4]
        self.ud = params.index("unsqueeze_dim")
        self.op: Any = None

    def takes(self, ts: Tuple[Any, ...], partial: bool) -> bool:
        """Whether a model's function of this form's family computes what the form computes
        for these tensors' widths (shapes only: decided while torch traces too)."""
        cos = ts[-2]
        if not isinstance(cos, torch.Tensor) or not cos.dim() or \
                any(not isinstance(t, torch.Tensor) or not t.dim() for t in ts[:-2]):
            return False
        w = cos.shape[-1]
        if partial:
            return bool(w >= 2)
        if self.name == "apply_rotary_pos_emb":
            return all(t.shape[-1] == w for t in ts[:-2])
        if self.name == "apply_rotary_pos_emb_glm":
            return all(t.shape[-1] == 2 * (w // 2) for t in ts[:-2])
        return True  # (the other forms' cores take full widths only: their graphs decide)

    def kernel(self, *ts: torch.Tensor, unsqueeze_dim: int) -> Any:
        """The operator's kernel (grad mode off): the core's way, the graph where it declines."""
        out = self.core(*ts, unsqueeze_dim)
        return out if out is not None else self.graph(*ts, unsqueeze_dim=unsqueeze_dim)


def call(form: Form, args: Tuple[Any, ...], kw: Dict[str, Any],
         graph: Optional[Callable[..., Any]] = None, partial: bool = True) -> Any:
    """One call of a form with transformers' arguments: the operator while torch.compile or
    torch.export traces, the graph (graph: the model's own function, for a patched model)
    where something records or transforms the call, else the core's way (the graph where
    the core declines).  partial False: the model's function has no partial width (Llama's,
    Helium's), so tables narrower than q are its own to refuse; True (GPT-NeoX's, GLM's):
    a table of width one is its one-channel rotation, not the form's broadcast."""
    g = form.graph if graph is None else graph
    bound = _bind(form, args, kw)
    if bound is None:  # arguments transformers' function would refuse or read otherwise
        return g(*args, **kw)
    ts, ud = bound
    if graph is not None and not form.takes(ts, partial):
        return g(*args, **kw)
    if form.op is not None and type(ud) is int and _torch_ops.tracing(ts):
        return form.op(*ts, ud)
    way = _way(ts)
    if way == _TRAIN and form.train and type(ud) is int \
            and sum(t.numel() for t in ts[:-2]) >= _TRAIN_MIN:
        out = _train(form, g, ts, ud)
        if out is not None:
            return out
    if way != _CORE:
        return g(*args, **kw)
    out = form.core(*ts, ud)
    return out if out is not None else g(*args, **kw)


def _bind(form: Form, args: Tuple[Any, ...], kw: Dict[str, Any]
          ) -> Optional[Tuple[Tuple[Any, ...], Any]]:
    """(the tensors, unsqueeze_dim) from a call's arguments, by transformers' parameter
    names; None for arguments that bind otherwise (too many, unknown or repeated names)."""
    params = form.params
    n = len(form.tensors)
    if not kw:  # (the usual call: positional arguments only)
        if n <= len(args) <= len(params):
            return args[:n], args[form.ud] if len(args) > form.ud else 1
        return None
    if len(args) > len(params):
        return None
    vals = dict(zip(params, args))
    for name, v in kw.items():
        if name not in params or name in vals:
            return None
        vals[name] = v
    for name in form.tensors:
        if name not in vals:
            return None
    return tuple(vals[n] for n in form.tensors), vals.get("unsqueeze_dim", 1)


_PAIR = ("q", "k", "cos", "sin", "unsqueeze_dim")
_PAIR_POS = ("q", "k", "cos", "sin", "position_ids", "unsqueeze_dim")
_SINGLE = ("x", "cos", "sin", "unsqueeze_dim")

#: the forms by their public names
FORMS: Dict[str, Form] = {f.name: f for f in (
    Form("apply_rotary_pos_emb", _PAIR, _g_std, _c_std),
    Form("apply_rotary_pos_emb_interleave", _PAIR_POS, _g_interleave, _c_interleave, False),
    Form("apply_rotary_pos_emb_glm", _PAIR, _g_glm, _c_glm),
    Form("apply_rotary_pos_emb_cohere", _PAIR, _g_cohere, _c_cohere, train=False),
    Form("apply_rotary_pos_emb_olmo", _PAIR, _g_olmo, _c_olmo),
    Form("apply_rotary_pos_emb_half", _PAIR, _g_half, _c_half, False),
    Form("apply_rotary_pos_emb_float32", _PAIR, _g_float32, _c_float32),
    Form("apply_rotary_pos_emb_glm_float32", _PAIR, _g_glm_float32, _c_glm_float32),
    Form("apply_rotary_pos_emb_single", _SINGLE, _g_single, _c_single),
)}

for _f in FORMS.values():
    _f.op = _torch_ops.register_form(_f.name, "single" if _f.params[0] == "x" else "pair",
                                     _f.kernel, _f.graph)


# ---- training: the core's forward, autograd's own backward of the graph, replayed --------------
#
# Where autograd records a rotation (q or k require grad, the tables do not), the forward is
# the core's (the graph's bits) and the backward is autograd's own backward of transformers'
# graph: its aten operations, captured once per layout by tracing autograd through the graph
# (torch.fx's make_fx on real tensors: every op the engine runs, its casts and the order of its
# sums), dead code removed, and replayed.  The gradients are the graph's by construction;
# the engine's bookkeeping and the forward's six or so kernels are what is saved.  Only the
# tables are kept for the backward (a rotation is linear in q and k), unless the captured
# backward reads q or k.

#: the fewest values of q and k a training call takes the core's forward and the captured
#: backward for: below, Python's fixed costs (the autograd Function, the replayed ops' calls)
#: outweigh the forward's savings, and transformers' graph runs as it is (measured on the
#: 2-core AMD EPYC Zen 4, 2 threads, the standard form against transformers' own: about 0.9
#: of its speed at 40,960 to 655,360 values, 1.15-1.22 at 2.6 M, 1.09-1.30 at 10.5 M)
_TRAIN_MIN = 1 << 20


class _Capture:
    """A layout's captured backward: for each pattern of outputs a gradient reaches, a graph
    of aten ops from (those gradients, the rotated tensors, cos, sin) to the gradients of the
    inputs that require grad; whether those read the rotated tensors."""
    __slots__ = ("graph", "ud", "need", "examples", "by_pattern", "reads_x", "lock")

    def __init__(self, graph: Callable[..., Any], ud: int, need: Tuple[bool, ...],
                 ts: Tuple[torch.Tensor, ...]) -> None:
        self.graph, self.ud, self.need = graph, ud, need
        self.examples = tuple(torch.empty_like(t, memory_format=torch.contiguous_format)
                              .zero_() for t in ts[:-2]) + tuple(t.detach() for t in ts[-2:])
        self.by_pattern: Dict[Tuple[bool, ...], Any] = {}
        self.reads_x = False
        self.lock = threading.Lock()

    def replay(self, reach: Tuple[bool, ...]) -> Any:
        gm = self.by_pattern.get(reach)
        if gm is None:
            with self.lock:
                gm = self.by_pattern.get(reach)
                if gm is None:
                    gm = self.by_pattern[reach] = self._trace(reach)
        return gm

    def _trace(self, reach: Tuple[bool, ...]) -> Any:
        from torch.fx.experimental.proxy_tensor import make_fx
        n = len(self.examples) - 2
        graph, ud, need = self.graph, self.ud, self.need

        def backward(*args: torch.Tensor) -> Any:
            gs, xs, (cos, sin) = args[:sum(reach)], args[-2 - n:-2], args[-2:]
            with torch.enable_grad():
                leaves = [x.detach().requires_grad_(r) for x, r in zip(xs, need)]
                out = graph(*leaves, cos, sin, unsqueeze_dim=ud)
                outs = out if isinstance(out, tuple) else (out,)
                got = iter(gs)
                pairs = [(o, next(got)) for o, r in zip(outs, reach) if r]
                pairs = [(o, g) for o, g in pairs if o.requires_grad]
                wrt = [x for x, r in zip(leaves, need) if r]
                if not pairs:
                    return tuple(None for _ in wrt)
                return torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs],
                                           allow_unused=True)
        gs = [torch.zeros_like(x) for x, r in zip(self.examples[:n], reach) if r]
        # neutral saved-tensor hooks: the capture's own autograd graph is nothing an outer
        # hook (activation checkpointing's count of saved tensors) may see
        with torch.autograd.graph.saved_tensors_hooks(_same_tensor, _same_tensor):
            gm = make_fx(backward)(*gs, *self.examples)
        gm.graph.eliminate_dead_code()
        places = [nd for nd in gm.graph.nodes if nd.op == "placeholder"]
        if any(nd.users for nd in places[len(gs):len(gs) + n]):
            self.reads_x = True
        raw = _straight(gm.graph)
        if not _in_place(gm.graph):
            return raw
        fast = _straight(gm.graph)
        # the in-place graph checked against the captured one on gradients of every kind of
        # value (zeros of both signs, NaNs of both signs, infinities, subnormals)
        probe = [_specials(g) for g in gs] + list(self.examples)
        want, got = raw(*probe), fast(*probe)
        return fast if _same_outputs(want, got) else raw


#: aten ops whose result is memory of its own (never a view of an argument)
_FRESH = ("slice_backward", "select_backward", "add", "sub", "mul", "neg", "_to_copy", "cat",
          "clone", "stack", "index_put", "new_zeros", "zeros_like")
#: out-of-place ops with an in-place twin that computes the same values into their first argument
_IN_PLACE = {"add.Tensor": "add_.Tensor", "mul.Tensor": "mul_.Tensor", "neg.default": "neg_.default",
             "sub.Tensor": "sub_.Tensor"}


def _in_place(graph: Any) -> bool:
    """Each out-of-place op whose first argument is a fresh temporary nothing else reads (of the
    result's shape and dtype) computes into it instead, as autograd's engine accumulates
    gradients into the buffer it holds: the same values without an allocation per op.
    Whether anything changed."""
    changed = False
    for nd in graph.nodes:
        t = nd.target
        if nd.op != "call_function" or not isinstance(t, torch._ops.OpOverload):
            continue
        twin = _IN_PLACE.get(f"{t._opname}.{t._overloadname}")
        a = nd.args[0] if nd.args else None
        if twin is None or not isinstance(a, torch.fx.Node) or a.op != "call_function" \
                or len(a.users) != 1 or not isinstance(a.target, torch._ops.OpOverload) \
                or a.target._opname not in _FRESH:
            continue
        va, vo = a.meta.get("val"), nd.meta.get("val")
        if va is None or vo is None or va.shape != vo.shape or va.dtype != vo.dtype:
            continue
        name, overload = twin.split(".")
        nd.target = getattr(getattr(torch.ops.aten, name), overload)
        changed = True
    return changed


def _same_tensor(t: torch.Tensor) -> torch.Tensor:
    return t


def _straight(graph: Any) -> Callable[..., Any]:
    """A graph of aten ops as one plain Python function: each op called through the
    dispatcher's own entry (the same kernel as autograd's call, without OpOverload's Python
    wrapper or nn.Module's call), constants bound by name."""
    env: Dict[str, Any] = {}
    params: List[str] = []
    body: List[str] = []

    def ref(a: Any) -> str:
        if isinstance(a, torch.fx.Node):
            return a.name
        if isinstance(a, (list, tuple)):
            inner = ", ".join(ref(x) for x in a)
            return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
        name = f"_c{len(env)}"
        env[name] = a
        return name

    for nd in graph.nodes:
        if nd.op == "placeholder":
            params.append(nd.name)
        elif nd.op == "call_function":
            fn = getattr(nd.target, "_op", None) if isinstance(nd.target, torch._ops.OpOverload) \
                else None
            name = f"_f{len(env)}"
            env[name] = fn if callable(fn) else nd.target
            args = [ref(a) for a in nd.args] + [f"{k}={ref(v)}" for k, v in nd.kwargs.items()]
            body.append(f"    {nd.name} = {name}({', '.join(args)})")
        elif nd.op == "output":
            body.append(f"    return {ref(nd.args[0])}")
    src = f"def replay({', '.join(params)}):\n" + "\n".join(body) + "\n"
    exec(compile(src, "<sinpe captured backward>", "exec"), env)
    replay: Callable[..., Any] = env["replay"]
    return replay


def _specials(t: torch.Tensor) -> torch.Tensor:
    gen = torch.Generator().manual_seed(5)
    out = torch.randn(t.shape, generator=gen).to(t.dtype)
    flat = out.view(-1)
    vals = [0.0, -0.0, float("nan"), -float("nan"), float("inf"), -float("inf"), 1e-40, -1e-40]
    for i in range(min(flat.numel(), 64)):
        flat[(i * 7919) % flat.numel()] = vals[i % len(vals)]
    return out


def _int_view(t: torch.Tensor) -> torch.Tensor:
    t = t.contiguous()
    return t.view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[
        t.element_size()])


def _same_outputs(a: Any, b: Any) -> bool:
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    return len(a) == len(b) and all(
        (x is None and y is None) or (x is not None and y is not None and x.shape == y.shape
                                      and x.dtype == y.dtype
                                      and torch.equal(_int_view(x), _int_view(y)))
        for x, y in zip(a, b))


_CAPTURES: "OrderedDict[Any, _Capture]" = OrderedDict()
_CAPTURES_LOCK = threading.Lock()
#: layouts whose backward is kept (a training run's sequence lengths; each capture ~30 ms)
_CAPTURES_MAX = 512


def _capture(form: Form, graph: Callable[..., Any], ts: Tuple[torch.Tensor, ...], ud: int,
             need: Tuple[bool, ...]) -> Optional[_Capture]:
    if len(ts) == 4:
        q, k, c, s = ts
        key: Any = (form.name, graph, ud, need, q.shape, k.shape, c.shape, s.shape, q.dtype,
                    k.dtype, c.dtype, s.dtype)
    else:
        x, c, s = ts
        key = (form.name, graph, ud, need, x.shape, c.shape, s.shape, x.dtype, c.dtype, s.dtype)
    cap = _CAPTURES.get(key)
    if cap is not None:
        return cap
    cap = _Capture(graph, ud, need, ts)
    try:
        cap.replay((True,) * (len(ts) - 2))  # a graph that refuses these inputs: its own path
    except Exception:
        return None
    with _CAPTURES_LOCK:
        _CAPTURES[key] = cap
        while len(_CAPTURES) > _CAPTURES_MAX:  # the oldest first
            _CAPTURES.popitem(last=False)
    return cap


class _Train(torch.autograd.Function):
    """The training call: forward by the form's kernel, backward by the captured graph."""

    @staticmethod
    def forward(ctx: Any, form: Form, graph: Callable[..., Any], cap: _Capture, ud: int,
                *ts: torch.Tensor) -> Any:
        ctx.set_materialize_grads(False)
        ctx.cap = cap
        ctx.n = len(ts) - 2
        ctx.save_for_backward(*(ts if cap.reads_x else ts[-2:]))
        out = form.core(*ts, ud) if form.exact else None  # (the core's NaN signs differ
        if out is None:  # from these graphs': the graph itself, as where the core declines)
            out = graph(*ts, unsqueeze_dim=ud)
        outs = out if isinstance(out, tuple) else (out,)
        ctx.mark_non_differentiable(*[o for o, t in zip(outs, ts) if not t.requires_grad])
        return out

    @staticmethod
    def backward(ctx: Any, *grads: Optional[torch.Tensor]) -> Any:
        cap, n = ctx.cap, ctx.n
        saved = ctx.saved_tensors
        xs = saved[:n] if cap.reads_x else (None,) * n
        reach = tuple(g is not None for g in grads[:n])
        got: Tuple[Any, ...] = ()
        if any(reach):
            got = cap.replay(reach)(*[g for g in grads[:n] if g is not None], *xs, *saved[-2:])
        it = iter(got)
        out = [next(it, None) if r else None for r in cap.need]
        return (None, None, None, None) + tuple(out) + (None, None)


def _train(form: Form, graph: Callable[..., Any], ts: Tuple[torch.Tensor, ...],
           ud: int) -> Any:
    """A training call (q or k require grad, the tables not), or None where its backward
    cannot be captured (the graph's own path then)."""
    need = tuple(bool(t.requires_grad) for t in ts[:-2])
    cap = _capture(form, graph, ts, ud, need)
    if cap is None:
        return None
    # torch's autograd.Function.apply is unannotated (torch 2.13)
    return _Train.apply(form, graph, cap, ud, *ts)  # type: ignore[no-untyped-call]


def graph_of(name: str) -> Callable[..., Any]:
    """transformers' graph of a form (restated)."""
    return FORMS[name].graph


def _global_functions(fn: Any, g: Dict[str, Any]) -> Tuple[Tuple[str, Any], ...]:
    """The module-level functions of g that fn's code names, and theirs, transitively."""
    out: Dict[str, Any] = {}
    todo = [fn]
    while todo:
        f = todo.pop()
        f = getattr(f, "__wrapped__", f)
        code = getattr(f, "__code__", None)
        if code is None:
            continue
        names = list(code.co_names)
        for c in code.co_consts:
            if hasattr(c, "co_names"):
                names.extend(c.co_names)
        for n in names:
            obj = g.get(n)
            if n not in out and callable(obj) and getattr(obj, "__globals__", None) is g:
                out[n] = obj
                todo.append(obj)
    return tuple(out.items())


#: the reference functions whose tables may be narrower than q (the first channels rotate)
PARTIAL_REFERENCES = frozenset({"gpt_neox", "phi3", "nemotron", "glm"})


class route:
    """A form standing in for a model's own rotation function (sinpe.torch.patch): the form's
    core way and operator, the model's function wherever the graph runs.  reference: the
    transformers module whose function it matched (its widths' rule).  With the module's
    globals and the name, a function the module holds under that name now, other than the
    one routed (the user replaced it), is called instead: the model computes what the
    unpatched model computes."""
    __slots__ = ("form", "original", "partial", "g", "name", "deps")

    def __init__(self, form: str, original: Callable[..., Any], reference: str = "",
                 g: Optional[Dict[str, Any]] = None, name: str = "") -> None:
        self.form = form
        self.original = original
        self.partial = reference in PARTIAL_REFERENCES
        self.g, self.name = g, name
        #: the module-level functions the original calls (rotate_half...), as they were: one
        #: replaced since changes what the original computes, so the original runs instead
        self.deps = _global_functions(original, g) if g is not None else ()

    def __call__(self, *args: Any, **kw: Any) -> Any:
        g = self.g
        if g is not None:
            live = g.get(self.name)
            if live is not self.original and live is not None:
                return live(*args, **kw)
            for n, f in self.deps:
                if g.get(n) is not f:
                    return self.original(*args, **kw)
        return call(FORMS[self.form], args, kw, self.original, self.partial)

    def __repr__(self) -> str:
        return f"<sinpe form {self.form} for {getattr(self.original, '__qualname__', '?')}>"
