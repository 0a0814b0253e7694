"""An instance attribute standing in for one of a module's methods (what sinpe.torch.patch
sets), and the module's own method behind it.  The patch's attributes (sinpe/_torch/state.py)
are of this kind; the forwards and the own-code check only need to see through them."""
from __future__ import annotations

import inspect
from typing import Any, Callable



class Shadow:
    """An attribute set on a module instance in place of one of its methods: the module, the
    attribute, and the instance attribute it shadowed (None: the class's own method)."""
    __slots__ = ("module", "attr", "previous", "__weakref__")

    module: Any
    attr: str
    previous: Any

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


def own(module: Any, attr: str = "forward") -> Callable[..., Any]:
    """The module's own method (the instance attribute patch shadowed, or the class's)."""
    p = module.__dict__.get(attr)
    if isinstance(p, Shadow):
        return p.original()
    return getattr(type(module), attr).__get__(module)  # type: ignore[no-any-return]


