"""sinpe's torch entry points as torch custom operators, and tensors out.

- :func:`register_form` (called by :mod:`sinpe._torch_forms` at import) registers each
  rotation form as an operator ``torch.ops.sinpe.<form>`` with a fake (meta) kernel and an
  autograd formula (``torch.ops.sinpe.rotation_vjp``: autograd through transformers' graph),
  so that ``torch.compile(..., fullgraph=True)`` traces each call as one node, with no
  graph break, and the compiled call gives the eager call's bits, gradients included.  The
  operator is called while torch.compile or torch.export traces (:func:`tracing`); an eager
  call runs the form directly (same bits, no dispatcher cost).
- :func:`add_pe` (``torch.ops.sinpe.add_pe``, mutating x) and :func:`hf_rope`
  (``torch.ops.sinpe.hf_rope``) likewise.
- :func:`to_torch` and :func:`preset`: NumPy results (ml_dtypes bfloat16 included) as torch
  tensors without a copy, and every preset with torch tensors out.

Registration happens when sinpe.torch is imported (never during a trace) and is idempotent:
an operator that already exists (sinpe.torch imported again in the same process) is reused,
its kernels finding the current functions through this module's tables at call time.
A torch without ``torch.library.custom_op`` (before 2.4) gets the plain functions
(``OPERATORS`` is then False): eager results are the same, torch.compile breaks the graph
there.  See docs/torch_compile.md.
"""
import contextlib
import sys
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ._api import _add_pe_kernel, add_pe_operator
from ._backends.policy import torch_kernels
from ._hf.config import MAPPING_KEYS, VIEW_KEYS, config_from_text, config_text

__all__ = ["OPERATORS", "register_form", "tracing", "add_pe", "hf_rope", "to_torch", "preset"]

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


# ---- the rotation forms --------------------------------------------------------------------------

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
    return _lazy_op("rotation_vjp", _vjp_kernel, _vjp_fake,
                    "(str form, Tensor[] inputs, Tensor?[] grads, bool[] need, "
                    "int unsqueeze_dim) -> Tensor[]")


#: the operators registered (or found registered) by _lazy_op, by name
_LAZY: Dict[str, Any] = {}


