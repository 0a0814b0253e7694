"""dtype= as users spell it: every spelling np.dtype accepts ('f4', '<f4', 'e', 'd'; float
and 'float' are float64, as in NumPy), 'bfloat16' (through ml_dtypes, imported on first use)
and torch dtypes, to the np.dtype the core writes.  One resolver for every entry point."""
from __future__ import annotations

import sys
from typing import Any, Callable, Dict, FrozenSet, List, Tuple

import numpy as np

from ._memo import Memo

TABLE_DTYPES = ("float32", "float16", "bfloat16", "float64")


def _error(obj: Any) -> TypeError:
    return TypeError(f"dtype must be float32, float16, bfloat16 or float64, got {obj!r}")


def bfloat16() -> np.dtype:
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError("dtype bfloat16 needs the ml_dtypes package "
                        "(pip install 'sinpe[bfloat16]')") from None
    d: np.dtype = np.dtype(ml_dtypes.bfloat16)
    return d


def resolve(obj: Any) -> np.dtype:
    """The np.dtype of a dtype= value (None: float32); TypeError for anything but the four
    float types in native byte order."""
    if obj is None:
        return _F32
    try:  # torch dtypes, NumPy dtypes and scalar types, names: resolved once each
        hit = _RESOLVED.get((type(obj), obj))
    except TypeError:  # unhashable: resolved below, which names it
        hit = None
    if hit is not None:
        return hit
    d = _resolve(obj)
    if type(obj) in (str, type) or type(obj).__module__ == "torch":
        _RESOLVED[(type(obj), obj)] = d
    return d


_F32 = np.dtype(np.float32)
#: names, scalar types and torch dtypes, which compare and hash by value (an np.dtype is
#: not kept: one with metadata equals one without, and np.dtype() of it is quick anyway)
_RESOLVED: Memo[Tuple[Any, Any], np.dtype] = Memo(64)


def _resolve(obj: Any) -> np.dtype:
    key = obj
    if type(obj).__name__ == "dtype" and type(obj).__module__ == "torch":
        key = str(obj).replace("torch.", "", 1)
    if isinstance(key, str) and key == "bfloat16":
        return bfloat16()
    if isinstance(key, np.dtype) and key.name == "bfloat16":
        return key
    try:
        d: np.dtype = np.dtype(key)
    except (TypeError, ValueError, SyntaxError):  # NumPy's parser of "f4,(2)" strings raises
        raise _error(obj) from None                # SyntaxError on a bad one (the fuzzer's)
    if d.name not in TABLE_DTYPES:
        raise _error(obj)
    if not d.isnative:
        raise TypeError(f"dtype {obj!r} is not in native byte order: sinpe writes native "
                        "float32, float16, bfloat16 or float64")
    return d


# ---- torch tensors as arguments: one conversion for every entry point ----------------------

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


def _kind_check(torch: Any, t: Any, name: str, cpu: bool = True) -> None:
    """A tensor whose memory the core cannot read as a strided CPU array, refused by name
    (cpu=False: another device is the caller's to copy from)."""
    if getattr(t, "is_nested", False):
        raise TypeError(f"{name} is a nested tensor: sinpe takes strided CPU tensors (one "
                        f"shape); pass each of its tensors (.unbind()) or a padded tensor")
    ft = getattr(getattr(torch, "_C", None), "_functorch", None)
    if ft is not None and (ft.is_batchedtensor(t) or ft.is_gradtrackingtensor(t)
                           or ft.is_functionaltensor(t)):
        raise TypeError(f"{name} is a tensor inside a torch function transform (torch.vmap, "
                        f"torch.func.grad, functionalize): sinpe reads and writes memory "
                        f"directly and cannot be transformed; call it outside on the whole "
                        f"tensor")
    if t.layout != torch.strided:
        raise TypeError(f"{name} must be a strided tensor, got layout {t.layout}")
    if cpu and t.device.type != "cpu":
        raise ValueError(f"{name} is on device {t.device}: sinpe works on CPU tensors")
    if t.device.type == "cpu" and not t.is_meta:
        _storage_check(t, name)


