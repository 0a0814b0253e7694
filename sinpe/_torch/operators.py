"""sinpe's torch entry points as torch custom operators.

- :func:`register_form` (called by sinpe/_torch/forms.py at import) registers each
  rotation form as an operator ``torch.ops.sinpe.<form>`` with a fake (meta) kernel and an
  autograd formula (``torch.ops.sinpe.rotation_vjp``: autograd through transformers' graph),
  so that ``torch.compile(..., fullgraph=True)`` traces each call as one node, with no
  graph break, and the compiled call gives the eager call's bits, gradients included.  The
  operator is called while torch.compile or torch.export traces (:func:`tracing`); an eager
  call runs the form directly (same bits, no dispatcher cost).
- :func:`lazy_op` registers one operator once per process (``add_pe`` in tables.py,
  ``hf_rope`` in hf_rope.py, the forms' backward here), and :func:`use_operator` says when a
  call takes it (torch traces the call).

Registration happens when the torch wing is imported (never during a trace) and is
idempotent: an operator that already exists (sinpe.torch imported again in the same process)
is reused, its kernels finding the current functions through this module's tables at call
time.  A torch without ``torch.library.custom_op`` (before 2.4) gets the plain functions
(``OPERATORS`` is then False): eager results are the same, torch.compile breaks the graph
there.  See docs/torch_compile.md.
"""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch



#: whether this torch has ``torch.library.custom_op`` (else every entry point is a plain function)
OPERATORS = hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_autograd")


_NS = "sinpe"


_SCHEMAS = {
    "pair": "(Tensor q, Tensor k, Tensor cos, Tensor sin, int unsqueeze_dim) -> (Tensor, Tensor)",
    "single": "(Tensor x, Tensor cos, Tensor sin, int unsqueeze_dim) -> Tensor",
}


def _exists(name: str) -> bool:
    try:
        getattr(getattr(torch.ops, _NS), name)
    except (AttributeError, RuntimeError):
        return False
    return True


def tracing(ts: Sequence[Any]) -> bool:
    """Whether torch.compile or torch.export is tracing a call of these tensors: the public
    functions then call their operators (one node each in the graph)."""
    return torch.compiler.is_compiling() and all(isinstance(t, torch.Tensor) for t in ts)


#: the forms' kernels and graphs, by operator name (refreshed by register_form: an operator
#: registered by an earlier import of this module finds today's functions)
_FORMS: Dict[str, Tuple[Callable[..., Any], Callable[..., Any], str]] = {}


def _form(name: str) -> Tuple[Callable[..., Any], Callable[..., Any], str]:
    mod = sys.modules.get(__name__)
    table: Dict[str, Tuple[Callable[..., Any], Callable[..., Any], str]] = \
        getattr(mod, "_FORMS", _FORMS)
    return table[name]


def register_form(name: str, kind: str, kernel: Callable[..., Any],
                  graph: Callable[..., Any]) -> Any:
    """torch.ops.sinpe.<name> for a rotation form (kind 'pair': (q, k, cos, sin,
    unsqueeze_dim) -> (q_embed, k_embed); 'single': (x, cos, sin, unsqueeze_dim) -> x_embed):
    kernel(*tensors, unsqueeze_dim=) is the form's eager way with grad mode off; graph is
    transformers' graph, whose torch ops give the fake kernel's shapes and the backward
    (torch.ops.sinpe.rotation_vjp: autograd through the graph, so each gradient is the one
    transformers' own graph gives).  None where this torch has no custom operators."""
    _FORMS[name] = (kernel, graph, kind)
    if not OPERATORS:
        return None
    if _exists(name):
        return getattr(getattr(torch.ops, _NS), name).default
    _vjp_op()
    return _register(name, kind)


