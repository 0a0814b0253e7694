"""Rotary embeddings applied in place, and the tables' relative-position property.

apply_rope builds its cos/sin rows in the C core (as the presets do) and rotates x there
in one pass; shift_matrix is plain NumPy (float64), for inspection.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

from . import _angles, _cache, _jobs, _producers, _tensors
from ._jobs import (rope_job, COS, SIN, _admit, _freqs, _int, _positive, _rope_inv_freq, _round,
                    _table)
from ._backends import policy as _policy
from ._backends.policy import call_opts as _opts
from ._memo import Memo
from ._types import PresetOpts


def apply_rope(x: Any, positions: Any = None, *, base: float = 10000.0, layout: str = "half",
               offset: int = 0, seq_dim: int = -2, rot_dim: Optional[int] = None,
               cos: Any = None, sin: Any = None, producer: Optional[str] = None,
               engine_args: Any = None, backend: Optional[str] = None, threads: Optional[int] = None,
               torch_threads: Optional[int] = None) -> Any:
    """Rotate x in place by the rotary position embedding (RoPE) and return it.

    x: a writable array or torch CPU tensor (float32, float16, bfloat16 or float64) of shape
       (..., seq, head_dim), seq on axis seq_dim: (batch, heads, seq, head_dim) with the
       default -2, (batch, seq, heads, head_dim) with seq_dim=-3 (or 1).
    positions: (seq,) or (batch, seq) (HF's position_ids; batch = x.shape[0]); default
       offset + arange(seq). Rounded to float32 as torch's .float() does.
    layout: 'half': transformers' ``apply_rotary_pos_emb`` with ``LlamaRotaryEmbedding``'s
       default cos/sin (``x * cos + rotate_half(x) * sin``, rotate_half = cat(-x2, x1); in
       x's dtype with cos/sin cast to it, every op rounded as torch does);
       'pairs': rotary-embedding-torch's ``apply_rotary_emb(RotaryEmbedding(rot)(t), x)``
       (pairwise rotate_half; computed in float32 and rounded once to x's dtype).
    rot_dim: rotate only the first rot_dim columns (even; default head_dim), as partial
       rotary models and rotary-embedding-torch with a smaller dim do.
    cos, sin: instead of base/positions, the tables a transformers rotary module returned
       (shape (seq, rot) or (batch, seq, rot), any float dtype; rot <= head_dim: the first
       rot columns rotate, GPT-NeoX's partial form), for layout 'half'; for layout 'pairs',
       rotary-embedding-torch's tables ``freqs.cos()``, ``freqs.sin()`` of its repeated-pair
       angles (``RotaryEmbedding(dim)(t)``, or :func:`sinpe.presets.rotary_embedding_torch`):
       ``x * cos + rotate_half(x) * sin`` on the first rot columns, in float32, rounded once.
    producer: whose arithmetic rotates (docs/engines.md): None or 'transformers' (the
       layouts above), 'inductor' (torch.compile: float32 intermediates, one rounding),
       'onnxruntime' (its RotaryEmbedding kernel on x86-64, ONNX's opset-23 op too: float32
       and float16), 'openvino' / 'openvino-bf16' (its fused RoPE node at hint f32 / at its
       default bfloat16 precision; ':avx512' or ':avx2' names the serving CPU, else this
       machine's), 'mlx' (mx.fast.rope on the CPU: its own tables from positions, computed
       whatever backend=, and every op in x's dtype; given positions are int32 integers,
       each rounded to float32 once, where MLX adds float(t) + float(offset): the same below
       2^24, past it pass offset=;
       with cos/sin given, MLX's per-op rotation of those tables), 'llama.cpp' (ggml's
       ggml_rope_ext on x86-64, NEOX for the halves, NORMAL for the pairs: its own angles from
       integer positions, float32 and float16).  The other engines' tables are transformers'
       (computed, or given: read as the cache an exporter writes).  A dtype or layout the
       engine does not run is refused naming it.
    engine_args: the rope parameters of an engine that computes its own tables: llama.cpp's
       as it reads them from a GGUF (a mapping of freq_scale, ext_factor, attn_factor,
       beta_fast, beta_slow, n_ctx_orig, freq_factors; YaRN when ext_factor != 0); MLX's
       {'freqs': mx.fast.rope's freqs= (rot_dim / 2 values; base is then not read)}.
    base: theta (rope_theta). backend, threads, torch_threads: as for the tables.  The cos/sin
       rows are kept in the cache for the next call (sinpe.set_cache_size), by position:
       a decode step computes only rows no call has computed (docs/speed.md).  q and k in
       one call: :func:`apply_rope_qk`.
    """
    _apply(x, None, positions, base, layout, offset, seq_dim, rot_dim, cos, sin, producer,
           engine_args, backend, threads, torch_threads)
    return x


def apply_rope_qk(q: Any, k: Any, positions: Any = None, *, base: float = 10000.0,
                  layout: str = "half", offset: int = 0, seq_dim: int = -2,
                  rot_dim: Optional[int] = None, cos: Any = None, sin: Any = None,
                  producer: Optional[str] = None, engine_args: Any = None,
                  backend: Optional[str] = None, threads: Optional[int] = None,
                  torch_threads: Optional[int] = None) -> Tuple[Any, Any]:
    """Rotate q and k in place by the same tables in one call and return (q, k), as
    transformers' ``apply_rotary_pos_emb(q, k, cos, sin)`` and the engines' kernels do: the
    tables are made (or read) once and one pass of the core's threads rotates both.

    q, k: one dtype and head_dim, the same seq on seq_dim and the same batch when the tables
    have one per batch (positions (batch, seq)); their heads may differ (grouped-query
    attention).  Every other argument as :func:`apply_rope`'s, applied to both; the bits are
    apply_rope(q, ...) and apply_rope(k, ...)'s.  q and k that may share memory (views of one
    fused qkv buffer) are rotated one after the other, q first.
    """
    if _may_share(q, k):  # views of one buffer (a fused qkv): one after the other
        for x in (q, k):
            _apply(x, None, positions, base, layout, offset, seq_dim, rot_dim, cos, sin,
                   producer, engine_args, backend, threads, torch_threads)
        return q, k
    _apply(q, k, positions, base, layout, offset, seq_dim, rot_dim, cos, sin, producer,
           engine_args, backend, threads, torch_threads)
    return q, k


def _may_share(q: Any, k: Any) -> bool:
    """q and k may reach the same memory (by their extents, as the core's check of one job's
    arrays: views of one fused qkv buffer too, which that check refuses)."""
    torch = _tensors.torch_of(q)
    if torch is not None and _tensors.torch_of(k) is not None:
        try:
            return bool(q.untyped_storage().data_ptr() == k.untyped_storage().data_ptr())
        except (RuntimeError, NotImplementedError):  # no storage (meta, nested): the checks
            return False
    try:
        return bool(np.may_share_memory(q, k))
    except Exception:  # noqa: BLE001 - not buffers: the checks name them
        return False


class _Rows(NamedTuple):
    """How one frequency vector's rows are kept by position: their key, itemsize and fill."""
    key: Any
    itemsize: int
    fill: Any


class _Plan(NamedTuple):
    """What apply_rope made of a call's arguments but x's values and the positions: kept by
    them (_plan_key) once a call succeeded, so that the next (a decode step) only reads its
    rows and rotates."""
    opts: PresetOpts
    shape: Tuple[int, ...]
    sd: int
    seq: int
    layout: str
    rows: Optional[_Rows]
    form: int
    tensor: bool
    given: bool = False  # the tables are given (NumPy arrays read as they are)


_PLANS: Memo[Any, _Plan] = Memo(256)
#: given tables' dtypes the core reads as they are (widened exactly, as the copies would be)
_READ_AS_THEY_ARE = frozenset({"float32", "float16", "bfloat16"})
_SCALARS = (int, type(None))


def _plan_key(x: Any, k: Any, cos: Any, sin: Any, layout: Any, seq_dim: Any, rot_dim: Any,
              base: Any, producer: Any, backend: Any, threads: Any, torch_threads: Any) -> Any:
    """The key of a call's plan, or None: arguments of types whose equal values could mean
    different things (bools, subclasses, objects) are never keys."""
    if type(seq_dim) is not int or type(rot_dim) not in _SCALARS or type(threads) not in _SCALARS \
            or type(torch_threads) not in _SCALARS or type(base) not in (float, int) \
            or type(layout) is not str or type(producer) not in (str, type(None)) \
            or type(backend) not in (str, type(None)):
        return None
    try:
        xk = (type(x), x.dtype, tuple(x.shape))
        kk = None if k is None else (type(k), k.dtype, tuple(k.shape))
        tk = None if cos is None else (type(cos), cos.dtype, tuple(cos.shape), type(sin),
                                       sin.dtype, tuple(sin.shape))
        key = (xk, kk, tk, layout, seq_dim, rot_dim, base, producer, backend, threads, torch_threads,
               _policy.token())
        hash(key)
    except Exception:  # noqa: BLE001 - a nested tensor's shape raises: no key, the checks name it
        return None
    return key


def _apply(x: Any, k: Any, positions: Any, base: Any, layout: Any, offset: Any, seq_dim: Any,
           rot_dim: Any, cos: Any, sin: Any, producer: Any, engine_args: Any, backend: Any,
           threads: Any, torch_threads: Any) -> None:
    """apply_rope's (and apply_rope_qk's) rotation of x (and k)."""
    key = None
    if (cos is None) == (sin is None) and engine_args is None:
        key = _plan_key(x, k, cos, sin, layout, seq_dim, rot_dim, base, producer, backend,
                        threads, torch_threads)
        plan = None if key is None else _PLANS.get(key)
        if plan is not None and _run(plan, x, k, positions, offset, cos, sin):
            return
    plan = _checked(x, k, positions, base, layout, offset, seq_dim, rot_dim, cos, sin, producer,
                    engine_args, backend, threads, torch_threads)
    if key is not None and plan is not None and _policy.settled(backend):
        _PLANS[key] = plan


def _run(plan: _Plan, x: Any, k: Any, positions: Any, offset: Any, cos: Any, sin: Any) -> bool:
    """A call by its kept plan: True when done; False when its rows are not kept by position
    (or its offset and positions are not plain, or its given tables may share x's memory):
    the full route then runs (and names what is wrong, or copies the tables)."""
    if type(offset) is not int or (positions is not None and offset != 0):
        return False
    if plan.given:
        if positions is not None or offset != 0 or cos.ctypes.data % cos.itemsize \
                or sin.ctypes.data % sin.itemsize or any(
                np.may_share_memory(a, t) for a in (x, k) if a is not None for t in (cos, sin)):
            return False
        _rotate(plan, x, k, cos if cos.ndim == 3 else cos[None],
                sin if sin.ndim == 3 else sin[None], False)
        return True
    tensor = plan.tensor and _tensors.writable(x, "x" if k is None else "q")
    if k is not None:
        if tensor:
            _tensors.writable(k, "k")
        elif not k.flags.writeable:  # a NumPy k (the plan's key): named before the core
            raise ValueError("k is read-only")
    pos = None
    if positions is not None:
        pos = _positions(_tensors.values(positions, "positions"), 0, plan.shape, plan.sd,
                         plan.seq)
    tables = _by_position(plan.rows, plan.seq, offset, pos)
    if tables is None:
        return False
    _rotate(plan, x, k, tables[0], tables[1], tensor)
    return True


def _rotate(plan: _Plan, x: Any, k: Any, c: Any, s_: Any, tensor: bool) -> None:
    """The core's one call: x (and k) rotated by the tables c, s_."""
    if tensor:  # before the write: no signal's handler runs between the write and the move
        _jobs.bump_version(x)
        if k is not None:
            _jobs.bump_version(k)
    rope_job(plan.opts.core, x, c, s_, plan.sd, 0 if c.shape[0] > 1 else -1,
             plan.layout == "pairs", None, k, None, None if k is None else _QK_NAMES, plan.form)


def _qk_check(q: Any, k: Any, qs: Tuple[int, ...]) -> None:
    """apply_rope_qk's q and k: both tensors or both not, one dtype, rank and head_dim (the
    rest the core checks against the tables, naming k)."""
    if (_tensors.torch_of(q) is None) != (_tensors.torch_of(k) is None):
        raise TypeError(f"q and k must both be torch tensors or both be arrays, got "
                        f"{type(q).__name__} and {type(k).__name__}")
    if _tensors.torch_of(k) is None:  # the core refuses it too, naming the first array
        try:
            readonly = memoryview(k).readonly
        except (TypeError, ValueError):
            readonly = False
        if readonly:
            raise ValueError("k is read-only")
    _tensors.writable(k, "k")
    ks = _shape_of(k)
    qn, kn = _dtype_name(q), _dtype_name(k)
    if qn != kn or len(qs) != len(ks) or qs[-1:] != ks[-1:]:
        raise ValueError(f"q and k must have one dtype, rank and head_dim, got {qn} {qs} and "
                         f"{kn} {ks}")


#: the rope call's arrays (x, cos, sin, src, x2, src2) by apply_rope_qk's names
_QK_NAMES = ("q", "cos", "sin", "q", "k", "k")


def _checked(x: Any, k: Any, positions: Any, base: Any, layout: Any, offset: Any, seq_dim: Any,
             rot_dim: Any, cos: Any, sin: Any, producer: Any, engine_args: Any, backend: Any,
             threads: Any, torch_threads: Any) -> Optional[_Plan]:
    """The call with every check: the plan of a call with transformers' tables (None: the
    tables were given or an engine's own)."""
    tensor = _tensors.writable(x, "x" if k is None else "q")  # nested, vmapped, inference: named
    positions = _tensors.values(positions, "positions")
    shape = _shape_of(x)
    if k is not None:
        _qk_check(x, k, shape)
    plan = None
    if len(shape) < 2:
        raise ValueError(f"x must have shape (..., seq, head_dim), got shape {shape}")
    if layout not in ("half", "pairs"):
        raise ValueError(f"layout must be 'half' or 'pairs', got {layout!r}")
    sdim = _int(seq_dim, "seq_dim", minimum=-len(shape))
    sd = sdim + len(shape) if sdim < 0 else sdim
    if not 0 <= sd < len(shape) - 1:
        raise ValueError(f"seq_dim={sdim} is not an axis of x before the last "
                         f"(x has shape {shape})")
    seq, d = shape[sd], shape[-1]
    if k is not None and _shape_of(k)[sd] != seq:
        raise ValueError(f"k must have q's seq on seq_dim={sdim} ({seq}), got shape "
                         f"{_shape_of(k)}")
    if k is not None and positions is not None and np.ndim(positions) == 2 \
            and np.shape(positions)[0] > 1 and _shape_of(k)[0] != shape[0]:
        raise ValueError(f"k must have q's batch ({shape[0]}) when positions have one row per "
                         f"batch element, got k of shape {_shape_of(k)}")
    name = _dtype_name(x)
    rot = _rot_of(cos, rot_dim, d)
    made = _producers.producer(producer, name, layout, rot, d)
    if engine_args is not None and (made is None or not made.p.angles or cos is not None):
        raise ValueError("engine_args are the rope parameters of an engine that computes its "
                         "own tables (producer='llama.cpp' or 'mlx', without cos/sin), not "
                         f"{producer!r}'s")
    form = 0 if made is None else made.form
    mlx = made is not None and made.p.angles == "mlx"
    opts = _opts(None, None, backend, threads, torch_threads)  # checked, whoever computes
    if mlx:  # MLX's own functions make its tables
        opts = _opts(None, None, "mlx", threads, torch_threads)
    if cos is not None or sin is not None:
        c, s_ = _given_tables(cos, sin, shape, sd, layout, positions, offset, rot_dim,
                              name != "float32")
        if type(x) is np.ndarray and (k is None or type(k) is np.ndarray) \
                and type(cos) is np.ndarray and type(sin) is np.ndarray \
                and all(t.dtype.isnative and t.dtype.name in _READ_AS_THEY_ARE
                        and t.ctypes.data % t.itemsize == 0 for t in (cos, sin)):
            plan = _Plan(opts, shape, sd, seq, layout, None, form, tensor, True)
    elif made is not None and made.p.angles:
        c, s_ = _own_tables(opts, made.p.angles, shape, sd, seq, positions, base, layout,
                            offset, rot, engine_args)
    else:
        half = name if layout == "half" and name in ("float16", "bfloat16") else None
        # transformers' module casts its tables to x's dtype: an engine reads them so
        own = made is not None and made.form & _producers.OV_TABLES
        half = half if half is not None and (own or math.prod(shape) >= 2 * seq * d) else None
        c, s_ = _rope_tables(opts, shape, sd, seq, d, positions, base, layout, offset, rot_dim,
                             half)
        plan = _Plan(opts, shape, sd, seq, layout,
                     _rows_of(opts, rot, _positive(base, "base"), layout, half), form, tensor)
    _rotate(plan or _Plan(opts, shape, sd, seq, layout, None, form, tensor), x, k, c, s_,
            tensor)
    return plan


def _positions(positions: Any, off: int, shape: Tuple[int, ...], sd: int, seq: int) -> np.ndarray:
    """The positions as (1 or batch, seq) (HF's position_ids), checked against x's shape."""
    if off:
        raise ValueError("offset and positions exclude each other")
    pos = np.asarray(positions)
    pos = pos[None] if pos.ndim == 1 else pos
    if pos.ndim != 2 or pos.shape[1] != seq or pos.shape[0] not in (1, shape[0]) \
            or (pos.shape[0] > 1 and sd == 0):
        raise ValueError(f"positions must have shape (seq,) or (batch, seq) = "
                         f"({shape[0]}, {seq}) for x of shape {shape}, got "
                         f"{np.shape(positions)}")
    return pos


def _rot_of(cos: Any, rot_dim: Any, d: int) -> int:
    """The rotated width a call asks for (the tables' width, rot_dim or head_dim), read
    before anything is made for a producer's refusals (rot_dim checked here: its type and
    range are named before a producer's rule reads it)."""
    if cos is not None:
        shape = _shape_of(cos)
        return shape[-1] if shape else d
    if rot_dim is None:
        return d
    rot = _int(rot_dim, "rot_dim")
    if rot % 2 or rot > d or rot < 2:
        raise ValueError(f"rot_dim must be even, >= 2 and <= head_dim = {d}, got {rot}")
    return rot


def _own_tables(opts: PresetOpts, engine: str, shape: Tuple[int, ...], sd: int, seq: int,
                positions: Any, base: Any, layout: str, offset: Any, rot: int,
                engine_args: Any) -> Tuple[Any, Any]:
    """An engine's own cos and sin tables (tables, seq, rot), float32 (sinpe._angles), rot
    as _rot_of checked it: MLX's from positions float(t) + float(offset) (MLX's int32
    offset) or the given integer ones; llama.cpp's from integer positions (ggml's int32).
    Not kept: a call computes its own."""
    theta = _positive(base, "base")
    off = _int(offset, "offset")
    if positions is None:
        if not -(1 << 31) <= off + seq - 1 < 1 << 31:
            raise OverflowError(f"offset={off} does not fit in {engine}'s int32 positions "
                                f"for {seq} rows")
        pos = np.arange(seq, dtype=np.float32)[None] + np.float32(off) if engine == "mlx" \
            else np.arange(off, off + seq, dtype=np.int64)[None]
    else:
        pos = _positions(positions, off, shape, sd, seq)
    if positions is not None:  # integers, as the engine's own positions and offsets are
        pos = _angles.int32_positions(pos, engine)
    if engine == "mlx":
        return _angles.mlx_tables(opts, np.asarray(pos, np.float32) if positions is not None
                                  else pos, rot, theta, layout, 0 in shape,
                                  _angles.mlx_args(engine_args, rot))
    c, s_ = _angles.llama_tables(opts, pos, rot, theta, layout,
                                 _angles.llama_args(engine_args, rot))
    if 0 in shape:
        return np.zeros((1, 0, rot), np.float32), np.zeros((1, 0, rot), np.float32)
    return c, s_

def _dtype_name(x: Any) -> str:
    """The name of x's element type ('float32', 'bfloat16', ...; torch's, NumPy's, ml_dtypes'
    or a buffer's)."""
    dt = getattr(x, "dtype", None)
    if dt is None:
        try:
            dt = np.dtype(memoryview(x).format)
        except (TypeError, ValueError):
            return "?"
    return str(dt).replace("torch.", "")


def _shape_of(x: Any) -> Tuple[int, ...]:
    """x's shape without a copy (torch tensors of any dtype, arrays, buffers)."""
    shape = getattr(x, "shape", None)
    if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
        return shape
    return tuple(np.shape(x))


def _rope_tables(opts: PresetOpts, shape: Tuple[int, ...], sd: int, seq: int, d: int, positions: Any,
                 base: Any, layout: str, offset: Any, rot_dim: Any,
                 half: Optional[str] = None) -> Tuple[Any, Any]:
    """The cos and sin tables (tables, seq, rot), float32: from the cache, or computed in
    the core and kept; with half ('float16'/'bfloat16', for the halves layout, where each op
    runs in x's type and the tables' values are first rounded to it), the tables rounded so
    (kept too): the code path reads them as they are, where it would round each float32 value
    again for every vector that uses its row (in place, 2 threads, Zen 4: 1 x 32 x 512 x 128
    float16 352 -> 290 us, bfloat16 555 -> 422 us)."""
    rot, theta, off, pos = _rope_args(opts, shape, sd, seq, d, positions, base, offset, rot_dim)
    if 0 in shape:  # nothing to rotate: tables of no rows (the core takes them for an empty
        _check_rows(opts, rot, theta, layout, seq, off, pos)  # x) after the same checks
        none = np.zeros((1, 0, rot), np.float32)
        return none, none
    by_row = _by_position(_rows_of(opts, rot, theta, layout, half), seq, off, pos)
    if by_row is not None:
        return by_row
    if half is not None:
        c, s_ = _rope_tables(opts, shape, sd, seq, d, positions, base, layout, offset, rot_dim)
        key = _cache.rope_key(opts.core, rot, theta, layout, seq, off, pos)
        key = None if key is None else key._replace(rounded=half)
        kept = _cache.memo_get(key)
        if kept is None:
            both = np.stack((c, s_))
            kept = _round(both.ravel(), half).reshape(both.shape)
            _cache.memo_put(key, kept)
        return kept[0], kept[1]
    key = _cache.rope_key(opts.core, rot, theta, layout, seq, off, pos)
    kept = _cache.memo_get(key)
    if kept is not None:
        return kept[0], kept[1]
    tables = 1 if pos is None else pos.shape[0]
    _admit((2, tables, seq, rot), opts._replace(dtype=np.float32), "its cos and sin tables",
           np.float32)
    freq = _rope_freq(opts, rot, theta, layout)
    both = np.empty((2, tables, seq, rot), np.float32)
    for i, kind in enumerate((COS, SIN)):  # emb.cos(), emb.sin(): two tensors of emb's shape
        col = [4 * k + kind for k in range(rot)]
        if pos is None:  # arange(offset, offset + seq): the core checks the last position
            _table(seq, freq, col, opts._replace(out=both[i, 0]), offset=off, own=True)
        else:
            _table(pos, freq, col, opts._replace(out=both[i]))
    _cache.memo_put(key, both)
    return both[0], both[1]


def _rope_args(opts: PresetOpts, shape: Tuple[int, ...], sd: int, seq: int, d: int,
               positions: Any, base: Any, offset: Any,
               rot_dim: Any) -> Tuple[int, float, int, Optional[np.ndarray]]:
    """(rot, theta, offset, positions as (1 or batch, seq) or None), checked."""
    rot = _rot_of(None, rot_dim, d)
    theta = _positive(base, "base")
    with np.errstate(over="ignore"):
        if np.isinf(np.float32(theta)):
            raise ValueError(f"base must be at most the largest float32 (3.4028235e+38): the "
                             f"frequencies are theta ** (2i / rot_dim) in float32 as torch computes "
                             f"them, where {base!r} is inf; got {base!r}")
    off = _int(offset, "offset")
    pos = None if positions is None else _positions(positions, off, shape, sd, seq)
    return rot, theta, off, pos


#: positions of a call read from the rows kept by position when there are at most these
#: (a decode step's; a prefill's longer positions are kept whole, by their bytes, and read
#: without a gather)
GATHER = 4096


def _rows_of(opts: PresetOpts, rot: int, theta: float, layout: str,
             half: Optional[str]) -> Optional[_Rows]:
    """The rows by position of a call's tables; None when they are never kept so (rows that
    couple, the cache off)."""
    key = _cache.rows_key(opts.core, rot, theta, layout, half)
    if key is None:
        return None
    fill = _fill(opts, rot, theta, layout) if half is None \
        else _fill_rounded(opts, rot, theta, layout, half)
    return _Rows(key, 4 if half is None else 2, fill)


def _by_position(rows_of: Optional[_Rows], seq: int, off: int,
                 pos: Optional[np.ndarray]) -> Optional[Tuple[Any, Any]]:
    """The call's cos and sin (tables, seq, rot) from the rows kept by position (sinpe._cache:
    rope_rows), computing only the rows no call has computed: views for consecutive positions
    (by offset, or one row of positions), else gathered (integer positions, at most GATHER);
    None: not kept (rows that couple, the cache off, positions past 2^24 or not integers).
    A row's bits are its position's whatever the call that computed it (backends whose rows
    do not couple), as the per-call tables' are."""
    if rows_of is None:
        return None
    take = None
    if pos is None:
        lo, hi = off, off + seq
    elif pos.shape[1] == 1 and pos.size <= 64 and pos.dtype.kind in "iu":  # a decode step
        vals = pos.ravel().tolist()  # read once (Python ints: cheaper than NumPy's at this size)
        lo, hi = min(vals), max(vals) + 1
        if hi - lo > 1:
            take = np.array(vals, np.int64).reshape(pos.shape)
    elif pos.dtype.kind in "iu" and pos.size <= GATHER:
        pos = pos.copy()  # the values read once: another thread may write the caller's
        if pos.shape[0] > 1 and (pos == pos[:1]).all():  # HF's position_ids, one row expanded
            pos = pos[:1]
        lo, hi = int(pos.min()), int(pos.max()) + 1
        if not (pos.shape[0] == 1 and hi - lo == seq
                and (seq == 1 or (np.diff(pos[0]) == 1).all())):
            take = pos
    else:
        return None
    got = _cache.rope_rows(rows_of.key, lo, hi, rows_of.itemsize, rows_of.fill)
    if got is None:
        return None
    rows, first = got
    if take is None:
        v = rows[:, None, lo - first:hi - first]
    else:
        v = rows[:, take - first]
    return v[0], v[1]


def _fill(opts: PresetOpts, rot: int, theta: float, layout: str) -> Any:
    """The float32 rows of positions start .. start + m - 1 into out (2, m, rot): cos, sin, by
    the core (as the per-call tables by offset)."""
    def fill(out: np.ndarray, start: int) -> None:
        freq = _rope_freq(opts, rot, theta, layout)
        for i, kind in enumerate((COS, SIN)):
            _table(out.shape[1], freq, [4 * k + kind for k in range(rot)],
                   opts._replace(out=out[i]), offset=start, own=True)
    return fill


def _fill_rounded(opts: PresetOpts, rot: int, theta: float, layout: str, half: str) -> Any:
    """The rows rounded to half, from the float32 rows of the same positions (kept too)."""
    def fill(out: np.ndarray, start: int) -> None:
        m = out.shape[1]
        got = _cache.rope_rows(_cache.rows_key(opts.core, rot, theta, layout), start,
                               start + m, 4, _fill(opts, rot, theta, layout))
        if got is None:
            f32 = np.empty((2, m, rot), np.float32)
            _fill(opts, rot, theta, layout)(f32, start)
        else:
            f32 = got[0][:, start - got[1]:start - got[1] + m]
        out[...] = _round(np.ascontiguousarray(f32).ravel(), half).reshape(out.shape)
    return fill


def _rope_freq(opts: PresetOpts, rot: int, theta: float, layout: str) -> np.ndarray:
    """One frequency per column (halves: inv[t % h]; pairs: inv[t // 2])."""
    inv = _rope_inv_freq(rot, theta, opts, name="base")
    t = np.arange(rot)
    return np.ascontiguousarray(inv[t // 2] if layout == "pairs" else inv[t % (rot // 2)],
                                np.float32)


def _check_rows(opts: PresetOpts, rot: int, theta: float, layout: str, seq: int, off: int,
                pos: Any) -> None:
    """Every check the tables of a non-empty x get (positions' types and values, the last
    position by offset), nothing computed: an empty x is refused what add_pe refuses."""
    freq = _rope_freq(opts, rot, theta, layout)
    col = [4 * k + COS for k in range(rot)]
    if pos is not None:
        _table(pos, freq, col, opts._replace(out=None), fill=False)
    elif seq > 0:
        if off > (1 << 63) - seq:
            raise OverflowError(f"offset={off} is too large for {seq} rows: the last position, "
                                f"offset + {seq - 1}, does not fit in int64")
        _table(1, freq, col, opts._replace(out=None), offset=off + seq - 1, own=True, fill=False)


def _given_tables(cos: Any, sin: Any, shape: Tuple[int, ...], sd: int, layout: str,
                  positions: Any, offset: Any, rot_dim: Any, not32: bool) -> Tuple[Any, Any]:
    """A rotary module's cos and sin (any float dtype; HF casts them to x's dtype) as the
    core's float32 tables (tables, seq, rot): widening is exact.  Always copies: tables that
    share memory with x (a view of it) would be read while x is written.  float64 tables
    must hold float32 values unless x is float32 (whose product torch rounds once from
    float64, as rounding the tables first does): the core's tables are float32."""
    if cos is None or sin is None:
        raise TypeError("apply_rope() needs both cos and sin, or neither")
    if positions is not None or offset != 0 or rot_dim is not None:
        raise ValueError("cos/sin exclude positions, offset and rot_dim")
    _table_shapes(cos, sin, shape, sd)  # before any copy: a broadcast view may be huge
    c, s_ = _float32(cos, "cos", not32), _float32(sin, "sin", not32)
    if c.shape != s_.shape or c.ndim not in (2, 3):
        raise ValueError(f"cos and sin must have one shape, (seq, rot) or (batch, seq, rot), got "
                         f"{c.shape} and {s_.shape}")
    return (c[None], s_[None]) if c.ndim == 2 else (c, s_)


def _table_shapes(cos: Any, sin: Any, shape: Tuple[int, ...], sd: int) -> None:
    """What cos and sin's shapes say before they are copied: one shape, (seq, rot) or (batch,
    seq, rot), seq x's, no more elements than x (a table of more cannot be one)."""
    cs, ss = (tuple(int(n) for n in getattr(t, "shape", None) or np.shape(t)) for t in (cos, sin))
    if cs != ss or len(cs) not in (2, 3) or cs[-2] != shape[sd] \
            or math.prod(cs) > max(math.prod(shape), 1):
        raise ValueError(f"cos and sin must have one shape, (seq, rot) or (batch, seq, rot) "
                         f"with seq = {shape[sd]} (x's) and rot <= {shape[-1]}, got {cs} and "
                         f"{ss}")


def _float32(t: Any, name: str, not32: bool) -> np.ndarray:
    torch = _tensors.torch_of(t)
    if torch is not None:
        if t.dtype in (torch.bfloat16, torch.float16):  # widened exactly
            t = _tensors.float_copy(t, name)
    a = _tensors.values(t, name)
    a = np.asarray(a)
    if a.dtype.kind != "f" and a.dtype.name != "bfloat16":
        raise TypeError(f"{name} must hold floats, got dtype {a.dtype}")
    r = np.array(a, np.float32, order="C", copy=True)  # never x's own memory
    if a.dtype.itemsize > 4 and not32:
        with np.errstate(invalid="ignore"):
            exact = (r.astype(a.dtype) == a) | (np.isnan(a) & np.isnan(r))
        if not exact.all():
            raise ValueError(f"{name} holds {a.dtype} values that are not float32 values, for an "
                             f"x that is not float32: sinpe rotates with float32 tables, where "
                             f"torch would use these; give {name} as float32 (as transformers' "
                             f"rotary modules return it), or rotate with torch")
    return r


def shift_matrix(k: int, d_model: int, base: float = 10000.0, *,
                 backend: Optional[str] = None) -> np.ndarray:
    """The relative-position property of the seeds: the block-diagonal rotation R_k
    (float64, d_model x d_model) with PE(pos + k) = R_k @ PE(pos) for the exact sinusoids of
    the table's frequencies (div[i], the table's float32 values on `backend`). Block i acts
    on (sin, cos) of pair i: [[cos k w_i, sin k w_i], [-sin k w_i, cos k w_i]]. The float32
    table meets it up to its roundings, which grow with pos and k (docs/presets.md)."""
    d = _int(d_model, "d_model", minimum=2)
    if d % 2:
        raise ValueError(f"d_model must be an even integer >= 2, got {d}")
    kk = _int(k, "k", minimum=-(1 << 62))
    b = _positive(base, "base")
    opts = _opts(None, None, backend, None, None)
    _admit((d, d), opts, "the matrix", np.float64)
    div = _freqs("exp_mul", d // 2, opts, step=2, a=-math.log(b) / d).astype(np.float64)
    th = kk * div
    c, s = np.cos(th), np.sin(th)
    R = np.zeros((d, d))
    i = np.arange(d // 2)
    R[2 * i, 2 * i], R[2 * i, 2 * i + 1] = c, s
    R[2 * i + 1, 2 * i], R[2 * i + 1, 2 * i + 1] = -s, c
    return R
