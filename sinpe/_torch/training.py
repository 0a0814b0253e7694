"""A training call of a rotation form: the core's forward, autograd's own backward replayed.

Where autograd records a rotation (q or k require grad, the tables do not), the forward is
the core's (the graph's bits) and the backward is autograd's own backward of transformers'
graph: its aten operations, captured once per layout by tracing autograd through the graph
(torch.fx's make_fx on real tensors: every op the engine runs, its casts and the order of its
sums), dead code removed, and replayed.  The gradients are the graph's by construction;
the engine's bookkeeping and the forward's six or so kernels are what is saved.  Only the
tables are kept for the backward (a rotation is linear in q and k), unless the captured
backward reads q or k.  Which calls come here is sinpe/_torch/forms.py's decision.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from .._memo import Memo



#: aten ops whose result is memory of its own (never a view of an argument)
_FRESH = ("slice_backward", "select_backward", "add", "sub", "mul", "neg", "_to_copy", "cat",
          "clone", "stack", "index_put", "new_zeros", "zeros_like")


#: out-of-place ops with an in-place twin that computes the same values into their first argument
_IN_PLACE = {"add.Tensor": "add_.Tensor", "mul.Tensor": "mul_.Tensor", "neg.default": "neg_.default",
             "sub.Tensor": "sub_.Tensor"}


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


#: layouts whose backward is kept (a training run's sequence lengths; each capture ~30 ms)
_CAPTURES: "Memo[Any, _Capture]" = Memo(512)


def _capture(form: Any, graph: Callable[..., Any], ts: Tuple[torch.Tensor, ...], ud: int,
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
    _CAPTURES[key] = cap  # (racing threads: each keeps a capture, the last one stays)
    return cap


class _Train(torch.autograd.Function):
    """The training call: forward by the form's kernel, backward by the captured graph."""

    @staticmethod
    def forward(ctx: Any, form: Any, graph: Callable[..., Any], cap: _Capture, ud: int,
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


def train(form: Any, graph: Callable[..., Any], ts: Tuple[torch.Tensor, ...],
           ud: int) -> Any:
    """A training call (q or k require grad, the tables not), or None where its backward
    cannot be captured (the graph's own path then)."""
    need = tuple(bool(t.requires_grad) for t in ts[:-2])
    cap = _capture(form, graph, ts, ud, need)
    if cap is None:
        return None
    # torch's autograd.Function.apply is unannotated (torch 2.13)
    return _Train.apply(form, graph, cap, ud, *ts)  # type: ignore[no-untyped-call]


