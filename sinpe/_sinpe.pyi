from typing import Any, Dict, List, Literal, Optional, SupportsFloat, SupportsIndex, TypeVar, Union

import numpy as np
import numpy.typing as npt

_Backend = Optional[Literal["builtin", "mkl"]]
_Kernel = Literal["scalar", "avx2", "neon"]
_DType = Union[None, str, npt.DTypeLike, Any]
_X = TypeVar("_X")

def positional_encoding(
    max_len: Optional[SupportsIndex] = ...,
    d_model: Optional[SupportsIndex] = ...,
    base: SupportsFloat = ...,
    *,
    positions: Optional[npt.ArrayLike] = ...,
    offset: SupportsIndex = ...,
    dtype: _DType = ...,
    out: Any = ...,
    backend: _Backend = ...,
    threads: Optional[SupportsIndex] = ...,
) -> Any: ...
def empty_table(
    max_len: SupportsIndex,
    d_model: SupportsIndex,
    base: SupportsFloat = ...,
    *,
    dtype: _DType = ...,
    backend: _Backend = ...,
    threads: Optional[SupportsIndex] = ...,
) -> Any: ...
def add_pe(
    x: _X,
    /,
    base: SupportsFloat = ...,
    *,
    offset: SupportsIndex = ...,
    positions: Optional[npt.ArrayLike] = ...,
    backend: _Backend = ...,
    threads: Optional[SupportsIndex] = ...,
) -> _X: ...
def elementwise(
    func: Literal["exp", "sin", "cos"], x: npt.NDArray[np.float32], /, *, backend: _Backend = ...
) -> npt.NDArray[np.float32]: ...
def _round(x: npt.NDArray[np.float32], dtype: _DType, /) -> Any: ...
def load_mkl(path: str, /) -> None: ...
def _set_mkl_unavailable(reason: str, /) -> None: ...
def mkl_info() -> Dict[str, Any]: ...
def set_backend(name: Literal["builtin", "mkl"], /) -> None: ...
def get_backend() -> Literal["builtin", "mkl"]: ...
def set_threads(n: SupportsIndex, /) -> None: ...
def get_threads() -> int: ...
def kernels() -> List[str]: ...
def set_kernel(name: _Kernel, /) -> None: ...
def get_kernel() -> _Kernel: ...
