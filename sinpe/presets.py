"""Other libraries' deterministic positional encodings, bit for bit with their functions.

Each function reproduces one library's table with that library's own parameter names and
defaults, and returns NumPy arrays. The operations of each are listed, step by step with
their dtypes, in ``docs/presets.md`` (which also says which release was compared): formulas
that look alike give different bits, so each preset follows its library's order of
operations exactly.

All the work is done by sinpe's C core: the frequency vector (``sinpe._jobs.freq_job``: float32
exp/pow steps, or float64 ones) and then the table (``sinpe._jobs.table_job``: each row's
angles, their sin/cos, and a column map). Float32 steps run on the same backend choice as
the tutorial table (``backend=``: torch's bits where torch computes them, the built-in's
correctly rounded functions otherwise).  Where the library itself computes in NumPy float64
(XLM, Marian, the TF tutorial, MAE, Flax's initializer), those steps are NumPy's own calls in
the library's order and layouts (NumPy's float64 pow, exp, sin and cos are not the C
library's on every machine), and the float32 values are stored as the tables store them.

The table functions take ``dtype=`` (rounded from the float32 values as torch rounds them)
and ``backend=``, ``torch_threads=`` as :func:`sinpe.positional_encoding` does, and those
that make one table also ``out=`` and ``threads=`` (each signature says which).  Every
argument is checked, and every result refused when it cannot fit in memory, before anything
is allocated or written; an ``out=`` must be a writable buffer of the result's shape and
dtype, and is left untouched otherwise.
"""
from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence, Tuple, cast

import numpy as np

from . import _dtypes, _rope, _tensors
from ._hf import hf_rope  # transformers' rotary modules from a config
from ._jobs import (ANGLE, COS, SIN, ZERO, _admit, _freqs, _int, _positive, _real, _result,
                    _rope_inv_freq, _round_to, _table, backend_name)
from ._backends.policy import call_opts as _opts
from ._types import PresetOpts

__all__ = [
    "fairseq", "fairseq_positions", "m2m100", "speech2text", "fsmt", "musicgen", "fairseq2",
    "tensor2tensor", "keras_hub", "keras_hub_rotary", "tf_tutorial", "xlm", "marian",
    "flax_sinusoidal_init", "whisper",
    "diffusers_timestep", "mae_2d", "timm_2d", "llama_rope", "rotary_embedding_torch",
    "rotary_embedding_torch_freqs", "tatp22_1d", "tatp22_2d", "tatp22_3d", "alibi_slopes", "alibi_bias",
    "hf_rope",
]


# ---- column layouts ---------------------------------------------------------------------------

def _halves(n_sin: int, n_cos: Optional[int] = None, *, first: int = SIN, pad: int = 0,
            t0: int = 0) -> List[int]:
    """[first(a_t0..) | other(a_t0..)] then pad zero columns."""
    n_cos = n_sin if n_cos is None else n_cos
    other = COS if first == SIN else SIN
    n1, n2 = (n_sin, n_cos) if first == SIN else (n_cos, n_sin)
    return ([4 * (t0 + t) + first for t in range(n1)] + [4 * (t0 + t) + other for t in range(n2)]
            + [ZERO] * pad)


