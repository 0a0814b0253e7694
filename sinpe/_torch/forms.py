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
``torch.ops.sinpe.<form>`` (sinpe/_torch/operators.py): its kernel is the core way (the graph
for what the core declines), its backward the vector-Jacobian product of the graph.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

import torch
import torch.autograd.forward_ad as _FORWARD_AD  # (its dual level, read per call)

from .. import _tensors
from .graphs import GRAPHS
from .operators import register_form, tracing
from .rotate import CORES
from .training import train



def _autocast_on() -> bool:
    return bool(torch.is_autocast_enabled("cpu"))


_AUTOCAST: Callable[[], bool] = _autocast_on


try:
    torch.is_autocast_enabled("cpu")
except TypeError:  # a torch whose is_autocast_enabled takes no device (before 2.4)
    _AUTOCAST = torch.is_autocast_cpu_enabled


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
        if not _tensors.plain(torch, t):  # (the core's rule: sinpe._tensors)
            return _GRAPH
        if grad and t.requires_grad:
            records = True
    if not records:
        return _CORE
    return _GRAPH if ts[-1].requires_grad or ts[-2].requires_grad else _TRAIN


#: the fewest values of q and k a training call takes the core's forward and the captured
#: backward for: below, Python's fixed costs (the autograd Function, the replayed ops' calls)
#: outweigh the forward's savings, and transformers' graph runs as it is (measured on the
#: 2-core AMD EPYC Zen 4, 2 threads, the standard form against transformers' own: about 0.9
#: of its speed at 40,960 to 655,360 values, 1.15-1.22 at 2.6 M, 1.09-1.30 at 10.5 M)
_TRAIN_MIN = 1 << 20


class Form:
    """One rotation form: its name, parameters (transformers' own), graph, core way, and
    operator (None without custom operators)."""
    __slots__ = ("name", "params", "graph", "core", "op", "tensors", "ud", "exact", "train")

    def __init__(self, name: str, params: Tuple[str, ...], exact: bool = True,
                 train: bool = True) -> None:
        self.name, self.params, self.graph, self.core = name, params, GRAPHS[name], CORES[name]
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
    if form.op is not None and type(ud) is int and tracing(ts):
        return form.op(*ts, ud)
    way = _way(ts)
    if way == _TRAIN and form.train and type(ud) is int \
            and sum(t.numel() for t in ts[:-2]) >= _TRAIN_MIN:
        out = train(form, g, ts, ud)
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
    Form("apply_rotary_pos_emb", _PAIR),
    Form("apply_rotary_pos_emb_interleave", _PAIR_POS, exact=False),
    Form("apply_rotary_pos_emb_glm", _PAIR),
    Form("apply_rotary_pos_emb_cohere", _PAIR, train=False),
    Form("apply_rotary_pos_emb_olmo", _PAIR),
    Form("apply_rotary_pos_emb_half", _PAIR, exact=False),
    Form("apply_rotary_pos_emb_float32", _PAIR),
    Form("apply_rotary_pos_emb_glm_float32", _PAIR),
    Form("apply_rotary_pos_emb_single", _SINGLE),
)}


for _f in FORMS.values():
    _f.op = register_form(_f.name, "single" if _f.params[0] == "x" else "pair",
                                     _f.kernel, _f.graph)


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
