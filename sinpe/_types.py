"""The types of the public API's parameters (for mypy --strict; the core checks values)."""
from __future__ import annotations

from typing import Any, Literal, NamedTuple, Optional, TypeVar, Union

import numpy.typing as npt

Name = Literal["auto", "builtin", "mkl", "torch", "sleef", "torch-aarch64-2.13",
               "torch-aarch64-2.13-sve256", "torch-aarch64-2.14", "torch-aarch64-2.14-sve256",
               "torch-aarch64-2.15", "torch-aarch64-2.15-sve256", "numpy", "tensorflow", "jax",
               "onnxruntime", "mlx", "numpy-2.0", "numpy-2.4", "tensorflow-2.19",
               "tensorflow-2.21", "jax-0.7", "jax-0.8", "jax-0.10", "onnxruntime-1.32",
               "mlx-0.32"]
Backend = Optional[Name]
Kernel = Literal["scalar", "avx2", "avx512", "neon"]
DType = Union[None, str, npt.DTypeLike, Any]
X = TypeVar("X")

# ---- the package's own (not the public API's) -----------------------------------------------
class Opts(NamedTuple):
    """The core's options for one call, as sinpe._backends.policy.opts resolves them (the
    binding's _Opts, _sinpe.pyi: a 7-tuple read by position in C, convert.c to_opts)."""
    backend: int        # the core's backend index (_sinpe.BACKENDS)
    path: int           # the built-in backend's code path (_sinpe.PATHS)
    threads: Any        # worker threads, as given (the core checks them)
    trig: int           # a SLEEF profile's trig (1: u35)
    lanes: int          # a SLEEF profile's lanes
    torch_threads: Any  # torch's thread count for a SLEEF profile, as given (checked by the core)
    pow_lanes: int      # the lanes of torch's pow on x86-64


class PresetOpts(NamedTuple):
    """A call's options, resolved once (sinpe._backends.policy.call_opts): the presets,
    apply_rope and the HF rope carry them to their jobs."""
    dtype: Any          # dtype= as given (None: float32, or out='s own)
    out: Any            # out= as given (None: a fresh result)
    core: Opts          # the core's options (backend, path, threads, ...)
