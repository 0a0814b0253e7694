"""add_pe's held route: the cache's rows held as a view of x's own kind and added as a model
holding its `pe` buffer adds it (docs/speed.md, "The held route"): by torch's add_ on a torch
tensor; on an ndarray by the core's held add, called straight from C (NumPy's add for
float64); small positional_encoding tables copied from held rows likewise.

Policy only.  The rows are the cache's (computed by the core, the same bits as the call would
compute), and the add is the one the core's rule names: x + pe rounded once to x's dtype, so
the result's bits are the core's (tests/numerics/test_numerics_held.py checks every dtype and
route).  The route is taken only where it keeps every rule of the core's call, and is faster:
a plain call (no positions, max_len, threads or torch_threads), x of an exact type (a
strided torch CPU tensor that is contiguous, needs no grad, carries no negative bit, is no
inference tensor and is not wrapped by a torch function transform; or a writable C-contiguous
ndarray, aligned and sharing no memory with the rows), and a size up to the route's measured limit for x's dtype.  Anything else returns
False and the call goes the core's way, which checks and names what is wrong.

Views are made after a plain call with offset 0 succeeded through the cache; at most
MAX_VIEWS are held, and they are dropped whenever the cache forgets or replaces an entry
(sinpe._cache.on_forget), so they never keep memory the cache's budget has let go.
"""
from __future__ import annotations

import functools
import math
import sys
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple, Union

import numpy as np

from . import _cache, _jobs, _tensors
from ._backends import policy, records
from ._types import Opts

MAX_VIEWS = 64

#: the largest x (elements) each route takes, by dtype: measured on Zen 4 at 2 threads
#: (docs/speed.md): torch's float32/float64 add_ at every size; the core's held add
#: (float16/bfloat16 tensors, float32/float16/bfloat16 arrays; a second thread from 2^17
#: values on torch's OpenMP workers) and NumPy's float64 add keep up with a job's two threads
#: up to 1-2 M elements
_LIMITS = {
    ("torch", "torch.float32"): 1 << 62, ("torch", "torch.float64"): 1 << 62,
    ("torch", "torch.float16"): 1 << 21, ("torch", "torch.bfloat16"): 1 << 21,
    ("numpy", "float32"): 1 << 21, ("numpy", "float64"): 1 << 21,
    ("numpy", "float16"): 1 << 21, ("numpy", "bfloat16"): 1 << 21,
}

#: float32 tensors of up to this many elements take the core's held add, larger ones torch's
#: add_ (measured, docs/speed.md)
_CORE_FLOAT32 = 1 << 16

class State(NamedTuple):
    """What a call's core options were resolved from: the backend argument, the default as
    set, the code path, and whether torch is imported ('auto' follows it)."""
    backend: Any
    default: Any
    path: int
    torch: bool


class AddKey(NamedTuple):
    """A plain add_pe call's route: x's type, dtype and shape, the exact types and values of
    base and offset, the state, and the default thread count."""
    x_type: Any
    dtype: Any
    shape: Any
    base_type: Any
    base: Any
    offset_type: Any
    offset: Any
    state: State
    threads: int


class TableKey(NamedTuple):
    """A plain positional_encoding call's held rows (kind "table": never an add's key)."""
    kind: str
    max_len_type: Any
    max_len: Any
    d_model_type: Any
    d_model: Any
    base_type: Any
    base: Any
    offset_type: Any
    offset: Any
    state: State


#: the keys are made by tuple.__new__ (one C call: a warm add_pe makes one per call)
_new = tuple.__new__
_VIEWS: Dict[Union[AddKey, TableKey], Any] = {}  # add's routes and table's rows
_STATE = policy._STATE
_MODULES = sys.modules
_STATS = _cache._STATS


