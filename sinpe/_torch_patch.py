"""One line swaps a transformers model's rotary position embedding to sinpe: :func:`patch`,
:func:`unpatch`, :func:`patched` (re-exported by :mod:`sinpe.torch`).

How a model is patched (docs/hf_patch.md):

- **Rotary modules.** Every submodule whose class is named ``*RotaryEmbedding`` and whose
  forward is ``(x, position_ids[, layer_type])`` gets, on the instance, a forward that returns
  :func:`sinpe.presets.hf_rope`'s tables of the module's own state: its ``inv_freq`` buffer
  (``f"{layer_type}_inv_freq"`` per layer type) and its ``attention_scaling``, as they are at
  call time (after ``model.to(dtype)``, after a dynamic rope regrew them), in the layout of
  the config the module was built with.  A forward that transformers wraps in
  ``dynamic_rope_update`` stays wrapped by the same function, so the dynamic and longrope
  state evolves exactly as transformers keeps it.  GPT-J/CodeGen's sincos buffer, PhiMoE's
  per-call mscale, complex ``torch.polar`` tables (DeepSeek-V2, Llama 4), DINOv3's patch
  centres and EfficientLoFTR's grid get forwards of their own.
- **Rotations.** The modeling module's rotation functions (``apply_rotary_pos_emb`` and kin)
  are recognised by their code (the syntax tree of the function and of the helpers it calls,
  compared with transformers' own reference functions).  The methods of the model's modules
  that call one get, on the instance, a copy whose code names a private alias instead
  (``_sinpe_route__apply_rotary_pos_emb`` in the modeling module, a :class:`route` to the
  sinpe form); every other name the method reads resolves through the live module, as the
  class's own method resolves it.  Unrecognised rotations are left as the model computes
  them (listed by :func:`patched` as ``kept``).

**Proof on the instance.** Before anything changes, each rotary module's own forward and
sinpe's are called on the module (its state saved and restored, torch's random state
untouched) at a few positions in float32 and bfloat16, and each routed rotation and its form
on a few random vectors: a module whose outputs differ in any bit keeps its own forward
(:func:`patched` says why), a rotation that differs is not routed.  A module on the meta
device is proven on a CPU twin built from its config.  A family whose rotary
:func:`sinpe.presets.hf_rope` does not reproduce raises NotImplementedError naming the family
and why, and the model is left as it was.

**State is plain data.** What patch sets on an instance is a :class:`Patched` attribute (what
it replaces and how, as names and numbers) that builds its function again when copied,
pickled or loaded (``copy.deepcopy``, ``pickle``, ``torch.save``/``torch.load``), so a copy is
patched as its original was and :func:`unpatch` restores every module of a model, in any
order, whoever patched it.  ``save_pretrained`` saves weights and config only: a model loaded
with ``from_pretrained`` is unpatched (``patched()`` empty).
"""
from __future__ import annotations

import ast
import contextlib
import copy
import dis
import inspect
import math
import os
import sys
import textwrap
import types
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

import numpy as np
import torch

from . import _torch_forms
from ._torch_ops import hf_rope
from ._torch_forms import route

__all__ = ["patch", "unpatch", "patched", "Patched"]

_Pair = Tuple[torch.Tensor, torch.Tensor]
#: a model's record of its patch call (plain data): the backend and the rotations kept
_ROOT = "_sinpe_patch"
#: a rotary module whose own forward was kept (plain data: its record)
_KEPT = "_sinpe_kept"
#: the modeling module's alias of a routed name (a route to a sinpe form, or a helper's copy)
_ALIAS = "_sinpe_route__"


def _model_arg(model: Any) -> None:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")


# ---- recognising the modeling module's rotation functions --------------------------------------

#: reference rotation functions: (module, function name) -> the sinpe.torch form.
_REFERENCES: List[Tuple[str, str, str]] = [
    ("llama", "apply_rotary_pos_emb", "apply_rotary_pos_emb"),
    ("gpt_neox", "apply_rotary_pos_emb", "apply_rotary_pos_emb"),
    ("phi3", "apply_rotary_pos_emb", "apply_rotary_pos_emb"),
    ("nemotron", "apply_rotary_pos_emb", "apply_rotary_pos_emb"),
    ("deepseek_v3", "apply_rotary_pos_emb_interleave", "apply_rotary_pos_emb_interleave"),
    ("glm", "apply_rotary_pos_emb", "apply_rotary_pos_emb_glm"),
    ("helium", "apply_rotary_pos_emb", "apply_rotary_pos_emb_glm"),
    ("cohere", "apply_rotary_pos_emb", "apply_rotary_pos_emb_cohere"),
    ("olmo", "apply_rotary_pos_emb", "apply_rotary_pos_emb_olmo"),
    ("gpt_oss", "apply_rotary_pos_emb", "apply_rotary_pos_emb_half"),
    ("modernbert", "apply_rotary_pos_emb", "apply_rotary_pos_emb_float32"),
    ("ernie4_5", "apply_rotary_pos_emb", "apply_rotary_pos_emb_glm_float32"),
    ("gemma3n", "apply_rotary_pos_emb", "apply_rotary_pos_emb_single"),
]


def _definition(fn: Any) -> Optional[Tuple[ast.FunctionDef, List[ast.stmt]]]:
    """A function's definition as written (its source parsed) and its body without the
    docstring; None when its source cannot be read."""
    try:
        node = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return None
    if not isinstance(node, ast.FunctionDef):
        return None
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return node, body


def _body_dump(fn: Callable[..., Any]) -> Optional[str]:
    """The syntax tree of a function's arguments and body (its decorators left out)."""
    d = _definition(fn)
    if d is None:
        return None
    node, body = d
    args = ast.dump(node.args, annotate_fields=False)
    return args + ast.dump(ast.Module(body=body, type_ignores=[]), annotate_fields=False)


def _fingerprint(fn: Any, seen: Optional[Set[int]] = None) -> Optional[str]:
    """The code of fn and of the module-level Python functions it calls, as syntax trees
    (names of the helpers included: ``rotate_half`` differs between families)."""
    fn = inspect.unwrap(fn) if callable(fn) else fn
    if not isinstance(fn, types.FunctionType):
        return None
    seen = set() if seen is None else seen
    if id(fn) in seen:
        return "<recursive>"
    seen.add(id(fn))
    body = _body_dump(fn)
    if body is None:
        return None
    parts = [body]
    for name in sorted(set(_names(fn.__code__))):
        g = fn.__globals__.get(name)
        if isinstance(inspect.unwrap(g) if callable(g) else g, types.FunctionType):
            parts.append(f"{name}={_fingerprint(g, seen)}")
    return "|".join(parts)


