"""The producers of a rotation: whose arithmetic ``producer=`` reproduces (docs/engines.md).

A rotation's bits depend on who computes it: transformers' eager graph rounds every op in x's
dtype, torch.compile keeps float32 intermediates and rounds once, ONNX Runtime's RoPE kernel
fuses a product into an FMA and reads a half-width cache in x's dtype.  Each is the
core's ROPE job with a form (sinpe.h: ``SINPE_ROPE_*`` flags); this module is the one table of
them: which form, which dtypes and layouts the engine runs on CPU, and why the others are
refused.  Imports nothing of the package.
"""
from __future__ import annotations

from typing import Any, Dict, FrozenSet, NamedTuple, Optional

#: the core's rotation forms (sinpe.h: SINPE_ROPE_*), combined as flags
ONE = 1         # float32 arithmetic, one rounding to x's dtype
FMA = 2         # float32: y0 = fma(x0, c, -(x1 s)), y1 = fma(x0, s, x1 c)
HALF_CACHE = 4  # both elements of a pair read the pair's first column (a rot/2-wide cache)
TAIL16 = 8      # pairs: a last block under 16 columns without FMA after its first pair

_FLOATS = frozenset({"float32", "float16", "bfloat16", "float64"})
_BOTH = frozenset({"half", "pairs"})


class Producer(NamedTuple):
    """One producer's record."""
    name: str                   # producer= as users write it
    engine: str                 # the engine, as its users name it
    form: int                   # the core's rotation form (flags above)
    dtypes: FrozenSet[str]      # the dtypes of x it runs on CPU
    layouts: FrozenSet[str]     # 'half' (rotate-half, NeoX) and/or 'pairs' (interleaved, GPT-J)
    refused: str                # why another dtype is refused (the engine's own limit)


PRODUCERS: Dict[str, Producer] = {p.name: p for p in (
    Producer("transformers", "transformers (eager torch)", 0, _FLOATS, _BOTH, ""),
    Producer("inductor", "torch.compile (inductor, CPU)", ONE, _FLOATS, _BOTH, ""),
    Producer("onnxruntime", "ONNX Runtime's RotaryEmbedding (x86-64 CPU)",
             ONE | FMA | HALF_CACHE | TAIL16,
             frozenset({"float32", "float16"}), _BOTH,
             "its CPU kernel runs float32 and float16 only (no bfloat16 or float64 kernel)"),
)}

#: engines whose rotation sinpe does not reproduce yet, and why (refused by name)
NOT_YET: Dict[str, str] = {
    "openvino": "OpenVINO's RoPE node is not reproduced yet (its interleaved layout takes a "
                "kernel by the serving CPU's vector width)",
    "openvino-bf16": "OpenVINO's bf16 inference is not reproduced yet (its interleaved layout "
                     "takes a kernel by the serving CPU's vector width)",
    "llama.cpp": "llama.cpp's angles (theta scaled per pair by powf, glibc's sinf/cosf) are "
                 "not reproduced yet",
    "mlx": "MLX's own frequencies and sin/cos are not reproduced yet",
}


def form(name: Any, dtype: str, layout: str) -> int:
    """The core's form of producer name's rotation of an x of dtype (its name: 'float32',
    ...) in layout (0: torch's eager ops).  Raises TypeError, ValueError or
    NotImplementedError naming the producer and the reason."""
    p = producer(name, dtype, layout)
    return 0 if p is None else p.form


def producer(name: Any, dtype: str, layout: str) -> Optional[Producer]:
    """The producer's record for a rotation of an x of dtype (its name: 'float32', ...) in
    layout; None for transformers' own bits (producer=None or 'transformers'): the default
    route.  Raises TypeError, ValueError or NotImplementedError naming the producer and the
    reason."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise TypeError(f"producer must be a str or None, got {name!r} ({type(name).__name__})")
    p = PRODUCERS.get(name)
    if p is None:
        if name in NOT_YET:
            raise NotImplementedError(f"producer={name!r}: {NOT_YET[name]}")
        raise ValueError(f"producer must be one of {sorted(PRODUCERS)}, got {name!r}")
    if p.form == 0:  # transformers' own: the call's usual rules
        return None
    if dtype not in _FLOATS:  # not a float type at all: the call's usual rules name it
        return p
    if dtype not in p.dtypes:
        raise ValueError(f"producer={name!r} does not run {dtype}: {p.refused}")
    if layout not in p.layouts:
        raise ValueError(f"producer={name!r} does not run the {layout!r} layout")
    return p