def _lazy_op(name: str, kernel: Callable[..., Any], fake: Callable[..., Any],
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


# ---- add_pe on tensors ---------------------------------------------------------------------------

def _route(*ts: Any) -> bool:
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


def _add_pe_op() -> Any:
    """torch.ops.sinpe.add_pe (registered by sinpe._api, whose add_pe routes to it while
    torch traces a tensor: its kernel is sinpe.add_pe)."""
    return add_pe_operator()


def add_pe(x: Any, base: float = 10000.0, *, offset: int = 0, positions: Any = None,
           max_len: Optional[int] = None, backend: Optional[str] = None) -> Any:
    """:func:`sinpe.add_pe` for torch tensors as the operator ``torch.ops.sinpe.add_pe``
    (it mutates x): adds the sinusoidal table's rows to x in place and returns x, bit for bit
    as ``sinpe.add_pe``, inside ``torch.compile(fullgraph=True)`` too.  backend None: the
    kernels of the torch in this process (as the module).  positions: a tensor or None.
    No autograd (x is written in place, as sinpe.add_pe writes it).  A meta x is returned as
    it is (nothing to write)."""
    if OPERATORS and _route(x, positions) \
            and not isinstance(base, bool) and isinstance(base, (int, float)) \
            and type(offset) is int and (max_len is None or type(max_len) is int) \
            and (backend is None or isinstance(backend, str)):
        _add_pe_op()(x, float(base), offset, positions, max_len, backend)
        return x
    _add_pe_kernel(x, base, offset, positions, max_len, backend)
    return x


# ---- tensors out ---------------------------------------------------------------------------------

def to_torch(a: Any, device: Any = None) -> Any:
    """A NumPy array (float32, float16, float64, integers, or ml_dtypes bfloat16, which
    ``torch.from_numpy`` refuses) as a torch tensor of the same dtype sharing its memory (no
    copy; a read-only or non-contiguous array is copied once), moved to device if given.  A
    tuple or list of arrays gives a tuple of tensors; a torch tensor is returned as it is
    (moved to device if given)."""
    if isinstance(a, (tuple, list)):
        return tuple(to_torch(x, device) for x in a)
    if isinstance(a, torch.Tensor):
        return a if device is None else a.to(device)
    if not isinstance(a, np.ndarray):
        raise TypeError(f"a must be a NumPy array or a tuple of them, got {type(a).__name__}")
    if not (a.flags.c_contiguous and a.flags.writeable):
        a = np.array(a, order="C")
    if a.dtype.name == "bfloat16":
        t = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(a)
    return t if device is None or torch.device(device).type == "cpu" else t.to(device)


def _dtype_name(dtype: Any) -> Any:
    return str(dtype).replace("torch.", "") if isinstance(dtype, torch.dtype) else dtype


def preset(name: str, *args: Any, dtype: Any = None, device: Any = None, **kw: Any) -> Any:
    """``sinpe.presets.<name>(*args, **kw)`` with torch tensors out: dtype a torch dtype
    (torch.bfloat16 included) or any spelling the preset takes, device where the result goes
    (computed on the CPU, copied if the device is another).  The preset writes into a NumPy
    array that the tensor then shares (no copy), or, with ``out=`` a CPU torch tensor, into
    that tensor (returned).  Presets without dtype= (positions, slopes) are converted as they
    come; tuples come back as tuples of tensors."""
    from . import presets
    if not isinstance(name, str) or name not in presets.__all__:
        raise ValueError(f"name must be one of sinpe.presets' functions "
                         f"({', '.join(presets.__all__)}), got {name!r}")
    fn = getattr(presets, name)
    if dtype is not None:
        kw["dtype"] = _dtype_name(dtype)
    out = kw.get("out")
    res = fn(*args, **kw)
    if isinstance(out, torch.Tensor):
        return out if device is None else out.to(device)
    return to_torch(res, device)


# ---- hf_rope, tensors out, as an operator --------------------------------------------------------
#
# The operator takes the config as its text (sinpe._hf.config.config_text: a canonical JSON of
# what hf_rope reads of it), so that a compiled graph or an exported program holds a string,
# never an object or its id: an exported program loads and runs in another process, and a
# config built per call inside a compiled function is read as it is.

def hf_rope_eager(config: Any, position_ids: Any, *, inv_freq: Any = None, dtype: Any = None,
                  layer_type: Optional[str] = None, backend: Optional[str] = None,
                  attention_scaling: Any = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """:func:`sinpe.presets.hf_rope` with torch tensors out, on position_ids' device."""
    device = position_ids.device if isinstance(position_ids, torch.Tensor) else \
        torch.device("cpu")
    from .presets import hf_rope as np_hf_rope
    cos, sin = np_hf_rope(config, position_ids, inv_freq=inv_freq, dtype=_dtype_name(dtype),
                          layer_type=layer_type,
                          backend=torch_kernels() if backend is None else backend,
                          attention_scaling=attention_scaling)
    return to_torch(cos, device), to_torch(sin, device)


def _hf_kernel(position_ids: torch.Tensor, inv_freq: Optional[torch.Tensor], config: str,
               dtype: Optional[torch.dtype], layer_type: Optional[str], backend: Optional[str],
               attention_scaling: Optional[float]) -> Tuple[torch.Tensor, torch.Tensor]:
    cos, sin = hf_rope_eager(config_from_text(config), position_ids, inv_freq=inv_freq,
                             dtype=dtype, layer_type=layer_type, backend=backend,
                             attention_scaling=attention_scaling)
    return cos, sin  # fresh arrays' memory (to_torch copies a read-only, kept one)


#: sizes an unbacked symbolic size (no hint) is probed with, and recognised by in the result
_PRIMES = (13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73)
#: the fake kernel's findings: (text, sizes, ...) -> (result's sizes, dtype, fixed sizes)
_FAKE_SHAPES: Dict[Any, Any] = {}


def _np_dtype(dtype: torch.dtype) -> Any:
    name = str(dtype).replace("torch.", "")
    if name == "bfloat16":
        from ._dtypes import bfloat16
        return bfloat16()
    try:
        return np.dtype(name)
    except TypeError:
        return np.dtype(np.float32)  # (the real kernel names what it cannot read)


def _hf_shapes(config: str, position_ids: torch.Tensor, inv_freq: Optional[torch.Tensor],
               dtype: Optional[torch.dtype], layer_type: Optional[str],
               attention_scaling: Optional[float]) -> Tuple[List[Any], Any, List[int]]:
    """The tables' sizes, dtype, and the input sizes that must keep their value, from probes:
    hf_rope on zeros of the inputs' sizes (a symbolic size at its hint, read without a
    guard; an unbacked one at a distinct prime), then once more per symbolic size with that
    size one larger.  A result's size that followed it (the hint, then the hint + 1) is that
    symbol; a size whose change the probe refuses (the 3 of mrope's rows, the 2 of axial
    (h, w) pairs) or that changes the result otherwise (inv_freq's length makes the width)
    is fixed at its hint.  Each size in the result is a symbol of the inputs or a number."""
    from .presets import hf_rope as np_hf_rope
    cfg = config_from_text(config)
    n_pos = position_ids.dim()
    dims = list(position_ids.shape) + ([] if inv_freq is None else list(inv_freq.shape))
    used = {d for d in dims if isinstance(d, int)}
    primes = iter(p for p in _PRIMES if p not in used)
    base: List[int] = []
    hints: Dict[int, int] = {}
    unbacked: Dict[int, int] = {}
    for i, d in enumerate(dims):
        if isinstance(d, int):
            base.append(d)
            continue
        node = d.node
        hint = node.hint if node.has_hint() else None
        if isinstance(hint, int):
            base.append(hint)
            hints[i] = hint
        else:
            base.append(next(primes))
            unbacked[i] = base[-1]
    inv_dt = None if inv_freq is None else _np_dtype(inv_freq.dtype)
    key = (config, tuple(base), tuple(sorted(hints)), n_pos, str(inv_dt), str(dtype),
           layer_type, attention_scaling)
    kept = _FAKE_SHAPES.get(key)
    if kept is None:
        def probe(sizes: List[int]) -> Tuple[Tuple[int, ...], Any]:
            inv = None if inv_dt is None else np.zeros(sizes[n_pos:], inv_dt)
            cos, _ = np_hf_rope(cfg, np.zeros(sizes[:n_pos], np.int64), inv_freq=inv,
                                dtype=_dtype_name(dtype), layer_type=layer_type,
                                backend="builtin", attention_scaling=attention_scaling)
            return tuple(cos.shape), cos.dtype

        out, out_dt = probe(base)
        pattern: List[Any] = [("n", v) for v in out]
        fixed = []
        for i, hint in hints.items():
            bumped = list(base)
            bumped[i] = hint + 1
            try:
                out_i = probe(bumped)[0]
            except (ValueError, TypeError, NotImplementedError, OverflowError):
                fixed.append(i)
                continue
            changed = [j for j in range(len(out)) if j >= len(out_i) or out_i[j] != out[j]]
            if len(out_i) == len(out) and all(pattern[j][0] == "n" and out[j] == hint
                                              and out_i[j] == hint + 1 for j in changed):
                for j in changed:
                    pattern[j] = ("d", i)
            else:
                fixed.append(i)
        for i, p in unbacked.items():  # (the old rule: a result's size equal to the prime)
            pattern = [("d", i) if q == ("n", p) else q for q in pattern]
        tdt = torch.bfloat16 if out_dt.name == "bfloat16" else getattr(torch, np.dtype(out_dt).name)
        kept = (pattern, tdt, fixed)
        if len(_FAKE_SHAPES) >= 256:
            _FAKE_SHAPES.clear()
        _FAKE_SHAPES[key] = kept
    pattern, tdt, fixed = kept
    return [dims[v] if kind == "d" else v for kind, v in pattern], tdt, fixed


def _hf_fake(position_ids: torch.Tensor, inv_freq: Optional[torch.Tensor], config: str,
             dtype: Optional[torch.dtype], layer_type: Optional[str], backend: Optional[str],
             attention_scaling: Optional[float]) -> Tuple[torch.Tensor, torch.Tensor]:
    """The tables' shape and dtype (_hf_shapes), on position_ids' device (meta when
    inv_freq is a meta tensor)."""
    shape, tdt, fixed = _hf_shapes(config, position_ids, inv_freq, dtype, layer_type,
                                   attention_scaling)
    dims = list(position_ids.shape) + ([] if inv_freq is None else list(inv_freq.shape))
    for i in fixed:  # sizes the tables' shape has no rule for: their value (a guard)
        d: Any = dims[i]
        if not isinstance(d, int):
            torch._check(d == d.node.hint)  # type: ignore[no-untyped-call]
    if inv_freq is not None and inv_freq.is_meta and not position_ids.is_meta:
        return (torch.empty(shape, dtype=tdt, device="meta"),
                torch.empty(shape, dtype=tdt, device="meta"))
    return (position_ids.new_empty(shape, dtype=tdt),
            position_ids.new_empty(shape, dtype=tdt))


def _hf_op() -> Any:
    return _lazy_op("hf_rope", _hf_kernel, _hf_fake,
                    "(Tensor position_ids, Tensor? inv_freq, str config, ScalarType? dtype, "
                    "str? layer_type, str? backend, float? attention_scaling) "
                    "-> (Tensor, Tensor)")


# ---- the config's text while torch traces ------------------------------------------------------
#
# Dynamo cannot trace json.dumps; a function it is told to keep as a constant runs for real when
# Dynamo meets it (torch._dynamo.assume_constant_result).  Given the config object itself, it
# would be guarded by identity only (an edit in place between compiled calls would go unseen,
# and an object built inside the compiled function is not the real object it is handed).  So the
# attributes hf_rope reads are read here, in code Dynamo traces (which guards each value read),
# into a plain dict, and that dict is what the constant function writes as text.

_MISSING = object()
#: what a dict config's reading keeps (an object's: VIEW_KEYS; a heterogeneous one is
#: handed over whole)
_DICT_KEYS = VIEW_KEYS + MAPPING_KEYS + ("per_layer_config",)


def _pin(v: Any) -> Any:
    """v, whose numbers Dynamo keeps as constants: an int or float read from an object
    becomes a symbolic input of the graph once it has changed between calls (torch's
    automatic dynamic scalars), which no constant function takes; as a dict's key it is
    specialised (its value guarded).  Containers are rebuilt, other values kept as they are."""
    t = type(v)
    if t is int or t is float:
        for k in {v: None}:
            return k
    if t is dict:
        return {k: _pin(x) for k, x in v.items()}
    if t is list:
        return [_pin(x) for x in v]
    if t is tuple:
        return tuple(_pin(x) for x in v)
    return v


def _reading(config: Any, top: bool = True) -> Any:
    """What hf_rope reads of config, as a plain dict, in code that Dynamo traces; None for a
    config read only as a whole (a Mapping other than dict, a heterogeneous config object
    whose per-layer view transformers builds by copying it)."""
    if type(config) is dict:
        out = {k: _pin(config[k]) for k in _DICT_KEYS if k in config}
        sub = config.get("text_config") if top and out.get("hidden_size") is None else None
    elif isinstance(config, (Mapping, str, bytes)) or not hasattr(config, "__dict__") \
            or getattr(config, "is_heterogeneous", False):
        return None
    else:
        out = {}
        for k in VIEW_KEYS:
            v = getattr(config, k, _MISSING)
            if v is not _MISSING:
                out[k] = _pin(v)
        sub = getattr(config, "text_config", None) if top and out.get("hidden_size") is None \
            else None
    if sub is not None and not isinstance(sub, (str, bytes)):
        r = _reading(sub, False)
        if r is None:
            return None
        out["text_config"] = r
    return out


def _text_of(config: Any, layer_type: Optional[str]) -> str:
    return config_text(config, layer_type)


# what torch._dynamo.assume_constant_result sets (without importing torch._dynamo for it)
_text_of._dynamo_marked_constant = True  # type: ignore[attr-defined]


def hf_rope(config: Any, position_ids: Any, *, inv_freq: Any = None, dtype: Any = None,
            layer_type: Optional[str] = None, backend: Optional[str] = None,
            attention_scaling: Any = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """:func:`sinpe.presets.hf_rope` with torch tensors out: ``(cos, sin)`` in ``dtype`` (a
    torch dtype or any spelling sinpe takes; torch.bfloat16 included) on position_ids' device
    (the tables are computed on the CPU and copied when the device differs).  backend None:
    the kernels of the torch in this process (what the model computes); ``'builtin'``:
    correctly rounded tables.  inv_freq with attention_scaling: the tables of a module's
    state (its buffer and its attention_scaling; see sinpe.presets.hf_rope).

    While torch.compile or torch.export traces it (position_ids a tensor, inv_freq a tensor
    or None, dtype a torch dtype or None, attention_scaling a Python number or None) it is
    the operator ``torch.ops.sinpe.hf_rope``, one node of the graph, which holds the
    config's text (``sinpe._hf.config.config_text``): the values hf_rope reads of it, each
    guarded by torch.compile (an edit in place compiles again), except for a Mapping that
    is not a dict and a heterogeneous config (guarded by identity).  On meta or fake tensors
    it gives tables of the right shape and dtype, computing nothing.  An eager call on
    tensors with data runs the eager function directly."""
    if OPERATORS and _route(position_ids, inv_freq) \
            and (dtype is None or isinstance(dtype, torch.dtype)) \
            and (layer_type is None or isinstance(layer_type, str)) \
            and (backend is None or isinstance(backend, str)) \
            and (attention_scaling is None or type(attention_scaling) in (int, float)):
        r = _reading(config)
        text = _text_of(config if r is None else r, layer_type)
        scaling = None if attention_scaling is None else float(_pin(attention_scaling))
        cos, sin = _hf_op()(position_ids, inv_freq, text, dtype, layer_type, backend, scaling)
        return cos, sin
    return hf_rope_eager(config, position_ids, inv_freq=inv_freq, dtype=dtype,
                         layer_type=layer_type, backend=backend,
                         attention_scaling=attention_scaling)
