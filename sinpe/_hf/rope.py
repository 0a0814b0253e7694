"""transformers' rotary modules (``*RotaryEmbedding.forward``) from a model's config, bit for
bit: :func:`hf_rope` (exported by :mod:`sinpe.presets`).  The config is read by
:mod:`.config`, the first call's inv_freq made by :data:`.inits.ROPE_INIT_FUNCTIONS`, the
vision towers' axial rope by :mod:`.axial`; here, the forward: positions, the regrowth
switches and the cos/sin tables.  One call makes at most two calls into the core: the
frequencies (one "pow" job) and both tables (one table job); a third, the rounding to x's
dtype, only where transformers scales the tables first (yarn, longrope) and casts them.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any, Dict, Optional, Tuple

import numpy as np

from .. import _angles, _producers, _tensors
from .._jobs import COS, SIN, _int, _round_to, _table, table_job
from .._types import PresetOpts
from .._backends.policy import call_opts as _opts
from .._memo import Memo
from .axial import AXIAL, axial_rope, given_inv as _inv_given, positions as _array_positions
from .config import Cfg, read as read_config
from .families import HALF_WIDTH, INTERLEAVED, MROPE, NO_CAST, NTK_ALPHA, OTHER
from .inits import FAMILY_INITS, ROPE_INIT_FUNCTIONS, omp_factor

__all__ = ["hf_rope", "ROPE_TYPES"]

F32 = np.float32
#: the rope types hf_rope computes (besides the vision towers' "axial").
ROPE_TYPES = tuple(ROPE_INIT_FUNCTIONS)
NAMES = ("out", "position_ids", "head_dim")


# ---- inputs ----------------------------------------------------------------------------------

def _positions(position_ids: Any) -> Tuple[Optional[np.ndarray], Tuple[int, ...]]:
    """(the positions array, its shape); (None, (1, n)) for an int n (``arange(n)[None]``,
    never made: the core computes its rows)."""
    if isinstance(position_ids, (bool, np.bool_, int, np.integer)) or \
            not hasattr(position_ids, "shape") and np.ndim(position_ids) == 0:
        if isinstance(position_ids, (int, np.integer)) and not isinstance(position_ids, bool):
            return None, (1, _int(position_ids, "position_ids"))
        raise TypeError(f"position_ids must be an integer array (batch, seq), got "
                        f"{position_ids!r}")
    a = _array_positions(position_ids)
    return a, a.shape


def _seq_len(pos: Optional[np.ndarray], shape: Tuple[int, ...]) -> Any:
    """The dynamic/longrope forwards' ``seq_len = torch.max(position_ids) + 1``, computed in
    position_ids' own dtype as torch computes it (int32 wraps, float16 rounds, NaN stays NaN
    and compares False), as a Python int or float; 0 for no positions.  A broadcast array
    is read once per stored element (its axes of stride 0 at index 0)."""
    if pos is None:
        return shape[-1]
    if not pos.size:
        return 0
    data = pos[tuple(0 if st == 0 else slice(None) for st in pos.strides)]
    with np.errstate(all="ignore"):
        top = np.add(np.max(data), np.ones((), pos.dtype)).astype(pos.dtype)
    return int(top) if pos.dtype.kind in "iu" else float(top)


# ---- the first call's inv_freq -----------------------------------------------------------------

def _rope_type(c: Cfg, state: bool = False) -> str:
    """The config's rope_type ("axial" for a vision tower), or the refusal of a form hf_rope
    does not reproduce.  state: the tables of a module's state (its init function already
    ran, so its rope_type is not read, only the form: "axial" or "state")."""
    mt, rope_type = c.model_type, c.p["rope_type"]
    if mt in OTHER:
        raise NotImplementedError(f"model_type {mt!r}: its rotary module is not the "
                                  "cos/sin-of-cat(freqs) form hf_rope reproduces")
    if rope_type == "axial" or mt in AXIAL:
        return "axial"
    if state:
        rope_type = "state"
    elif mt in NTK_ALPHA and (rope_type == "ntk_alpha" or rope_type == "dynamic"
                              and c.p.get("alpha")):
        return "ntk_alpha"  # the module's own renaming: a fixed alpha, no regrowth
    elif not isinstance(rope_type, str) or rope_type not in ROPE_INIT_FUNCTIONS:
        raise ValueError(f"rope_type {rope_type!r} is not one of {ROPE_TYPES}")
    if mt not in MROPE and c.p.get("mrope_section") is not None:
        raise NotImplementedError(f"model_type {mt!r} with mrope_section: its multimodal "
                                  "recomposition is not one hf_rope knows")
    return rope_type


def _regrowth(c: Cfg, rope_type: str, pos: Optional[np.ndarray],
              shape: Tuple[int, ...]) -> Optional[Any]:
    """The seq_len with which the module's first forward calls the init function again
    (transformers' dynamic_rope_update), or None when it keeps its init's inv_freq:
    dynamic past max_position_embeddings (seq_len itself), longrope past
    original_max_position_embeddings (``original_max_position_embeddings + 1``)."""
    if rope_type not in ("dynamic", "longrope"):
        return None
    top = _seq_len(pos, shape)
    if rope_type == "longrope":
        omp = omp_factor(c, "longrope", 1)[0]
        return omp + 1 if top > omp else None
    mpe = _int(c.max_position_embeddings, "config.max_position_embeddings", minimum=1)
    if not top > mpe:
        return None
    if pos is not None and pos.dtype.kind not in "iu" and pos.dtype != np.float32:
        raise NotImplementedError(f"position_ids of dtype {pos.dtype} past "
                                  "max_position_embeddings: the dynamic rope's regrowth "
                                  f"then runs in {pos.dtype}; pass integer position_ids")
    if not math.isfinite(top):
        raise ValueError(f"position_ids reach {top}: the dynamic rope's regrowth from an "
                         "infinite seq_len has no finite base")
    return top


def _first_inv(c: Cfg, rope_type: str, opts: PresetOpts, seq: Any,
               given: Any) -> Tuple[np.ndarray, float]:
    """The inv_freq and attention scaling of the module's first forward: its init's, or the
    regrown ones (the same init function, called with seq_len), or the given buffer."""
    init = FAMILY_INITS.get(rope_type) or ROPE_INIT_FUNCTIONS[rope_type]
    inv, scaling = init(c, opts, seq)
    if given is None or (rope_type == "dynamic" and seq is not None):
        return inv, scaling  # a regrown dynamic rope registers a new float32 buffer
    mine, given_dtype = _inv_given(given, len(inv))
    if rope_type == "longrope" and seq is not None:
        # the long factors copy_ into the given buffer, rounded to its dtype
        return np.asarray(_round_to(inv, given_dtype)).astype(F32), scaling
    return mine, scaling


def hf_rope(config: Any, position_ids: Any, *, inv_freq: Any = None, dtype: Any = None,
            backend: Optional[str] = None, threads: Optional[int] = None,
            torch_threads: Optional[int] = None, layer_type: Optional[str] = None,
            attention_scaling: Any = None,
            producer: Optional[str] = None) -> Tuple[np.ndarray, np.ndarray]:
    """hf_rope(config, position_ids, *, inv_freq=None, dtype=None, backend=None, threads=None,
    torch_threads=None, layer_type=None, attention_scaling=None, producer=None) -> (cos, sin)

    The ``(cos, sin)`` that transformers' (5.24.0) ``*RotaryEmbedding(config)`` returns from
    its FIRST ``forward(x, position_ids)`` call, bit for bit, as NumPy arrays of shape
    ``position_ids.shape + (width,)`` (width: head_dim, or the rotary dim with partial
    rotary) in dtype (x.dtype in the library: float32 default, float16, bfloat16 as an
    ml_dtypes array; cos and sin are two views of one array, made by one table job).
    config: a transformers config (or its ``to_dict()``, or any Mapping); a composite
    config (Qwen2-VL) is read through its text_config.  position_ids: (batch, seq) integers
    (a NumPy array or torch tensor), for mrope also (3, batch, seq); an int n means
    ``arange(n)[None]``.  inv_freq: the module's own buffer instead of the config's (any float
    dtype, e.g. bfloat16 after ``model.to(torch.bfloat16)``: the forward upcasts it with
    ``.float()``).  layer_type: for configs whose rope_parameters are keyed by layer type
    (Gemma 3: 'full_attention', 'sliding_attention'), the forward's layer_type.

    producer: the tables an engine serving the model computes for this config
    (docs/engines.md): None, 'transformers' and the engines that read an exported cache
    ('inductor', 'onnxruntime', 'openvino', 'openvino-bf16'): transformers' tables, as here;
    'mlx' (the default rope: MLX's own tables, rounded to dtype) and 'llama.cpp' (its GGUF
    converter's and llama_context's reading: default, linear, yarn, llama3; its float32 cache
    whatever dtype) from integer position_ids; another rope type raises NotImplementedError
    naming it.

    With inv_freq AND attention_scaling (the module's ``inv_freq`` buffer and
    ``attention_scaling``, or ``{layer_type}_inv_freq`` and ``{layer_type}_attention_scaling``
    per layer type) the tables are those of the module's current state, what its forward
    computes now: no init function runs and nothing regrows (transformers'
    ``dynamic_rope_update`` has already updated the buffer), ``cos = emb.cos() *
    attention_scaling`` (a float32 product with the number rounded to float32, as torch
    multiplies a float32 tensor by a Python float) with emb from ``inv_freq.float()`` in the
    family's layout, cast as the family casts; the width is inv_freq's (2 * len(inv_freq),
    or len(inv_freq) for half-width tables), not the config's head_dim.  The config is read
    only for the form (model_type, mrope_section, the per-layer-type nesting): values the
    module fixed at init (rope_theta, factor, attention_factor, head_dim, the partial
    factor) edited in the config since do not change the tables, as they do not change the
    module's.  attention_scaling: a real number (transformers keeps a Python float).

    The forward (all families but the listed variants): ``freqs = position_ids[..., None]
    .float() * inv_freq.float()`` (one float32 product), ``emb = cat(freqs, freqs)``,
    ``cos = emb.cos() * attention_scaling`` (a float32 product, exact when 1.0), ``sin``
    alike, then ``.to(x.dtype)``.  Variants by ``config.model_type``: Cohere (and Cohere2,
    BLT) ``repeat_interleave(freqs, 2)``; GPT-OSS ``emb = freqs``; OLMo, ERNIE 4.5 no cast
    (float32 whatever dtype); mrope (Qwen2-VL, Qwen2.5-VL: chunks of mrope_section from
    position rows t, h, w then cat; GLM-4V the same then repeat_interleave; Qwen3-VL rows
    interleaved t, h, w) computed on the (3, batch, seq, dim/2) tensor as the module does;
    HunYuan-VL one row per mrope_section entry, ``cat(freqs, freqs)`` cut in chunks of
    ``2 * section`` from row i, and its ``ntk_alpha`` rope (rope_type 'dynamic' with a fixed
    alpha: ``base = rope_theta * alpha ** (dim / (dim - 2))``, never regrown).
    Families with other modules (Llama 4, DeepSeek-V2 complex tables, PhiMoE, GPT-J...)
    raise NotImplementedError.  More model types of the same forms, the per-layer view of a
    heterogeneous config (Gemma 4: ``config.per_layer_config[layer_type]``, as the init
    reads it) and the vision towers' axial 2D rope (rope_type "axial": position_ids (N, 2)
    h, w coordinates, (batch, N, 2) for Gemma 4's; each family's layout) are in
    :mod:`sinpe._hf.axial` and :mod:`sinpe._hf.families`.

    inv_freq per rope_type (dim = int(head_dim * partial_rotary_factor); head_dim =
    ``config.head_dim or hidden_size // num_attention_heads``; ``A = arange(0, dim, 2)
    .float() / dim`` in float32; ``P = base ** A`` torch's float32 pow; ``1.0 / t`` is
    ``t.reciprocal() * 1.0``; Python numbers are rounded to float32 where they meet a tensor):
      default: ``1.0 / P`` with dim = head_dim (partial_rotary_factor honoured only by the
        families whose own default init reads it: GPT-NeoX, Phi, StableLM, GLM, Persimmon...).
      linear: ``(1.0 / P) / f32(factor)``.
      dynamic: at init ``base' = base * (factor * mpe / mpe - (factor - 1)) ** (dim / (dim -
        2))`` in Python floats, ``1.0 / base' ** A``; on a first call with ``max(position_ids)
        + 1 = s > max_position_embeddings`` the module regrows: ``t = f32(factor) * f32(s)``,
        ``t / f32(mpe)``, ``- f32(factor - 1)``, ``f32(double(t) ** (dim / (dim - 2)))``,
        ``f32(base) * t`` (float32 0-d steps), then ``1.0 / t ** A`` (the history of later
        calls is not modelled: this is the first call).  s, here and for longrope, is
        ``max(position_ids) + 1`` in position_ids' own dtype, as torch computes it (int32
        wraps, float16 rounds, NaN compares False); a regrowth from floating positions
        other than float32 raises NotImplementedError.
      yarn: Python floats for attention_factor (get_mscale), beta_fast/slow and
        find_correction_range (floor/ceil when truncate), ``P``; ``extra = 1.0 / P``,
        ``inter = 1.0 / (f32(factor) * P)``; ``ramp = clamp((arange(dim // 2) - f32(low)) /
        f32(high - low), 0, 1)``; ``ef = 1 - ramp``; ``inter * (1 - ef) + extra * ef``;
        cos/sin multiplied by f32(attention_factor).
      longrope: ``1.0 / (f32(ext) * P)`` with ext = long_factor when ``max(position_ids) + 1
        > original_max_position_embeddings`` (the module's per-call switch), short_factor
        otherwise (a given low-precision inv_freq: the long factors are rounded to its dtype,
        as the module's ``copy_`` into its buffer rounds them); attention_factor =
        ``sqrt(1 + log(factor) / log(omp))`` (Python floats) unless given.
      llama3: ``inv = 1.0 / P``; ``wl = (1.0 / inv) * f32(2 pi)``; ``ill = where(wl >
        f32(omp / low), inv / f32(factor), inv)``; ``s = ((1.0 / wl) * f32(omp) - f32(low)) /
        f32(high - low)``; ``((1 - s) * ill) / f32(factor) + s * ill`` where medium.
      proportional: ``a = int(prf * head_dim // 2)`` angles ``1.0 / base ** (arange(0, 2a, 2)
        / head_dim)``, then head_dim / 2 - a zeros, all ``/ f32(factor)``; full head_dim.
    """
    # the core's options are checked by the call's first job (no separate call for them)
    opts = _opts(dtype, None, backend, threads, torch_threads, check=False)
    c = read_config(config, layer_type)
    made = _producers.producer(producer, "float32", "half")
    if made is not None and made.p.angles:  # the engine's own tables from the config
        if inv_freq is not None or attention_scaling is not None:
            raise ValueError(f"producer={producer!r} computes its own tables from the config: "
                             "inv_freq and attention_scaling are transformers' module's")
        return _engine_tables(made.p.angles, c, position_ids, opts, dtype)
    if attention_scaling is not None:
        return _module_state(c, position_ids, inv_freq, attention_scaling, opts, dtype,
                             layer_type)
    rope_type = _rope_type(c)
    if rope_type == "axial":  # a vision tower's 2D rope
        return axial_rope(c, position_ids, inv_freq, opts, dtype, layer_type)
    pos, shape = _positions(position_ids)
    seq = _regrowth(c, rope_type, pos, shape)
    key = _memo_key(c, rope_type, opts, seq, inv_freq)
    kept = None if key is None else _memo.get(key)
    if kept is not None:
        inv, emb, scaling = kept
    else:
        inv, scaling = _first_inv(c, rope_type, opts, seq, inv_freq)
        inv = np.ascontiguousarray(inv, F32)
        emb = np.ascontiguousarray(_emb(c.model_type, inv), F32)
        inv.flags.writeable = emb.flags.writeable = False  # shared by later calls
        if key is not None:
            _memo[key] = (inv, emb, scaling)
    out_dtype = None if c.model_type in NO_CAST else dtype
    mrope = MROPE.get(c.model_type)
    if mrope is not None:
        return _mrope(pos, shape, inv, scaling, mrope, c, opts, out_dtype)
    return _cos_sin(pos, shape, emb, scaling, opts, out_dtype)


def _engine_tables(engine: str, c: Cfg, position_ids: Any, opts: PresetOpts,
                   dtype: Any) -> Tuple[np.ndarray, np.ndarray]:
    """MLX's or llama.cpp's cos and sin for the config (sinpe._angles: the engine's reading
    of it, or NotImplementedError naming the rope type it does not reproduce), of shape
    position_ids.shape + (rotary dim,), in the family's layout: MLX's rounded to dtype as its
    rotation rounds them, llama.cpp's float32 cache as it is."""
    kw, why = _angles.config_args(engine, c, opts)
    if kw is None:
        raise NotImplementedError(f"producer={engine!r}: {why}")
    pos, shape = _positions(position_ids)
    p = np.arange(shape[1])[None] if pos is None else np.asarray(pos)
    if p.ndim != 2:
        raise ValueError(f"position_ids for producer={engine!r} must be (batch, seq) integers, "
                         f"got {p.dtype} of shape {p.shape}")
    p = _angles.int32_positions(p, engine)
    rot = c.dim()
    theta = float(c.p["rope_theta"])
    layout = "pairs" if c.model_type in INTERLEAVED else "half"
    if engine == "mlx":
        cos, sin = _angles.mlx_tables(_opts(None, None, "mlx", opts.core.threads, None),
                                      p.astype(F32), rot, theta, layout, False)
        return _round_to(cos, dtype), _round_to(sin, dtype)
    return _angles.llama_tables(opts, p, rot, theta, layout,
                                _angles.llama_args(kw.get("engine_args"), rot))


def _scaling(v: Any) -> float:
    """attention_scaling as a Python float (a real number; not a bool)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        raise TypeError(f"attention_scaling must be a real number (the module's "
                        f"attention_scaling), got {type(v).__name__}")
    try:
        return float(v)
    except OverflowError:
        raise OverflowError(f"attention_scaling {v!r} does not fit in a float") from None


def _module_state(c: Cfg, position_ids: Any, inv_freq: Any, attention_scaling: Any,
                  opts: PresetOpts, dtype: Any,
                  layer_type: Optional[str]) -> Tuple[np.ndarray, np.ndarray]:
    """The tables of a module's state: its inv_freq buffer and attention_scaling, in the
    family's layout (no init function, no regrowth)."""
    scaling = _scaling(attention_scaling)
    if inv_freq is None:
        raise ValueError("attention_scaling given without inv_freq: the tables of a module's "
                         "state need both (its inv_freq buffer and its attention_scaling)")
    if _rope_type(c, state=True) == "axial":
        return axial_rope(c, position_ids, inv_freq, opts, dtype, layer_type, scaling=scaling)
    pos, shape = _positions(position_ids)
    inv = _inv_given(inv_freq, None)[0]
    emb = np.ascontiguousarray(_emb(c.model_type, inv), F32)
    out_dtype = None if c.model_type in NO_CAST else dtype
    mrope = MROPE.get(c.model_type)
    if mrope is not None:
        return _mrope(pos, shape, inv, scaling, mrope, c, opts, out_dtype)
    return _cos_sin(pos, shape, emb, scaling, opts, out_dtype)


# ---- the frequencies kept between calls --------------------------------------------------------
#
# A decode step calls the rotary module once per token with the same config: its inv_freq (an
# init function, a pow job in the core) is kept, keyed by the values the init functions read
# (Cfg's fields, never the config object: a config changed in place misses), the backend's
# options, the regrowth's seq_len, and a given inv_freq= buffer by its content (a NumPy array or
# a tensor alike: a write that bumps no version counter, through .data or a NumPy view, misses
# too).  sinpe.clear_cache() forgets them.

_memo: "Memo[Any, Any]" = Memo(16)  # (sinpe._memo: emptied by clear_cache)


def _frozen(v: Any) -> Any:
    """v as a hashable key that tells 1, 1.0 and True apart (equal in Python, not to the
    init functions' float32 steps) and lists from tuples; TypeError when it cannot be."""
    if isinstance(v, (list, tuple)):
        return (type(v).__name__,) + tuple(_frozen(e) for e in v)
    if isinstance(v, Mapping):
        return ("map",) + tuple(sorted((str(k), _frozen(e)) for k, e in v.items()))
    if isinstance(v, np.ndarray):
        return ("nd", v.dtype.str, v.shape, v.tobytes())
    if v is None or isinstance(v, (bool, int, float, str, np.generic)):
        return (type(v).__name__, v)
    raise TypeError("not a plain value")


#: the most frequencies a given inv_freq is keyed by (no rotary has more; a larger one is
#: refused by the call, and its values are never copied for a key first)
_KEYED = 1 << 16


def _given_key(given: Any) -> Any:
    """A given inv_freq by its content: dtype, shape and values (a tensor's widened to
    float64, exactly); TypeError when it cannot be read here (the call then keeps nothing)."""
    if given is None:
        return None
    torch = _tensors.torch_of(given)
    if torch is None and not isinstance(given, np.ndarray):
        raise TypeError("not an array")
    if (given.numel() if torch is not None else given.size) > _KEYED:
        raise TypeError("too large to key")  # more than any rotary has: the call refuses it
    if torch is None:
        return _frozen(given)
    try:
        values = given.detach().to("cpu", torch.float64).numpy()
    except (RuntimeError, NotImplementedError, ValueError) as exc:  # meta, fake tensors
        raise TypeError(str(exc)) from None
    return ("tensor", str(given.dtype), tuple(given.shape), values.tobytes())


class _Part:
    """A config's part of a key: its hash taken once (a decode step looks the same reading up
    again: the same object, equal at once), equal to another reading of the same values."""
    __slots__ = ("t", "h")

    def __init__(self, t: Tuple[Any, ...]) -> None:
        self.t, self.h = t, hash(t)  # TypeError: a value that cannot be keyed

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other: Any) -> bool:
        return self is other or (type(other) is _Part and self.h == other.h
                                 and self.t == other.t)


def _memo_key(c: Cfg, rope_type: str, opts: PresetOpts, seq: Any, given: Any) -> Any:
    """The key of the frequencies of this call, or None when a value cannot be keyed (then
    nothing is kept)."""
    try:
        part = c.__dict__.get("_key")  # the config's part, once per reading (config.read)
        if part is None:
            part = c.__dict__["_key"] = _Part((
                c.model_type, _frozen((c.hidden_size, c.num_attention_heads,
                                       c.max_position_embeddings, c.has_head_dim, c.head_dim,
                                       c.omp_attr, c.top_truncate)), _frozen(c.p)))
        key = (rope_type, _frozen(seq), opts.core, part, _given_key(given))
        hash(key)
    except TypeError:
        return None
    return key


# ---- the tables ------------------------------------------------------------------------------

def _emb(mt: str, inv: np.ndarray) -> np.ndarray:
    """The frequencies of the module's ``emb``: cat(inv, inv), repeat_interleave or inv."""
    if mt in INTERLEAVED:
        return np.repeat(inv, 2)
    if mt in HALF_WIDTH:
        return inv
    return np.concatenate([inv, inv])


_COLS: "Memo[int, np.ndarray]" = Memo(64)


def _cos_sin_table(pos: Optional[np.ndarray], shape: Tuple[int, ...], freq: np.ndarray,
                   scaling: float, opts: PresetOpts, dtype: Any, grid: bool = False
                   ) -> np.ndarray:
    """``emb.cos()`` then ``emb.sin()`` side by side, shape + (2 * len(freq),), in one job
    (scaled by attention_scaling in float32, then rounded to dtype)."""
    width = len(freq)
    col: Any = _COLS.get(width)
    if col is None:  # a pure function of the width: kept (read-only), as the frequencies are
        k = 4 * np.arange(width, dtype=np.int64)
        col = np.concatenate([k + COS, k + SIN])
        col.flags.writeable = False
        _COLS[width] = col
    out_scale = None if scaling == 1.0 else scaling
    freq = np.ascontiguousarray(freq, F32)
    if pos is not None:  # (a decode step: straight to the job, without _table's options)
        t: np.ndarray = table_job(opts.core, positions=pos, freq=freq, col=col, dtype=dtype,
                                  names=NAMES, out_scale=out_scale)
        return t.reshape(shape + (2 * width,))
    job = opts._replace(dtype=dtype)
    kw: Dict[str, Any] = {"names": NAMES, "out_scale": out_scale}
    if grid:  # arange(n) in each of the 3 rows: grid row r has position r % n
        t = _table(None, freq, col, job, grid=(shape[0], shape[-1], 0),
                   comp=np.ones(width, np.int32), **kw)
    else:
        t = _table(shape[-1], freq, col, job, **kw)
    return t.reshape(shape + (2 * width,))


def _cos_sin(pos: Optional[np.ndarray], shape: Tuple[int, ...], freq: np.ndarray,
             scaling: float, opts: PresetOpts, dtype: Any) -> Tuple[np.ndarray, np.ndarray]:
    """(cos, sin): two views of one table."""
    t = _cos_sin_table(pos, shape, freq, scaling, opts, dtype)
    w = len(freq)
    return t[..., :w], t[..., w:]


def _sections(spec: Tuple[Any, ...], c: Cfg, h: int) -> np.ndarray:
    """The position row (t, h, w) of each of the h half columns."""
    how, _, dflt = spec
    sec = c.p.get("mrope_section") or dflt
    try:
        sec = [_int(v, "mrope_section") for v in sec]
    except TypeError:
        raise TypeError(f"config.rope_parameters['mrope_section'] must be a list of ints, got "
                        f"{sec!r}") from None
    row = np.zeros(h, np.int64)
    if how == "chunks":
        if sum(sec) != h:
            raise ValueError(f"mrope_section {sec} must sum to dim / 2 = {h}")
        j = 0
        for i, n in enumerate(sec):
            row[j:j + n] = i % 3
            j += n
    else:  # qwen3_vl: T everywhere, then H at 1::3 and W at 2::3 up to 3 * section
        if len(sec) < 3:
            raise ValueError(f"mrope_section must have 3 entries, got {sec}")
        for d, off in ((1, 1), (2, 2)):
            row[slice(off, sec[d] * 3, 3)] = d
    return row


def _full_sections(c: Cfg, h: int) -> Tuple[int, np.ndarray]:
    """HunYuan-VL's recomposition: the axes (one per mrope_section entry) and, for each of the
    2h columns of cat(freqs, freqs), the axis row it is taken from (chunk i of widths
    2 * mrope_section[i] from row i % axes)."""
    sec = c.p.get("mrope_section")
    if sec is None:
        raise ValueError(f"model_type {c.model_type!r} needs rope_parameters['mrope_section'] "
                         "(its rotary module takes len() of it)")
    try:
        sec = [_int(v, "mrope_section") for v in sec]
    except TypeError:
        raise TypeError(f"config.rope_parameters['mrope_section'] must be a list of ints, got "
                        f"{sec!r}") from None
    if not sec or sum(sec) != h or min(sec) < 0:
        raise ValueError(f"mrope_section {sec} must sum to dim / 2 = {h}")
    return len(sec), np.repeat(np.arange(len(sec)), [2 * s for s in sec])


def _mrope(pos: Optional[np.ndarray], shape: Tuple[int, ...], inv: np.ndarray, scaling: float,
           spec: Tuple[Any, ...], c: Cfg, opts: PresetOpts,
           dtype: Any) -> Tuple[np.ndarray, np.ndarray]:
    """freqs.cos(), freqs.sin() on the (axes, batch, seq, dim/2) tensor, as the module computes
    them, then each half column from its section's row, expanded (cat or interleave); or, for
    the "full" recomposition, each column of cat(freqs, freqs) from its section's row; for
    the "alternate" one (two axes), half column j from row j % 2."""
    h = len(inv)
    if spec[0] == "full":
        axes, row = _full_sections(c, h)
    elif spec[0] == "alternate":
        if h % 2:
            raise ValueError(f"NeoMME's recomposition stacks the even and odd half columns: "
                             f"dim / 2 = {h} must be even (torch.stack raises)")
        axes, row = 2, np.arange(h) % 2
    else:
        axes, row = 3, _sections(spec, c, h)
    if pos is not None and pos.ndim == 2:
        pos = np.broadcast_to(pos[None], (axes,) + pos.shape)
    shape = (axes,) + shape if len(shape) == 2 else shape
    if len(shape) != 3 or shape[0] != axes:
        raise ValueError(f"position_ids must have shape (batch, seq) or ({axes}, batch, seq) "
                         f"for mrope, got {shape}")
    t = _cos_sin_table(pos, shape, inv, scaling, opts, dtype, grid=True)
    out = []
    for k in (0, h):
        if spec[0] == "full":  # column j of cat(freqs, freqs): freqs[j % h] of row row[j]
            cols = np.arange(2 * h)
            out.append(np.ascontiguousarray(t[row, :, :, k + cols % h].transpose(1, 2, 0)))
            continue
        half = t[row, :, :, k + np.arange(h)].transpose(1, 2, 0)  # column j from row row[j]
        full = np.repeat(half, 2, axis=-1) if spec[1] == "interleave" else \
            np.concatenate([half, half], axis=-1)
        out.append(np.ascontiguousarray(full))
    return out[0], out[1]
