"""Routing a modeling module's rotation functions: the methods that call one get a copy of
their code naming a private alias in the modeling module (``_sinpe_route__<name>``, a
:class:`sinpe._torch.forms.route` to the sinpe form); every other global resolves live."""
from __future__ import annotations

import dis
import inspect
import types
from typing import Any, Callable, Dict, List, Set

import torch

from .._memo import Memo

from .compare import same_bits
from .forms import FORMS, call, route
from .recognise import classify, is_rotation_name, code_names



#: the modeling module's alias of a routed name (a route to a sinpe form, or a helper's copy)
_ALIAS = "_sinpe_route__"


def calls_routed(fn: Any, routed: Set[str]) -> bool:
    """Whether fn (through its decorators' chain) names a routed global."""
    while fn is not None:
        if isinstance(fn, types.FunctionType) and routed.intersection(code_names(fn.__code__)):
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


def recode(fn: types.FunctionType, names: Set[str]) -> types.FunctionType:
    """A copy of fn (and of the functions its decorators wrap, their closures rebuilt around
    the copy) whose code loads the alias of each of names: every other global resolves
    through fn's own (live) module globals."""
    inner = getattr(fn, "__wrapped__", None)
    closure = fn.__closure__
    new_inner = None
    if isinstance(inner, types.FunctionType) and closure:
        new_inner = recode(inner, names)
        cells = []
        for c in closure:
            try:
                val = c.cell_contents
            except ValueError:
                cells.append(c)
                continue
            cells.append(types.CellType(new_inner) if val is inner else c)
        closure = tuple(cells)
    code = _renamed(fn.__code__, names) if names.intersection(code_names(fn.__code__)) \
        else fn.__code__
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__dict__.update(fn.__dict__)
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__
    if new_inner is not None:
        setattr(new, "__wrapped__", new_inner)
    return new


def recodable(fn: Any, names: Set[str]) -> bool:
    while fn is not None:
        if isinstance(fn, types.FunctionType) and not _global_only(fn.__code__, names):
            return False
        fn = getattr(fn, "__wrapped__", None)
    return True


class Router:
    """Per modeling module (its globals dict): the rotation functions it names with their
    sinpe forms, the module-level helpers that call them, and what is kept."""

    def __init__(self, g: Dict[str, Any]):
        self.g = g
        self.routes: Dict[str, str] = {}
        self.refs: Dict[str, str] = {}
        self.kept: Dict[str, str] = {}
        for name, obj in list(g.items()):
            if name.startswith(_ALIAS) or not is_rotation_name(name) or not callable(obj):
                continue
            f = inspect.unwrap(obj)
            if not isinstance(f, types.FunctionType) or not f.__module__.startswith(
                    "transformers."):
                continue
            found = classify(obj)
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
                if calls_routed(obj, routed) and recodable(obj, routed):
                    routed.add(name)
                    self.helpers.append(name)
                    changed = True
        self.names = routed
        self.seen = self._reads()

    def _reads(self) -> Dict[str, int]:
        """What the routing was decided from: the module's rotation-named callables and the
        module-level functions, by identity."""
        return {n: id(o) for n, o in self.g.items() if not n.startswith(_ALIAS)
                and (isinstance(o, types.FunctionType) or (callable(o) and is_rotation_name(n)))}

    def fresh(self) -> bool:
        return self._reads() == self.seen

    def table(self) -> Dict[str, Any]:
        """The routing as plain data: each routed name -> [its form, the reference module its
        function matched], each helper -> 'helper'."""
        out: Dict[str, Any] = {n: [f, self.refs[n]] for n, f in self.routes.items()}
        out.update({n: "helper" for n in self.helpers})
        return out

    def install(self) -> None:
        install(self.g, self.table())


def install(g: Dict[str, Any], table: Dict[str, Any]) -> None:
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
            if obj is not None and classify(obj) == (form, ref):
                g[_ALIAS + name] = route(form, obj, ref, g, name)
            elif obj is not None:
                g[_ALIAS + name] = obj
            continue
        if isinstance(obj, types.FunctionType) and obj.__globals__ is g:
            g[_ALIAS + name] = recode(obj, names)
        elif obj is not None:
            g[_ALIAS + name] = obj


def _same_rotation(fn: Callable[..., Any], form: str) -> bool:
    """The model's function and the form on a few random vectors (float32, bfloat16; halves
    and GPT-NeoX's partial widths), bit for bit: a function whose code matched a reference
    but computes otherwise (its helpers replaced at run time) is not routed."""
    f = FORMS[form]
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
                    got = call(f, args, {})
                except Exception:
                    return False
            if not same_bits(want, got):
                return False
            compared += 1
    return compared > 0


_ROUTERS: "Memo[int, Router]" = Memo(1024)  # by the globals' id (the router holds them)


def router(g: Dict[str, Any]) -> Router:
    """The router of a modeling module's globals, made again when the functions it read were
    replaced since (a rotation or a helper the user swapped)."""
    r = _ROUTERS.get(id(g))
    if r is None or r.g is not g or not r.fresh():
        r = _ROUTERS[id(g)] = Router(g)
    return r


def chain_names(fn: Any) -> List[str]:
    out: List[str] = []
    while fn is not None:
        if isinstance(fn, types.FunctionType):
            out.extend(code_names(fn.__code__))
        fn = getattr(fn, "__wrapped__", None)
    return out
