"""The public functions: names and defaults resolved here (sinpe._backends.policy), everything
else done by one core job each (sinpe._jobs: pe_table, add_job, map_job; the jobs shared with
the presets and the rope too)."""
from __future__ import annotations

import sys
from typing import Any, Literal, Optional, SupportsFloat, SupportsIndex

import numpy as np
import numpy.typing as npt

from . import _cache, _held, _jobs, _tensors
from ._backends.policy import get_default as _default_backend, opts as _opts, torch_kernels
from ._types import Backend, DType, X

_FUNCS = {"exp": 0, "sin": 1, "cos": 2}


def positional_encoding(max_len: Optional[SupportsIndex] = None,
                        d_model: Optional[SupportsIndex] = None, base: SupportsFloat = 10000.0,
                        *, positions: Optional[npt.ArrayLike] = None, offset: SupportsIndex = 0,
                        dtype: DType = None, out: Any = None, backend: Backend = None,
                        torch_threads: Optional[SupportsIndex] = None,
                        threads: Optional[SupportsIndex] = None) -> Any:
    """Sinusoidal positional-encoding table, shape (max_len, d_model).

    pe[pos, 2i] = sin(pos * div[i]) and pe[pos, 2i+1] = cos(pos * div[i]) with
    div[i] = exp(2i * -log(base) / d_model), computed step by step in float32 as the
    reference PyTorch module does (bit for bit with torch on the backends with torch's bits).

    offset: the first row's position (rows offset .. offset+max_len-1).
    positions: instead of max_len, an array of positions of any shape (integers, or reals
        rounded to float32 as torch's .float() does; negative and fractional positions work);
        the result has shape positions.shape + (d_model,).
    dtype: float32 (default), float16, bfloat16 (with ml_dtypes) or float64, in any spelling
        np.dtype accepts (or a torch dtype); rounded from the float32 values as torch's
        .half(), .bfloat16() and .double() round them.
    out: a writable array or buffer (NumPy array, memoryview, ctypes array, the NumPy view of
        a torch CPU tensor) of the result's shape, or of (1, max_len, d_model), in any layout
        whose elements do not share memory; filled and returned.  Its dtype is the result's
        (dtype= must agree).
    backend: None (sinpe.get_backend(): 'auto' chooses torch's bits when it can), 'torch'
        (the installed torch's own kernels), 'mkl' (the mkl wheel), 'builtin' (correctly
        rounded), 'sleef' or a 'torch-aarch64-...' profile (torch on 64-bit Arm).
    torch_threads: for the 'sleef' profiles, torch's thread count (its vectors depend on it);
        None: the running torch's, or torch's default.
    threads: worker threads (None: sinpe.get_threads()); the bits do not depend on it.
    """
    if d_model is None:
        raise TypeError("positional_encoding() needs d_model")
    if (max_len is None) == (positions is None):
        raise TypeError("positional_encoding() needs exactly one of max_len and positions")
    plain = positions is None and dtype is None and out is None and threads is None \
        and torch_threads is None
    if plain:
        key = _held.table(max_len, d_model, base, offset, backend)  # a copy of held rows
        if type(key) is np.ndarray:
            return key
    core = _opts(backend, threads, torch_threads)
    positions = _tensors.values(positions, "positions")
    if _tensors.writable(out, "out"):  # written outside autograd, as torch's out= moves
        _jobs.bump_version(out)  # its version (refused writes leave it moved: harmless)
    r = _leased(lambda: _cache.table_rows_lease(core, max_len, d_model, base, offset,
                                                positions), _jobs.pe_table, core, out, max_len,
                d_model, base, offset, positions, dtype)
    if plain:
        _held.keep_table(core, key, max_len, d_model, offset)
    return r


