"""Tensors at sinpe's entry points: one rule for what sinpe may read or write, one conversion
each way.  torch is never imported here (a tensor's own module is used).

- :func:`refusal` is the rule: why a tensor cannot be read or written as a strided CPU array
  (nested, inside a torch function transform, another layout, another device, no memory),
  named by parameter; :func:`check` raises it, :func:`plain` is its fast yes (no message).
- Each check on one side.  A tensor the core reads or writes goes to the binding, whose export
  of it (DLPack) checks its device, dtype, flags and its storage's bounds
  (``storage_holds``); this module checks what the export cannot say.  Memory Python itself
  reads (:func:`values`, :func:`float_copy`) has its storage's bounds checked here, since the
  binding never sees that tensor.
- :func:`values` (a tensor's values as a NumPy array, as torch's ops read them) and
  :func:`memory` (an ndarray over a tensor's own memory, for results filled by NumPy) one way;
  :func:`to_torch` the other.
- :func:`writable` (a tensor about to be written in place; sinpe._jobs.bump_version moves
  its version after the write: the core's routes of torch are there).
"""
from __future__ import annotations

import sys
from typing import Any, Callable, FrozenSet, List, Optional, Tuple

import numpy as np

from ._dtypes import bfloat16


def torch_of(obj: Any) -> Any:
    """torch (the module) when obj is a torch.Tensor of any subclass (nn.Parameter, user
    subclasses), else None; torch is never imported here."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    t = getattr(torch, "Tensor", ())
    if type(obj) is t or isinstance(obj, t):  # (exact tensors skip the metaclass's check)
        return torch
    return None


# ---- the rule -------------------------------------------------------------------------------

def _transformed(torch: Any, t: Any) -> bool:
    """Inside a torch function transform: vmap's batched tensors, grad's tracking wrappers and
    functionalize's tensors alike."""
    return bool((_WRAPPED[0] if _WRAPPED else _wrapped_of(torch))(t))


_WRAPPED: List[Callable[[Any], Any]] = []


def _wrapped_of(torch: Any) -> Callable[[Any], Any]:
    """torch's predicate of a transformed tensor, looked up once (a decode step asks it at
    every call)."""
    ft = getattr(getattr(torch, "_C", None), "_functorch", None)
    _WRAPPED.append(ft.is_functorch_wrapped_tensor if ft is not None else lambda t: False)
    return _WRAPPED[0]


def refusal(torch: Any, t: Any, name: str, cpu: bool = True) -> Optional[Exception]:
    """Why tensor t cannot be read or written as the strided CPU array it views (None: it
    can), named by parameter (cpu=False: another device is the caller's to copy from)."""
    if getattr(t, "is_nested", False):
        return TypeError(f"{name} is a nested tensor: sinpe takes strided CPU tensors (one "
                         f"shape); pass each of its tensors (.unbind()) or a padded tensor")
    if _transformed(torch, t):
        return TypeError(f"{name} is a tensor inside a torch function transform (torch.vmap, "
                         f"torch.func.grad, functionalize): sinpe reads and writes memory "
                         f"directly and cannot be transformed; call it outside on the whole "
                         f"tensor")
    if t.layout != torch.strided:
        return TypeError(f"{name} must be a strided tensor, got layout {t.layout}")
    if cpu and t.device.type != "cpu":
        return ValueError(f"{name} is on device {t.device}: sinpe works on CPU tensors")
    return None


def check(torch: Any, t: Any, name: str, cpu: bool = True) -> None:
    """The rule, raised (see refusal)."""
    err = refusal(torch, t, name, cpu)
    if err is not None:
        raise err


def plain(torch: Any, t: Any) -> bool:
    """The rule's fast yes, for hot paths that fall back instead of raising: a CPU, strided,
    not nested, not transformed tensor."""
    wrapped = _WRAPPED[0] if _WRAPPED else _wrapped_of(torch)
    return bool(t.is_cpu and t.layout is torch.strided and not t.is_nested and not wrapped(t))


