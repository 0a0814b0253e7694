"""The producers of a rotation: whose arithmetic ``producer=`` reproduces (docs/engines.md).

A rotation's bits depend on who computes it: transformers' eager graph rounds every op in x's
dtype, torch.compile keeps float32 intermediates and rounds once, ONNX Runtime's RoPE kernel
fuses a product into an FMA and reads a half-width cache in x's dtype, OpenVINO's node fuses
the same way but picks its interleaved kernel by the serving CPU's vector width, MLX computes
its own frequencies and sin/cos and rounds every op, llama.cpp scales its angles per pair and
fuses like ONNX Runtime.  Each is the core's ROPE job with a form
(sinpe.h: ``SINPE_ROPE_*`` flags), and for MLX its own angles; this module is the one table
of them: the form for an x's dtype, layout and rotated width, which dtypes and layouts the
engine runs on CPU, and why the others are refused.  Imports only the core's CPU record.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, FrozenSet, NamedTuple, Optional, Union

#: the core's rotation forms (sinpe.h: SINPE_ROPE_*), combined as flags
ONE = 1           # float32 arithmetic, one rounding to x's dtype
FMA = 2           # float32: y0 = fma(x0, c, -(x1 s)), y1 = fma(x0, s, x1 c)
HALF_CACHE = 4    # both elements of a pair read the pair's first column (a rot/2-wide cache)
TAIL16 = 8        # pairs: a last block under 16 columns without FMA after its first pair
EACH = 16         # every op rounded in x's dtype, the pairs layout too (MLX's graph)
BF16 = 32         # a float32/float16 x computed in bfloat16 (OpenVINO's default on BF16 CPUs)
OV_TABLES = 64    # the tables as OpenVINO reads them (float32 tables of a bfloat16 x converted)
OV_STORE = 128    # bfloat16 results by OpenVINO's conversion (its C++ loop)
TAIL8 = 256       # pairs: the pairs past the last complete block of 8 columns without FMA

_FLOATS = frozenset({"float32", "float16", "bfloat16", "float64"})
_BOTH = frozenset({"half", "pairs"})
_CPU_FLOATS = frozenset({"float32", "float16", "bfloat16"})

#: a producer's form for an x of dtype in layout with rot of its head_dim columns rotated,
#: on a CPU with vectors of `lanes` float32 lanes (OpenVINO's kernels: 16 with AVX-512, 8
#: with AVX2); a str: why the engine does not run that rotation as sinpe reproduces it
FormRule = Callable[[str, str, int, int, int], Union[int, str]]


class Producer(NamedTuple):
    """One producer's record."""
    name: str                   # producer= as users write it (an OpenVINO name takes ':isa')
    engine: str                 # the engine, as its users name it
    rule: FormRule              # the core's rotation form
    dtypes: FrozenSet[str]      # the dtypes of x it runs on CPU
    layouts: FrozenSet[str]     # 'half' (rotate-half, NeoX) and/or 'pairs' (interleaved, GPT-J)
    refused: str                # why another dtype is refused (the engine's own limit)
    angles: str = ""            # "": transformers' tables from positions; else the engine's own
    isa: bool = False           # the form depends on the serving CPU's vector width


class Resolved(NamedTuple):
    """A producer's rotation of one x: its record and the core's form."""
    p: Producer
    form: int


def _fixed(form: int) -> FormRule:
    return lambda dtype, layout, rot, d, lanes: form


def _openvino(bf16: bool) -> FormRule:
    """OpenVINO 2026.4's fused RoPE node on x86-64 (docs/engines.md): the halves by its JIT
    kernel (FMA); the interleaved pairs by its JIT kernel when rot is a multiple of two
    vectors, else by its C++ loop (no FMA; bfloat16 stores by its own conversion); both
    elements of a pair read the pair's first column there.  Interleaved pairs over the whole
    head (rot == head_dim) are not fused: its Eltwise ops run them in float32.  bf16: its default precision on
    CPUs with AVX512-BF16, which computes float32 and float16 models in bfloat16."""
    def rule(dtype: str, layout: str, rot: int, d: int, lanes: int) -> Union[int, str]:
        if layout == "pairs" and dtype == "bfloat16":
            return ("OpenVINO does not fuse the interleaved rotation of a bfloat16 x into its "
                    "RoPE node; the graph it runs op by op then is not reproduced")
        if layout == "pairs" and rot >= d:  # not fused (GPT-J's pattern has pass-through
            # columns): its op-by-op graph, measured: float32, no FMA, one rounding, at
            # either precision
            return HALF_CACHE | OV_TABLES | (ONE if dtype != "float32" else 0)
        form = FMA | OV_TABLES | (ONE if dtype != "float32" else 0)
        if bf16 and dtype != "bfloat16":
            form |= BF16
        if layout == "pairs":
            form |= HALF_CACHE
            if rot % (2 * lanes):
                form = (form & ~FMA) | (OV_STORE if form & BF16 or dtype == "bfloat16" else 0)
        return form
    return rule


