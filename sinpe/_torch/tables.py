"""Tables and additions with torch tensors: :func:`add_pe` (in place, the operator
``torch.ops.sinpe.add_pe`` while torch traces), :func:`to_torch` (NumPy results, ml_dtypes'
bfloat16 included, as tensors without a copy) and :func:`preset` (every preset with tensors out).
"""
from __future__ import annotations

from typing import Any, Optional

import torch

from .._api import _add_pe_kernel, add_pe_operator
from .._tensors import to_torch
from .operators import OPERATORS, use_operator



def add_pe_op() -> Any:
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
    if OPERATORS and use_operator(x, positions) \
            and not isinstance(base, bool) and isinstance(base, (int, float)) \
            and type(offset) is int and (max_len is None or type(max_len) is int) \
            and (backend is None or isinstance(backend, str)):
        add_pe_op()(x, float(base), offset, positions, max_len, backend)
        return x
    _add_pe_kernel(x, base, offset, positions, max_len, backend)
    return x


def dtype_name(dtype: Any) -> Any:
    return str(dtype).replace("torch.", "") if isinstance(dtype, torch.dtype) else dtype


def preset(name: str, *args: Any, dtype: Any = None, device: Any = None, **kw: Any) -> Any:
    """``sinpe.presets.<name>(*args, **kw)`` with torch tensors out: dtype a torch dtype
    (torch.bfloat16 included) or any spelling the preset takes, device where the result goes
    (computed on the CPU, copied if the device is another).  The preset writes into a NumPy
    array that the tensor then shares (no copy), or, with ``out=`` a CPU torch tensor, into
    that tensor (returned).  Presets without dtype= (positions, slopes) are converted as they
    come; tuples come back as tuples of tensors."""
    from .. import presets
    if not isinstance(name, str) or name not in presets.__all__:
        raise ValueError(f"name must be one of sinpe.presets' functions "
                         f"({', '.join(presets.__all__)}), got {name!r}")
    fn = getattr(presets, name)
    if dtype is not None:
        kw["dtype"] = dtype_name(dtype)
    out = kw.get("out")
    res = fn(*args, **kw)
    if isinstance(out, torch.Tensor):
        return out if device is None else out.to(device)
    return to_torch(res, device)


if OPERATORS:  # the operator at import (never inside a trace)
    add_pe_op()