def add(x: Any, base: Any, offset: Any, backend: Any) -> Any:
    """x += the held rows by x's own library: True when done; else (nothing written) the
    call's key for keep(), or None when x has no dtype or shape or an argument no hash.

    The key is everything the view depends on: x's type, dtype and shape, the exact types
    and values of base and offset (a subclass's value is never taken for a plain one), and
    the backend as resolved now (the argument, the default, the path, and whether torch is
    imported, which 'auto' follows)."""
    try:
        key = _new(AddKey, (type(x), x.dtype, x.shape, type(base), base, type(offset), offset,
                            _new(State, (backend, _STATE["backend"], _STATE["path"],
                                         "torch" in _MODULES)), _STATE["threads"]))
        route = _VIEWS.get(key)
    except Exception:  # no dtype or shape, an unhashable argument, a nested tensor's shape:
        return None     # the core's way names what is wrong
    if route is not None and route(x):
        _STATS["hits"] += 1
        return True
    return key


#: positional_encoding's tables of up to this many values are copies of held rows (a copy of
#: a few hundred KiB costs less than a core call's fixed cost: docs/speed.md)
TABLE_LIMIT = 1 << 20


def table(max_len: Any, d_model: Any, base: Any, offset: Any, backend: Any) -> Any:
    """A plain positional_encoding call's table as a copy of the held rows; else the call's
    key for keep_table() (None: the arguments have no key)."""
    try:
        key = _new(TableKey, ("table", type(max_len), max_len, type(d_model), d_model,
                              type(base), base, type(offset), offset,
                              _new(State, (backend, _STATE["backend"], _STATE["path"],
                                           "torch" in _MODULES))))
        rows = _VIEWS.get(key)
    except Exception:  # an unhashable argument: the core's way names it
        return None
    if rows is not None:
        _STATS["hits"] += 1
        return rows.copy()
    return key


def keep_table(core: Opts, key: Any, max_len: Any, d_model: Any, offset: Any) -> None:
    """After a plain positional_encoding call that succeeded: hold its rows for table()."""
    if type(key) is not TableKey or type(max_len) is not int or type(d_model) is not int \
            or type(offset) is not int or offset != 0 or not records.INDEPENDENT[core.backend] \
            or not 0 < max_len * d_model <= TABLE_LIMIT:
        return
    if _state_moved(core, key.state):
        return
    _cache.hold_rows(core, d_model, key.base, 0, max_len, lambda rows: _store(key, rows))


def _state_moved(core: Opts, state: State) -> bool:
    """True when the backend's state changed while a call ran (another thread's set_backend
    or set_kernel, torch imported): the key's state (backend argument, default, path, torch)
    is no longer what the call's core options were resolved from, and its rows must not be
    held under that key."""
    now = State(state.backend, _STATE["backend"], _STATE["path"], "torch" in _MODULES)
    o = policy.opts(state.backend)
    return now != state or (o.backend, o.path) != (core.backend, core.path)


def _store(key: Union[AddKey, TableKey], value: Any) -> None:
    """Under the cache's lock (sinpe._cache.hold_rows): an entry forgotten since cannot be
    held."""
    if len(_VIEWS) >= MAX_VIEWS:
        _VIEWS.clear()
    _VIEWS[key] = value


def _modes(torch: Any) -> int:
    """torch function and dispatch modes in force (FakeTensorMode, a TorchFunctionMode, a
    tracer): the route's tensor ops would run under them, so it is not taken."""
    C = torch._C
    return int(C._len_torch_function_stack() + C._len_torch_dispatch_stack())


