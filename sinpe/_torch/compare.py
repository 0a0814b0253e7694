"""Outputs compared bit for bit (the patch's proofs): tensors as unsigned-integer views."""
from __future__ import annotations

from typing import Any, List, Tuple

import torch



def _flat(out: Any) -> List[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    raise TypeError(f"not tensors: {type(out).__name__}")


def bits_of(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    t = t.contiguous()
    return t.view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[
        t.element_size()])


def ndiff(want: Any, got: Any) -> Tuple[int, int]:
    """(values that differ in any bit, values) of two outputs; (-1, n) when their shapes,
    dtypes or structure differ."""
    try:
        a, b = _flat(want), _flat(got)
    except TypeError:
        return -1, 0
    n = sum(t.numel() for t in a)
    if len(a) != len(b) or any(x.shape != y.shape or x.dtype != y.dtype for x, y in zip(a, b)):
        return -1, n
    return sum(int((bits_of(x).cpu() != bits_of(y).cpu()).sum()) for x, y in zip(a, b)), n


def same_bits(want: Any, got: Any) -> bool:
    return ndiff(want, got)[0] == 0