def _names(code: types.CodeType) -> List[str]:
    out = list(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out.extend(_names(c))
    return out


_KNOWN: Optional[Dict[str, Tuple[str, str]]] = None


def _known() -> Dict[str, Tuple[str, str]]:
    """fingerprint -> (form name, reference module), from transformers' installed reference
    modules."""
    global _KNOWN
    if _KNOWN is None:
        import importlib
        known: Dict[str, Tuple[str, str]] = {}
        for mod, fn, form in _REFERENCES:
            try:
                m = importlib.import_module(f"transformers.models.{mod}.modeling_{mod}")
            except Exception:  # a transformers without that family
                continue
            fp = _fingerprint(getattr(m, fn, None))
            if fp is not None:
                known.setdefault(fp, (form, mod))
        _KNOWN = known
    return _KNOWN


def _classify(fn: Any) -> Optional[Tuple[str, str]]:
    """(form, reference module) of a rotation function recognised by its code, or None; kept
    per function object (a copy's rebuild classifies the module's functions again)."""
    kept = _CLASSIFIED.get(id(fn))
    if kept is not None and kept[0] is fn:
        return kept[1]  # type: ignore[no-any-return]
    fp = _fingerprint(fn)
    got = None if fp is None else _known().get(fp)
    if len(_CLASSIFIED) >= 1024:
        _CLASSIFIED.clear()
    _CLASSIFIED[id(fn)] = (fn, got)
    return got


_CLASSIFIED: Dict[int, Tuple[Any, Any]] = {}


def _is_rotation_name(name: str) -> bool:
    n = name.lower()
    return "rot" in n and ("apply" in n or "emb" in n) or n.startswith("apply_rope")


# ---- the rotations a modeling module routes ------------------------------------------------------

def _calls_routed(fn: Any, routed: Set[str]) -> bool:
    """Whether fn (through its decorators' chain) names a routed global."""
    while fn is not None:
        if isinstance(fn, types.FunctionType) and routed.intersection(_names(fn.__code__)):
            return True
        fn = getattr(fn, "__wrapped__", None)
    return False


def _global_only(code: types.CodeType, names: Set[str]) -> bool:
    """Whether every instruction of code (and of the code nested in it) that refers to one of
    names by its co_names entry is a LOAD_GLOBAL (so the entry can be renamed)."""
    for ins in dis.get_instructions(code):
        if ins.argval in names and ins.opname != "LOAD_GLOBAL" and isinstance(ins.argval, str) \
                and ins.opcode in dis.hasname:
            return False
    return all(_global_only(c, names) for c in code.co_consts if isinstance(c, types.CodeType))


def _renamed(code: types.CodeType, names: Set[str]) -> types.CodeType:
    consts = tuple(_renamed(c, names) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)
    return code.replace(co_names=tuple(_ALIAS + n if n in names else n for n in code.co_names),
                        co_consts=consts)


def _recode(fn: types.FunctionType, names: Set[str]) -> types.FunctionType:
    """A copy of fn (and of the functions its decorators wrap, their closures rebuilt around
    the copy) whose code loads the alias of each of names: every other global resolves
    through fn's own (live) module globals."""
    inner = getattr(fn, "__wrapped__", None)
    closure = fn.__closure__
    new_inner = None
    if isinstance(inner, types.FunctionType) and closure:
        new_inner = _recode(inner, names)
        cells = []
        for c in closure:
            try:
                val = c.cell_contents
            except ValueError:
                cells.append(c)
                continue
            cells.append(types.CellType(new_inner) if val is inner else c)
        closure = tuple(cells)
    code = _renamed(fn.__code__, names) if names.intersection(_names(fn.__code__)) \
        else fn.__code__
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__dict__.update(fn.__dict__)
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__
    if new_inner is not None:
        setattr(new, "__wrapped__", new_inner)
    return new


def _recodable(fn: Any, names: Set[str]) -> bool:
    while fn is not None:
        if isinstance(fn, types.FunctionType) and not _global_only(fn.__code__, names):
            return False
        fn = getattr(fn, "__wrapped__", None)
    return True


class _Router:
    """Per modeling module (its globals dict): the rotation functions it names with their
    sinpe forms, the module-level helpers that call them, and what is kept."""

    def __init__(self, g: Dict[str, Any]):
        self.g = g
        self.routes: Dict[str, str] = {}
        self.refs: Dict[str, str] = {}
        self.kept: Dict[str, str] = {}
        for name, obj in list(g.items()):
            if name.startswith(_ALIAS) or not _is_rotation_name(name) or not callable(obj):
                continue
            f = inspect.unwrap(obj)
            if not isinstance(f, types.FunctionType) or not f.__module__.startswith(
                    "transformers."):
                continue
            found = _classify(obj)
            if found is None:
                self.kept[name] = "unrecognised"
            elif not _same_rotation(obj, found[0]):
                self.kept[name] = "its results differ from the sinpe form's"
            else:
                self.routes[name] = found[0]
                self.refs[name] = found[1]
        # module-level helpers that call a routed function (transitively) get aliases too
        self.helpers: List[str] = []
        routed = set(self.routes)
        changed = True
        while changed:
            changed = False
            for name, obj in list(g.items()):
                if name in routed or name.startswith(_ALIAS) \
                        or not isinstance(obj, types.FunctionType) or obj.__globals__ is not g:
                    continue
                if _calls_routed(obj, routed) and _recodable(obj, routed):
                    routed.add(name)
                    self.helpers.append(name)
                    changed = True
        self.names = routed
        self.seen = self._reads()

    def _reads(self) -> Dict[str, int]:
        """What the routing was decided from: the module's rotation-named callables and the
        module-level functions, by identity."""
        return {n: id(o) for n, o in self.g.items() if not n.startswith(_ALIAS)
                and (isinstance(o, types.FunctionType) or (callable(o) and _is_rotation_name(n)))}

    def fresh(self) -> bool:
        return self._reads() == self.seen

    def table(self) -> Dict[str, Any]:
        """The routing as plain data: each routed name -> [its form, the reference module its
        function matched], each helper -> 'helper'."""
        out: Dict[str, Any] = {n: [f, self.refs[n]] for n, f in self.routes.items()}
        out.update({n: "helper" for n in self.helpers})
        return out

    def install(self) -> None:
        _install(self.g, self.table())


def _install(g: Dict[str, Any], table: Dict[str, Any]) -> None:
    """The aliases of a routing table in a modeling module's globals: each routed name's
    route (to the function the module holds now: its graph's way), each helper's copy (its
    code naming the aliases); a function the module holds now that is not the one routed
    (the user replaced it: not the form's code) or a helper it no longer holds as its own
    function is aliased as it is now (called as the unpatched model calls it)."""
    names = set(table)
    for name, what in table.items():
        obj = g.get(name)
        if what != "helper":
            form, ref = what
            cur = g.get(_ALIAS + name)
            if isinstance(cur, route) and cur.form == form and cur.g is g:
                continue  # (it calls whatever the module holds under the name, if replaced)
            if obj is not None and _classify(obj) == (form, ref):
                g[_ALIAS + name] = route(form, obj, ref, g, name)
            elif obj is not None:
                g[_ALIAS + name] = obj
            continue
        if isinstance(obj, types.FunctionType) and obj.__globals__ is g:
            g[_ALIAS + name] = _recode(obj, names)
        elif obj is not None:
            g[_ALIAS + name] = obj


def _same_rotation(fn: Callable[..., Any], form: str) -> bool:
    """The model's function and the form on a few random vectors (float32, bfloat16; halves
    and GPT-NeoX's partial widths), bit for bit: a function whose code matched a reference
    but computes otherwise (its helpers replaced at run time) is not routed."""
    f = _torch_forms.FORMS[form]
    gen = torch.Generator().manual_seed(7)
    single = f.params[0] == "x"
    compared = 0
    for dtype in (torch.float32, torch.bfloat16):
        for d, r in ((8, 8), (8, 4)):
            if form == "apply_rotary_pos_emb_half":
                r //= 2
            q = torch.randn(1, 2, 3, d, generator=gen).to(dtype)
            k = torch.randn(1, 1, 3, d, generator=gen).to(dtype)
            ang = torch.randn(1, 3, r, generator=gen)
            cdt = torch.float32 if form == "apply_rotary_pos_emb_olmo" else dtype
            cos, sin = ang.cos().to(cdt), ang.sin().to(cdt)
            args = (q, cos, sin) if single else (q, k, cos, sin)
            with torch.no_grad():
                try:
                    want = fn(*args)
                except Exception:  # widths the function itself refuses (no partial rotary)
                    continue
                try:
                    got = _torch_forms.call(f, args, {})
                except Exception:
                    return False
            if not _same(want, got):
                return False
            compared += 1
    return compared > 0


# ---- comparing outputs ---------------------------------------------------------------------------

def _flat(out: Any) -> List[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    raise TypeError(f"not tensors: {type(out).__name__}")


def _bits(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    t = t.contiguous()
    return t.view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[
        t.element_size()])


def _ndiff(want: Any, got: Any) -> Tuple[int, int]:
    """(values that differ in any bit, values) of two outputs; (-1, n) when their shapes,
    dtypes or structure differ."""
    try:
        a, b = _flat(want), _flat(got)
    except TypeError:
        return -1, 0
    n = sum(t.numel() for t in a)
    if len(a) != len(b) or any(x.shape != y.shape or x.dtype != y.dtype for x, y in zip(a, b)):
        return -1, n
    return sum(int((_bits(x).cpu() != _bits(y).cpu()).sum()) for x, y in zip(a, b)), n


def _same(want: Any, got: Any) -> bool:
    return _ndiff(want, got)[0] == 0


# ---- patched attributes: plain data, rebuilt on copy and load ------------------------------------

class Patched:
    """What sinpe.torch.patch set on a module instance in place of one of its methods: the
    module, the attribute, a spec of plain data (what replaces it and how) and the instance
    attribute it shadowed (None: the class's own method).  Called as the method it replaces;
    ``copy.deepcopy``, ``pickle`` and ``torch.save`` keep the spec and build the function again
    for the copy's module."""
    __slots__ = ("module", "attr", "spec", "previous", "fn", "__weakref__")

    def __init__(self, module: Any, attr: str, spec: Dict[str, Any],
                 previous: Any = None) -> None:
        self.module, self.attr, self.spec, self.previous = module, attr, spec, previous
        self.fn = _build(module, attr, spec)

    def __call__(self, *args: Any, **kw: Any) -> Any:
        return self.fn(*args, **kw)

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.original())

    @property
    def __wrapped__(self) -> Any:
        return self.original()

    def original(self) -> Callable[..., Any]:
        """The method this attribute stands in for, bound to its module."""
        if self.previous is not None:
            return self.previous  # type: ignore[no-any-return]
        return getattr(type(self.module), self.attr).__get__(self.module)  # type: ignore[no-any-return]

    def __reduce__(self) -> Any:
        return (_unpickled, (self.attr, self.spec),
                {"module": self.module, "previous": self.previous})

    def __repr__(self) -> str:
        return f"<sinpe patched {type(self.module).__name__}.{self.attr}: {self.spec['form']}>"


def _unpickled(attr: str, spec: Dict[str, Any]) -> "_Unbuilt":
    return _Unbuilt(attr, spec)


class _Unbuilt(Patched):
    """A Patched being unpickled or copied: its module arrives with its state."""
    __slots__ = ()

    def __init__(self, attr: str, spec: Dict[str, Any]) -> None:  # noqa: super not called
        self.attr, self.spec, self.fn = attr, spec, _not_restored

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple):  # (None, slots) from __slots__ classes
            state = state[1]
        self.module, self.previous = state["module"], state["previous"]
        object.__setattr__(self, "__class__", Patched)  # (self.__class__ = Patched, which mypy
        # refuses: a class assigned to an instance of its subclass)
        self.fn = _build(self.module, self.attr, self.spec)

    def __call__(self, *args: Any, **kw: Any) -> Any:
        return _not_restored()


