"""Rows computed by earlier calls, kept for later ones (docs/speed.md, "The cache").

Policy only: which rows to keep, how many bytes, when to forget.  The core computes the rows
and checks that kept rows suit a job (sinpe.h: sinpe_job.kept); a kept row is the row the
same job would compute, so the bits never depend on the cache.

An entry holds the float32 rows of positions lo .. hi - 1 of one table, keyed by everything
its bits depend on: the backend (its index names the library loaded in this process) and
code path, d_model and base, and for backends whose lanes couple (SLEEF) their profile and
the length of the tensor torch evaluates.  The thread count is not in the key (it never
changes bits).  Entries grow as calls ask for more rows of the same table (only the missing
rows are computed), and the least recently used go when the budget is passed (entries in
use order: eviction takes the oldest, O(1) each).  apply_rope's tables cheaper than their
bookkeeping are not kept (MIN_VALUES).  Lookups take the lock only to mark the entry used; misses take it to
reserve the fill, so that two threads never compute into the same rows; a fresh buffer is
allocated by the call itself once the core has checked it and admitted the buffer with the
result (sinpe.h: kept.reserve), and a buffer that cannot be had leaves the call uncached.
The core is told which rows are filled and reads no others, whatever this module believed
(a masked array's max(), positions changed by another thread).  Every lease is settled by
its call (done or failed), whatever it raises; a forked child gets a fresh lock and keeps
the rows (they stay valid).
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple, Union

import numpy as np

from . import _jobs, _memo
from ._backends import policy, records
from ._types import Opts

ENV = "SINPE_CACHE_MB"
DEFAULT_BYTES = 64 << 20
#: apply_rope's tables of fewer values are not kept (a decode step's one row, a new key at
#: every step): computing them costs less than keeping them (docs/speed.md).  The rows of
#: the tables and adds need no such floor: one entry per table, grown in place.
MIN_VALUES = 4096


class TableKey(NamedTuple):
    """A table's rows, for a backend whose rows do not couple (records.INDEPENDENT)."""
    backend: int
    path: int
    d: int
    base: float


class CoupledKey(NamedTuple):
    """A table's rows, for a backend whose lanes couple (SLEEF): its profile and the length
    of the tensor torch evaluates too."""
    backend: int
    path: int
    trig: int
    lanes: int
    torch_threads: Any
    d: int
    base: float
    tensor_rows: int


class RopeKey(NamedTuple):
    """apply_rope's cos/sin tables, by everything they depend on (rope_key)."""
    backend: int
    path: int
    trig: int
    lanes: int
    torch_threads: Any
    pow_lanes: int
    rot: int
    theta: float
    layout: str
    seq: int
    where: Tuple[Any, ...]
    rounded: Optional[str] = None  # the tables rounded to a half type (apply_rope's halves)


#: An entry's key: a table's (_key, by what its bits depend on) or a result's (rope_key).
Key = Union[TableKey, CoupledKey, RopeKey, "RowsKey"]


class _Entry:
    __slots__ = ("rows", "first", "lo", "hi", "filling", "hit")

    def __init__(self, rows: np.ndarray, first: int, lo: int, hi: int) -> None:
        self.rows, self.first, self.lo, self.hi = rows, first, lo, hi
        self.filling = False
        self.hit = (rows, first, lo, hi, lo, lo)  # the core's argument on a hit (one object,
        # replaced whole when the filled rows grow: a reader never sees half an update)


_ENTRIES: "OrderedDict[Key, _Entry]" = OrderedDict()  # least recently used first
_STATS = {"budget": DEFAULT_BYTES, "used": 0, "hits": 0, "misses": 0}
_LOCK = threading.Lock()


def _after_fork() -> None:
    global _LOCK, _ROPE_FILL
    _LOCK = threading.Lock()
    _ROPE_FILL = threading.RLock()  # a filler of the parent's other threads is not here
    for e in _ENTRIES.values():
        e.filling = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


# ---- the settings --------------------------------------------------------------------------

def _physical() -> int:
    """This machine's physical memory in bytes (0: unknown), the core's figure."""
    return _jobs.physical_memory()


_PHYSICAL: List[int] = []


def _quarter() -> int:
    """The largest buffer an entry gets: a quarter of physical memory (the call's result is
    admitted with it, and a call must never fail for the cache's sake)."""
    if not _PHYSICAL:
        _PHYSICAL.append(_physical())
    return _PHYSICAL[0] // 4 if _PHYSICAL[0] > 0 else 1 << 62


