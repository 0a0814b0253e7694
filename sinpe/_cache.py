"""Rows computed by earlier calls, kept for later ones (docs/speed.md, "The cache").

Policy only: which rows to keep, how many bytes, when to forget.  The core computes the rows
and checks that kept rows suit a job (sinpe.h: sinpe_job.kept); a kept row is the row the
same job would compute, so the bits never depend on the cache.

An entry holds the float32 rows of positions lo .. hi - 1 of one table, keyed by everything
its bits depend on: the backend (its index names the library loaded in this process) and
code path, d_model and base, and for backends whose lanes couple (SLEEF) their profile and
the length of the tensor torch evaluates.  The thread count is not in the key (it never
changes bits).  Entries grow as calls ask for more rows of the same table (only the missing
rows are computed), and the least recently used go when the budget is passed.  Lookups take
no lock; misses take one to reserve the fill, so that two threads never compute into the
same rows; a forked child gets a fresh lock and keeps the rows (they stay valid).
"""
from __future__ import annotations

import os
import threading
from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import _jobs
from ._backends import records

ENV = "SINPE_CACHE_MB"
DEFAULT_BYTES = 64 << 20


class _Entry:
    __slots__ = ("rows", "first", "lo", "hi", "last", "filling", "hit")

    def __init__(self, rows: np.ndarray, first: int, lo: int, hi: int) -> None:
        self.rows, self.first, self.lo, self.hi = rows, first, lo, hi
        self.last = 0
        self.filling = False
        self.hit = (rows, first, first, first)  # the core's argument on a hit: nothing to fill


_ENTRIES: Dict[tuple, _Entry] = {}
_STATS = {"budget": DEFAULT_BYTES, "used": 0, "hits": 0, "misses": 0, "clock": 0}
_LOCK = threading.Lock()


def _after_fork() -> None:
    global _LOCK
    _LOCK = threading.Lock()
    for e in _ENTRIES.values():
        e.filling = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


# ---- the settings --------------------------------------------------------------------------

def set_cache_size(nbytes: int) -> None:
    """The bytes of computed rows kept for later calls (0: none kept; the default 64 MiB,
    or SINPE_CACHE_MB at import).  Shrinking forgets the least recently used rows."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)):
        raise TypeError(f"nbytes must be an integer, got {nbytes!r} ({type(nbytes).__name__})")
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    with _LOCK:
        _STATS["budget"] = int(nbytes)
        _evict(0, None)


def get_cache_size() -> int:
    """The cache's budget in bytes (sinpe.set_cache_size)."""
    return int(_STATS["budget"])


def clear_cache() -> None:
    """Forget every kept row (the next calls compute theirs again)."""
    with _LOCK:
        _ENTRIES.clear()
        _STATS["used"] = 0


def cache_info() -> Dict[str, Any]:
    """The cache's budget, bytes used, entries, hits and misses since import."""
    return {"size": _STATS["budget"], "used": _STATS["used"], "entries": len(_ENTRIES),
            "hits": _STATS["hits"], "misses": _STATS["misses"], "env": ENV}


def configure(value: Optional[str]) -> None:
    """The budget at import: SINPE_CACHE_MB (a number of MiB, 0 to disable)."""
    if value is None or not value.strip():
        return
    try:
        mb = float(value)
    except ValueError:
        mb = -1.0
    if not mb >= 0 or mb > 1 << 40:
        raise ValueError(f"{ENV}={value!r} is not valid: use a number of MiB >= 0 (0 turns the "
                         f"cache off), or leave it unset")
    set_cache_size(int(mb * (1 << 20)))


def _evict(need: int, keep: Optional[tuple]) -> None:
    """Forget least recently used entries (not `keep`, none being filled) until `need`
    more bytes fit the budget.  Under the lock."""
    while _STATS["used"] + need > _STATS["budget"]:
        victims = [(e.last, k) for k, e in _ENTRIES.items() if k != keep and not e.filling]
        if not victims:
            return
        k = min(victims, key=lambda v: v[0])[1]  # keys of different kinds do not compare
        _STATS["used"] -= _ENTRIES.pop(k).rows.nbytes


# ---- leases: the rows a call may read, and those it computes ------------------------------