def storage_check(t: Any, name: str) -> None:
    """A tensor whose elements reach past its storage's end (the storage resized under it,
    an unsafe torch operation) is refused before Python reads its memory: neither the export
    (DLPack) nor the tensor says where its storage ends."""
    n = t.numel()
    if n == 0:
        return
    last = t.storage_offset() + sum((k - 1) * st for k, st in zip(t.shape, t.stride()) if st > 0)
    need = (last + 1) * t.element_size()
    have = t.untyped_storage().nbytes()
    if have < need:
        raise ValueError(f"{name}'s elements reach byte {need} of its storage, which holds "
                         f"{have} bytes (the storage was resized under the tensor): sinpe does "
                         f"not touch memory past a storage's end")


def readable(t: Any, name: str, resolve: bool = True) -> Any:
    """A tensor as the core reads it: detached (nothing records the call), its neg bit
    resolved as torch's own ops read it (resolve: not for a tensor written in place); one
    with elements and no memory (a freed storage: NULL data) refused by name."""
    if t is None:
        return t
    if t.requires_grad:
        t = t.detach()
    if resolve and t.is_neg():
        t = t.resolve_neg()
    if t.data_ptr() == 0 and t.numel():
        raise ValueError(f"{name}: the tensor has no memory (a NULL data pointer: its storage "
                         f"was freed or never allocated)")
    return t


def float_copy(t: Any, name: str) -> Any:
    """A torch tensor's t.float(), its elements first checked inside its storage where that
    is a copy (torch's copy reads past a storage resized under the view without a word)."""
    if t.dtype != torch_of(t).float32 and t.device.type == "cpu":
        storage_check(t, name)
    return t.float()


def shape_of(obj: Any, name: str) -> Tuple[int, ...]:
    """The shape of an array-like whose values are not read (a preset's inputs or tensor): a
    nested tensor, which has no one shape, refused by name (any other tensor has one)."""
    torch = torch_of(obj)
    if torch is not None:
        if obj.is_nested:
            check(torch, obj, name)
        return tuple(obj.shape)
    return np.shape(obj)


def writable(x: Any, name: str) -> bool:
    """True when x is a torch tensor about to be written in place (then its version counter
    moves after the write: bump_version), once it passes torch's own rules for in-place
    writes: not an inference tensor outside inference mode, not nested or transformed."""
    torch = torch_of(x)
    if torch is None:
        return False
    check(torch, x, name)
    if x.is_inference() and not torch.is_inference_mode_enabled():
        raise ValueError(f"{name} is an inference tensor (made under torch.inference_mode()) "
                         f"and this call is outside inference mode: torch refuses to write it in "
                         f"place there (as its add_ does), and so does sinpe; write a clone, or "
                         f"call inside torch.inference_mode()")
    return True


# ---- tensors to NumPy: values, memory --------------------------------------------------------

_PLAIN_DTYPES: List[FrozenSet[Any]] = []


def _plain_dtypes(torch: Any) -> FrozenSet[Any]:
    """The tensor dtypes whose .numpy() NumPy reads as they are (integers, float32/float64)."""
    if not _PLAIN_DTYPES:
        _PLAIN_DTYPES.append(frozenset({
            torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.float32,
            torch.float64}))
    return _PLAIN_DTYPES[0]


def _as_is(torch: Any, t: Any) -> bool:
    """A tensor whose .numpy() is its values as torch's ops read them, within its storage: a
    contiguous CPU torch.Tensor of a plain dtype needing no grad, without negative or conjugate
    bits, the rule's fast yes (a decode step's (1, 1) positions: 5 us -> 1 us)."""
    return (type(t) is torch.Tensor and t.dtype in _plain_dtypes(torch) and plain(torch, t)
            and not t.requires_grad and not t.is_neg() and t.is_contiguous()
            and t.untyped_storage().nbytes() >= (t.storage_offset() + t.numel())
            * t.element_size())