def set_cache_size(nbytes: int) -> None:
    """The bytes of computed rows kept for later calls (0: none kept; the default 64 MiB,
    or SINPE_CACHE_MB at import), at most this machine's physical memory.  Shrinking
    forgets the least recently used rows."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)):
        raise TypeError(f"nbytes must be an integer, got {nbytes!r} ({type(nbytes).__name__})")
    n = int(nbytes)
    if n < 0:
        raise ValueError(f"nbytes must be >= 0, got {n}")
    phys = _physical()
    if phys > 0 and n > phys:
        raise ValueError(f"nbytes must be at most this machine's physical memory ({phys} "
                         f"bytes, {phys / 2**30:.1f} GiB), got {n}")
    with _LOCK:
        _STATS["budget"] = n
        _evict(0)
        if n == 0:
            _forgotten()  # views held by a call that raced an earlier set_cache_size(0)


def get_cache_size() -> int:
    """The cache's budget in bytes (sinpe.set_cache_size)."""
    return int(_STATS["budget"])


def clear_cache() -> None:
    """Forget every kept row and every kept frequency vector (hf_rope's inv_freq): the next
    calls compute theirs again."""
    with _LOCK:
        _ENTRIES.clear()
        _STATS["used"] = 0
        _forgotten()
    _memo.clear_all()  # every Memo: the HF rope's frequencies and readings, resolutions


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
    phys = _physical()
    if not mb >= 0 or mb > 1 << 40 or (phys > 0 and mb * (1 << 20) > phys):
        raise ValueError(f"{ENV}={value!r} is not valid: use a number of MiB from 0 (0 turns "
                         f"the cache off) to this machine's physical memory "
                         f"({phys >> 20} MiB), or leave it unset")
    set_cache_size(int(mb * (1 << 20)))


def _evict(need: int) -> None:
    """Forget the least recently used entries until `need` more bytes fit the budget (an
    entry being filled too: its call keeps its own reference).  Under the lock."""
    while _ENTRIES and _STATS["used"] + need > _STATS["budget"]:
        _STATS["used"] -= _ENTRIES.popitem(last=False)[1].rows.nbytes
        _forgotten()


#: what holds views of entries' rows (add_pe's held route, a module above this one): told
#: whenever an entry is forgotten or replaced, so that no view outlives the budget's say
_VIEW_HOLDERS: List[Callable[[], None]] = []


def on_forget(forget: Callable[[], None]) -> None:
    _VIEW_HOLDERS.append(forget)


def _forgotten() -> None:
    for forget in _VIEW_HOLDERS:
        forget()


def hold_rows(core: Opts, d: int, base: Any, lo: int, hi: int,
              hold: Callable[[np.ndarray], None]) -> None:
    """hold(rows lo .. hi - 1 of a kept table of a backend whose rows do not couple: a view
    of the entry's filled rows, which are never written again), under the lock, so that no
    eviction runs between finding the rows and holding them (the holder is told of every
    later one: on_forget); nothing when the rows are not kept."""
    key = _key(core, d, base, 0)
    if type(key) is not TableKey:  # coupled rows are never held
        return
    with _LOCK:
        e = _ENTRIES.get(key)
        if _STATS["budget"] > 0 and e is not None and e.lo <= lo and hi <= e.hi:
            hold(e.rows[lo - e.first:hi - e.first])


def _touch(key: Key) -> None:
    with _LOCK:
        if key in _ENTRIES:
            _ENTRIES.move_to_end(key)


# ---- leases: the rows a call may read, and those it computes ------------------------------

def _key(core: Opts, d: int, base: Any,
         tensor_rows: int) -> Union[TableKey, CoupledKey, None]:
    """The entry's key, or None when the call's values are not plain (the core then checks
    and names them)."""
    if type(base) not in _PLAIN_REALS:  # a subclass's __float__ need not give what the core
        return None                      # reads (a float's own value): never a key
    try:
        b = float(base)
    except OverflowError:  # an int past float64: the core names it
        return None
    if not (b > 0 and b != float("inf")):
        return None
    if records.INDEPENDENT[core.backend]:
        return TableKey(core.backend, core.path, d, b)
    return CoupledKey(core.backend, core.path, core.trig, core.lanes, core.torch_threads, d, b,
                      tensor_rows)