def _like(tmpl: torch.Tensor, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """An output's layout, the same in the real and the fake kernel: q's own (as empty_like
    keeps it) when the shape is q's, else contiguous."""
    if tuple(shape) == tuple(tmpl.shape):
        return torch.empty_like(tmpl, dtype=dtype)
    return tmpl.new_empty(shape, dtype=dtype)


def _fresh(out: torch.Tensor, tmpl: torch.Tensor, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """out in _like's layout, in memory of its own (an operator's output may not alias an
    input, and its strides must be the fake kernel's): copied only when it is not."""
    want = _like(tmpl, out.shape, out.dtype)
    if want.stride() == out.stride() and (not out.numel() or all(
            out.data_ptr() != t.data_ptr() for t in inputs)):  # not an input returned as is
        return out
    return want.copy_(out)


def _on_meta(ts: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    return [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta") for t in ts]


def _register(name: str, kind: str) -> Any:
    qual = f"{_NS}::{name}"
    n_in = 4 if kind == "pair" else 3

    def run(ts: Sequence[torch.Tensor], ud: int) -> Any:
        with torch.no_grad():
            out = _form(name)[0](*ts, unsqueeze_dim=ud)
        if kind == "pair":
            return _fresh(out[0], ts[0], ts), _fresh(out[1], ts[1], ts)
        return _fresh(out, ts[0], ts)

    def shapes(ts: Sequence[torch.Tensor], ud: int) -> Any:
        out = _form(name)[1](*_on_meta(ts), unsqueeze_dim=ud)
        if kind == "pair":
            return (_like(ts[0], out[0].shape, out[0].dtype),
                    _like(ts[1], out[1].shape, out[1].dtype))
        return _like(ts[0], out.shape, out.dtype)

    if kind == "pair":
        def kernel(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   unsqueeze_dim: int) -> Any:
            return run((q, k, cos, sin), unsqueeze_dim)

        def fake(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                 unsqueeze_dim: int) -> Any:
            return shapes((q, k, cos, sin), unsqueeze_dim)
    else:
        def kernel(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,  # type: ignore[misc]
                   unsqueeze_dim: int) -> Any:
            return run((x, cos, sin), unsqueeze_dim)

        def fake(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,  # type: ignore[misc]
                 unsqueeze_dim: int) -> Any:
            return shapes((x, cos, sin), unsqueeze_dim)

    op = torch.library.custom_op(qual, kernel, mutates_args=(), schema=_SCHEMAS[kind])
    op.register_fake(fake)

    def setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Any) -> None:
        ctx.save_for_backward(*inputs[:n_in])
        ctx.unsqueeze_dim = inputs[n_in]
        ctx.set_materialize_grads(False)  # an output no gradient reaches: None, as autograd

    def backward(ctx: Any, *grads: Optional[torch.Tensor]) -> Any:
        ts = ctx.saved_tensors
        # which inputs a gradient reaches: q through q_embed, k through k_embed, the tables
        # through either (x and the tables for the single form)
        reach = [grads[0] is not None, grads[1] is not None] if kind == "pair" else \
            [grads[0] is not None]
        reach += [any(reach)] * 2
        need = [bool(n) and r for n, r in zip(ctx.needs_input_grad[:n_in], reach)]
        got = iter(_vjp_op()(name, list(ts), list(grads), need, ctx.unsqueeze_dim)
                   if any(need) else ())
        return tuple(next(got) if n else None for n in need) + (None,)

    op.register_autograd(backward, setup_context=setup_context)
    return op


def _vjp_kernel(form: str, inputs: List[torch.Tensor], grads: List[Optional[torch.Tensor]],
                need: List[bool], unsqueeze_dim: int) -> List[torch.Tensor]:
    """The gradients of the inputs in need, by autograd through the form's graph (torch's
    own ops on the saved inputs: transformers' graph, its casts and the order of its sums)."""
    graph = _form(form)[1]
    with _autograd_on():
        xs = [t.detach().requires_grad_(n) for t, n in zip(inputs, need)]
        out = graph(*xs, unsqueeze_dim=unsqueeze_dim)
        outs = out if isinstance(out, tuple) else (out,)
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
        wrt = [x for x, n in zip(xs, need) if n]
        got = torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs],
                                  allow_unused=True) if pairs else [None] * len(wrt)
    return [_fresh(g, x, inputs) if g is not None else torch.zeros_like(x)
            for g, x in zip(got, wrt)]


def _autograd_on() -> Any:
    """Grad mode on, and autograd's dispatch keys no longer excluded: a custom operator's
    kernel runs below autograd (the dispatcher excludes its keys there), so the graph's ops
    would record nothing; the keys this kernel's caller had excluded are restored on exit."""
    stack = contextlib.ExitStack()
    force = getattr(torch._C, "_ForceDispatchKeyGuard", None)
    if force is not None:
        inc = torch._C._dispatch_tls_local_include_set()
        exc = torch._C._dispatch_tls_local_exclude_set()
        for key in _AUTOGRAD_KEYS:
            exc = exc.remove(key)
        stack.enter_context(force(inc, exc))
    stack.enter_context(torch.enable_grad())
    return stack


_AUTOGRAD_KEYS = [getattr(torch._C.DispatchKey, k) for k in (
    "AutogradFunctionality", "AutogradOther", "AutogradCPU", "AutogradCUDA", "AutogradMeta",
    "AutogradXPU", "AutogradMPS", "AutogradPrivateUse1", "ADInplaceOrView")
    if hasattr(torch._C.DispatchKey, k)]


def _vjp_fake(form: str, inputs: List[torch.Tensor], grads: List[Optional[torch.Tensor]],
              need: List[bool], unsqueeze_dim: int) -> List[torch.Tensor]:
    return [torch.empty_like(x) for x, n in zip(inputs, need) if n]


def _vjp_op() -> Any:
    """torch.ops.sinpe.rotation_vjp: the forms' backward, one opaque node (so that a compiled
    backward runs autograd's own ops, not a fused restatement of them)."""
    return lazy_op("rotation_vjp", _vjp_kernel, _vjp_fake,
                    "(str form, Tensor[] inputs, Tensor?[] grads, bool[] need, "
                    "int unsqueeze_dim) -> Tensor[]")


#: the operators registered (or found registered) by lazy_op, by name
_LAZY: Dict[str, Any] = {}


def lazy_op(name: str, kernel: Callable[..., Any], fake: Callable[..., Any],
             schema: str) -> Any:
    """torch.ops.sinpe.<name>, registered once per process with its kernel and fake kernel (an
    operator of that name that already exists is reused: sinpe imported again)."""
    op = _LAZY.get(name)
    if op is None:
        if _exists(name):
            op = getattr(getattr(torch.ops, _NS), name).default
        else:
            op = torch.library.custom_op(f"{_NS}::{name}", kernel, mutates_args=(),
                                         schema=schema)
            op.register_fake(fake)
        _LAZY[name] = op
    return op


def use_operator(*ts: Any) -> bool:
    """Whether add_pe and hf_rope call their operator: while torch.compile or torch.export
    traces them (also torch.export's non-strict tracing, where torch.compiler.is_compiling()
    is True and the tensors are fake), and for meta and fake tensors (no data: the fake
    kernel's shapes, nothing reaches the core).  A call on tensors with data runs the eager
    function directly (no dispatcher cost).  ts: tensors, or None for an absent one."""
    plain = True
    for t in ts:
        if t is None:
            continue
        if type(t) is not torch.Tensor:
            if not isinstance(t, torch.Tensor):
                return False
            plain = False
        elif t.is_meta:
            plain = False
    if plain:
        return torch.compiler.is_compiling()
    return torch.compiler.is_compiling() or any(
        t is not None and (t.is_meta or isinstance(t, _FakeTensor)) for t in ts)


_FakeTensor = torch._subclasses.fake_tensor.FakeTensor


