"""The rotation forms' core way: q and k rotated by sinpe's core in one pass each.

A plain CPU call with nothing to record (sinpe/_torch/forms.py decides) is planned here: the
layouts of q, k and the tables the core's rope job can express (views of cos and sin broadcast
along the heads, the partial widths of GPT-NeoX's form), kept per shape; each form's core returns
None where it declines (its graph then runs), bit for bit with the graph's forward otherwise.
:data:`CORES` holds them by the forms' public names.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Dict, Optional, Tuple, cast

import torch

from .. import _producers, _tensors
from .._backends.policy import opts as _core_opts
from .._jobs import rope_job as _rope
from .._memo import Memo


_Pair = Tuple[torch.Tensor, torch.Tensor]


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


_PLANS: "Memo[Any, _Plan]" = Memo(256)  # a bound for shapes that change at every call


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
        plan = _PLANS[key] = _Plan(q, k, cos, sin, ud)
    return plan


def _rotate_into(q: torch.Tensor, k: Optional[torch.Tensor], cos: torch.Tensor,
                 sin: torch.Tensor, ud: int, pairs: bool,
                 inplace: bool = False, one: str = "q", form: int = 0
                 ) -> Optional[Tuple[Any, Any]]:
    """q (and k) rotated into fresh tensors (empty_like each, written once by the core, which
    reads cos/sin as they are: their dtype, their strides), or in place (fresh tensors the
    caller made); None when a layout does not fit the core (the caller runs the graph).
    one: the name of q in messages when k is None (the single form's x).  form: an engine's
    arithmetic (sinpe._producers; 0: torch's eager ops)."""
    plan = _plan(q, k, cos, sin, ud)
    lq, lk = plan.lq, plan.lk
    if lq is None or lk is None:
        return None
    opts = core_opts()
    # grad mode off, or no input that requires grad: the values are read as they are
    # (torch's export refuses tensors that require grad)
    q, k = _tensors.readable(q, one, not inplace), _tensors.readable(k, "k", not inplace)
    c0, s0 = cos, sin
    cos, sin = _tensors.readable(cos, "cos"), _tensors.readable(sin, "sin")
    # the kept strides hold for the tables as they came (detach keeps strides; a resolved
    # negative bit or a widened copy has its own)
    kept = not plan.widen and (cos is c0 or cos.stride() == c0.stride()) \
        and (sin is s0 or sin.stride() == s0.stride())
    if plan.widen:  # (torch's copy reads past a storage's end unchecked: checked first)
        cos, sin = _tensors.float_copy(cos, "cos"), _tensors.float_copy(sin, "sin")
    qe = q if inplace else torch.empty_like(q)
    ke = k if inplace or k is None else torch.empty_like(k)
    src_q, src_k = (None, None) if inplace else (q, k)
    if qe.numel():
        assert plan.q is not None  # (_Plan makes it for every q with elements)
        c, s = plan.q.tables(cos, sin, ud, lq, kept)
        if plan.one:
            _rope(opts, qe, c, s, lq[0], lq[1], pairs, src_q, ke, src_k, _NAMES, form=form)
            return qe, ke
        _rope(opts, qe, c, s, lq[0], lq[1], pairs, src_q, None, None,
              _NAMES if one == "q" else _X_NAMES, form=form)
    if ke is not None and ke.numel():
        views = plan.k if plan.k is not None else _Views(ke, lk, plan.r, cos, sin, ud, True)
        c, s = views.tables(cos, sin, ud, lk, kept and plan.k is not None)
        _rope(opts, ke, c, s, lk[0], lk[1], pairs, src_k, None, None, _K_NAMES, form=form)
    return qe, ke


def produced(q: torch.Tensor, k: Optional[torch.Tensor], cos: torch.Tensor, sin: torch.Tensor,
             unsqueeze_dim: Any, producer: Any, layout: str = "half") -> Optional[_Pair]:
    """transformers' apply_rotary_pos_emb (or a family's form, by its layout: 'half', or
    'pairs' with the pairs' repeated tables; k None: one tensor, the single form's x) as
    producer computes it (sinpe._producers: an engine's arithmetic on the tables an exporter
    writes), or None for transformers' own (the form's usual call).  An engine's forward has
    no gradient here, runs on plain CPU tensors, and takes the layouts the core rotates:
    anything else is refused, naming it."""
    ts = {"q" if k is not None else "x": q, "k": k, "cos": cos, "sin": sin}
    if k is None:
        del ts["k"]
    for name, t in ts.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    d = q.shape[-1] if q.dim() else 0
    p = _producers.producer(producer, str(q.dtype).replace("torch.", ""), layout,
                            cos.shape[-1] if cos.dim() else d, d)
    if p is None or (q.dtype == torch.float64 and p.form == _producers.ONE):
        return None  # (float64 in one rounding: transformers' own bits, its usual route)
    for name, t in ts.items():
        _tensors.check(torch, t, name)
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in ts.values()):
        raise ValueError(f"producer={producer!r} gives {p.p.engine}'s forward bits, which have "
                         "no gradient here: call it under torch.no_grad() or on tensors that "
                         "do not require grad")
    kd = q.dtype if k is None else k.dtype
    if q.dtype not in _FAST or kd != q.dtype or cos.dtype not in _FAST \
            or sin.dtype != cos.dtype or cos.shape != sin.shape \
            or (p.form == _producers.ONE and cos.dtype != q.dtype):
        raise ValueError(f"producer={producer!r}: q and k must share a float dtype and cos "
                         f"and sin a float dtype and shape ({p.p.engine}: transformers' "
                         f"tables, of q's dtype), got q {q.dtype}, k {kd}, cos {cos.dtype} "
                         f"{tuple(cos.shape)}, sin {sin.dtype} {tuple(sin.shape)}")
    if isinstance(unsqueeze_dim, bool):
        raise TypeError(f"unsqueeze_dim must be an integer, got {unsqueeze_dim!r}")
    try:
        ud = _ud(cos, operator.index(unsqueeze_dim))
    except TypeError:
        raise TypeError(f"unsqueeze_dim must be an integer, got {unsqueeze_dim!r}") from None
    if ud is None:
        raise IndexError(f"unsqueeze_dim={unsqueeze_dim!r} is out of range for cos of "
                         f"{cos.dim()} axes")
    out = None if not cos.dim() else _rotate_into(q, k, cos, sin, ud, layout == "pairs",
                                                   one="x" if k is None else "q", form=p.form)
    if out is None:
        raise ValueError(f"producer={producer!r}: cos {tuple(cos.shape)} unsqueezed at "
                         f"{unsqueeze_dim!r} is not a table of q {tuple(q.shape)}"
                         + ("" if k is None else f" and k {tuple(k.shape)}")
                         + " that an engine's rotation takes")
    return out


def core_opts() -> Any:
    """The default core options, checked by the rope job itself (no call of their own)."""
    return _core_opts()


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
    qf = q if dq == q.dtype else _tensors.float_copy(q, "q")
    kf = k if dk == k.dtype else _tensors.float_copy(k, "k")
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
    f = _tensors.float_copy
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



#: the core ways by the forms' public names
CORES: Dict[str, Callable[..., Any]] = {
    "apply_rotary_pos_emb": _c_std,
    "apply_rotary_pos_emb_interleave": _c_interleave,
    "apply_rotary_pos_emb_glm": _c_glm,
    "apply_rotary_pos_emb_cohere": _c_cohere,
    "apply_rotary_pos_emb_olmo": _c_olmo,
    "apply_rotary_pos_emb_half": _c_half,
    "apply_rotary_pos_emb_float32": _c_float32,
    "apply_rotary_pos_emb_glm_float32": _c_glm_float32,
    "apply_rotary_pos_emb_single": _c_single,
}
