"""The patch's state as plain data: a :class:`Patched` attribute (module, attribute, spec
of names and numbers) builds its function again when copied, pickled or loaded, so a copy is
patched as its original was and unpatch restores every module, in any order."""
from __future__ import annotations

import inspect
import types
from typing import Any, Callable, Dict

from .forwards import FORWARDS
from .routing import install, recode
from .shadow import Shadow



class Patched(Shadow):
    """What sinpe.torch.patch set on a module instance in place of one of its methods: the
    module, the attribute, a spec of plain data (what replaces it and how) and the instance
    attribute it shadowed (None: the class's own method).  Called as the method it replaces;
    ``copy.deepcopy``, ``pickle`` and ``torch.save`` keep the spec and build the function again
    for the copy's module."""
    __slots__ = ("spec", "fn")

    def __init__(self, module: Any, attr: str, spec: Dict[str, Any],
                 previous: Any = None) -> None:
        self.module, self.attr, self.spec, self.previous = module, attr, spec, previous
        self.fn = build(module, attr, spec)

    def __call__(self, *args: Any, **kw: Any) -> Any:
        return self.fn(*args, **kw)

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
        self.fn = build(self.module, self.attr, self.spec)

    def __call__(self, *args: Any, **kw: Any) -> Any:
        return _not_restored()


def _not_restored(*args: Any, **kw: Any) -> Any:
    """An unbuilt Patched's function, until its state arrives."""
    raise RuntimeError("a sinpe patched attribute was called before its module was restored")


def build(module: Any, attr: str, spec: Dict[str, Any]) -> Callable[..., Any]:
    kind = spec["kind"]
    if kind == "method":
        return _method(module, attr, spec)
    fwd = FORWARDS[kind](module, spec)
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
    install(g, table)
    return types.MethodType(recode(fn, set(table)), module)


def _class_function(cls: type, attr: str) -> types.FunctionType:
    for c in cls.__mro__:
        fn = vars(c).get(attr)
        if fn is not None:
            if not isinstance(fn, types.FunctionType):
                break
            return fn
    raise AttributeError(f"{cls.__name__}.{attr} is not a function of the class")