def _leased(get: Any, f: Any, *args: Any) -> Any:
    """f(*args, kept): a core call with the cache's rows (get() gives None: none; a tuple:
    kept rows read as they are; a Lease: rows to fill, settled after the call whatever it
    raises).  Every argument is made before the lease is taken."""
    lease = get()
    if lease is None or type(lease) is tuple:
        return f(*args, lease)
    try:
        r = f(*args, lease.kept)
    except BaseException:
        lease.failed()
        raise
    lease.done()
    return r


def add_pe(x: X, /, base: SupportsFloat = 10000.0, *, offset: SupportsIndex = 0,
           positions: Optional[npt.ArrayLike] = None, max_len: Optional[SupportsIndex] = None,
           backend: Backend = None, torch_threads: Optional[SupportsIndex] = None,
           threads: Optional[SupportsIndex] = None) -> X:
    """Add the positional encoding to x in place and return x.

    x: a writable array of shape (seq_len, d_model) or (..., seq_len, d_model), dtype
        float32, float16, bfloat16 or float64, in any layout whose elements do not share
        memory (NumPy arrays and buffer-protocol objects).  Rows offset .. offset+seq_len-1
        of the table are added to every element of the leading axes, bit for bit as the
        reference forward in eval mode (float32; other dtypes as torch's in-place
        x.add_(pe)).  Rows are computed, so there is no max_len limit.
    positions: instead of offset, positions broadcastable to x.shape[:-1] (for packed
        sequences whose positions restart).
    max_len: the length of the table the rows come from (the reference module's max_len;
        None: 5000, or offset+seq_len if larger); only the 'sleef' profiles' bits can
        depend on it.  backend, torch_threads, threads: as for positional_encoding.
    """
    if type(x) is not np.ndarray and _traced(x):  # torch.compile or torch.export traces x
        if _add_pe_traced(x, base, offset, positions, max_len, backend, torch_threads, threads):
            return x
    plain = positions is None and max_len is None and threads is None and torch_threads is None
    if plain:
        key = _held.add(x, base, offset, backend)  # rows held for x's own library's add
        if key is True:
            return x
    table_rows, grow = (5000, True) if max_len is None else (max_len, False)
    core = _opts(backend, threads, torch_threads)
    positions = _tensors.values(positions, "positions")
    if _tensors.writable(x, "x"):  # about to be written outside autograd: its version
        _jobs.bump_version(x)  # moves first, so no signal's handler runs between the write
    _leased(lambda: _cache.add_rows(core, x, base, offset, positions, table_rows, grow),
            _jobs.add_job, core, x, base, offset, positions, table_rows, grow)  # and the move
    if plain:
        _held.keep(core, x, key, offset)
    return x


# ---- add_pe as torch's operator --------------------------------------------------------------
#
# torch.compile (Dynamo) cannot trace the core (a C function it skips), so while torch traces a
# call on a torch tensor (torch.compile, torch.export; or on fake tensors, which hold no data)
# add_pe is the operator torch.ops.sinpe.add_pe: one node of the graph, whose kernel
# is add_pe itself.  It is registered here, the first time it is needed (torch is imported
# then: a torch tensor exists), so that sinpe.add_pe compiles without sinpe.torch;
# sinpe.torch's add_pe is the same operator.

_MODULES = sys.modules
_ADD_PE: Any = None


def _add_pe_kernel(x: Any, base: float, offset: int, positions: Any, max_len: Optional[int],
                   backend: Any) -> None:
    """torch.ops.sinpe.add_pe's kernel: add_pe (backend None: the kernels of the torch in this
    process, sinpe.torch.add_pe's default; sinpe.add_pe's own calls name their backend)."""
    name: Any = torch_kernels() if backend is None else backend
    add_pe(x, base, offset=offset, positions=positions, max_len=max_len, backend=name)


def _add_pe_fake(x: Any, base: float, offset: int, positions: Any, max_len: Optional[int],
                 backend: Optional[str]) -> None:
    return None  # x is written in place: no output, nothing to say about shapes