def _storage_check(t: Any, name: str) -> None:
    """A tensor whose elements reach past its storage's end (the storage resized under it,
    an unsafe torch operation) is refused before its memory is touched: neither the export
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


def float_copy(t: Any, name: str) -> Any:
    """A torch tensor's t.float(), its elements first checked inside its storage where that
    is a copy (torch's copy reads past a storage resized under the view without a word)."""
    if t.dtype != torch_of(t).float32 and t.device.type == "cpu":
        _storage_check(t, name)
    return t.float()


_PLAIN_TENSOR_DTYPES: List[FrozenSet[Any]] = []


def plain_tensor_dtypes(torch: Any) -> FrozenSet[Any]:
    """The tensor dtypes whose .numpy() NumPy reads as they are (integers, float32/float64)."""
    if not _PLAIN_TENSOR_DTYPES:
        _PLAIN_TENSOR_DTYPES.append(frozenset({
            torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.float32,
            torch.float64}))
    return _PLAIN_TENSOR_DTYPES[0]


def shape_of(obj: Any, name: str) -> Tuple[int, ...]:
    """The shape of an array-like whose values are not read (a preset's inputs or tensor): a
    nested tensor, which has no one shape, refused by name (any other tensor has one)."""
    torch = torch_of(obj)
    if torch is not None:
        if obj.is_nested:
            _kind_check(torch, obj, name)
        return tuple(obj.shape)
    return np.shape(obj)


def array_arg(obj: Any, name: str) -> Any:
    """An array-like parameter read by a call (positions=, timesteps, t, attention_mask):
    a torch tensor of any dtype and kind as the NumPy array of its values (bfloat16 widened
    exactly, requires-grad detached, negative and conjugate bits resolved) or refused naming
    the parameter; anything else as it is (the core converts and checks it)."""
    torch = torch_of(obj)
    if torch is None:
        return obj
    _kind_check(torch, obj, name)
    t = obj.detach()
    if t.is_complex():
        raise TypeError(f"{name} must hold integers or real numbers, got dtype {t.dtype}")
    if t.dtype == torch.bfloat16:
        t = t.float()  # exact: every bfloat16 is a float32
    t = t.resolve_conj().resolve_neg()
    try:
        return t.numpy()
    except (TypeError, RuntimeError) as exc:
        raise TypeError(f"{name}: a tensor of dtype {t.dtype} cannot be read ({exc})") from None


def writable_tensor(x: Any, name: str) -> bool:
    """True when x is a torch tensor about to be written in place (then its version counter
    moves after the write: bump_version), once it passes torch's own rules for in-place
    writes: not an inference tensor outside inference mode, not nested or transformed."""
    torch = torch_of(x)
    if torch is None:
        return False
    _kind_check(torch, x, name)
    if x.is_inference() and not torch.is_inference_mode_enabled():
        raise ValueError(f"{name} is an inference tensor (made under torch.inference_mode()) "
                         f"and this call is outside inference mode: torch refuses to write it in "
                         f"place there (as its add_ does), and so does sinpe; write a clone, or "
                         f"call inside torch.inference_mode()")
    return True


def bump_version(x: Any) -> None:
    """A torch tensor written outside autograd: its version counter moves, as torch's own
    in-place ops move it (a graph that saved it then refuses to backpropagate).  Inference
    tensors have none."""
    torch = torch_of(x)
    if torch is not None and not x.is_inference():
        torch_seen(torch)
        _TORCH_C[0]((x,))


_TORCH_C: List[Callable[..., Any]] = []  # torch's C-level version bump, once a tensor was written


def torch_seen(torch: Any) -> None:
    """Once per process, when torch tensors reach the core (a tensor written, sinpe.torch
    imported): the C-level routes of _tensor_route."""
    if not _TORCH_C:
        _tensor_route(torch)


def _tensor_route(torch: Any) -> None:
    """Hands the binding torch's C-level export of a tensor (later calls take it instead of
    the Python-level __dlpack__; docs/speed.md) and keeps torch's C-level version bump."""
    from . import _sinpe
    to_dlpack = getattr(torch._C, "_to_dlpack_versioned", None)
    bump = getattr(torch._C, "_increment_version", None)
    if to_dlpack is not None:  # (the held add moves a version in C, right after its write)
        _sinpe.tensor_route(torch.Tensor, to_dlpack, bump)
    _TORCH_C.append(bump if bump is not None else torch.autograd.graph.increment_version)


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


def ndarray_view(out: Any, name: str = "out") -> np.ndarray:
    """An ndarray over out's own memory (an out= the core has already checked: a NumPy
    array, a buffer, a torch CPU tensor of any float dtype, a DLPack exporter), for results
    that are filled by NumPy assignment."""
    if isinstance(out, np.ndarray):
        return out
    torch = torch_of(out)
    if torch is not None:
        _kind_check(torch, out, name)
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
            import sys
            torch = sys.modules.get("torch")  # NumPy reads no bfloat16 export; torch does
            if torch is None:
                raise TypeError(f"{name}: its DLPack export cannot be written here ({exc})") \
                    from None
            return ndarray_view(torch.from_dlpack(out), name)
    raise TypeError(f"{name} must be a writable array or buffer, got {type(out).__name__}")
