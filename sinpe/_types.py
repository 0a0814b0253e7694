"""The types of the public API's parameters (for mypy --strict; the core checks values)."""
from __future__ import annotations

from typing import Any, Literal, Optional, TypeVar, Union

import numpy.typing as npt

Name = Literal["auto", "builtin", "mkl", "torch", "sleef", "torch-aarch64-2.13",
               "torch-aarch64-2.13-sve256", "torch-aarch64-2.14", "torch-aarch64-2.14-sve256",
               "torch-aarch64-2.15", "torch-aarch64-2.15-sve256", "numpy", "tensorflow", "jax",
               "onnxruntime", "numpy-2.4", "tensorflow-2.21", "jax-0.10", "onnxruntime-1.32"]
Backend = Optional[Name]
Kernel = Literal["scalar", "avx2", "avx512", "neon"]
DType = Union[None, str, npt.DTypeLike, Any]
X = TypeVar("X")