#: the exact types whose float() / int() is the value the core reads (subclasses may define
#: __float__, __int__ and __index__ that disagree: their values are never keys)
_NP_INTS = frozenset(np.dtype(c).type for c in "bBhHiIlLqQ")
_PLAIN_REALS = frozenset({float, int} | {np.dtype(c).type for c in "efdg"} | _NP_INTS)


def _plain_int(v: Any) -> Optional[int]:
    if type(v) is int:
        return v
    if type(v) in _NP_INTS:
        return int(v)
    return None


class Lease:
    """What one call reads (kept: the core's argument) and, on a miss, the entry it fills:
    published with its filled range lo .. hi - 1 once the call succeeds (done), released
    when it fails (failed).  A fresh buffer is made by the call (make), after its checks."""
    __slots__ = ("kept", "key", "entry", "old", "lo", "hi", "f0", "f1", "cap", "d")

    def __init__(self, key: Key, old: Optional[_Entry], lo: int, hi: int, f0: int, f1: int,
                 own: Optional[_Entry] = None, cap: int = 0, d: int = 0) -> None:
        self.key, self.old, self.lo, self.hi, self.f0, self.f1 = key, old, lo, hi, f0, f1
        self.entry, self.cap, self.d = own, cap, d
        if own is not None:  # room in its buffer: the call fills the rows past its filled ones
            self.kept: Any = (own.rows, own.first, own.lo, own.hi, f0, f1)
        else:
            self.kept = (cap * d * 4, self.make)

    def make(self) -> Any:
        """The fresh buffer, once the core has checked the call and admitted the buffer
        with its result; None (the call computes as without a cache) when it cannot be had."""
        try:
            rows = _fresh(self.cap, self.d)
        except MemoryError:
            return None
        old, lo = self.old, self.lo
        if old is not None:  # the rows it held, from its filled range
            rows[old.lo - lo:old.hi - lo] = old.rows[old.lo - old.first:old.hi - old.first]
            r0, r1 = old.lo, old.hi
        else:
            r0 = r1 = lo
        self.entry = _Entry(rows, lo, lo, lo)
        return (rows, lo, r0, r1, self.f0, self.f1)

    def _release(self) -> None:
        for e in (self.entry, self.old):
            if e is not None:
                e.filling = False

    def done(self) -> None:
        e = self.entry
        with _LOCK:
            self._release()
            if e is None:
                return  # no buffer could be made: nothing kept
            e.lo, e.hi = self.lo, self.hi
            e.hit = (e.rows, e.first, self.lo, self.hi, self.lo, self.lo)
            cur = _ENTRIES.get(self.key)
            if cur is e:
                _ENTRIES.move_to_end(self.key)
                return  # filled in its own buffer: the filled range grew
            if cur is not None:
                _STATS["used"] -= cur.rows.nbytes
                del _ENTRIES[self.key]
                _forgotten()
            _evict(e.rows.nbytes)
            if _STATS["used"] + e.rows.nbytes <= _STATS["budget"]:
                _ENTRIES[self.key] = e
                _STATS["used"] += e.rows.nbytes

    def failed(self) -> None:
        """The call raised (or was interrupted): the entry keeps its filled rows only."""
        with _LOCK:
            self._release()


def lease(core: Opts, d: Any, base: Any, lo: int, hi: int, tensor_rows: int) -> Any:
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
    if e is not None and e.lo <= lo and hi <= e.hi:
        hit = e.hit
        _touch(key)
        _STATS["hits"] += 1
        return hit
    return _miss(key, d, lo, hi, budget)


def _fresh(rows: int, d: int) -> np.ndarray:
    """An entry's buffer: from 4 MiB on advised to use transparent huge pages as fresh tables
    are (a first call writes every page of it; 2048 page faults cost about 0.5 ms)."""
    if rows * d * 4 < (4 << 20):
        return np.empty((rows, d), np.float32)
    return _jobs.empty_table(policy.opts(), rows, d)