def _not_restored(*args: Any, **kw: Any) -> Any:
    """An unbuilt Patched's function, until its state arrives."""
    raise RuntimeError("a sinpe patched attribute was called before its module was restored")


def _build(module: Any, attr: str, spec: Dict[str, Any]) -> Callable[..., Any]:
    kind = spec["kind"]
    if kind == "method":
        return _method(module, attr, spec)
    fwd = _ROTARY_FORWARDS[kind](module, spec)
    if spec.get("dynamic"):
        from transformers.modeling_rope_utils import dynamic_rope_update
        fwd = dynamic_rope_update(fwd)  # type: ignore[no-untyped-call]
    return types.MethodType(fwd, module)


def _method(module: Any, attr: str, spec: Dict[str, Any]) -> Callable[..., Any]:
    """A copy of the class's method whose code names the aliases of the spec's routing table,
    bound to module; the aliases installed in its modeling module again (a copy, or a process
    that unpickled the model), from the table itself: whatever the module holds now."""
    fn = _class_function(type(module), attr)
    g = inspect.unwrap(fn).__globals__
    table = spec["table"]
    _install(g, table)
    return types.MethodType(_recode(fn, set(table)), module)


def _class_function(cls: type, attr: str) -> types.FunctionType:
    for c in cls.__mro__:
        fn = vars(c).get(attr)
        if fn is not None:
            if not isinstance(fn, types.FunctionType):
                break
            return fn
    raise AttributeError(f"{cls.__name__}.{attr} is not a function of the class")


_ROUTERS: Dict[int, _Router] = {}


def _router(g: Dict[str, Any]) -> _Router:
    """The router of a modeling module's globals, made again when the functions it read were
    replaced since (a rotation or a helper the user swapped)."""
    r = _ROUTERS.get(id(g))
    if r is None or r.g is not g or not r.fresh():
        r = _ROUTERS[id(g)] = _Router(g)
    return r


# ---- the rotary forwards -------------------------------------------------------------------------

def _meta(*ts: Any) -> bool:
    """A tensor without values sinpe can read: on the meta device, or inside a torch
    function transform (vmap, grad, jvp, functionalize): the module's own forward then."""
    if torch.compiler.is_compiling():  # (fake tensors under a trace: the operators take them)
        return any(isinstance(t, torch.Tensor) and t.is_meta for t in ts)
    return any(isinstance(t, torch.Tensor) and (t.is_meta or _FUNCTORCH_WRAPPED(t))
               for t in ts)


_FUNCTORCH_WRAPPED = torch._C._functorch.is_functorch_wrapped_tensor


def _own(self: Any, attr: str = "forward") -> Callable[..., Any]:
    """The module's own method (the instance attribute patch shadowed, or the class's)."""
    p = self.__dict__.get(attr)
    if isinstance(p, Patched):
        return p.original()
    return getattr(type(self), attr).__get__(self)  # type: ignore[no-any-return]


def _scaling(self: Any, layer_type: Optional[str]) -> float:
    """attention_scaling as the module's forward reads it: the layer type's own where the
    module keeps one, else the module's, else 1 (a module that does not scale)."""
    v: Any = getattr(self, f"{layer_type}_attention_scaling", None) if layer_type is not None \
        else None
    if v is None:
        v = getattr(self, "attention_scaling", 1.0)
    return float(v)