def _interleaved(n_cols: int, t0: int = 0) -> List[int]:
    """sin a_t, cos a_t, sin a_t+1, ... for n_cols columns."""
    return [4 * (t0 + j // 2) + (SIN if j % 2 == 0 else COS) for j in range(n_cols)]


def _pad_row(padding_idx: Optional[int], n: int) -> int:
    """The row torch's ``emb[padding_idx, :] = 0`` clears (negative indices from the end)."""
    if padding_idx is None:
        return -1
    p = _int(padding_idx, "padding_idx", minimum=-(1 << 62))
    row = p + n if p < 0 else p
    if not 0 <= row < n:
        raise IndexError(f"padding_idx {p} is out of bounds for a table of {n} rows")
    return row


# ---- fairseq and its copies -------------------------------------------------------------------

def fairseq(num_embeddings: int, embedding_dim: int, padding_idx: Optional[int] = None, *,
            dtype: Any = None, out: Any = None, backend: Optional[str] = None,
            threads: Optional[int] = None, torch_threads: Optional[int] = None) -> np.ndarray:
    """fairseq ``SinusoidalPositionalEmbedding.get_embedding`` (fairseq/modules/
    sinusoidal_positional_embedding.py @3d262bb, the same in 0.12.2): row p is position p,
    ``[sin | cos]`` of ``p * exp(i * f32(-log(10000) / (d//2 - 1)))``, a zero column when
    embedding_dim is odd, row ``padding_idx`` zero. Shape (num_embeddings, embedding_dim).
    The rows a model reads are :func:`fairseq_positions` of its tokens."""
    return _fairseq_like(num_embeddings, embedding_dim, padding_idx, SIN,
                         _opts(dtype, out, backend, threads, torch_threads))


def _fairseq_like(num_embeddings: int, embedding_dim: int, padding_idx: Optional[int],
                  first: int, opts: PresetOpts) -> np.ndarray:
    n = _int(num_embeddings, "num_embeddings")
    d = _int(embedding_dim, "embedding_dim")
    h = d // 2
    if h < 2:
        raise ValueError(f"embedding_dim must be >= 4 (the library divides by "
                         f"embedding_dim // 2 - 1), got {d}")
    zero = _pad_row(padding_idx, n)
    _admit((n, d), opts)
    freq = _freqs("exp_mul", h, opts, a=-(math.log(10000) / (h - 1)))
    return _table(n, freq, _halves(h, first=first, pad=d % 2), opts, zero_row=zero,
                  names=("out", "num_embeddings", "embedding_dim"))


def fairseq_positions(tokens: Any, padding_idx: int, cache_length: int = 0) -> np.ndarray:
    """fairseq's ``make_positions`` (and transformers' ``create_position_ids_from_input_ids``):
    the table rows tokens of shape (batch, seq) read: padding_idx + 1, + 2, ... for real
    tokens (shifted by cache_length), padding_idx for pads. int64."""
    t = np.asarray(_tensors.values(tokens, "tokens"))
    if t.ndim != 2:
        raise ValueError(f"tokens must have shape (batch, seq), got {t.shape}")
    mask = (t != padding_idx).astype(np.int64)
    pos: np.ndarray = (np.cumsum(mask, axis=1) + int(cache_length)) * mask + int(padding_idx)
    return pos


def m2m100(num_positions: int, embedding_dim: int, padding_idx: Optional[int] = None, **kw: Any
           ) -> np.ndarray:
    """transformers ``M2M100SinusoidalPositionalEmbedding(...).weights`` (5.24.0; also NLLB,
    XGLM, TrOCR, Kosmos-2, SeamlessM4T, SpeechT5): fairseq's table of num_positions + 2
    rows (the module's offset), row padding_idx zero."""
    return fairseq(_int(num_positions, "num_positions") + 2, embedding_dim, padding_idx, **kw)


def speech2text(num_positions: int, embedding_dim: int, padding_idx: Optional[int] = None,
                **kw: Any) -> np.ndarray:
    """transformers ``Speech2TextSinusoidalPositionalEmbedding(...).weights``: as
    :func:`m2m100`."""
    return m2m100(num_positions, embedding_dim, padding_idx, **kw)


def fsmt(num_positions: int, embedding_dim: int, padding_idx: int, **kw: Any) -> np.ndarray:
    """transformers FSMT ``SinusoidalPositionalEmbedding.get_embedding(num_positions,
    embedding_dim, padding_idx)``: fairseq's table (no offset)."""
    return fairseq(num_positions, embedding_dim, padding_idx, **kw)


def musicgen(num_embeddings: int, embedding_dim: int, *, dtype: Any = None, out: Any = None,
             backend: Optional[str] = None, threads: Optional[int] = None,
             torch_threads: Optional[int] = None) -> np.ndarray:
    """transformers ``MusicgenSinusoidalPositionalEmbedding.get_embedding`` (and
    MusicGen-Melody): fairseq's frequencies with the halves swapped, ``[cos | sin]``, no
    padding row."""
    return _fairseq_like(num_embeddings, embedding_dim, None, COS,
                         _opts(dtype, out, backend, threads, torch_threads))


def fairseq2(encoding_dim: int, max_seq_len: int, *, _legacy_pad_idx: Optional[int] = None,
             dtype: Any = None, out: Any = None, backend: Optional[str] = None,
             threads: Optional[int] = None, torch_threads: Optional[int] = None) -> np.ndarray:
    """fairseq2 ``SinusoidalPositionEncoder``'s table (src/fairseq2/nn/position_encoder.py
    @027bdeb, ``_fill_sin_freq_table``; 0.8.1): shape (max_seq_len + 1, encoding_dim), row 0
    zero (the pad), row k >= 1 position off + k - 1 with off = 0, or 1 + _legacy_pad_idx;
    ``[sin | cos]`` of ``exp((i * f32(-log 10000)) / f32(E//2 - 1))``. encoding_dim must be
    even (ValueError, as fairseq2)."""
    opts = _opts(dtype, out, backend, threads, torch_threads)
    e = _int(encoding_dim, "encoding_dim")
    n = _int(max_seq_len, "max_seq_len")
    if e % 2:
        raise ValueError(f"encoding_dim must be even, got {e}")
    if e < 2:
        raise ValueError(f"encoding_dim must be >= 2, got {e}")
    h = e // 2
    off = 0 if _legacy_pad_idx is None else 1 + _int(_legacy_pad_idx, "_legacy_pad_idx",
                                                     minimum=-(1 << 62))
    if n and off > (1 << 63) - n:
        raise OverflowError(f"the last position, {off} + {n} - 1, does not fit in int64")
    _admit((n + 1, e), opts)
    _admit((n + 1,), opts, "its positions", np.float32)
    freq = _freqs("exp_muldiv", h, opts, a=-math.log(10000.0), b=float(h - 1))
    steps = np.empty(n + 1, np.float32)  # row 0: the pad; then off .. off + n - 1
    steps[0] = 0.0
    steps[1:] = np.arange(off, off + n, dtype=np.float64)
    return _table(steps, freq, _halves(h), opts, zero_row=0, trow_shift=-1,
                  names=("out", "max_seq_len", "encoding_dim"))


# ---- TensorFlow lineage -----------------------------------------------------------------------

def tensor2tensor(length: int, channels: int, min_timescale: float = 1.0,
                  max_timescale: float = 1.0e4, start_index: int = 0, *, dtype: Any = None,
                  out: Any = None, backend: Optional[str] = None, threads: Optional[int] = None,
                  torch_threads: Optional[int] = None) -> np.ndarray:
    """tensor2tensor ``get_timing_signal_1d`` (layers/common_attention.py @bafdc1b), the math
    as written in float32 steps on sinpe's backends (backend='tensorflow': TensorFlow's own
    kernels, bit for bit): ``inc = f32(log(max/min)) / max(f32(n) - 1, 1)``, ``inv = f32(min) *
    exp(i * -inc)``, ``[sin | cos]`` of ``(start_index + p) * inv``, channels % 2 zero
    columns. Shape (1, length, channels)."""
    L = _int(length, "length")
    c = _int(channels, "channels")
    n = c // 2
    if n < 1:
        raise ValueError(f"channels must be >= 2, got {c}")
    lo, hi = _positive(min_timescale, "min_timescale"), _positive(max_timescale, "max_timescale")
    start = _int(start_index, "start_index", minimum=-(1 << 62))
    opts = _opts(dtype, out, backend, threads, torch_threads)
    _admit((L, c), opts)
    inc = np.float32(math.log(hi / lo)) / max(np.float32(n) - np.float32(1), np.float32(1))
    freq = _freqs("exp_mul", n, opts, a=float(-inc), m=lo)
    col = _halves(n, pad=c % 2)
    names = ("out", "length", "channels")
    if start >= 0:
        t = _table(L, freq, col, opts, offset=start, names=names, lead=True, own=True)
    else:
        _admit((L,), opts, "its positions", np.float64)
        t = _table(np.arange(start, start + L, dtype=np.float64), freq, col, opts, names=names,
                   lead=True)
    return t[None] if out is None else t


#: how each Keras backend forms keras-hub's positions ``ops.arange(seq) + start_index``: the
#: arange is int32 and the sum wraps there (measured with keras 3.15.1 on torch 2.13,
#: TensorFlow 2.21, JAX 0.10.2 and NumPy 2.4); the Python ints each takes: (lowest, past the
#: highest, the exception beyond)
_KERAS_PY_START = {"tensorflow": (-(1 << 63), 1 << 63, ValueError),
                   "jax": (-(1 << 31), 1 << 31, OverflowError),
                   "numpy": (-(1 << 31), 1 << 31, OverflowError),
                   "torch": (-(1 << 63), 1 << 64, OverflowError)}


def _wrapped32(first: int, n: int) -> Any:
    """first, first + 1, ... (n of them) as int32 sums wrap: the int64 values, or an int
    offset >= 0 when nothing wraps and nothing is negative (the table's own rows)."""
    first = (first + (1 << 31)) % (1 << 32) - (1 << 31)  # the start as int32 takes it
    if first >= 0 and first + n <= 1 << 31:
        return first
    return ((np.arange(n, dtype=np.int64) + (first + (1 << 31))) % (1 << 32)
            - (1 << 31)).astype(np.int64)


def _keras_start(start_index: Any, L: int, fw: str) -> Any:
    """keras-hub's positions from start_index under the Keras backend fw: an int offset
    (positions start .. start + L - 1, >= 0) or an array of positions."""
    start = _int(start_index, "start_index", minimum=-(1 << 1000))
    fw = fw if fw in _KERAS_PY_START else "torch"  # every other backend: keras' torch backend's
    if isinstance(start_index, np.integer):  # an array scalar: the backend's type promotion
        dt = np.dtype(type(start_index))
        if fw == "tensorflow" and dt != np.int32:
            raise TypeError(f"start_index of dtype {dt}: under TensorFlow keras-hub adds it "
                            "to an int32 arange, which TensorFlow refuses (AddV2 of int32 "
                            f"and {dt})")
        if fw == "torch" and dt == np.uint64:
            raise ValueError("start_index of dtype uint64: keras' torch backend refuses it "
                             "(Unsupported dtype for PyTorch: uint64)")
        sum_type = np.result_type(np.int32, dt) if fw == "numpy" else np.int32
        if sum_type == np.float64:  # NumPy: int32 + uint64 is float64, then cast to float32
            return np.arange(L, dtype=np.float64) + np.float64(start)
        if sum_type == np.int64:  # NumPy: int32 + int64 or uint32 is int64, no wrap
            return start if start >= 0 else np.arange(start, start + L, dtype=np.int64)
        return _wrapped32(start, L)
    lo, hi, exc = _KERAS_PY_START[fw]
    if not lo <= start < hi:
        raise exc(f"start_index={start} is out of the range keras' {fw} backend takes for "
                  f"a Python int added to an int32 arange ([{lo}, {hi}))")
    return _wrapped32(start, L)


def _keras_positions(positions: Any, shape: Tuple[int, ...], fw: str) -> np.ndarray:
    """Given positions (seq,) or (batch, seq), as the Keras backend fw takes them: 64-bit
    integers become int32 (wrapped) under JAX and NumPy; uint64 is refused by torch."""
    L = shape[-2]
    pos = np.asarray(_tensors.values(positions, "positions"))
    if pos.dtype.kind in "USbcMmV":
        raise TypeError(f"positions must be integers or real numbers, got dtype {pos.dtype}")
    if pos.ndim not in (1, 2) or pos.shape[-1] != L:
        raise ValueError(f"positions must have shape (seq,) or (batch, seq) with seq = {L}, "
                         f"got {pos.shape}")
    try:
        np.broadcast_shapes(pos.shape, shape[:-1])
    except ValueError:
        raise ValueError(f"positions of shape {pos.shape} do not broadcast to inputs' "
                         f"{shape[:-1]}") from None
    if pos.dtype.kind in "iu" and pos.dtype.itemsize == 8:
        if fw in ("jax", "numpy"):  # converted to 32 bits (wrapped) before the cast
            return pos.astype(pos.dtype.kind + "4")
        if fw not in ("tensorflow", "jax", "numpy") and pos.dtype == np.uint64:
            raise ValueError("positions of dtype uint64: keras' torch backend refuses them "
                             "(Unsupported dtype for PyTorch: uint64)")
    return pos


def _keras_sum(pe: np.ndarray, fw: str, sines: Optional[np.ndarray]) -> np.ndarray:
    """keras' ``sin(a) * sin_mask + cos(a) * cos_mask`` where it is not the chosen function
    (float32 pe, in place): a sine of -0.0 plus cos(-0.0) * 0 is +0.0 (under JAX, which
    flushes subnormals, so is a subnormal sine), and where a is infinite or NaN both terms
    are NaN and the sum keeps the first, sin(a)'s.  TensorFlow's sin and cos give NaNs of
    other signs there (Eigen: sin(-inf) +NaN, cos(-inf) -NaN, cos flips a NaN's sign; the
    C library's at an op's last elements), so under TensorFlow each cosine column's NaN is
    the sine's of that element, from sines (sin at every element, as TensorFlow's sin of
    the whole angle tensor gives it); the other frameworks' sin and cos give the same NaN."""
    u = pe.view(np.uint32)
    s = u[..., 0::2]
    zero = (s & 0x7F800000) == 0 if fw == "jax" else s == 0x80000000
    s[zero] = 0
    if sines is not None and pe.shape[-1] > 1:
        cos, sin = u[..., 1::2], sines.view(np.uint32)[..., 1::2]
        nan = (sin & 0x7FFFFFFF) > 0x7F800000
        cos[nan] = sin[nan]
    return pe


def _keras_odd(pos: Any, freq: np.ndarray) -> bool:
    """Whether a sine can be -0.0, subnormal or NaN (keras' sum can then differ from the
    function): NaN or infinite float positions, or of magnitude below 1 but +0.0,
    frequencies above 1 (products can overflow) or below 2^-100 (products can vanish)."""
    f = np.asarray(freq, np.float32)
    if f.size and (not (f <= 1).all() or not (f >= 2.0 ** -100).all()):
        return True
    if isinstance(pos, np.ndarray) and pos.dtype.kind == "f":
        with np.errstate(over="ignore"):
            p = pos.astype(np.float32)  # as keras casts them (the core rounds them the same)
        return bool((~np.isfinite(p) | ((np.abs(p) < 1) & ((p != 0) | np.signbit(p)))).any())
    return False


def keras_hub(inputs: Any, max_wavelength: float = 10000, start_index: int = 0,
              positions: Any = None, *, dtype: Any = None, out: Any = None,
              backend: Optional[str] = None, threads: Optional[int] = None,
              torch_threads: Optional[int] = None) -> np.ndarray:
    """keras-hub ``SinePositionEncoding(max_wavelength)(inputs, start_index, positions)``
    (src/layers/modeling/sine_position_encoding.py @71453d0, 0.32.0) on keras' torch backend,
    or under JAX with backend='jax', under TensorFlow with backend='tensorflow' (Eigen's
    float pow), under NumPy with backend='numpy' (the installed NumPy's own float32 pow):
    interleaved ``sin, cos`` of ``pos * f32(1/max_wavelength) ** (f32(2*(j//2)) / f32(d))``,
    broadcast to inputs' shape. inputs: an array (its shape; the result is float32, or
    dtype=) or a shape tuple (..., seq_length, hidden_size); positions: (seq,) or
    (batch, seq). As keras-hub forms them: positions ``arange(seq) + start_index`` in int32,
    wrapping past 2^31 (the Python ints each Keras backend takes, NumPy's promotions of an
    array scalar), given 64-bit integer positions wrapped to int32 under JAX and NumPy,
    keras' sum ``sin*mask + cos*mask`` (a sine of -0.0 is +0.0; under TensorFlow a NaN
    angle's cosine column holds the sine's NaN), hidden_size 0 (an empty last axis)."""
    given = inputs if isinstance(inputs, (tuple, list)) else _tensors.shape_of(inputs, "inputs")
    shape = tuple(_int(v, "inputs' shape") for v in given)
    if len(shape) < 2:
        raise ValueError(f"inputs must have at least 2 dimensions (..., seq, hidden), got {shape}")
    L, d = shape[-2], shape[-1]
    wl = _positive(max_wavelength, "max_wavelength")
    opts = _opts(dtype, out, backend, threads, torch_threads)
    fw = backend_name(opts.core)  # as resolved: set_backend and SINPE_BACKEND too
    pos = (_keras_start(start_index, L, fw) if positions is None
           else _keras_positions(positions, shape, fw))
    dst = _result(shape, opts)
    if d == 0:  # keras-hub: no frequency, no column, an empty last axis
        return dst if out is None else out
    # under JAX, XLA divides the exponents by hidden_size as a multiply by f32(1 / d)
    by = dict(a=float(np.float32(1) / np.float32(d))) if fw == "jax" else dict(b=float(d))
    freq = _freqs("pow", d, opts, step=2, group=2, base=1 / wl, base_name="1 / max_wavelength",
                  **by)
    col = [4 * j + (SIN if j % 2 == 0 else COS) for j in range(d)]
    odd = _keras_odd(pos, freq)
    one = opts._replace(out=None, dtype=np.float32 if odd else dst.dtype)
    if not isinstance(pos, int):
        _admit(pos.shape, opts, "its positions", pos.dtype)

    def table(cols: List[int]) -> np.ndarray:  # positions rounded to float32 by the core, as keras
        return (_table(L, freq, cols, one, offset=pos, own=True) if isinstance(pos, int)
                else _table(pos, freq, cols, one))

    pe = table(col)
    if odd:  # keras' masked sum, then rounded to dtype as the table would be
        sines = table([4 * j + SIN for j in range(d)]) if fw == "tensorflow" else None
        pe = _round_to(_keras_sum(pe, fw, sines), dst.dtype)
    dst[...] = pe  # the same dtype: copies
    return dst if out is None else out


def keras_hub_rotary(inputs: Any, max_wavelength: float = 10000, scaling_factor: float = 1.0,
                     sequence_axis: int = 1, feature_axis: int = -1, start_index: int = 0,
                     positions: Any = None, *, backend: Optional[str] = None,
                     threads: Optional[int] = None,
                     torch_threads: Optional[int] = None) -> np.ndarray:
    """keras-hub ``RotaryEmbedding(max_wavelength, scaling_factor, sequence_axis=...,
    feature_axis=...)(inputs, start_index, positions)`` (src/layers/modeling/
    rotary_embedding.py, 0.32.0, the default rope_type 'linear') on keras' torch backend: the
    rotated inputs, float32. With the feature axis moved last and the sequence axis to 1:
    ``inv = f32(max_wavelength) ** -(arange(0, d, 2) / f32(d)) / f32(scaling_factor)``,
    ``emb = [p * inv | p * inv]`` for positions ``p = f32(arange(seq)) + f32(start_index)``
    (or positions (seq,) / (batch, seq) as float32), then ``x * cos(emb) + cat(-x2, x1) *
    sin(emb)``, moved back. inputs: an array of rank >= 3 (floats are rounded to float32, as
    the layer's compute dtype). backend='jax', 'tensorflow' or 'numpy' (or their profiles):
    the layer under that Keras backend, eager: the framework's pow, cos and sin (with its
    tails), JAX's divisions by the constants d and scaling_factor as products by their
    float32 reciprocals (XLA's), TensorFlow's true divisions, and both frameworks'
    flush-to-zero (subnormal inputs and results of the rotation's products and sums are
    zeros); NumPy's operations are torch's, with NumPy's pow, cos and sin. Keras has no ONNX
    Runtime backend: 'onnxruntime' raises NotImplementedError."""
    opts = _opts(None, None, backend, threads, torch_threads)
    fw = backend_name(opts.core)  # as resolved: set_backend and SINPE_BACKEND too
    if fw == "onnxruntime":
        given = repr(backend) if backend is not None else f"None (the default, {fw!r})"
        raise NotImplementedError(
            f"keras_hub_rotary with backend={given}: keras-hub's RotaryEmbedding runs "
            f"under Keras' JAX, TensorFlow, NumPy or torch backends, not {fw}; use 'jax', "
            "'tensorflow', 'numpy', or None (the torch Keras backend's bits)")
    if _tensors.torch_of(inputs) is not None:  # any subclass; bfloat16 widened exactly
        inputs = _tensors.values(inputs.detach().cpu().float(), "inputs")
    x = np.asarray(inputs)
    if x.dtype.kind not in "iuf" and x.dtype.name != "bfloat16":
        raise TypeError(f"inputs must hold numbers, got dtype {x.dtype}")
    rank = x.ndim
    if rank < 3:
        raise ValueError(f"inputs must have at least 3 dimensions (batch, sequence, features), "
                         f"got shape {x.shape}")
    sa = _int(sequence_axis, "sequence_axis", minimum=-(1 << 62))
    fa = _int(feature_axis, "feature_axis", minimum=-(1 << 62))
    sa, fa = sa + rank if sa < 0 else sa, fa + rank if fa < 0 else fa
    for name, value, ax in (("sequence_axis", sequence_axis, sa),
                            ("feature_axis", feature_axis, fa)):
        if not 0 <= ax < rank:
            raise ValueError(f"{name} {value} is out of range for input with rank {rank}")
    if sa == fa:
        raise ValueError("sequence_axis and feature_axis must be different")
    d = x.shape[fa]
    if d % 2:
        raise ValueError(f"Rotary dimension must be even, got {d} (inputs' feature axis)")
    wl = _positive(max_wavelength, "max_wavelength")
    sf = _positive(scaling_factor, "scaling_factor")
    start = _int(start_index, "start_index", minimum=-(1 << 62))
    moved = np.moveaxis(x, (fa, sa), (-1, 1))  # (batch, seq, ..., d), as the layer moves it
    S = moved.shape[1]
    if positions is None:
        pos = None
    else:
        pos = np.asarray(_tensors.values(positions, "positions"))
        if pos.dtype.kind not in "iuf":
            raise TypeError(f"positions must hold real numbers, got dtype {pos.dtype}")
        pos = pos[None] if pos.ndim == 1 else pos
        if pos.ndim != 2 or pos.shape[1] != S or pos.shape[0] not in (1, moved.shape[0]):
            raise ValueError(f"positions must have shape (seq,) or (batch, seq) = "
                             f"({moved.shape[0]}, {S}), got {np.shape(positions)}")
    b = 1 if pos is None else pos.shape[0]
    _admit(moved.shape, opts._replace(dtype=np.float32))
    _admit((2, b, S, d), opts, "its cos and sin tables", np.float32)
    xm = np.array(moved, dtype=np.float32, order="C")  # the layer's compute dtype, a new array
    # the frequencies first: their rules (max_wavelength in float32's range) hold for an empty
    # input too
    xla = fw == "jax"  # XLA: a division by a constant is a product by its float32 reciprocal
    inv = _freqs("pow", d // 2, opts, step=2, base=wl, base_name="max_wavelength",
                 **(dict(a=-float(_recip32(d))) if xla else dict(b=-float(d))))
    if not xm.size:
        return np.moveaxis(xm, (-1, 1), (fa, sa))
    if pos is None:
        p32 = (np.arange(S, dtype=np.float64).astype(np.float32) + _int32f(start))[None]
    else:
        p32 = pos.astype(np.float32)
    if fw in ("jax", "tensorflow"):
        return np.moveaxis(_keras_rotary_fw(xm, p32, inv, sf, xla, opts), (-1, 1), (fa, sa))
    cos, sin = _keras_cos_sin(p32, inv / np.float32(sf), opts)
    _rope.apply_rope(xm, cos=cos, sin=sin, seq_dim=1, backend=backend, threads=threads,
                     torch_threads=torch_threads)
    return np.moveaxis(xm, (-1, 1), (fa, sa))


def _recip32(v: Any) -> np.float32:
    """float32 1 / f32(v) (inf for 0, without a warning)."""
    with np.errstate(divide="ignore"):
        return np.float32(1) / np.float32(v)


def _int32f(v: int) -> np.float32:
    """An integer rounded to float32 once (np.float32(v) goes through a double: two roundings
    above 2^53), as the frameworks cast an int64."""
    # a 0-d array's [()] is its scalar (NumPy's stubs type it as an array)
    return cast(np.float32, np.array(v, np.int64).astype(np.float32)[()])


def _flushed(a: np.ndarray) -> np.ndarray:
    """Subnormal float32 values as zeros of their sign (FTZ/DAZ), in place."""
    u = a.view(np.uint32)
    u[(u & 0x7F800000) == 0] &= np.uint32(0x80000000)
    return a


def _keras_cos_sin(p32: np.ndarray, inv: np.ndarray, opts: PresetOpts) -> Tuple[np.ndarray, np.ndarray]:
    """cos and sin of the layer's embedding ``p * [inv | inv]`` for positions p32 (b, seq),
    each as one (b, seq, d) tensor (a framework's tails fall where the layer's do)."""
    freq = np.concatenate([inv, inv])
    one = opts._replace(out=None, dtype=None)
    d = len(freq)
    return (_table(p32, freq, [4 * k + COS for k in range(d)], one),
            _table(p32, freq, [4 * k + SIN for k in range(d)], one))


def _keras_rotary_fw(xm: np.ndarray, p32: np.ndarray, inv: np.ndarray, sf: float, xla: bool,
                     opts: PresetOpts) -> np.ndarray:
    """keras-hub's RotaryEmbedding under JAX or TensorFlow, eager, on xm (batch, seq, ..., d):
    the layer's ops one by one, each rounded (no fused multiply-add between ops), under the
    frameworks' FTZ/DAZ."""
    S, d = xm.shape[1], xm.shape[-1]
    sf32 = _flushed(np.array([sf], np.float32))  # DAZ: a subnormal factor is a zero
    with np.errstate(all="ignore"):
        inv = _flushed(inv * _flushed(np.float32(1) / sf32) if xla else inv / sf32)
    cos, sin = _keras_cos_sin(p32, inv, opts)
    lead = (cos.shape[0], S) + (1,) * (xm.ndim - 3) + (d,)
    cos, sin = cos.reshape(lead), sin.reshape(lead)
    h = d // 2
    t = _flushed(xm)
    rot = np.concatenate([-t[..., h:], t[..., :h]], axis=-1)
    with np.errstate(all="ignore"):
        return _flushed(_flushed(t * cos) + _flushed(rot * sin))


def tf_tutorial(length: int, depth: int, *, legacy: bool = False, dtype: Any = None,
                out: Any = None, backend: Optional[str] = None, threads: Optional[int] = None,
                torch_threads: Optional[int] = None) -> np.ndarray:
    """The TensorFlow Transformer tutorial's ``positional_encoding`` (tensorflow/text,
    docs/tutorials/transformer.ipynb), float64 math rounded to float32 as ``tf.cast`` does:
    - current (since e54bc4f): ``[sin | cos]`` of ``p / 10000**(k / (depth/2))``,
      k < ceil(depth/2); shape (length, 2*ceil(depth/2));
    - legacy=True (through 2be0104, ``get_angles``): interleaved, rate
      ``1 / 10000**(2*(j//2) / depth)``; shape (1, length, depth)."""
    L = _int(length, "length")
    dp = _int(depth, "depth", minimum=1)
    opts = _opts(dtype, out, backend, threads, torch_threads)
    n = math.ceil(dp / 2)
    if not legacy:
        _np_admit((L, 2 * n), 2 * n, opts)
        dst = _result((L, 2 * n), opts)
        if dst.size == 0:  # nothing to fill: no rates (depth may be huge)
            return dst if out is None else out
        half = dp / 2
        rates = 1 / (10000 ** (np.arange(half)[np.newaxis, :] / half))

        def block(r0: int, r1: int) -> np.ndarray:
            rads = np.arange(r0, r1)[:, np.newaxis] * rates
            t = np.empty((r1 - r0, 2 * n), np.float32)  # np.concatenate([sin, cos]), cast
            t[:, :n] = np.sin(rads)
            t[:, n:] = np.cos(rads)
            return t
        _np_rows(dst, L, 2 * n, block)
        return dst if out is None else out
    shape = (L, dp) if out is not None and np.ndim(out) == 2 else (1, L, dp)
    _np_admit(shape, dp, opts)
    dst = _result(shape, opts)
    if dst.size == 0:
        return dst if out is None else out
    i = np.arange(dp)[np.newaxis, :]
    rates = 1 / np.power(10000, (2 * (i // 2)) / np.float32(dp))

    def legacy_block(r0: int, r1: int) -> np.ndarray:
        rads = np.arange(r0, r1)[:, np.newaxis] * rates
        rads[:, 0::2] = np.sin(rads[:, 0::2])
        rads[:, 1::2] = np.cos(rads[:, 1::2])
        return rads.astype(np.float32)
    _np_rows(dst[0] if dst.ndim == 3 else dst, L, dp, legacy_block)
    return dst if out is None else out


# ---- NumPy's float64 steps ----------------------------------------------------------------------

_NP_STEP = 1 << 16  # float64 elements per NumPy step: bounded scratch, whatever the table


def _np_rows(dst: np.ndarray, rows: int, width: int, block: Any) -> None:
    """dst[r0:r1] = block(r0, r1), in steps of rows: block gives the library's float32 values
    of those rows (its NumPy float64 steps, on arrays of the library's layout, cast as the
    library casts; NumPy's float64 functions are elementwise, so a step of rows gives each
    element's bits), rounded to dst's dtype as the tables round (the core's rule)."""
    step = max(1, _NP_STEP // max(width, 1))
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        dst[r0:r1] = _round_to(block(r0, r1), dst.dtype)


def _np_admit(shape: Tuple[int, ...], width: int, opts: PresetOpts) -> None:
    """Refuse, before anything is allocated, a result that cannot be made and NumPy float64
    steps that cannot fit: a few float64 arrays of a row's width (the library's rates; a
    step's angles, sines, cosines and their join), which outgrow a table of few, very wide
    rows. An empty result needs no steps."""
    _admit(shape, opts)
    if all(shape):
        _admit((6, width), opts, "its float64 steps", np.float64)


def _xlm_angles(d: int) -> np.ndarray:
    """transformers' ``np.power(10000, 2 * (j // 2) / dim)`` for every column j: NumPy's pow,
    once per pair of columns, on an array (the ufunc's loop is the one a Python scalar goes
    through, element by element; the exponents are the same correctly rounded quotients)."""
    pw = np.power(10000, (2 * np.arange(math.ceil(d / 2))) / d)
    return pw[np.arange(d) // 2]


# ---- transformers' float64 tables, Whisper ------------------------------------------------------

def xlm(n_pos: int, dim: int, *, dtype: Any = None, out: Any = None,
        backend: Optional[str] = None, threads: Optional[int] = None,
        torch_threads: Optional[int] = None) -> np.ndarray:
    """transformers ``create_sinusoidal_embeddings(n_pos, dim, out)`` (models/xlm/
    modeling_xlm.py, 5.24.0; DistilBERT and Flaubert copy it): interleaved ``sin, cos`` of
    ``p / 10000**(2*(j//2)/dim)`` in float64, rounded to float32. Shape (n_pos, dim)."""
    n, d = _int(n_pos, "n_pos"), _int(dim, "dim", minimum=1)
    opts = _opts(dtype, out, backend, threads, torch_threads)
    _np_admit((n, d), d, opts)
    dst = _result((n, d), opts)
    if dst.size == 0:  # nothing to fill: no frequencies (dim may be huge)
        return dst if out is None else out
    pw = _xlm_angles(d)

    def block(r0: int, r1: int) -> np.ndarray:
        enc = np.arange(r0, r1, dtype=np.float64)[:, None] / pw  # pos / np.power(...)
        t = np.empty((r1 - r0, d), np.float32)
        t[:, 0::2] = np.sin(enc[:, 0::2])
        t[:, 1::2] = np.cos(enc[:, 1::2])
        return t
    _np_rows(dst, n, d, block)
    return dst if out is None else out


def marian(num_positions: int, embedding_dim: int, *, dtype: Any = None, out: Any = None,
           backend: Optional[str] = None, threads: Optional[int] = None,
           torch_threads: Optional[int] = None) -> np.ndarray:
    """transformers ``MarianSinusoidalPositionalEmbedding(...).create_weight()`` (Pegasus,
    Informer, Autoformer, TimeSeriesTransformer and RoFormer have the same body): XLM's
    float64 angles, ``[sin of the ceil(dim/2) even columns | cos of the dim//2 odd ones]``."""
    n, d = _int(num_positions, "num_positions"), _int(embedding_dim, "embedding_dim", minimum=1)
    opts = _opts(dtype, out, backend, threads, torch_threads)
    _np_admit((n, d), d, opts)
    dst = _result((n, d), opts)
    if dst.size == 0:
        return dst if out is None else out
    pw, s = _xlm_angles(d), math.ceil(d / 2)

    def block(r0: int, r1: int) -> np.ndarray:
        enc = np.arange(r0, r1, dtype=np.float64)[:, None] / pw
        t = np.empty((r1 - r0, d), np.float32)
        t[:, :s] = np.sin(enc[:, 0::2])
        t[:, s:] = np.cos(enc[:, 1::2])
        return t
    _np_rows(dst, n, d, block)
    return dst if out is None else out


def flax_sinusoidal_init(max_len: int, d_feature: int, min_scale: float = 1.0,
                         max_scale: float = 10000.0, *, dtype: Any = None, out: Any = None,
                         backend: Optional[str] = None, threads: Optional[int] = None,
                         torch_threads: Optional[int] = None) -> np.ndarray:
    """Flax's ``sinusoidal_init(max_len, min_scale, max_scale)(key, (1, max_len, d_feature))``
    (google/flax examples/wmt/models.py @047b288): NumPy float64 ``[sin | cos]`` of
    ``p * min_scale * exp(i * -log(max_scale / min_scale) / (d_feature//2 - 1))``, stored into
    float32 zeros (an odd d_feature keeps a zero last column). Shape (1, max_len, d_feature)
    (out= may also be (max_len, d_feature)). d_feature 2 and 3 are refused: Flax divides by
    d_feature // 2 - 1 = 0 there (a table of NaN)."""
    L, d = _int(max_len, "max_len"), _int(d_feature, "d_feature")
    h = d // 2
    if h == 1:
        raise ValueError(f"d_feature must not be 2 or 3 (Flax divides by d_feature // 2 - 1), "
                         f"got {d}")
    lo, hi = _positive(min_scale, "min_scale"), _positive(max_scale, "max_scale")
    ratio = hi / lo
    if not 0.0 < ratio < math.inf:
        raise ValueError(f"max_scale / min_scale must be finite and > 0, got {hi!r} / {lo!r}")
    opts = _opts(dtype, out, backend, threads, torch_threads)
    shape = (L, d) if out is not None and np.ndim(out) == 2 else (1, L, d)
    _np_admit(shape, d, opts)
    dst = _result(shape, opts)
    if dst.size == 0:  # nothing to fill: no frequencies (d_feature may be huge)
        return dst if out is None else out
    scale_factor = -np.log(ratio) / (h - 1)
    div_term = lo * np.exp(np.arange(0, h) * scale_factor)

    def block(r0: int, r1: int) -> np.ndarray:
        position = np.arange(r0, r1)[:, np.newaxis]
        pe = np.zeros((r1 - r0, d), dtype=np.float32)
        pe[:, :h] = np.sin(position * div_term)
        pe[:, h:2 * h] = np.cos(position * div_term)
        return pe
    _np_rows(dst[0] if dst.ndim == 3 else dst, L, d, block)
    return dst if out is None else out


def whisper(length: int, channels: int, max_timescale: float = 10000, *, dtype: Any = None,
            out: Any = None, backend: Optional[str] = None, threads: Optional[int] = None,
            torch_threads: Optional[int] = None) -> np.ndarray:
    """openai-whisper ``whisper.model.sinusoids`` (@c0d2f62, 20250625; transformers'
    ``modeling_whisper.sinusoids`` is the same): ``[sin | cos]`` of
    ``p * exp(f32(-log(max_timescale) / (channels//2 - 1)) * i)``. channels must be even
    and >= 4 (the library asserts evenness and divides by channels//2 - 1)."""
    L, c = _int(length, "length"), _int(channels, "channels")
    if c % 2:
        raise ValueError(f"channels must be even, got {c}")
    if c < 4:
        raise ValueError(f"channels must be >= 4 (channels // 2 - 1 is a divisor), got {c}")
    mt = _positive(max_timescale, "max_timescale")
    opts = _opts(dtype, out, backend, threads, torch_threads)
    _admit((L, c), opts)
    h = c // 2
    freq = _freqs("exp_mul", h, opts, a=-float(np.log(mt) / (h - 1)))  # openai-whisper's np.log
    return _table(L, freq, _halves(h), opts, names=("out", "length", "channels"))


# ---- diffusers, MAE, timm ---------------------------------------------------------------------

def diffusers_timestep(timesteps: Any, embedding_dim: int, flip_sin_to_cos: bool = False,
                       downscale_freq_shift: float = 1, scale: float = 1,
                       max_period: int = 10000, *, dtype: Any = None, out: Any = None,
                       backend: Optional[str] = None, threads: Optional[int] = None,
                       torch_threads: Optional[int] = None) -> np.ndarray:
    """diffusers ``get_timestep_embedding`` (src/diffusers/models/embeddings.py @58eb52c,
    0.42.1): ``freq = exp((f32(-log max_period) * i) / f32(d//2 - shift))``, ``arg = f32(scale)
    * (t * freq)`` for 1-D timesteps (fractional allowed; rounded as ``.float()``),
    ``[sin | cos]`` (``[cos | sin]`` with flip_sin_to_cos), a zero column when
    embedding_dim is odd. Shape (N, embedding_dim)."""
    t = np.asarray(_tensors.values(timesteps, "timesteps"))
    if t.ndim != 1:
        raise ValueError(f"timesteps must be a 1-d array, got shape {t.shape}")
    d = _int(embedding_dim, "embedding_dim")
    h = d // 2
    if h < 1:
        raise ValueError(f"embedding_dim must be >= 2, got {d}")
    period = _positive(max_period, "max_period")
    shift, sc = _real(downscale_freq_shift, "downscale_freq_shift"), _real(scale, "scale")
    opts = _opts(dtype, out, backend, threads, torch_threads)
    _admit((t.shape[0], d), opts)
    freq = _freqs("exp_muldiv", h, opts, a=-math.log(period), b=float(h - shift))
    col = _halves(h, first=COS if flip_sin_to_cos else SIN, pad=d % 2)
    return _table(t, freq, col, opts, scale=sc, names=("out", "timesteps", "embedding_dim"))


def mae_2d(embed_dim: int, grid_size: int, cls_token: bool = False, *, dtype: Any = None,
           out: Any = None, backend: Optional[str] = None, threads: Optional[int] = None,
           torch_threads: Optional[int] = None) -> np.ndarray:
    """MAE ``get_2d_sincos_pos_embed(embed_dim, grid_size, cls_token)`` (facebookresearch/mae
    @efb2a80, util/pos_embed.py), as MAE uses it (``torch.from_numpy(pos).float()``): float64
    math rounded to float32. Row i*G + j: ``[sin w | cos w | sin h | cos h]`` (w = j, h = i;
    omega_k = 1/10000**(k/(D/4))), a zero first row with cls_token. diffusers'
    ``get_2d_sincos_pos_embed(D, G, base_size=G)`` gives the same float32 values.
    embed_dim must be a multiple of 4."""
    D, G = _int(embed_dim, "embed_dim"), _int(grid_size, "grid_size")
    if D % 4 or D == 0:
        raise ValueError(f"embed_dim must be a positive multiple of 4, got {D}")
    opts = _opts(dtype, out, backend, threads, torch_threads)
    lead = 1 if cls_token else 0
    if G and G > ((1 << 62) - lead) // G:
        raise OverflowError(f"a grid of {G} x {G} positions is larger than memory can address")
    _np_admit((lead + G * G, D), G * D, opts)  # the steps: the G positions of an axis
    dst = _result((lead + G * G, D), opts)
    if G == 0:  # no grid: the cls row alone, or nothing (embed_dim may be huge)
        dst[...] = 0
        return dst if out is None else out
    # MAE's get_1d_sincos_pos_embed_from_grid(D/2, pos) for the G positions of one axis: its
    # float64 steps in NumPy (the grid's G * G rows only repeat these values)
    omega = np.arange(D // 4, dtype=np.float64)
    omega /= D / 4.
    omega = 1. / 10000 ** omega
    out1 = np.einsum("m,d->md", np.arange(G, dtype=np.float32), omega)
    one = _round_to(np.concatenate([np.sin(out1), np.cos(out1)], axis=1).astype(np.float32),
                    dst.dtype)  # (G, D/2): [sin | cos] of position g
    if cls_token:
        dst[0] = 0
    for i in range(G):  # row i*G + j: [w = j's (D/2) | h = i's (D/2)]
        rows = dst[lead + i * G:lead + (i + 1) * G]
        rows[:, :D // 2] = one
        rows[:, D // 2:] = one[i]
    return dst if out is None else out


def timm_2d(feat_shape: Sequence[int], dim: int = 64, temperature: float = 10000.,
            reverse_coord: bool = False, interleave_sin_cos: bool = False, *,
            dtype: Any = None, out: Any = None, backend: Optional[str] = None,
            threads: Optional[int] = None, torch_threads: Optional[int] = None) -> np.ndarray:
    """timm ``build_sincos2d_pos_embed`` (timm/layers/pos_embed_sincos.py @aa4b585, 1.0.31):
    ``bands = 1 / temperature ** (arange(dim//4) / (dim//4))``; rows over the ij grid of
    feat_shape ([H, W], or [W, H] with reverse_coord), ``[sin h | sin w | cos h | cos w]``
    (``[sin h | cos h | sin w | cos w]`` with interleave_sin_cos). dim must be a multiple of
    4. Shape (H*W, dim)."""
    try:
        fs = [_int(v, "feat_shape") for v in feat_shape]
    except TypeError:
        if isinstance(feat_shape, (str, bytes)) or not hasattr(feat_shape, "__iter__"):
            raise TypeError(f"feat_shape must be a sequence of 2 integers, got {feat_shape!r}") from None
        raise
    if len(fs) != 2:
        raise ValueError(f"feat_shape must have 2 entries, got {feat_shape!r}")
    d = _int(dim, "dim")
    if d % 4 or d == 0:
        raise ValueError(f"dim must be a positive multiple of 4, got {d}")
    if reverse_coord:
        fs = fs[::-1]
    temp = _positive(temperature, "temperature")
    opts = _opts(dtype, out, backend, threads, torch_threads)
    if fs[1] and fs[0] > (1 << 62) // fs[1]:
        raise OverflowError(f"a grid of {fs[0]} x {fs[1]} positions is larger than memory can "
                            "address")
    _admit((fs[0] * fs[1], d), opts)
    q = d // 4
    bands = _freqs("pow", q, opts, b=float(q), base=temp, recip=True, base_name="temperature")
    freq = np.concatenate([bands, bands])
    comp = np.repeat(np.arange(2, dtype=np.int32), q)  # the grid's (r // W, r % W)
    s = [4 * t + SIN for t in range(2 * q)]
    c = [4 * t + COS for t in range(2 * q)]
    col = (s[:q] + c[:q] + s[q:] + c[q:]) if interleave_sin_cos else (s + c)
    return _table(None, freq, col, opts, grid=(fs[0], fs[1], 0), comp=comp,
                  names=("out", "feat_shape", "dim"))


# ---- rotary ------------------------------------------------------------------------------------

def llama_rope(head_dim: int, position_ids: Any, rope_theta: float = 10000.0,
               attention_scaling: float = 1.0, *, dtype: Any = None,
               backend: Optional[str] = None, threads: Optional[int] = None,
               torch_threads: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
    """transformers ``LlamaRotaryEmbedding`` with the default rope (models/llama/
    modeling_llama.py, 5.24.0): ``inv_freq = 1 / rope_theta ** (arange(0, dim, 2) / dim)``,
    ``emb = cat(freqs, freqs)`` for ``freqs = position_ids.float()[..., None] * inv_freq``;
    returns ``(cos(emb) * attention_scaling, sin(emb) * attention_scaling)``, each of shape
    position_ids.shape + (head_dim,), in dtype (x.dtype in the library; float32 default).
    position_ids: an array (batch, seq) or (seq,), or an int n for arange(n)."""
    dim = _int(head_dim, "head_dim", minimum=2)
    if dim % 2:
        raise ValueError(f"head_dim must be even, got {dim}")
    theta = _positive(rope_theta, "rope_theta")
    scaling = _real(attention_scaling, "attention_scaling")
    opts = _opts(dtype, None, backend, threads, torch_threads)
    position_ids = _tensors.values(position_ids, "position_ids")
    count = np.ndim(position_ids) == 0  # an int n: arange(n)
    rows = _int(position_ids, "position_ids") if count else None
    pos = None if count else np.asarray(position_ids)
    shape = ((rows,) if pos is None else pos.shape) + (dim,)
    f32 = dtype is None or _dtypes.resolve(dtype) == np.float32
    _admit((2 if scaling == 1.0 or f32 else 3,) + shape, opts._replace(dtype=np.float32))
    inv = _rope_inv_freq(dim, theta, opts, "rope_theta")
    freq = np.concatenate([inv, inv])
    direct = opts._replace(dtype=dtype if scaling == 1.0 else None)  # rounded by the store
    tables = []
    for kind in (COS, SIN):  # emb.cos(), emb.sin(): two tensors of emb's shape
        t = _table(rows if count else pos, freq, [4 * k + kind for k in range(dim)], direct,
                   names=("out", "position_ids", "head_dim"))
        if scaling != 1.0:
            t *= np.float32(scaling)
            t = _round_to(t, dtype)
        tables.append(t)
    return tables[0], tables[1]


def rotary_embedding_torch_freqs(dim: int, theta: float = 10000, theta_rescale_factor: float = 1.,
                                 freqs_for: str = "lang", num_freqs: int = 1, *,
                                 backend: Optional[str] = None,
                                 torch_threads: Optional[int] = None) -> np.ndarray:
    """rotary-embedding-torch ``RotaryEmbedding(dim, ...).freqs`` (0.9.1): 'lang'
    ``1 / (theta' ** (arange(0, dim, 2)[:dim//2] / dim))`` with ``theta' = theta *
    theta_rescale_factor ** (dim / (dim - 2))`` in Python floats, or 'constant' ones
    (num_freqs). 'pixel' (torch.linspace) is not reproduced."""
    d = _int(dim, "dim", minimum=1)
    opts = _opts(None, None, backend, None, torch_threads)
    if freqs_for == "constant":
        return np.ones(_int(num_freqs, "num_freqs"), np.float32)
    if freqs_for != "lang":
        raise ValueError(f"freqs_for={freqs_for!r} is not reproduced; use 'lang' or 'constant'")
    th0 = _positive(theta, "theta")
    rescale = _positive(theta_rescale_factor, "theta_rescale_factor")
    th = th0 * rescale ** (d / (d - 2)) if d != 2 else \
        th0 * rescale ** float("inf") if rescale != 1 else th0
    return _rope_inv_freq(d, th, opts, "theta * theta_rescale_factor ** (dim / (dim - 2))"
                          if rescale != 1 else "theta")[:d // 2]


def rotary_embedding_torch(dim: int, seq_len: Optional[int] = None, *, t: Any = None,
                           offset: int = 0, theta: float = 10000,
                           theta_rescale_factor: float = 1., interpolate_factor: float = 1.,
                           freqs_for: str = "lang", num_freqs: int = 1, dtype: Any = None,
                           out: Any = None, backend: Optional[str] = None,
                           threads: Optional[int] = None,
                           torch_threads: Optional[int] = None) -> np.ndarray:
    """rotary-embedding-torch ``RotaryEmbedding(dim, ...)(t)``: the angles
    ``t[:, None] * freqs``, each repeated for a pair of columns ``[a0, a0, a1, a1, ...]``
    (its apply_rotary_emb takes their cos and sin, as torch computes them:
    ``sinpe.apply_rope(x, layout='pairs', cos=torch.from_numpy(angles).cos(),
    sin=torch.from_numpy(angles).sin())``, or the tables of its ``freqs``).
    t: positions (float32 values); default ``(arange(seq_len) + offset) /
    interpolate_factor`` in float32 (its get_seq_pos).
    Shape (len(t), 2 * len(freqs))."""
    opts = _opts(dtype, out, backend, threads, torch_threads)
    freqs = rotary_embedding_torch_freqs(dim, theta, theta_rescale_factor, freqs_for, num_freqs,
                                         backend=backend, torch_threads=torch_threads)
    if t is None:
        n = _int(seq_len, "seq_len")
        off, interp = _real(offset, "offset"), _positive(interpolate_factor, "interpolate_factor")
        _admit((n, 2 * len(freqs)), opts)
        _admit((n,), opts, "its positions", np.float32)
        t = np.arange(n, dtype=np.float32)  # in place: one array of n, the same bits
        t += np.float32(off)
        t /= np.float32(interp)
    pos = np.asarray(_tensors.values(t, "t"))
    _admit(pos.shape + (2 * len(freqs),), opts)
    col = [4 * (j // 2) + ANGLE for j in range(2 * len(freqs))]
    return _table(pos, np.ascontiguousarray(freqs, np.float32), col, opts,
                  names=("out", "t", "dim"))


def _tatp_shape(tensor: Any, ndim: int) -> Tuple[Tuple[int, ...], Any]:
    given = tensor if isinstance(tensor, (tuple, list)) else _tensors.shape_of(tensor, "tensor")
    shape = tuple(_int(v, "tensor's shape") for v in given)
    dt = None if isinstance(tensor, (tuple, list)) else getattr(tensor, "dtype", None)
    if len(shape) != ndim:
        raise ValueError(f"The input tensor has to be {ndim}d! (got shape {shape})")
    return shape, dt


def _tatp_axis(n: int, c: int, inv: np.ndarray, opts: PresetOpts) -> np.ndarray:
    """tatp22's get_emb: interleaved sin, cos of arange(n) * inv_freq, c columns."""
    return _table(n, inv, _interleaved(c), opts._replace(out=None))


def tatp22_1d(channels: int, tensor: Any, *, dtype: Any = None, out: Any = None,
              backend: Optional[str] = None, threads: Optional[int] = None,
              torch_threads: Optional[int] = None) -> np.ndarray:
    """positional-encodings (tatp22) ``PositionalEncoding1D(channels)(tensor)``
    (torch_encodings.py @efeb8d9, 6.0.3): c = ceil(channels/2)*2, ``inv_freq = 1 / 10000 **
    (arange(0, c, 2) / c)``, interleaved sin, cos of x * inv_freq, truncated to tensor's last
    axis and repeated over its batch. tensor: an array (batch, x, ch) (its dtype is the
    result's unless dtype=) or that shape as a tuple."""
    (B, X, ch), tdt = _tatp_shape(tensor, 3)
    c = math.ceil(_int(channels, "channels", minimum=1) / 2) * 2
    opts = _opts(dtype if dtype is not None else tdt, out, backend, threads, torch_threads)
    width = min(c, ch)  # the library's zeros beyond its channels are cut by [:orig_ch] first
    dst = _result((B, X, width), opts)
    if dst.size == 0:  # nothing to fill: the axis is not computed (it may be long)
        return dst if out is None else out
    inv = _rope_inv_freq(c, 10000.0, opts)
    dst[...] = _tatp_axis(X, width, inv, opts._replace(dtype=dst.dtype))  # the same dtype: copies
    return dst if out is None else out


def tatp22_2d(channels: int, tensor: Any, *, dtype: Any = None, out: Any = None,
              backend: Optional[str] = None, threads: Optional[int] = None,
              torch_threads: Optional[int] = None) -> np.ndarray:
    """positional-encodings (tatp22) ``PositionalEncoding2D(channels)(tensor)``: c =
    ceil(channels/4)*2; each (x, y) holds ``[x's interleaved encoding (c) | y's (c)]``,
    truncated to tensor's last axis, repeated over the batch. torch builds the x and y
    encodings as two tensors, and so does sinpe (their SLEEF vectors on 64-bit Arm).
    tensor: an array (batch, x, y, ch) or that shape."""
    (B, X, Y, ch), tdt = _tatp_shape(tensor, 4)
    c = math.ceil(_int(channels, "channels", minimum=1) / 4) * 2
    opts = _opts(dtype if dtype is not None else tdt, out, backend, threads, torch_threads)
    width = min(ch, 2 * c)
    dst = _result((B, X, Y, width), opts)
    if dst.size == 0:  # nothing to fill: no axis is computed (one may be long)
        return dst if out is None else out
    inv = _rope_inv_freq(c, 10000.0, opts)
    one = opts._replace(dtype=dst.dtype)
    nx = min(c, width)
    dst[..., :nx] = _tatp_axis(X, c, inv, one)[None, :, None, :nx]
    if width > c:
        dst[..., c:width] = _tatp_axis(Y, c, inv, one)[None, None, :, :width - c]
    return dst if out is None else out



def tatp22_3d(channels: int, tensor: Any, *, dtype: Any = None, out: Any = None,
              backend: Optional[str] = None, threads: Optional[int] = None,
              torch_threads: Optional[int] = None) -> np.ndarray:
    """positional-encodings (tatp22) ``PositionalEncoding3D(channels)(tensor)`` (6.0.3): c =
    ceil(channels/6)*2; each (x, y, z) holds ``[x's interleaved encoding (c) | y's (c) |
    z's (c)]``, truncated to tensor's last axis, repeated over the batch. torch builds the
    three encodings as three tensors, and so does sinpe. tensor: an array (batch, x, y, z, ch)
    (its dtype is the result's unless dtype=) or that shape as a tuple."""
    (B, X, Y, Z, ch), tdt = _tatp_shape(tensor, 5)
    c = math.ceil(_int(channels, "channels", minimum=1) / 6) * 2
    opts = _opts(dtype if dtype is not None else tdt, out, backend, threads, torch_threads)
    width = min(ch, 3 * c)
    dst = _result((B, X, Y, Z, width), opts)
    if dst.size == 0:  # nothing to fill: no axis is computed (one may be long)
        return dst if out is None else out
    inv = _rope_inv_freq(c, 10000.0, opts)
    one = opts._replace(dtype=dst.dtype)
    for k, (n, index) in enumerate([(X, np.s_[None, :, None, None]), (Y, np.s_[None, None, :, None]),
                                    (Z, np.s_[None, None, None, :])]):
        lo, hi = k * c, min(width, (k + 1) * c)
        if hi > lo:
            dst[..., lo:hi] = _tatp_axis(n, c, inv, one)[index + (slice(0, hi - lo),)]
    return dst if out is None else out

# ---- ALiBi --------------------------------------------------------------------------------------

def _paper_slopes(n: int) -> List[float]:
    # the ALiBi paper's reference, in Python floats (ofirpress/attention_with_linear_biases,
    # fairseq/models/transformer.py, get_slopes)
    def power_of_2(m: int) -> List[float]:
        start = 2 ** (-2 ** -(math.log2(m) - 3))
        return [start * start ** i for i in range(m)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    p = 2 ** math.floor(math.log2(n))
    return power_of_2(p) + _paper_slopes(2 * p)[0::2][:n - p]


def alibi_slopes(num_heads: int, *, method: str = "bloom", backend: Optional[str] = None,
                 torch_threads: Optional[int] = None) -> np.ndarray:
    """ALiBi's per-head slopes, float32.
    method='bloom': transformers ``_get_alibi_slopes`` (models/bloom/modeling_bloom.py):
    ``torch.pow(f32(2 ** -(2 ** -(log2(p) - 3))), arange(1, p + 1))`` for p the largest power
    of 2 <= num_heads, then the odd powers of the next base for the rest (torch's pow).
    method='paper': the ALiBi paper's ``get_slopes`` in Python floats, then float32
    (``torch.Tensor(get_slopes(n))``)."""
    n = _int(num_heads, "num_heads", minimum=1)
    if method not in ("bloom", "paper"):
        raise ValueError(f"method must be 'bloom' or 'paper', got {method!r}")
    opts = _opts(None, None, backend, None, torch_threads)
    _admit((n,), opts, "the slopes", np.float64)
    if method == "paper":
        return np.array(_paper_slopes(n), np.float64).astype(np.float32)
    p = 2 ** math.floor(math.log2(n))
    base = 2 ** (-(2 ** -(math.log2(p) - 3)))
    slopes = _freqs("pow", p, opts, start=1, base=base, b=1.0)
    if p != n:
        extra = 2 ** (-(2 ** -(math.log2(2 * p) - 3)))
        r = min(p, n - p)
        slopes = np.concatenate([slopes, _freqs("pow", r, opts, start=1, step=2, base=extra,
                                                b=1.0)])
    return slopes


def alibi_bias(attention_mask: Any = None, num_heads: int = 8, *, seq_length: Optional[int] = None,
               method: str = "bloom", dtype: Any = None, backend: Optional[str] = None,
               torch_threads: Optional[int] = None) -> np.ndarray:
    """ALiBi's bias.
    method='bloom': transformers ``build_alibi_tensor(attention_mask, num_heads, dtype)``:
    ``slopes[:, None] * ((cumsum(mask) - 1) * mask)`` in float32, shape
    (batch * num_heads, 1, seq_length), rounded to dtype (float32 default; BLOOM passes its
    compute dtype). attention_mask (batch, seq) of 0/1, or seq_length= for all ones.
    method='paper': the reference's ``slopes[:, None, None] * arange(maxpos)``, shape
    (num_heads, 1, seq_length) (attention_mask unused)."""
    if method not in ("bloom", "paper"):
        raise ValueError(f"method must be 'bloom' or 'paper', got {method!r}")
    heads = _int(num_heads, "num_heads", minimum=1)
    L = None if seq_length is None else _int(seq_length, "seq_length")
    exact = {"float16": 2048, "bfloat16": 256}.get(
        str(getattr(attention_mask, "dtype", "")).replace("torch.", ""))
    if exact is not None and len(getattr(attention_mask, "shape", ())) == 2 \
            and int(attention_mask.shape[1]) > exact:
        raise ValueError(f"attention_mask of dtype {attention_mask.dtype} and "
                         f"{int(attention_mask.shape[1])} positions: transformers' cumsum runs in "
                         f"the mask's dtype, exact up to {exact} positions and rounded past them, "
                         "which sinpe does not reproduce; pass an integer, bool or float32 mask")
    m = None if attention_mask is None else np.asarray(_tensors.values(attention_mask,
                                                                         "attention_mask"))
    if m is not None and (m.ndim != 2 or not (np.issubdtype(m.dtype, np.integer)
                                              or np.issubdtype(m.dtype, np.bool_)
                                              or np.issubdtype(m.dtype, np.floating))):
        raise ValueError(f"attention_mask must be an array of shape (batch, seq), got shape "
                         f"{m.shape} of {m.dtype}")
    if L is None:
        if m is None:
            raise ValueError("alibi_bias needs attention_mask or seq_length")
        L = m.shape[1]
    elif m is not None and L != m.shape[1]:
        raise ValueError(f"seq_length={L} disagrees with attention_mask's {m.shape[1]} "
                         "positions")
    opts = _opts(dtype, None, backend, None, torch_threads)
    batch = 1 if m is None else m.shape[0]
    rows = heads if method == "paper" else batch * heads
    _admit((rows, 1, L), opts._replace(dtype=np.float32))
    _admit((3, batch, L), opts, "its positions", np.int64)
    slopes = alibi_slopes(heads, method=method, backend=backend, torch_threads=torch_threads)
    if method == "paper":
        bias = slopes[:, None, None] * np.arange(L, dtype=np.float32)[None, None, :]
        return _round_to(bias.astype(np.float32), dtype)
    mi = np.ones((1, L), np.int64) if m is None else m.astype(np.int64)
    ar = ((np.cumsum(mi, axis=-1) - 1) * mi)[:, None, :].astype(np.float32)  # int64 -> float32
    bias = slopes[None, :, None] * ar  # (batch, heads, seq): float32 products
    return _round_to(bias.reshape(mi.shape[0] * heads, 1, L), dtype)