def _key(core: tuple, d: int, base: Any, tensor_rows: int) -> Optional[tuple]:
    """The entry's key, or None when the call's values are not plain (the core then checks
    and names them)."""
    if type(base) not in (float, int) and not isinstance(base, np.floating):
        return None
    try:
        b = float(base)
    except OverflowError:  # an int past float64: the core names it
        return None
    if not (b > 0 and b != float("inf")):
        return None
    index = core[0]
    if records.INDEPENDENT[index]:
        return (index, core[1], d, b)
    return (index, core[1], core[3], core[4], core[5], d, b, tensor_rows)


def _plain_int(v: Any) -> Optional[int]:
    if type(v) is int:
        return v
    if isinstance(v, np.integer) and not isinstance(v, np.bool_):
        return int(v)
    return None


class Lease:
    """What one call reads (kept: the core's argument) and, on a miss, the entry it fills:
    published with its valid range lo .. hi - 1 once the call succeeds (done), dropped when
    it fails (failed)."""
    __slots__ = ("kept", "key", "entry", "lo", "hi")

    def __init__(self, kept: tuple, key: tuple = (), entry: Optional[_Entry] = None,
                 lo: int = 0, hi: int = 0) -> None:
        self.kept, self.key, self.entry, self.lo, self.hi = kept, key, entry, lo, hi

    def done(self) -> None:
        e = self.entry
        if e is None:
            return
        with _LOCK:
            e.filling = False
            e.lo, e.hi = self.lo, self.hi
            cur = _ENTRIES.get(self.key)
            if cur is e:
                return  # filled in its own buffer: the valid range grew
            if cur is not None:
                cur.filling = False
                _STATS["used"] -= cur.rows.nbytes
                del _ENTRIES[self.key]
            _evict(e.rows.nbytes, self.key)
            if _STATS["used"] + e.rows.nbytes <= _STATS["budget"]:
                _ENTRIES[self.key] = e
                _STATS["used"] += e.rows.nbytes

    def failed(self) -> None:
        """The call raised (or was interrupted): the entry keeps its valid rows only."""
        if self.entry is not None:
            with _LOCK:
                self.entry.filling = False
                cur = _ENTRIES.get(self.key)
                if cur is not None:
                    cur.filling = False


def lease(core: tuple, d: Any, base: Any, lo: int, hi: int, tensor_rows: int) -> Any:
    """Rows lo .. hi - 1 of the table (d columns, base) for one call: on a hit the kept
    rows (the core's argument, a tuple), on a miss a Lease whose missing rows the call
    computes; None when the cache is off or the rows would not fit it (the call then
    computes as without a cache)."""
    budget = _STATS["budget"]
    if budget <= 0 or hi <= lo or type(d) is not int or d < 2 or d % 2:
        return None
    if max(hi, tensor_rows) * d > 1 << 62:
        return None  # rows that far from row 0 are never kept (the core refuses to fill rows
        # whose elements from row 0 pass int64; such rows are their own tensor there)
    key = _key(core, d, base, tensor_rows)
    if key is None:
        return None
    e = _ENTRIES.get(key)
    clock = _STATS["clock"] = _STATS["clock"] + 1
    if e is not None and e.lo <= lo and hi <= e.hi:
        e.last = clock
        _STATS["hits"] += 1
        return e.hit
    return _miss(key, d, lo, hi, budget, clock)


def _fresh(rows: int, d: int) -> np.ndarray:
    """An entry's buffer: from 4 MiB on advised to use transparent huge pages as fresh tables
    are (a first call writes every page of it; 2048 page faults cost about 0.5 ms)."""
    if rows * d * 4 < (4 << 20):
        return np.empty((rows, d), np.float32)
    return _jobs.empty_table(rows, d)


def _miss(key: tuple, d: int, lo: int, hi: int, budget: int, clock: int) -> Optional[Lease]:
    with _LOCK:
        _STATS["misses"] += 1
        e = _ENTRIES.get(key)
        if e is not None and e.filling:
            return None  # another thread is filling this table: compute without the cache
        if e is not None and hi >= e.lo and lo <= e.hi and (lo >= e.lo or hi <= e.hi):
            new_lo, new_hi = min(lo, e.lo), max(hi, e.hi)  # one side grows
            f0, f1 = (new_lo, e.lo) if new_lo < e.lo else (e.hi, new_hi)
        else:
            e, (new_lo, new_hi), (f0, f1) = None, (lo, hi), (lo, hi)
        if e is not None and e.first <= new_lo and new_hi <= e.first + e.rows.shape[0]:
            e.filling = True  # room in its buffer: the call fills the rows past its valid ones
            e.last = clock
            return Lease((e.rows, e.first, f0, f1), key, e, new_lo, new_hi)
        n = new_hi - new_lo
        if n * d * 4 > budget:
            return None
        cap = max(n, 2 * (e.hi - e.lo)) if e is not None else n  # room to grow into
        if len(key) == 8:  # coupled lanes: no rows past torch's tensor
            cap = min(cap, key[7] - new_lo)
        if cap * d * 4 > budget:
            cap = n
        rows = _fresh(cap, d)
        if e is not None:
            e.filling = True
            rows[e.lo - new_lo:e.hi - new_lo] = e.rows[e.lo - e.first:e.hi - e.first]
        new = _Entry(rows, new_lo, new_lo, new_lo)
        new.last = clock
        new.filling = True
        return Lease((rows, new_lo, f0, f1), key, new, new_lo, new_hi)