def _hf_forward(module: Any, spec: Dict[str, Any]) -> Callable[..., Any]:
    configs, backend = spec["configs"], spec["backend"]

    def forward(self: Any, x: torch.Tensor, position_ids: torch.Tensor,
                layer_type: Optional[str] = None) -> _Pair:
        name = f"{layer_type}_inv_freq" if layer_type is not None else "inv_freq"
        inv = getattr(self, name)
        if _meta(x, position_ids, inv):  # no values: the module's own forward's meta tensors
            args = (x, position_ids) if layer_type is None else (x, position_ids, layer_type)
            return _unwrapped_own(self)(*args)  # type: ignore[no-any-return]
        cfg = configs.get(layer_type)
        args = (x, position_ids) if layer_type is None else (x, position_ids, layer_type)
        if cfg is None:  # a layer type the module did not have at patch time: its own forward
            return _unwrapped_own(self)(*args)  # type: ignore[no-any-return]
        if torch.compiler.is_compiling():
            return hf_rope(cfg, position_ids, inv_freq=inv, dtype=x.dtype,
                           layer_type=layer_type, backend=backend,
                           attention_scaling=_scaling(self, layer_type))
        try:
            return hf_rope(cfg, position_ids, inv_freq=inv, dtype=x.dtype,
                           layer_type=layer_type, backend=backend,
                           attention_scaling=_scaling(self, layer_type))
        except (ValueError, TypeError, IndexError):
            # inputs hf_rope refuses (an mrope module given (batch, n, 2) pairs, which it
            # broadcasts): the module's own forward, which takes them or raises its own error,
            # as unpatched
            return _unwrapped_own(self)(*args)  # type: ignore[no-any-return]

    if spec["layer_type"]:
        return forward

    def forward_pos(self: Any, x: torch.Tensor, position_ids: torch.Tensor) -> _Pair:
        return forward(self, x, position_ids)
    return forward_pos


def _unwrapped_own(self: Any) -> Callable[..., Any]:
    """The module's own forward without transformers' dynamic_rope_update (the patched forward
    already ran it)."""
    own = _own(self)
    f = getattr(own, "__func__", None)
    if f is not None and getattr(f, "__wrapped__", None) is not None \
            and _dynamic_wrapped(type(self)):
        return types.MethodType(f.__wrapped__, self)
    return own


def _plain_view(dim: int) -> Dict[str, Any]:
    """A config hf_rope reads as the plain default rope of a rotary width dim (the modules
    below compute their inv_freq themselves or as this default does)."""
    return {"model_type": "sinpe_plain", "hidden_size": dim, "num_attention_heads": 1,
            "head_dim": dim, "max_position_embeddings": 2 ** 62,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}