def values(obj: Any, name: str, keep_bfloat16: bool = False, any_device: bool = False) -> Any:
    """A tensor argument whose values a call reads (positions=, timesteps, attention masks,
    position_ids) as a NumPy array of its values as torch's ops read them (detached,
    negative and conjugate bits resolved), or refused naming the parameter; bfloat16 widened
    exactly to float32, or kept as ml_dtypes' bfloat16 (keep_bfloat16); any_device: a tensor
    on another device is copied to the CPU (a meta tensor, holding no data, refused).
    Anything else is returned as it is (the core converts and checks it)."""
    torch = torch_of(obj)
    if torch is None:
        return obj
    if _as_is(torch, obj):
        return obj.numpy()
    if any_device and obj.device.type == "meta":
        raise ValueError(f"{name} is a meta tensor (it holds no data)")
    check(torch, obj, name, cpu=not any_device)
    if obj.is_complex():
        raise TypeError(f"{name} must hold integers or real numbers, got dtype {obj.dtype}")
    t = obj.detach().resolve_conj().resolve_neg()
    if t.device.type == "cpu":
        storage_check(t, name)
    t = t.cpu()
    if t.dtype == torch.bfloat16:
        if keep_bfloat16:
            return t.view(torch.int16).numpy().view(bfloat16())
        t = t.float()  # exact: every bfloat16 is a float32
    try:
        return t.numpy()
    except (TypeError, RuntimeError) as exc:  # float8 and the like
        raise TypeError(f"{name}: a tensor of dtype {t.dtype} cannot be read ({exc})") from None


_NUMPY1 = np.lib.NumpyVersion(np.__version__) < "2.0.0"


class _Interface:
    """An ndarray's memory under the array interface, writable (see _writable)."""

    def __init__(self, a: np.ndarray) -> None:
        self.base = a  # keeps the DLPack import, and with it the producer's tensor, alive
        self.__array_interface__ = {"data": (a.ctypes.data, False), "shape": a.shape,
                                    "strides": a.strides, "typestr": a.dtype.str, "version": 3}


def _writable(a: np.ndarray) -> np.ndarray:
    """NumPy 1.x imports every DLPack export read-only (its DLPack 0.x capsule carries no
    read-only flag); the core has already read the export's own flags and refused a
    read-only one, so the same memory is written here as the core would write it."""
    if a.flags.writeable or not a.size or not _NUMPY1:
        return a
    return np.asarray(_Interface(a)).view(a.dtype)


def memory(out: Any, name: str = "out") -> np.ndarray:
    """An ndarray over out's own memory (an out= the core has already checked, its storage's
    bounds included: a NumPy array, a buffer, a torch CPU tensor of any float dtype, a DLPack
    exporter), for results that are filled by NumPy assignment."""
    if isinstance(out, np.ndarray):
        return out
    torch = torch_of(out)
    if torch is not None:
        check(torch, out, name)
        t = out.detach()
        a: np.ndarray = t.view(torch.int16).numpy().view(bfloat16()) \
            if t.dtype == torch.bfloat16 else t.numpy()
        return a
    if hasattr(out, "__array_interface__") or hasattr(out, "__array_struct__"):
        return np.asarray(out)
    try:
        return np.asarray(memoryview(out))
    except TypeError:
        pass
    if hasattr(out, "__dlpack__"):
        try:
            return _writable(np.from_dlpack(out))
        except (TypeError, ValueError, BufferError, RuntimeError) as exc:
            torch = sys.modules.get("torch")  # NumPy reads no bfloat16 export; torch does
            if torch is None:
                raise TypeError(f"{name}: its DLPack export cannot be written here ({exc})") \
                    from None
            return memory(torch.from_dlpack(out), name)
    raise TypeError(f"{name} must be a writable array or buffer, got {type(out).__name__}")


# ---- NumPy to tensors ---------------------------------------------------------------------------

def to_torch(a: Any, device: Any = None) -> Any:
    """A NumPy array (float32, float16, float64, integers, or ml_dtypes bfloat16, which
    ``torch.from_numpy`` refuses) as a torch tensor of the same dtype sharing its memory (no
    copy; a read-only or non-contiguous array is copied once), moved to device if given.  A
    tuple or list of arrays gives a tuple of tensors; a torch tensor is returned as it is
    (moved to device if given)."""
    import torch
    if isinstance(a, (tuple, list)):
        return tuple(to_torch(x, device) for x in a)
    if isinstance(a, torch.Tensor):
        return a if device is None else a.to(device)
    if not isinstance(a, np.ndarray):
        raise TypeError(f"a must be a NumPy array or a tuple of them, got {type(a).__name__}")
    if not (a.flags.c_contiguous and a.flags.writeable):
        a = np.array(a, order="C")
    if a.dtype.name == "bfloat16":
        t = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(a)
    return t if device is None or torch.device(device).type == "cpu" else t.to(device)


# ---- writes and torch's C-level routes -----------------------------------------------------------
