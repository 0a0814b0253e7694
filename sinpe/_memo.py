"""The package's one small memo: a dict bounded to its last `bound` entries, the least
recently used going first, that sinpe.clear_cache() empties with every other (clear_all).

Every private cache is a Memo (dtype names, backend resolutions, config readings,
frequencies; the torch wing's rotation plans, backward captures, recognised functions and
routers), but the rows' cache (sinpe._cache, a budget in bytes) and the held views
(sinpe._held), which keep their own rules and are emptied by clear_cache too.  A Memo is an
OrderedDict, so code that reads it as a dict (get, in, [], len) works unchanged: get and []
mark the entry used, a store past the bound forgets the oldest.  Each operation is one
C-level dict operation under the GIL; racing threads may at worst compute a value twice.
Imports nothing of the package.
"""
from __future__ import annotations

from typing import Any, List, Optional, OrderedDict, TypeVar, Union, overload

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")


class Memo(OrderedDict[K, V]):
    """A bounded LRU dict (bound: the most entries kept), emptied by clear_all()."""

    def __init__(self, bound: int) -> None:
        super().__init__()
        self.bound = bound
        _ALL.append(self)

    @overload
    def get(self, key: K, default: None = None, /) -> Optional[V]: ...
    @overload
    def get(self, key: K, default: V, /) -> V: ...
    @overload
    def get(self, key: K, default: D, /) -> Union[V, D]: ...

    def get(self, key: K, default: Any = None, /) -> Any:
        """The value kept for key (marked used), or default; TypeError for a key with no
        hash, as a dict's get."""
        try:
            v = self[key]
        except KeyError:
            return default
        try:
            self.move_to_end(key)
        except KeyError:  # another thread forgot it meanwhile
            pass
        return v

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        try:
            self.move_to_end(key)
            while len(self) > self.bound:
                self.popitem(last=False)
        except KeyError:  # another thread's store or clear came between
            pass


_ALL: List[Memo[Any, Any]] = []


def clear_all() -> None:
    """Forget every Memo's entries (sinpe.clear_cache)."""
    for m in _ALL:
        m.clear()
