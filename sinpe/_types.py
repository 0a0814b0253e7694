"""The types of the public API's parameters (for mypy --strict; the core checks values)."""
from __future__ import annotations

from typing import Any, Dict, Literal, Optional, Tuple, TypeVar, Union

import numpy.typing as npt

Name = Literal["auto", "builtin", "mkl", "torch", "sleef", "torch-aarch64-2.13",
               "torch-aarch64-2.13-sve256", "torch-aarch64-2.14", "torch-aarch64-2.14-sve256",
               "torch-aarch64-2.15", "torch-aarch64-2.15-sve256", "numpy", "tensorflow", "jax",
               "onnxruntime", "numpy-2.4", "tensorflow-2.21", "jax-0.10", "onnxruntime-1.32"]
Backend = Optional[Name]
Kernel = Literal["scalar", "avx2", "avx512", "neon"]
DType = Union[None, str, npt.DTypeLike, Any]
X = TypeVar("X")

# ---- the package's own (not the public API's) -----------------------------------------------
#: The core's options for one call, as sinpe._backends.policy.opts resolves them: (backend,
#: path, threads, trig, lanes, torch_threads, pow_lanes) (the binding's _Opts, _sinpe.pyi).
Opts = Tuple[Any, Any, Any, Any, Any, Any, Any]
#: A preset's options, resolved once (sinpe._jobs._opts): {"dtype", "out", "core"}.
PresetOpts = Dict[str, Any]