def _sincos_tables(module: Any, position_ids: torch.Tensor, dtype: Any,
                   backend: Optional[str]) -> _Pair:
    """(sin, cos), each (..., pos_embd_dim // 2): GPT-J/CodeGen's
    ``embed_positions[position_ids]`` split in halves.  Their table is the default rope's
    sin and cos of ``position * inv_freq`` (theta 10000) in float32, which is hf_rope's
    first half of columns; in the buffer's dtype, rounded once as ``model.to`` rounds it."""
    d = module.pos_embd_dim
    cos, sin = hf_rope(_plain_view(d), position_ids, dtype=dtype, backend=backend)
    return sin[..., : d // 2], cos[..., : d // 2]


def _sincos_forward(module: Any, spec: Dict[str, Any]) -> Callable[..., Any]:
    cast, backend, view = spec["cast"], spec["backend"], spec["config"]

    def sincos(self: Any, x: torch.Tensor, position_ids: torch.Tensor) -> _Pair:
        buf = self.embed_positions
        if _meta(x, position_ids, buf):
            return _own(self)(x, position_ids)  # type: ignore[no-any-return]
        d = self.pos_embd_dim
        cos, sin = hf_rope(view, position_ids, dtype=buf.dtype, backend=backend)
        sin, cos = sin[..., : d // 2], cos[..., : d // 2]
        if buf.device != sin.device:
            sin, cos = sin.to(buf.device), cos.to(buf.device)
        return (sin.to(x.dtype), cos.to(x.dtype)) if cast else (sin, cos)
    return sincos


def _polar_forward(module: Any, spec: Dict[str, Any]) -> Callable[..., Any]:
    backend, view = spec["backend"], spec["config"]

    def polar(self: Any, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        # DeepSeek-V2, Llama 4: torch.polar(1, position * inv_freq) (cos and sin from the C
        # library, times 1: exact), times attention_scaling as the module multiplies
        if _meta(x, position_ids, self.inv_freq):
            return _unwrapped_own(self)(x, position_ids)  # type: ignore[no-any-return]
        inv = self.inv_freq.to(device=x.device, dtype=torch.float)
        n = int(inv.shape[-1])
        cfg = view if 2 * n == view["head_dim"] else _plain_view(2 * n)
        cos, sin = hf_rope(cfg, position_ids, inv_freq=inv, dtype=torch.float32,
                           backend=backend)
        freqs_cis = torch.complex(cos[..., :n], sin[..., :n]).to(x.device)
        scaled: torch.Tensor = freqs_cis * self.attention_scaling
        return scaled
    return polar


def _mscale_forward(module: Any, spec: Dict[str, Any]) -> Callable[..., Any]:
    backend = spec["backend"]

    def mscale(self: Any, x: torch.Tensor, position_ids: torch.Tensor) -> _Pair:
        # PhiMoE: inv_freq recomputed from the config by the module's own init function on
        # every call, scaled by long_mscale or short_mscale as the call's length decides
        # (transformers' rule, read from the module's config as its forward reads it); the
        # tables are sinpe's float32 cos/sin of position * inv_freq, scaled and cast as the
        # module does.
        if _meta(x, position_ids, getattr(self, "inv_freq", None)):
            return _unwrapped_own(self)(x, position_ids)  # type: ignore[no-any-return]
        rp = self.config.rope_parameters
        scale = None
        seq_len = torch.max(position_ids) + 1
        if rp["rope_type"] != "default" and seq_len:
            scale = rp["long_mscale"] if seq_len > rp["original_max_position_embeddings"] \
                else rp["short_mscale"]
        inv, attention_scaling = self.rope_init_fn(self.config)
        scale = attention_scaling if scale is None else scale
        cos, sin = hf_rope(_plain_view(2 * int(inv.shape[-1])), position_ids, inv_freq=inv,
                           dtype=torch.float32, backend=backend)
        return (cos * scale).to(x.dtype), (sin * scale).to(x.dtype)
    return mscale


def _patch_centres(nh: int, nw: int) -> np.ndarray:
    """DINOv3's patch centres, (nh * nw, 2) (y, x) in [-1, 1], by the same float32 steps as
    its get_patches_center_coordinates (arange(0.5, n) / n, then 2 c - 1: each exact or
    correctly rounded, so NumPy's float32 gives torch's bits), times 2 pi rounded to float32
    (torch's float32 product by a Python float scalar)."""
    ch = np.arange(0.5, nh, dtype=np.float32) / np.float32(nh)
    cw = np.arange(0.5, nw, dtype=np.float32) / np.float32(nw)
    c = np.stack(np.meshgrid(ch, cw, indexing="ij"), -1).reshape(-1, 2)
    c = np.float32(2.0) * c - np.float32(1.0)
    return c * np.float32(2 * math.pi)


def _patches_forward(module: Any, spec: Dict[str, Any]) -> Callable[..., Any]:
    """DINOv3's rotary (EoMT-DINOv3): angles ``2 pi c * inv_freq`` of the patch centres c,
    flattened (y then x) and tiled twice, cos and sin, cast to the pixels' dtype: the
    vision axial hwhw layout of those float32 positions (sinpe._hf.axial), bit for bit.  In
    training mode the module jitters the centres with torch's generator: its own forward."""
    backend = spec["backend"]

    def forward(self: Any, pixel_values: torch.Tensor) -> _Pair:
        ph = self.config.patch_size
        ph, pw = (ph[0], ph[1]) if isinstance(ph, (tuple, list)) else (ph, ph)
        h, w = pixel_values.shape[-2:]
        if self.training or not _plain_grid(self.inv_freq, pixel_values, 4) or h < ph \
                or w < pw:
            return _own(self)(pixel_values)  # type: ignore[no-any-return]
        return _axial_pair(_patch_centres(h // ph, w // pw), self.inv_freq, "hwhw", backend,
                           pixel_values, None)
    return forward


def _plain_grid(inv_freq: Any, x: Any, ndim: int) -> bool:
    """The case the grid forms reproduce: a float32 CPU (or other real device's) inv_freq
    (after ``model.to(bfloat16)`` or float64 the module computes its angles in that type:
    its own forward then) and an x of ndim axes with memory (a meta x: the module's forward,
    which returns meta tensors)."""
    return (inv_freq.dtype == torch.float32 and not _meta(inv_freq, x) and x.dim() == ndim)


def _grid_forward(module: Any, spec: Dict[str, Any]) -> Callable[..., Any]:
    """EfficientLoFTR's rotary: the aggregated feature map's grid of 1-based (row, column)
    positions (``ones.cumsum``: exact), angles ``row * inv_freq`` and ``column * inv_freq``
    interleaved per frequency, sin and cos each repeated twice, as (1, h, w, 2 * angles) in
    x's dtype: the vision axial hw_repeat layout (sinpe._hf.axial), bit for bit."""
    backend = spec["backend"]

    def forward(self: Any, x: torch.Tensor) -> _Pair:
        cfg = self.config
        fh, fw = x.shape[-2:]
        eh = (fh - cfg.q_aggregation_kernel_size) // cfg.q_aggregation_stride + 1
        ew = (fw - cfg.q_aggregation_kernel_size) // cfg.q_aggregation_stride + 1
        # the module's angle tensor has hidden_size // 2 columns, its inv_freq a quarter of
        # hidden_size (other lengths broadcast or raise there), and a grid of at least one
        if not _plain_grid(self.inv_freq, x, 4) or eh < 1 or ew < 1 \
                or 4 * self.inv_freq.numel() != cfg.hidden_size:
            return _own(self)(x)  # type: ignore[no-any-return]
        g = np.stack(np.meshgrid(np.arange(1, eh + 1, dtype=np.float32),
                                 np.arange(1, ew + 1, dtype=np.float32), indexing="ij"), -1)
        return _axial_pair(g.reshape(-1, 2), self.inv_freq, "hw_repeat", backend, x,
                           (1, eh, ew))
    return forward


def _axial_pair(positions: np.ndarray, inv_freq: torch.Tensor, layout: str,
                backend: Optional[str], like: torch.Tensor,
                lead: Optional[Tuple[int, ...]]) -> _Pair:
    """The grid forms' (cos, sin): the vision axial layout's float32 tables of (N, 2)
    positions and the module's (float32) inv_freq, shaped lead + (columns,) when given, on
    like's device in like's dtype (the modules' closing ``.to``)."""
    from ._hf import axial
    from ._jobs import _opts
    inv = inv_freq.detach().to("cpu", torch.float32).numpy()
    c, s = axial._tables(positions, inv, layout, _opts(None, None, backend, None, None), None)
    if lead is not None:
        c, s = c.reshape(lead + c.shape[-1:]), s.reshape(lead + s.shape[-1:])
    return (torch.from_numpy(c).to(device=like.device, dtype=like.dtype),
            torch.from_numpy(s).to(device=like.device, dtype=like.dtype))


_ROTARY_FORWARDS: Dict[str, Callable[[Any, Dict[str, Any]], Callable[..., Any]]] = {
    "hf_rope": _hf_forward, "sincos": _sincos_forward, "polar": _polar_forward,
    "mscale": _mscale_forward, "patches": _patches_forward, "grid": _grid_forward}

_WHAT = {"hf_rope": "hf_rope", "sincos": "hf_rope (sincos table)",
         "mscale": "hf_rope (per-call mscale)", "polar": "hf_rope (complex polar table)",
         "patches": "hf_rope (patch centres)", "grid": "hf_rope (feature-map grid)"}


# ---- which rotary module is which ----------------------------------------------------------------

def _family(model: Any) -> str:
    cfg = getattr(model, "config", None)
    return str(getattr(cfg, "model_type", None) or type(model).__name__)


def _params(cls: type) -> List[str]:
    try:
        return list(inspect.signature(inspect.unwrap(getattr(cls, "forward"))).parameters)
    except (TypeError, ValueError, AttributeError):
        return []


def _rotary_signature(cls: type) -> Optional[bool]:
    """True: forward(x, position_ids, layer_type); False: forward(x, position_ids); None:
    something else."""
    params = _params(cls)
    if params[:3] != ["self", "x", "position_ids"]:
        return None
    rest = params[3:]
    if not rest:
        return False
    return True if rest == ["layer_type"] else None


def _dynamic_wrapped(cls: type) -> bool:
    from transformers.modeling_rope_utils import dynamic_rope_update
    probe = dynamic_rope_update(lambda self, x, position_ids: None)  # type: ignore[no-untyped-call]
    f = getattr(cls, "forward", None)
    return isinstance(f, types.FunctionType) and f.__code__ is probe.__code__


def _forward_source(cls: type) -> str:
    try:
        return inspect.getsource(inspect.unwrap(getattr(cls, "forward")))
    except (OSError, TypeError, AttributeError):
        return ""


def _other_kind(module: Any) -> Optional[str]:
    """'sincos': GPT-J/CodeGen's precomputed ``embed_positions`` table (sin | cos halves,
    looked up by position); 'mscale': PhiMoE's forward, which recomputes inv_freq from the
    config and scales by a per-call mscale; 'polar': complex ``torch.polar`` tables;
    'patches': DINOv3's forward(pixel_values), the patch centres of the image's grid;
    'grid': EfficientLoFTR's forward(x), the feature map's grid; None: the inv_freq form
    hf_rope reproduces."""
    if isinstance(getattr(module, "embed_positions", None), torch.Tensor) and \
            isinstance(getattr(module, "pos_embd_dim", None), int):
        return "sincos"
    src = _forward_source(type(module))
    if "short_mscale" in src and "rope_init_fn" in src:
        return "mscale"
    if "torch.polar" in src:
        return "polar"
    if "get_patches_center_coordinates" in src and _params(type(module)) == [
            "self", "pixel_values"]:
        return "patches"
    if "compute_embeddings" in src and "q_aggregation_stride" in src \
            and _params(type(module)) == ["self", "x"]:
        return "grid"
    return None


def _layer_types(module: Any) -> List[Optional[str]]:
    rt = getattr(module, "rope_type", None)
    if isinstance(rt, dict) and rt:
        return list(rt)
    lts = getattr(getattr(module, "config", None), "layer_types", None)
    if lts and all(hasattr(module, f"{t}_inv_freq") for t in set(lts)):
        return sorted(set(lts))
    return [None]


_POLAR = ("its rotary returns complex torch.polar tables, whose cos and sin torch takes from "
          "the C library's cosf/sinf: sinpe reproduces glibc's, as an x86-64 CPU with AVX2 and "
          "FMA runs them (measured: 0 of 7,968,669 random float32 angles and 0 of 6,400,000 "
          "rope angles differ), not the C library of other machines; pass backend= to take "
          "that backend's cos/sin instead")

#: the backend profile whose sin and cos are glibc's sinf/cosf (FMA variants), as torch.polar
#: calls them on x86-64 (docs/backends.md: 'jax-0.10' runs them for JAX's sin and cos)
_GLIBC_SINCOS = "jax-0.10"


def _glibc_like_torch() -> bool:
    """torch.polar's cosf/sinf are the C library's: glibc's FMA variants on an x86-64 Linux
    machine whose CPU has AVX2 and FMA (the avx2 code path's requirement)."""
    import platform
    from ._backends import policy
    return sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64") \
        and "avx2" in policy.kernels()


def _config_of(module: Any, family: str) -> Any:
    cfg = getattr(module, "config", None)
    if cfg is None:
        raise NotImplementedError(
            f"{family}: {type(module).__name__} has no config (a rotary module of remote code "
            "or of another library): not a transformers rotary module sinpe.torch.patch "
            "reproduces")
    return cfg


def _snapshot(module: Any, cfg: Any, layer_type: Optional[str]) -> Dict[str, Any]:
    """The config as hf_rope reads it for module (plain data), with the values the module
    fixed at init where it keeps them (mrope_section)."""
    from ._hf.config import snapshot
    snap = snapshot(cfg, layer_type)
    sec = getattr(module, "mrope_section", None)
    if isinstance(sec, (list, tuple)) and all(type(v) is int for v in sec):
        rp = snap.get("rope_parameters")
        key = "rope_parameters" if isinstance(rp, dict) else "rope_scaling"
        rp = dict(snap.get(key) or {})
        rp["mrope_section"] = list(sec)
        snap[key] = rp
    return snap


def _spec(module: Any, family: str, backend: Optional[str]) -> Dict[str, Any]:
    """What replaces the rotary module's forward (plain data); NotImplementedError for a
    rotary sinpe does not reproduce."""
    kind = _other_kind(module) or "hf_rope"
    cls = type(module)
    spec: Dict[str, Any] = {"kind": kind, "backend": backend, "dynamic": _dynamic_wrapped(cls),
                            "layer_type": False}
    if kind == "polar":
        if backend is None and not _glibc_like_torch():
            raise NotImplementedError(f"{family}: {cls.__name__} cannot be reproduced here: "
                                      f"{_POLAR}")
        spec["backend"] = _GLIBC_SINCOS if backend is None else backend
        spec["config"] = _plain_view(2 * int(module.inv_freq.shape[-1]))
    elif kind == "sincos":
        spec["cast"] = "x.dtype" in _forward_source(cls)  # GPT-J casts, CodeGen does not
        spec["config"] = _plain_view(module.pos_embd_dim)
    elif kind == "hf_rope":
        sig = _rotary_signature(cls)
        if sig is None:
            return {"kind": None, "why": "forward is not (x, position_ids)"}
        spec["layer_type"] = sig
        cfg = _config_of(module, family)
        types_ = _layer_types(module) if sig else [None]
        spec["configs"] = {lt: _snapshot(module, cfg, lt) for lt in types_}
        spec["layer_types"] = types_
    elif kind in ("mscale", "patches", "grid"):
        _config_of(module, family)
    spec["form"] = _WHAT[kind] + (" (dynamic_rope_update)" if spec["dynamic"] else "")
    return spec


# ---- the proof on the instance -------------------------------------------------------------------

@contextlib.contextmanager
def _restored(module: Any) -> Iterator[None]:
    """The module's attributes, buffers (their values too) and mode as they were, and torch's
    random state untouched, whatever runs inside."""
    attrs = dict(module.__dict__)
    bufs = dict(module._buffers)
    values = {k: v.detach().clone() for k, v in bufs.items()
              if isinstance(v, torch.Tensor) and not v.is_meta}
    training = module.training
    try:
        with torch.random.fork_rng(devices=[]):
            module.training = False
            yield
    finally:
        module.__dict__.clear()
        module.__dict__.update(attrs)
        module._buffers.clear()
        module._buffers.update(bufs)
        with torch.no_grad():
            for k, v in values.items():
                b = bufs[k]
                if not torch.equal(_bits(b), _bits(v)):
                    b.copy_(v)
        module.training = training


def _probe_positions(module: Any) -> List[torch.Tensor]:
    """Positions the proof calls both forwards with: a run from 0 and scattered positions, all
    below the lengths where a dynamic or longrope module changes its state."""
    cap = 4096
    for name in ("original_max_seq_len", "max_seq_len_cached"):
        v = getattr(module, name, None)
        if isinstance(v, int) and v > 1:
            cap = min(cap, v - 1)
    cfg = getattr(module, "config", None)
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict):
        for p in [rp] + [v for v in rp.values() if isinstance(v, dict)]:
            omp = p.get("original_max_position_embeddings")
            if isinstance(omp, int) and omp > 1:
                cap = min(cap, omp - 1)
    scattered = sorted({min(p, cap) for p in (0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 377,
                                              1000, 1597, 2584, 4095)})
    run = torch.arange(min(16, cap + 1))
    sc = torch.tensor(scattered)
    return [run[None], sc[None],
            torch.stack([sc, (sc // 2), (sc * 3) % (cap + 1)])[:, None],  # mrope's 3 rows
            torch.stack([sc, sc.flip(0)], -1)[None], torch.stack([run, run.flip(0)], -1)]


def _rotary_inputs(module: Any, kind: str) -> List[Tuple[Any, ...]]:
    """The proof's calls of a rotary module: (x, position_ids[, layer_type]) in float32 and
    bfloat16; a grid module's image; PhiMoE's a long call too."""
    if kind == "patches":
        ph = module.config.patch_size
        ph, pw = (ph[0], ph[1]) if isinstance(ph, (tuple, list)) else (ph, ph)
        return [(torch.zeros(1, 3, 2 * ph, 3 * pw, dtype=dt),)
                for dt in (torch.float32, torch.bfloat16)]
    if kind == "grid":
        c = module.config
        n = c.q_aggregation_kernel_size + 2 * c.q_aggregation_stride
        return [(torch.zeros(1, 4, n, n + c.q_aggregation_stride, dtype=dt),)
                for dt in (torch.float32, torch.bfloat16)]
    out: List[Tuple[Any, ...]] = []
    positions = _probe_positions(module)
    if kind == "mscale":
        omp = module.config.rope_parameters.get("original_max_position_embeddings")
        if isinstance(omp, int):
            positions.append(torch.tensor([[0, 1, omp - 1, omp, omp + 7]]))
    lts = _layer_types(module) if _rotary_signature(type(module)) else [None]
    for dt in (torch.float32, torch.bfloat16):
        x = torch.zeros(1, dtype=dt)
        for pos in positions:
            for lt in lts:
                out.append((x, pos) if lt is None else (x, pos, lt))
    return out


def _prove(module: Any, new: Callable[..., Any], own: Callable[..., Any],
           calls: List[Tuple[Any, ...]]) -> Optional[str]:
    """None when the module's own forward and the new one give the same bits on every call
    (the module's state restored after each); else why not."""
    compared = 0
    for args in calls:
        with _restored(module):
            try:
                with torch.no_grad():
                    want = own(*args)
            except Exception:
                continue  # inputs the module itself refuses: nothing to compare
        with _restored(module):
            try:
                with torch.no_grad():
                    got = new(*args)
            except NotImplementedError:
                raise
            except Exception as e:
                return f"sinpe's forward raised {type(e).__name__}: {e}"
        n, total = _ndiff(want, got)
        compared += 1
        if n:
            what = "a different shape or dtype" if n < 0 else f"{n} of {total} values differ"
            pos = args[1] if len(args) > 1 and isinstance(args[1], torch.Tensor) else None
            at = f" at positions {pos.flatten().tolist()[:6]}..." if pos is not None else ""
            return (f"its own forward and sinpe's differ ({what}{at}, "
                    f"{args[0].dtype})")
    return None if compared else "its own forward took none of the probe inputs"


def _own_code(module: Any) -> Optional[str]:
    """Why a rotary module's forward is not one sinpe may replace, or None: an instance
    attribute stands in for its forward (a hook, as accelerate sets), or a class of its own
    (a subclass, remote code) defines a method that is not a copy of transformers' code for
    it (the proof on the instance probes a few positions; code of the user's own may differ
    past them: position interpolation, clamping)."""
    d = module.__dict__.get("forward")
    if d is not None and not isinstance(d, Patched):
        return "an instance attribute stands in for its forward (a hook): its own forward"
    cls = type(module)
    base = next((c for c in cls.__mro__ if c.__module__.startswith("transformers.")), None)
    ref = base if base is not None else _llama_rotary()
    for c in cls.__mro__:
        if c is base or c is torch.nn.Module or c is object:
            break
        for attr, fn in vars(c).items():
            if attr.startswith("__") and attr != "__call__" or attr == "__init__":
                continue
            theirs = getattr(ref, attr, None) if ref is not None else None
            if not _same_code(fn, inspect.getattr_static(ref, attr, None) if ref is not None
                              else None) and fn is not theirs:
                return (f"{c.__qualname__}.{attr} is code of its own, not transformers': "
                        "its own forward")
    return None


def _same_code(mine: Any, theirs: Any) -> bool:
    """Whether a class attribute is a copy of transformers' code for it: plain functions (or
    static/class methods of them) whose syntax trees are equal, decorators included, and
    whose wrappers, if any, are transformers' or torch's own (dynamic_rope_update,
    torch.no_grad: a wrapper of the user's own may change positions past every probe)."""
    a, b = _plain_function(mine), _plain_function(theirs)
    if a is None or b is None or type(mine) is not type(theirs):
        return False
    return _def_dump(a) == _def_dump(b) and _library_wrappers(a) and _library_wrappers(b)


def _plain_function(obj: Any) -> Optional[types.FunctionType]:
    f = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
    return f if isinstance(f, types.FunctionType) else None


def _def_dump(fn: types.FunctionType) -> Optional[str]:
    """The syntax tree of a function's definition, its decorators and arguments included."""
    d = _definition(inspect.unwrap(fn))
    if d is None:
        return None
    node, body = d
    return ast.dump(ast.Module(body=[ast.FunctionDef(
        name="f", args=node.args, body=body, decorator_list=node.decorator_list,
        returns=None, type_comment=None)], type_ignores=[]), annotate_fields=False)


_LIBRARY_FILES = (os.path.dirname(torch.__file__) + os.sep,)


def _library_wrappers(fn: Any) -> bool:
    """Every wrapper in fn's chain (functools.wraps' __wrapped__) is code of transformers or
    torch (their decorators), never the user's."""
    lib = _LIBRARY_FILES + _transformers_files()
    while isinstance(fn, types.FunctionType):
        wrapped = getattr(fn, "__wrapped__", None)
        if wrapped is None:
            break
        if not fn.__code__.co_filename.startswith(lib):
            return False
        fn = wrapped
    return True


def _transformers_files() -> Tuple[str, ...]:
    mod = sys.modules.get("transformers")
    path = getattr(mod, "__file__", None)
    return (os.path.dirname(path) + os.sep,) if path else ()


def _llama_rotary() -> Any:
    """transformers' Llama rotary class: what remote code's rotary classes copy."""
    try:
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    except Exception:
        return None
    return LlamaRotaryEmbedding


def _twin(module: Any) -> Any:
    """A CPU copy of a module on the meta device to prove the patch on: built again from its
    config by its own class (its buffers as its init makes them); None when that fails."""
    try:
        with torch.device("cpu"):
            twin = type(module)(module.config)
    except Exception:
        return None
    if set(twin._buffers) != set(module._buffers):
        return None
    return twin


def _on_meta(module: Any) -> bool:
    return any(b.is_meta for b in module.buffers(recurse=False))


def _check_sincos(module: Any, family: str) -> None:
    """The whole buffer, recomputed, bit for bit; a buffer that is not the table refuses the
    family."""
    buf = module.embed_positions
    if buf.is_meta:
        return
    if buf.dim() != 2 or buf.shape[-1] != module.pos_embd_dim:
        raise NotImplementedError(f"{family}: {type(module).__name__}.embed_positions has "
                                  f"shape {tuple(buf.shape)}, not (positions, "
                                  f"{module.pos_embd_dim})")
    sin, cos = _sincos_tables(module, torch.arange(buf.shape[0])[None], buf.dtype, None)
    got = torch.cat((sin, cos), dim=-1)[0].to(buf.device)
    n = int((_bits(got) != _bits(buf)).sum())
    if n:
        raise NotImplementedError(f"{family}: {type(module).__name__}.embed_positions is not "
                                  f"the sin/cos table sinpe computes ({n} of {buf.numel()} "
                                  "values differ)")


def _check_rotary(module: Any, spec: Dict[str, Any], family: str) -> None:
    """hf_rope on the module's config: a family hf_rope refuses raises NotImplementedError
    here, before anything changes."""
    for lt in spec.get("layer_types", [None]):
        name = f"{lt}_inv_freq" if lt is not None else "inv_freq"
        inv = getattr(module, name, None)
        if not isinstance(inv, torch.Tensor):
            raise NotImplementedError(f"{family}: {type(module).__name__} has no {name} buffer "
                                      "(not the inv_freq form sinpe.torch.patch reproduces)")
        inv = inv if not inv.is_meta else torch.ones(inv.shape, dtype=inv.dtype)
        try:
            try:
                hf_rope(spec["configs"][lt], torch.arange(2)[None], inv_freq=inv,
                        dtype=torch.float32, layer_type=lt, backend=spec["backend"],
                        attention_scaling=1.0)
            except ValueError:  # a vision tower's axial rope: (batch, N, 2) positions
                hf_rope(spec["configs"][lt], torch.arange(4).view(1, 2, 2), inv_freq=inv,
                        dtype=torch.float32, layer_type=lt, backend=spec["backend"],
                        attention_scaling=1.0)
        except NotImplementedError as e:
            raise NotImplementedError(f"{family}: {type(module).__name__} cannot be "
                                      f"reproduced: {e}") from None


def _proof(module: Any, spec: Dict[str, Any], family: str) -> Optional[str]:
    """Whether sinpe's forward gives the module's own bits (None) or why not.  The proof runs
    with torch's kernels whatever backend the patch asked for (another backend's tables
    differ by design); on a CPU twin for a module on the meta device."""
    target = module
    if _on_meta(module):
        target = _twin(module)
        if target is None:
            return "it is on the meta device and no CPU twin could be built from its config"
    proof_spec = dict(spec)
    if spec["kind"] != "polar":
        proof_spec["backend"] = None
    elif not _glibc_like_torch():
        return None  # backend= given where glibc's cosf/sinf are not the C library's: unproven
    else:
        proof_spec["backend"] = _GLIBC_SINCOS
    if spec["kind"] == "sincos":
        _check_sincos(target, family)
    new = _build(target, "forward", proof_spec)
    return _prove(target, new, _own(target), _rotary_inputs(target, spec["kind"]))


# ---- the public face ------------------------------------------------------------------------------

def _rotaries(model: Any) -> Iterator[Tuple[str, Any]]:
    for name, m in model.named_modules():
        if type(m).__name__.endswith("RotaryEmbedding"):
            yield name, m


def _routes(model: Any, family: str) -> Tuple[List[Tuple[Any, str, Dict[str, Any]]], List[str]]:
    """The methods of model's modules that name a routed rotation: (module, attribute, spec)
    for each, and the rotations kept (nothing is changed here)."""
    plan: List[Tuple[Any, str, Dict[str, Any]]] = []
    routers: List[_Router] = []
    seen: Set[Tuple[type, str]] = set()
    hooked: List[str] = []
    for mod_name, m in model.named_modules():
        if type(m).__name__.endswith("RotaryEmbedding"):
            continue
        done: Set[str] = set()
        for cls in type(m).__mro__:
            if cls is torch.nn.Module or not cls.__module__.startswith("transformers."):
                break
            for attr, fn in vars(cls).items():
                if attr.startswith("__") or attr in done or not isinstance(fn, types.FunctionType):
                    continue
                done.add(attr)
                d = m.__dict__.get(attr)
                if d is not None and not isinstance(d, Patched):
                    # an instance attribute stands in for the method (a hook): left as it is
                    if _calls_routed(fn, _router(inspect.unwrap(fn).__globals__).names):
                        hooked.append(f"{type(m).__name__}.{attr} (an instance attribute "
                                      "stands in for it)")
                    continue
                r = _router(inspect.unwrap(fn).__globals__)
                if r not in routers:
                    routers.append(r)
                if not r.names or not _calls_routed(fn, r.names):
                    continue
                if not _recodable(fn, r.names):
                    r.kept[f"{cls.__name__}.{attr}"] = "its code names a rotation otherwise"
                    continue
                used = sorted(n for n in set(_chain_names(fn)) if n in r.names)
                form = ", ".join(f"{n} -> {r.routes.get(n, 'helper')}" for n in used)
                plan.append((m, attr, {"kind": "method", "table": r.table(), "form": form,
                                       "class": type(m).__name__}))
                seen.add((type(m), attr))
    kept = sorted({f"{n} ({why})" for r in routers for n, why in r.kept.items()} | set(hooked))
    return plan, kept


def _chain_names(fn: Any) -> List[str]:
    out: List[str] = []
    while fn is not None:
        if isinstance(fn, types.FunctionType):
            out.extend(_names(fn.__code__))
        fn = getattr(fn, "__wrapped__", None)
    return out


def patch(model: Any, *, backend: Optional[str] = None) -> Any:
    """patch(model, *, backend=None) -> model

    Swap a transformers model's rotary position embedding to sinpe, on the instances: every
    ``*RotaryEmbedding`` module's forward returns sinpe's tables of the module's own state
    (its ``inv_freq`` buffers and ``attention_scaling``, per layer type; dynamic and longrope
    state kept by transformers' own wrapper), and every rotation function the model's modules
    call is routed to the sinpe.torch form that computes the same bits, recognised from the
    model's own code (gradients are those of the model's own graph).  backend None: the
    kernels of the torch in this process, so outputs are bit for bit the model's (float32,
    bfloat16, cast before or after patching, generate(), backward); ``'builtin'``: correctly
    rounded tables (outputs then differ in their last bits).

    Each rotary module is proven on the instance first (its own forward and sinpe's on a few
    positions, bit for bit): one that differs keeps its own forward (``patched()`` says why).
    Raises NotImplementedError naming the family and why when a rotary module is not one
    sinpe reproduces; the model is then left as it was.  Patching twice re-patches (with the
    new backend).  :func:`unpatch` restores; :func:`patched` lists what was replaced.
    Copies, pickles and ``torch.save`` of a patched model are patched."""
    _model_arg(model)
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"backend must be None or a str, got {type(backend).__name__}")
    if backend is not None:
        from ._backends import policy
        try:
            policy.opts(backend, None, None)
        except (ValueError, RuntimeError) as e:  # a name refused, a library not installed
            raise type(e)(f"backend={backend!r}: {e}") from None
    family = _family(model)
    # 1. rotary modules: check and prove every one before changing anything
    plan: List[Tuple[Any, str, Dict[str, Any]]] = []
    keep: List[Tuple[Any, Dict[str, Any]]] = []
    found = False
    for mod_name, m in _rotaries(model):
        found = True
        own = _own_code(m)
        if own is not None:  # code sinpe cannot prove at every position: the module's own
            keep.append((m, {"class": type(m).__name__, "kind": "rotary",
                             "form": f"kept ({own})"}))
            continue
        spec = _spec(m, family, backend)
        if spec["kind"] is None:
            keep.append((m, {"class": type(m).__name__, "kind": "rotary",
                             "form": f"kept ({spec['why']})"}))
            continue
        if spec["kind"] == "hf_rope":
            _check_rotary(m, spec, family)
        why = _proof(m, spec, family)
        if why is not None:
            keep.append((m, {"class": type(m).__name__, "kind": "rotary",
                             "form": f"kept ({why})"}))
            continue
        spec["record"] = {"class": type(m).__name__, "kind": "rotary", "form": spec["form"]}
        plan.append((m, "forward", spec))
    if not found:
        raise NotImplementedError(f"{family}: the model has no *RotaryEmbedding module")
    if not plan and all(r["form"].startswith("kept (forward is not") for _, r in keep):
        raise NotImplementedError(
            f"{family}: no rotary module is a forward(x, position_ids) one (found "
            f"{sorted({r['class'] for _, r in keep})})")
    # 2. rotations: the methods that name a routed function
    methods, kept = _routes(model, family)
    for m, attr, spec in methods:
        spec["record"] = {"class": spec["class"], "kind": "rotation", "method": attr,
                          "form": spec["form"]}
    # 3. apply (nothing above changed the model); a patch of this model or of a module in it
    # made earlier is undone first
    unpatch(model)
    for m, attr, spec in plan + methods:
        prev = m.__dict__.get(attr)
        m.__dict__[attr] = Patched(m, attr, spec, prev)
    for m, record in keep:
        m.__dict__[_KEPT] = record
    model.__dict__[_ROOT] = {"backend": backend, "kept": kept}
    return model


def unpatch(model: Any) -> Any:
    """unpatch(model) -> model

    Restore every module of model that :func:`patch` changed (whichever call patched it: the
    model's own, an earlier one of a module inside it, the original of a copy): each patched
    method is the class's own again (or the instance's own attribute it shadowed).  A model
    that is not patched is returned unchanged."""
    _model_arg(model)
    for m in model.modules():
        d = m.__dict__
        for attr, v in list(d.items()):
            if isinstance(v, Patched):
                if v.previous is None or isinstance(v.previous, Patched):
                    del d[attr]
                else:
                    d[attr] = v.previous
        d.pop(_KEPT, None)
        d.pop(_ROOT, None)
    return model


def patched(model: Any) -> List[Dict[str, Any]]:
    """patched(model) -> list of dicts

    What :func:`patch` replaced in model: one dict per replaced method (module path, class,
    kind 'rotary' or 'rotation', form), plus the rotary modules that keep their own forward
    and the rotation functions left as the model computes them (form 'kept ...'); [] when
    nothing in the model is patched."""
    _model_arg(model)
    out: List[Dict[str, Any]] = []
    kept: List[str] = []
    for name, m in model.named_modules():
        d = m.__dict__
        for attr, v in d.items():
            if isinstance(v, Patched):
                out.append(dict(v.spec["record"], module=name))
        if _KEPT in d:
            out.append(dict(d[_KEPT], module=name))
        root = d.get(_ROOT)
        if isinstance(root, dict):
            kept += [k for k in root.get("kept", ()) if k not in kept]
    if not out:
        return []
    out += [{"module": "", "class": "", "kind": "rotation", "form": f"kept: {k}"} for k in kept]
    return out