def _miss(key: Key, d: int, lo: int, hi: int, budget: int) -> Optional[Lease]:
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
            e.filling = True
            _ENTRIES.move_to_end(key)
            return Lease(key, None, new_lo, new_hi, f0, f1, own=e)
        n = new_hi - new_lo
        if n * d * 4 > min(budget, _quarter()):
            return None  # a buffer that large would weigh on the call's own memory rule
        cap = max(n, 2 * (e.hi - e.lo)) if e is not None else n  # room to grow into
        if type(key) is CoupledKey:  # coupled lanes: no rows past torch's tensor
            cap = min(cap, key.tensor_rows - new_lo)
        if cap * d * 4 > min(budget, _quarter()):  # the largest buffer the rule allows: a
            cap = max(n, min(budget, _quarter()) // (d * 4))  # growing entry is copied once,
            #  not at every step (a decoder's one row per call), and stops being kept there
        if e is not None:
            e.filling = True
        lease_ = Lease(key, e, new_lo, new_hi, f0, f1, cap=cap, d=d)
        return lease_


def add_rows(core: Opts, x: Any, base: Any, offset: Any, positions: Any, table_rows: Any,
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


def table_rows_lease(core: Opts, rows: Any, d: Any, base: Any, offset: Any,
                     positions: Any) -> Any:
    """The lease of a table: rows offset .. offset + rows - 1, or by positions."""
    if positions is None:
        n, off = _plain_int(rows), _plain_int(offset)
        if n is None or off is None or n <= 0 or off < 0 or off > (1 << 62):
            return None
        return lease(core, d, base, off, off + n, off + n)
    return _position_rows(core, d, base, positions)


def _position_rows(core: Opts, d: Any, base: Any, positions: Any) -> Any:
    if not records.INDEPENDENT[core.backend] or not isinstance(positions, np.ndarray) \
            or positions.dtype.kind not in "iu" or positions.size == 0:
        return None
    # a guess (a masked array's mask, another thread's writes may make it wrong): the core
    # reads only the rows the cache filled and computes any other
    top = int(np.asarray(positions).max())
    if top < 0 or top >= 1 << 24:  # float32 holds every integer below 2^24
        return None
    if top >= 4 * positions.size + 4096:  # rows 0 .. top would cost far more than the call's
        return None                       # own (a decoder's positions=[t]): not kept
    return lease(core, d, base, 0, top + 1, 0)


# ---- whole results kept by their arguments (apply_rope's cos/sin) --------------------------

def rope_key(core: Opts, rot: int, theta: float, layout: str, seq: int, offset: int,
             pos: Any) -> Optional[RopeKey]:
    """apply_rope's tables by everything they depend on (positions by their bytes, up to
    64 KiB of them); None: not kept."""
    if pos is None:
        where: Any = ("offset", offset)
    elif isinstance(pos, np.ndarray) and pos.nbytes <= 1 << 16:
        where = (pos.dtype.str, pos.shape, pos.tobytes())
    else:
        return None
    return RopeKey(core.backend, core.path, core.trig, core.lanes, core.torch_threads,
                   core.pow_lanes, rot, theta, layout, seq, where)


def memo_get(key: Optional[Key]) -> Optional[np.ndarray]:
    """A kept result (read-only), or None."""
    if key is None or _STATS["budget"] <= 0:
        return None
    e = _ENTRIES.get(key)
    if e is None:
        return None
    _touch(key)
    _STATS["hits"] += 1
    return e.rows


def memo_put(key: Optional[Key], value: np.ndarray) -> None:
    """Keep a result (made read-only) if it fits the budget and is worth keeping."""
    if key is None or value.size < MIN_VALUES:
        return
    with _LOCK:
        _STATS["misses"] += 1
        if value.nbytes > _STATS["budget"] or key in _ENTRIES:
            return
        value.flags.writeable = False
        _evict(value.nbytes)
        if _STATS["used"] + value.nbytes <= _STATS["budget"]:
            _ENTRIES[key] = _Entry(value, 0, 0, 0)
            _STATS["used"] += value.nbytes


# ---- apply_rope's cos/sin rows by position (a decode step reads the rows it has seen) ------

class RowsKey(NamedTuple):
    """apply_rope's cos/sin rows of one frequency vector, by position: everything a row's
    bits depend on but the position (backends whose rows do not couple only): the core's
    options but its threads (backend, path, trig, lanes, torch_threads, pow_lanes), rot, base,
    layout and the rounding to a half type."""
    opts: Tuple[Any, ...]
    rot: int
    theta: float
    layout: str
    rounded: Optional[str] = None  # the rows rounded to a half type (apply_rope's halves)


#: the rows past a call's last that a fill computes with it: a decode step computes the next
#: ROPE_STEP rows once, then reads them (a core call per ROPE_STEP steps)
ROPE_STEP = 64
#: positions past this are not kept by position (float32 holds every integer below it)
ROPE_TOP = 1 << 24
_ROPE_FILL = threading.RLock()  # one filler at a time; a rounded fill reads the float32 rows


def rows_key(core: Opts, rot: int, theta: float, layout: str,
             rounded: Optional[str] = None) -> Optional[RowsKey]:
    """The key of apply_rope's rows by position; None when rows couple (SLEEF's lanes: a
    row's bits depend on the tensor it was computed in) or the cache is off."""
    if not records.INDEPENDENT[core.backend] or _STATS["budget"] <= 0:
        return None
    return RowsKey((core.backend, core.path, core.trig, core.lanes, core.torch_threads,
                    core.pow_lanes), rot, theta, layout, rounded)


def rope_rows(key: Optional[RowsKey], lo: int, hi: int, itemsize: int,
              fill: Callable[[np.ndarray, int], None]) -> Optional[Tuple[np.ndarray, int]]:
    """(rows, first): a kept array (2, n, rot) whose row r holds position first + r
    (cos, then sin), positions lo .. hi - 1 among them; the missing ones computed by
    fill(out, start) (out: a (2, m, rot) view for positions start .. start + m - 1).  None:
    not kept (the window would pass a quarter of the budget, or positions past ROPE_TOP).
    The rows of a window are written once, before they are published, and never again:
    a reader holds its view whatever a later call grows or evicts."""
    if key is None or lo < 0 or hi > ROPE_TOP or hi <= lo or _STATS["budget"] <= 0:
        return None
    e = _ENTRIES.get(key)
    if e is not None:
        rows, first, _, filled = e.hit[:4]
        if first <= lo and hi <= filled:
            try:  # marked used: one C-level step under the GIL (the lock is for fills)
                _ENTRIES.move_to_end(key)
            except KeyError:  # evicted meanwhile: the rows stay valid for this call
                pass
            _STATS["hits"] += 1
            return rows, first
    row_bytes = 2 * key.rot * itemsize
    most = _STATS["budget"] // 4 // row_bytes
    if hi - lo > most:
        return None
    with _ROPE_FILL:
        return _grow(key, lo, hi, most, fill)


def _grow(key: RowsKey, lo: int, hi: int, most: int,
          fill: Callable[[np.ndarray, int], None]) -> Tuple[np.ndarray, int]:
    """rope_rows' miss, under _ROPE_FILL: the entry's window extended (in its buffer, or a
    buffer twice as long with its rows copied) or started again at lo, filled to hi and
    ROPE_STEP rows past it."""
    e = _ENTRIES.get(key)
    if e is not None:
        rows, first, _, filled = e.hit[:4]
        if first <= lo and hi <= filled:
            return rows, first
    _STATS["misses"] += 1
    end = min(hi + ROPE_STEP, ROPE_TOP)
    if e is not None and first <= lo and end - first <= most:
        cap = rows.shape[1]
        if end - first > cap:  # a longer buffer (rows never move inside one)
            grown = np.empty((2, min(max(2 * cap, end - first), most), key.rot), rows.dtype)
            grown[:, :filled - first] = rows[:, :filled - first]
            rows = grown
        start = filled
    else:  # a new window at lo
        first = start = lo
        rows = np.empty((2, min(max(end - lo, 2 * ROPE_STEP), most), key.rot),
                        np.float32 if key.rounded is None else key.rounded)
    end = min(end, first + rows.shape[1])
    fill(rows[:, start - first:end - first], start)
    _publish(key, rows, first, end)
    return rows, first


def _publish(key: RowsKey, rows: np.ndarray, first: int, end: int) -> None:
    """The window's rows first .. end - 1 readable: its entry updated in place when its buffer
    is the same, else replaced (the budget counts the new buffer)."""
    with _LOCK:
        cur = _ENTRIES.get(key)
        if cur is not None and cur.rows is rows:
            cur.hi = end
            cur.hit = (rows, first, first, end, first, first)
            _ENTRIES.move_to_end(key)
            return
        if cur is not None:
            _STATS["used"] -= cur.rows.nbytes
            del _ENTRIES[key]
            _forgotten()
        _evict(rows.nbytes)
        if _STATS["used"] + rows.nbytes <= _STATS["budget"]:
            e = _Entry(rows, first, first, end)
            _ENTRIES[key] = e
            _STATS["used"] += rows.nbytes
