from typing import (Any, Callable, Dict, List, Literal, Optional, SupportsFloat, SupportsIndex,
                    TypeVar, Union)

import numpy as np
import numpy.typing as npt

_Name = Literal["auto", "builtin", "mkl", "torch", "sleef", "torch-aarch64-2.13",
                "torch-aarch64-2.13-sve256", "torch-aarch64-2.14", "torch-aarch64-2.14-sve256",
                "torch-aarch64-2.15", "torch-aarch64-2.15-sve256"]
_Backend = Optional[_Name]
_Kernel = Literal["scalar", "avx2", "avx512", "neon"]
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
    torch_threads: Optional[SupportsIndex] = ...,
    threads: Optional[SupportsIndex] = ...,
) -> Any: ...
def empty_table(
    max_len: SupportsIndex,
    d_model: SupportsIndex,
    base: SupportsFloat = ...,
    *,
    dtype: _DType = ...,
    backend: _Backend = ...,
    torch_threads: Optional[SupportsIndex] = ...,
    threads: Optional[SupportsIndex] = ...,
) -> Any: ...
def add_pe(
    x: _X,
    /,
    base: SupportsFloat = ...,
    *,
    offset: SupportsIndex = ...,
    positions: Optional[npt.ArrayLike] = ...,
    max_len: Optional[SupportsIndex] = ...,
    backend: _Backend = ...,
    torch_threads: Optional[SupportsIndex] = ...,
    threads: Optional[SupportsIndex] = ...,
) -> _X: ...
def elementwise(
    func: Literal["exp", "sin", "cos"], x: npt.NDArray[np.float32], /, *, backend: _Backend = ...,
    torch_threads: Optional[SupportsIndex] = ...
) -> npt.NDArray[np.float32]: ...
def _round(x: npt.NDArray[np.float32], dtype: _DType, /) -> Any: ...
def load_vml(library: Literal["mkl", "torch"], path: str, /) -> None: ...
def vml_info(library: Literal["mkl", "torch"], /) -> Optional[Dict[str, Any]]: ...
def _set_resolver(resolve: Callable[[str], str], /) -> None: ...
def cpu_features() -> Dict[str, Any]: ...
def set_backend(name: _Name, /) -> None: ...
def get_backend() -> str: ...
def _get_default() -> str: ...
def set_threads(n: SupportsIndex, /) -> None: ...
def get_threads() -> int: ...
def kernels() -> List[str]: ...
def set_kernel(name: _Kernel, /) -> None: ...
def get_kernel() -> _Kernel: ...
def _freqs(
    kind: Literal["exp_mul", "exp_muldiv", "pow", "pow64"], n: SupportsIndex, /, *,
    start: int = ..., step: int = ..., group: int = ..., a: float = ..., b: float = ...,
    m: float = ..., base: float = ..., recip: bool = ..., pow_lanes: int = ...,
    backend: _Backend = ..., torch_threads: Optional[SupportsIndex] = ...
) -> Any: ...
def _preset_table(
    rows: Any, freq: Any, col: Any, /, *, comp: Any = ..., scale: Optional[float] = ...,
    zero_row: int = ..., trow_shift: int = ..., f64_div: bool = ..., offset: SupportsIndex = ...,
    table_rows: int = ..., dtype: _DType = ..., out: Any = ..., backend: _Backend = ...,
    torch_threads: Optional[SupportsIndex] = ..., threads: Optional[SupportsIndex] = ...
) -> Any: ...
def _rope(
    x: _X, cos: Any, sin: Any, /, *, seq_axis: int, batch_axis: int = ..., pairs: bool = ...,
    threads: Optional[SupportsIndex] = ...
) -> _X: ...