def add_rows(core: tuple, x: Any, base: Any, offset: Any, positions: Any, table_rows: int,
             grow: bool) -> Any:
    """The lease of add_pe(x, ...): rows offset .. offset + L - 1 by offset; by positions
    (backends whose results do not couple), the rows up to the largest integer position."""
    shape = getattr(x, "shape", None)
    if not isinstance(shape, tuple) or len(shape) < 2 or 0 in shape:
        return None  # an empty x computes nothing: no rows to keep
    L, d = shape[-2], shape[-1]
    if positions is None:
        off, T = _plain_int(offset), _plain_int(table_rows)
        if off is None or T is None or off < 0 or off > 1 << 62 or type(L) is not int or L <= 0:
            return None  # the core names what is wrong, or computes as without a cache
        T = T if T >= off + L or not grow else off + L
        if T < off + L:
            return None  # the table is too short: the core says so
        return lease(core, d, base, off, off + L, T)
    return _position_rows(core, d, base, positions)


def table_rows_lease(core: tuple, rows: Any, d: Any, base: Any, offset: Any,
                     positions: Any) -> Any:
    """The lease of a table: rows offset .. offset + rows - 1, or by positions."""
    if positions is None:
        n, off = _plain_int(rows), _plain_int(offset)
        if n is None or off is None or n <= 0 or off < 0 or off > (1 << 62):
            return None
        return lease(core, d, base, off, off + n, off + n)
    return _position_rows(core, d, base, positions)


def _position_rows(core: tuple, d: Any, base: Any, positions: Any) -> Any:
    if not records.INDEPENDENT[core[0]] or not isinstance(positions, np.ndarray) \
            or positions.dtype.kind not in "iu" or positions.size == 0:
        return None
    top = int(positions.max())
    if top < 0 or top >= 1 << 24:  # float32 holds every integer below 2^24
        return None
    return lease(core, d, base, 0, top + 1, 0)


# ---- whole results kept by their arguments (apply_rope's cos/sin) --------------------------

def rope_key(core: tuple, rot: int, theta: float, layout: str, seq: int, offset: int,
             pos: Any) -> Optional[tuple]:
    """apply_rope's tables by everything they depend on (positions by their bytes, up to
    64 KiB of them); None: not kept."""
    if pos is None:
        where: Any = ("offset", offset)
    elif isinstance(pos, np.ndarray) and pos.nbytes <= 1 << 16:
        where = (pos.dtype.str, pos.shape, pos.tobytes())
    else:
        return None
    return ("rope", core[0], core[1], core[3], core[4], core[5], core[6], rot, theta, layout,
            seq, where)


def memo_get(key: Optional[tuple]) -> Optional[np.ndarray]:
    """A kept result (read-only), or None."""
    if key is None or _STATS["budget"] <= 0:
        return None
    e = _ENTRIES.get(key)
    if e is None:
        return None
    e.last = _STATS["clock"] = _STATS["clock"] + 1
    _STATS["hits"] += 1
    return e.rows


def memo_put(key: Optional[tuple], value: np.ndarray) -> None:
    """Keep a result (made read-only) if it fits the budget."""
    if key is None:
        return
    with _LOCK:
        _STATS["misses"] += 1
        if value.nbytes > _STATS["budget"] or key in _ENTRIES:
            return
        value.flags.writeable = False
        _evict(value.nbytes, key)
        if _STATS["used"] + value.nbytes <= _STATS["budget"]:
            e = _Entry(value, 0, 0, 0)
            e.last = _STATS["clock"]
            _ENTRIES[key] = e
            _STATS["used"] += value.nbytes