def add_pe_operator() -> Any:
    """torch.ops.sinpe.add_pe, registered once per process (an operator of that name that
    already exists is reused: sinpe imported again); None when the imported torch has no
    custom operators (before 2.4).  Needs torch imported."""
    global _ADD_PE
    if _ADD_PE is None:
        torch = _MODULES["torch"]
        lib = torch.library
        if not (hasattr(lib, "custom_op") and hasattr(lib, "register_autograd")):
            return None
        try:
            _ADD_PE = torch.ops.sinpe.add_pe.default
        except (AttributeError, RuntimeError):
            op = lib.custom_op("sinpe::add_pe", _add_pe_kernel, mutates_args=("x",),
                               schema="(Tensor(a!) x, float base, int offset, Tensor? positions, "
                                      "int? max_len, str? backend) -> ()")
            op.register_fake(_add_pe_fake)
            _ADD_PE = op
    return _ADD_PE


def _add_pe_registered() -> bool:
    """Whether torch.ops.sinpe.add_pe exists (registered now if needed)."""
    return add_pe_operator() is not None


# what torch._dynamo.assume_constant_result sets (torch._dynamo is not imported for it): Dynamo
# calls this function for real when it meets it and keeps its result as a constant, so that an
# add_pe traced before anything registered the operator registers it then
_add_pe_registered._dynamo_marked_constant = True  # type: ignore[attr-defined]


#: (torch.Tensor, torch.compiler.is_compiling, FakeTensor) once torch is imported: a tensor's
#: check then costs about 0.13 us (through sys.modules and torch's attributes, 0.2)
_TORCH: Any = None


def _torch_names(torch: Any) -> Any:
    global _TORCH
    _TORCH = (torch.Tensor, torch.compiler.is_compiling,
              torch._subclasses.fake_tensor.FakeTensor)
    return _TORCH


def _traced(x: Any) -> bool:
    """x is a torch tensor that torch.compile or torch.export traces, or a fake tensor
    (no data: the operator's fake kernel is what it gets).  (A meta tensor is refused by the
    eager way, as before: sinpe.torch.add_pe returns it.)"""
    names = _TORCH
    if names is None:
        torch = _MODULES.get("torch")
        if torch is None:
            return False
        names = _torch_names(torch)
    if type(x) is names[0]:
        return bool(names[1]())
    return isinstance(x, names[0]) and (bool(names[1]()) or isinstance(x, names[2]))


def _add_pe_traced(x: Any, base: Any, offset: Any, positions: Any, max_len: Any, backend: Any,
                   torch_threads: Any, threads: Any) -> bool:
    """add_pe as the operator, with the backend add_pe would use now (the default as set,
    'auto' or a pinned name: torch.compile guards it, and compiles again after set_backend);
    False (nothing done) for arguments the operator does not take (threads, torch_threads,
    positions that are not a tensor, base, offset or max_len not plain numbers): then the
    eager way runs (a graph break under torch.compile)."""
    torch = _MODULES["torch"]
    if not (torch_threads is None and threads is None
            and (positions is None or isinstance(positions, torch.Tensor))
            and type(base) in (int, float) and type(offset) is int
            and (max_len is None or type(max_len) is int)
            and (backend is None or isinstance(backend, str))
            and _add_pe_registered()):
        return False
    name = _default_backend() if backend is None else backend
    torch.ops.sinpe.add_pe(x, float(base), offset, positions, max_len, name)
    return True


def elementwise(func: Literal["exp", "sin", "cos"], x: npt.NDArray[np.float32], /, *,
                backend: Backend = None,
                torch_threads: Optional[SupportsIndex] = None) -> npt.NDArray[np.float32]:
    """func(x) elementwise for func in 'exp', 'sin', 'cos' and a float32 ndarray x, as the
    chosen backend computes it.  Returns a new C-contiguous array."""
    if func not in _FUNCS:
        raise ValueError(f"func must be 'exp', 'sin' or 'cos', got {func!r}")
    r: npt.NDArray[np.float32] = _jobs.map_job(_opts(backend, None, torch_threads), _FUNCS[func],
                                                  x)
    return r