def _torch_route(torch: Any, rows: np.ndarray, path: int, threads: int,
                 x: Any) -> Callable[[Any], bool]:
    """float16, bfloat16 and small float32: the core's held add through torch's C-level
    DLPack export (torch's add_ with a float32 operand is a casting loop; at small float32 the
    export and the add cost less than add_'s dispatch: 1 x 8 x 64, 0.9 against 1.3 us), which
    moves the version as add_ does; larger float32 and float64: torch's add_ of the rows' view
    (the core's float64 add is a scalar loop)."""
    view = torch.from_numpy(rows)
    plain = _tensors.plain
    C = torch._C
    # the core's held add: half types always, float32 up to 2^16 values (above that torch's
    # add_ was faster: 1 x 1024 x 1024 0.88, 8 x 512 x 512 0.93 of add_'s speed on a Zen 4)
    half = x.dtype in (torch.float16, torch.bfloat16) or (x.dtype == torch.float32
                                                          and x.numel() <= _CORE_FLOAT32)
    _jobs.torch_seen(torch)
    add_held = _jobs.add_held
    values, size = x.numel(), x.element_size()  # every x of the key: its shape and dtype

    def route(x: Any) -> bool:
        if not plain(torch, x) or x.is_inference() \
                or C._len_torch_function_stack() or C._len_torch_dispatch_stack() \
                or x.untyped_storage().nbytes() < (x.storage_offset() + values) * size:
            return False  # (a storage freed or resized under x: the core's way names it)
        if half:
            # the export and the core check the rest: grad, device, neg bit, C order and
            # memory shared with the rows all return False; once written, the binding moves
            # x's version (not an inference tensor: above) before any Python code runs, as
            # torch's add_ moves it
            return bool(add_held(path, threads, rows, x))
        if x.requires_grad or not x.is_cpu or not x.is_contiguous() or x.is_neg():
            return False
        x.add_(view)
        return True
    return route


def _numpy_route(path: int, threads: int, rows: np.ndarray, dtype: Any) -> Callable[[Any], bool]:
    """float32, float16 and bfloat16: the core's held add (sinpe.h: sinpe_add_held), called
    straight from C; it adds only to a writable, C-contiguous, aligned ndarray that shares
    no memory with the rows and returns False (nothing written) for anything else.
    float64: NumPy's add (the core's float64 add is a scalar loop, 1.7x NumPy's)."""
    if dtype != np.float64:
        return functools.partial(_jobs.add_held, path, threads, rows)
    add_, quiet = np.add, np.errstate

    def route(x: Any) -> bool:
        flags = x.flags
        if not (flags.writeable and flags.c_contiguous):
            return False
        # a signalling NaN in x is quieted without a warning, as the core quiets it (an
        # errstate can be entered once: one per call)
        with quiet(all="ignore"):
            add_(x, rows, out=x)
        return True
    return route


def keep(core: Opts, x: Any, key: Any, offset: Any) -> None:
    """After a plain add_pe call that succeeded (key: what add() returned): hold its rows for
    the route, when x's kind, dtype and size have one and the cache holds the rows (offset 0
    only: a decoder's offsets change at every step and would only churn the views)."""
    if type(key) is not AddKey or type(offset) is not int or offset != 0 \
            or not records.INDEPENDENT[core.backend]:
        return
    kind, torch = _kind(x)
    limit = _LIMITS.get((kind, str(x.dtype)), 0)
    shape = tuple(x.shape)
    if len(shape) < 2 or not 0 < math.prod(shape) <= limit:
        return
    if _state_moved(core, key.state) or (torch is not None and _modes(torch)):
        return
    threads = key.threads  # the default in force when the call began (the key says so)
    _cache.hold_rows(core, shape[-1], key.base, 0, shape[-2], lambda rows: _store(
        key, _torch_route(torch, rows, core.path, threads, x) if torch is not None
        else _numpy_route(core.path, threads, rows, x.dtype)))


def _kind(x: Any) -> Tuple[Any, ...]:
    torch = _MODULES.get("torch")
    if torch is not None and type(x) is getattr(torch, "Tensor", None):
        return "torch", torch
    if type(x) is np.ndarray:
        return "numpy", None
    return None, None


def forget() -> None:
    _VIEWS.clear()


_cache.on_forget(forget)


def held() -> Optional[int]:
    """How many views are held (tests)."""
    return len(_VIEWS)