def _llama(dtype: str, layout: str, rot: int, d: int, lanes: int) -> Union[int, str]:
    """llama.cpp's ggml (CPU, gcc 12 -O3 -march=native on x86-64): its float32 cache read as
    it is; the FMA form for every pair, but in float32 NORMAL mode (the pairs) the last
    (rot / 2) % 4 pairs, which gcc's vectorised loop leaves to scalar code without FMA;
    float16: float32 arithmetic, one rounding."""
    if dtype == "float32":
        return FMA | OV_TABLES | (TAIL8 if layout == "pairs" else 0)
    return ONE | FMA | OV_TABLES


PRODUCERS: Dict[str, Producer] = {p.name: p for p in (
    Producer("transformers", "transformers (eager torch)", _fixed(0), _FLOATS, _BOTH, ""),
    Producer("inductor", "torch.compile (inductor, CPU)", _fixed(ONE), _FLOATS, _BOTH, ""),
    Producer("onnxruntime", "ONNX Runtime's RotaryEmbedding (x86-64 CPU)",
             _fixed(ONE | FMA | HALF_CACHE | TAIL16), frozenset({"float32", "float16"}), _BOTH,
             "its CPU kernel runs float32 and float16 only (no bfloat16 or float64 kernel)"),
    Producer("openvino", "OpenVINO's RoPE node (x86-64 CPU, inference precision f32)",
             _openvino(False), _CPU_FLOATS, _BOTH,
             "its CPU plugin runs float32, float16 and bfloat16 (no float64 kernel)", isa=True),
    Producer("openvino-bf16", "OpenVINO's RoPE node (x86-64 CPU with AVX512-BF16, its default "
             "bfloat16 inference precision)", _openvino(True), _CPU_FLOATS, _BOTH,
             "its CPU plugin runs float32, float16 and bfloat16 (no float64 kernel)", isa=True),
    Producer("mlx", "MLX's mx.fast.rope (CPU)", _fixed(EACH), _CPU_FLOATS, _BOTH,
             "mx.fast.rope runs float32, float16 and bfloat16 (no float64)", angles="mlx"),
    Producer("llama.cpp", "llama.cpp's ggml_rope_ext (ggml CPU, x86-64; NEOX for the halves, "
             "NORMAL for the pairs)", _llama, frozenset({"float32", "float16"}), _BOTH,
             "ggml's CPU rope runs float32 and float16 only (no bfloat16 or float64)",
             angles="llama.cpp"),
)}

#: the serving CPU's float32 lanes by the ISA an OpenVINO name gives ('openvino:avx2')
ISAS = {"avx2": 8, "avx512": 16}


def _lanes(name: str, isa: str) -> int:
    """The float32 lanes of the CPU an OpenVINO producer serves on: its ':isa', else this
    machine's (AVX-512: 16, else AVX2: 8; another architecture must name one)."""
    if isa:
        if isa not in ISAS:
            raise ValueError(f"producer={name!r}: the serving CPU must be one of "
                             f"{sorted(ISAS)} (e.g. 'openvino:avx2'), got {isa!r}")
        return ISAS[isa]
    from . import _jobs
    cpu = _jobs.registry()["cpu"]
    if cpu.get("avx512f"):
        return ISAS["avx512"]
    if cpu.get("avx2"):
        return ISAS["avx2"]
    raise ValueError(f"producer={name!r}: OpenVINO's interleaved kernel depends on the serving "
                     "x86-64 CPU's vectors and this machine is none: name it, "
                     "'openvino:avx512' or 'openvino:avx2'")


def producer(name: Any, dtype: str, layout: str, rot: int = 0, d: int = 0) -> Optional[Resolved]:
    """The producer's rotation of an x of dtype (its name: 'float32', ...) in layout with rot
    of its d (head_dim) columns rotated (d 0: no form); None for transformers' own bits
    (producer=None or 'transformers'): the default route.  Raises TypeError or ValueError
    naming the producer and the reason."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise TypeError(f"producer must be a str or None, got {name!r} ({type(name).__name__})")
    base, colon, isa = name.partition(":")
    p = PRODUCERS.get(base)
    if p is None or (colon and (not p.isa or not isa)):
        raise ValueError(f"producer must be one of {sorted(PRODUCERS)} (OpenVINO's with "
                         f"':avx2' or ':avx512' for the serving CPU), got {name!r}")
    if base == "transformers":  # transformers' own: the call's usual rules
        return None
    if dtype not in _FLOATS:  # not a float type at all: the call's usual rules name it
        return Resolved(p, 0)
    if dtype not in p.dtypes:
        raise ValueError(f"producer={name!r} does not run {dtype}: {p.refused}")
    if layout not in p.layouts:
        raise ValueError(f"producer={name!r} does not run the {layout!r} layout")
    lanes = _lanes(name, isa) if p.isa else 0
    if base == "openvino-bf16" and lanes != ISAS["avx512"]:
        raise ValueError(f"producer={name!r}: OpenVINO computes in bfloat16 by default only on "
                         "CPUs with AVX512-BF16 (or AMX); on an AVX2 CPU it is 'openvino'")
    f = p.rule(dtype, layout, rot, d, lanes) if d else 0
    if isinstance(f, str):
        raise ValueError(f"producer={name!r}: {f}")
    return Resolved(p, f)


def form(name: Any, dtype: str, layout: str, rot: int, d: int) -> int:
    """The core's form of producer name's rotation (0: torch's eager ops)."""
    r = producer(name, dtype, layout, rot, d)
    return 0 if r is None else r.form
