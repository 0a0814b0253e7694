"""sinpe's torch entry points as torch custom operators, and tensors out.

- :func:`publish` (called once by :mod:`sinpe.torch` at import) registers each of
  sinpe.torch's rotation forms as an operator ``torch.ops.sinpe.<form>`` with a fake (meta)
  kernel and an autograd formula, and returns the public functions that call it, so that
  ``torch.compile(..., fullgraph=True)`` traces them as one node each, with no graph break,
  and the compiled call gives the eager call's bits (the kernel *is* the eager form).  The
  operator is called while torch.compile traces and when autograd records (the forms); a
  plain eager call runs the eager form directly (same bits, no dispatcher cost).
- :func:`add_pe` (``torch.ops.sinpe.add_pe``, mutating x) and :func:`hf_rope`
  (``torch.ops.sinpe.hf_rope``) likewise.
- :func:`to_torch` and :func:`preset`: NumPy results (ml_dtypes bfloat16 included) as torch
  tensors without a copy, and every preset with torch tensors out.

Registration happens when sinpe.torch is imported (never during a trace) and is idempotent:
an operator that already exists (sinpe.torch imported again in the same process) is reused,
its kernels finding the current eager functions through this module's tables at call time.
A torch without ``torch.library.custom_op`` (before 2.4) gets the plain functions
(``OPERATORS`` is then False): eager results are the same, torch.compile breaks the graph
there.  See docs/torch_compile.md.
"""
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ._backends.policy import torch_kernels

__all__ = ["OPERATORS", "publish", "add_pe", "hf_rope", "to_torch", "preset"]

#: whether this torch has ``torch.library.custom_op`` (else every entry point is a plain function)
OPERATORS = hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_autograd")

_NS = "sinpe"
#: the eager functions the operators' kernels call, by operator name (refreshed by publish)
_EAGER: Dict[str, Callable[..., Any]] = {}
#: the configs hf_rope's operator was called with, by id (kept alive: a compiled graph holds
#: the id as a constant)
_CONFIGS: Dict[int, Any] = {}

_PAIR = ("q", "k", "cos", "sin", "unsqueeze_dim")
_PAIR_POS = ("q", "k", "cos", "sin", "position_ids", "unsqueeze_dim")
_SINGLE = ("x", "cos", "sin", "unsqueeze_dim")
_SCHEMAS = {
    "pair": "(Tensor q, Tensor k, Tensor cos, Tensor sin, int unsqueeze_dim) -> (Tensor, Tensor)",
    "single": "(Tensor x, Tensor cos, Tensor sin, int unsqueeze_dim) -> Tensor",
}


def _eager(name: str) -> Callable[..., Any]:
    """The current eager function of an operator (through the module object in sys.modules,
    so an operator registered by an earlier import of this module finds today's function)."""
    mod = sys.modules.get(__name__)
    table = getattr(mod, "_EAGER", _EAGER)
    return table[name]


def _exists(name: str) -> bool:
    try:
        getattr(getattr(torch.ops, _NS), name)
    except (AttributeError, RuntimeError):
        return False
    return True


def _plain(*ts: Any) -> bool:
    """Plain strided tensors (not nested, sparse, or inside a torch function transform)."""
    if not all(isinstance(t, torch.Tensor) for t in ts):
        return False
    if torch.compiler.is_compiling():
        return True
    ft = torch._C._functorch
    return not any(t.is_nested or t.layout != torch.strided or ft.is_batchedtensor(t)
                   or ft.is_gradtrackingtensor(t) or ft.is_functionaltensor(t) for t in ts)


def _use_op(*ts: Any, grads: bool = False) -> bool:
    """Whether a public function calls its operator: while torch.compile traces it, and (for
    the forms, grads=True) when autograd records it.  Otherwise the eager function runs
    directly: the operator's kernel is that function, so the bits are the same, without the
    dispatcher's cost (about 0.1 ms a call here)."""
    if not all(isinstance(t, torch.Tensor) for t in ts):
        return False
    if torch.compiler.is_compiling():
        return True
    return grads and torch.is_grad_enabled() and any(t.requires_grad for t in ts) \
        and _plain(*ts)


def _like(tmpl: torch.Tensor, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """An output's layout, the same in the real and the fake kernel: q's own (as empty_like
    keeps it) when the shape is q's, else contiguous."""
    if tuple(shape) == tuple(tmpl.shape):
        return torch.empty_like(tmpl, dtype=dtype)
    return tmpl.new_empty(shape, dtype=dtype)


def _fresh(out: torch.Tensor, tmpl: torch.Tensor, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """out in _like's layout, in memory of its own (an operator's output may not alias an
    input, and its strides must be the fake kernel's): copied only when it is not."""
    want = _like(tmpl, out.shape, out.dtype)
    if want.stride() == out.stride() and (not out.numel() or all(
            out.data_ptr() != t.data_ptr() for t in inputs)):  # not an input returned as is
        return out
    return want.copy_(out)


def _on_meta(ts: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    return [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta") for t in ts]


# ---- the rotation forms --------------------------------------------------------------------------

def _kind(fn: Callable[..., Any]) -> Optional[str]:
    import inspect
    try:
        names = tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None
    if names in (_PAIR, _PAIR_POS):
        return "pair"
    if names == _SINGLE:
        return "single"
    return None


def _run(name: str, ts: Sequence[torch.Tensor], unsqueeze_dim: int) -> Any:
    """The eager form, with the public names it calls (a form built on another) eager too."""
    global _nested
    _nested += 1
    try:
        return _eager(name)(*ts, unsqueeze_dim=unsqueeze_dim)
    finally:
        _nested -= 1


#: > 0 while an operator's kernel (or fake kernel, or backward) runs its eager form: the public
#: functions then call their eager forms directly (no operator inside an operator)
_nested = 0


def _register(name: str, kind: str) -> Any:
    """torch.ops.sinpe.<name>: kernel = the eager form, fake = the eager form's torch ops on
    meta tensors (its shapes and dtypes, whatever the form), backward = the vector-Jacobian
    product of the eager form's torch formula (transformers' own ops, so eager autograd's
    bits; for a rotation, the inverse rotation)."""
    if _exists(name):
        return getattr(getattr(torch.ops, _NS), name).default
    qual = f"{_NS}::{name}"
    n_in = 4 if kind == "pair" else 3

    def outputs(out: Any, ts: Sequence[torch.Tensor]) -> Any:
        if kind == "pair":
            return _fresh(out[0], ts[0], ts), _fresh(out[1], ts[1], ts)
        return _fresh(out, ts[0], ts)

    def fake_outputs(out: Any, ts: Sequence[torch.Tensor]) -> Any:
        if kind == "pair":
            return _like(ts[0], out[0].shape, out[0].dtype), _like(ts[1], out[1].shape,
                                                                   out[1].dtype)
        return _like(ts[0], out.shape, out.dtype)

    if kind == "pair":
        def kernel(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   unsqueeze_dim: int) -> Any:
            with torch.no_grad():
                return outputs(_run(name, (q, k, cos, sin), unsqueeze_dim), (q, k, cos, sin))

        def fake(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                 unsqueeze_dim: int) -> Any:
            return fake_outputs(_run(name, _on_meta((q, k, cos, sin)), unsqueeze_dim),
                                (q, k, cos, sin))
    else:
        def kernel(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,  # type: ignore[misc]
                   unsqueeze_dim: int) -> Any:
            with torch.no_grad():
                return outputs(_run(name, (x, cos, sin), unsqueeze_dim), (x, cos, sin))

        def fake(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,  # type: ignore[misc]
                 unsqueeze_dim: int) -> Any:
            return fake_outputs(_run(name, _on_meta((x, cos, sin)), unsqueeze_dim), (x, cos, sin))

    op = torch.library.custom_op(qual, kernel, mutates_args=(), schema=_SCHEMAS[kind])
    op.register_fake(fake)

    def setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Any) -> None:
        ctx.save_for_backward(*inputs[:n_in])
        ctx.unsqueeze_dim = inputs[n_in]

    def backward(ctx: Any, *grads: torch.Tensor) -> Any:
        ts = ctx.saved_tensors
        ud = ctx.unsqueeze_dim

        def f(*xs: torch.Tensor) -> Any:
            # inside torch.func.vjp the tensors are wrapped: the eager form runs torch's ops
            return _run(name, xs, ud)
        _, vjp = torch.func.vjp(f, *ts)
        got = vjp(tuple(grads) if kind == "pair" else grads[0])
        return tuple(g if need else None for g, need in
                     zip(got, ctx.needs_input_grad[:n_in])) + (None,)

    op.register_autograd(backward, setup_context=setup_context)
    return op


def _pair_public(name: str, eager: Callable[..., Any], op: Any, with_pos: bool) -> Any:
    if with_pos:
        def public(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   position_ids: Any = None, unsqueeze_dim: int = 1) -> Any:
            if not _nested and type(unsqueeze_dim) is int and \
                    _use_op(q, k, cos, sin, grads=True):
                qe, ke = op(q, k, cos, sin, unsqueeze_dim)
                return qe, ke
            return eager(q, k, cos, sin, position_ids, unsqueeze_dim)
    else:
        def public(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,  # type: ignore[misc]
                   sin: torch.Tensor, unsqueeze_dim: int = 1) -> Any:
            if not _nested and type(unsqueeze_dim) is int and \
                    _use_op(q, k, cos, sin, grads=True):
                qe, ke = op(q, k, cos, sin, unsqueeze_dim)
                return qe, ke
            return eager(q, k, cos, sin, unsqueeze_dim)
    return public


def _single_public(name: str, eager: Callable[..., Any], op: Any) -> Any:
    def public(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               unsqueeze_dim: int = 1) -> Any:
        if not _nested and type(unsqueeze_dim) is int and \
                _use_op(x, cos, sin, grads=True):
            return op(x, cos, sin, unsqueeze_dim)
        return eager(x, cos, sin, unsqueeze_dim)
    return public


def publish(forms: Dict[str, Callable[..., Any]]) -> Dict[str, Callable[..., Any]]:
    """The public function of each eager form (name -> function): one that calls the form's
    operator, for the forms whose signature is transformers' ``(q, k, cos, sin[, position_ids],
    unsqueeze_dim=1)`` or ``(x, cos, sin, unsqueeze_dim=1)``; the eager function itself for
    any other signature, or when this torch has no custom operators.  Also registers
    add_pe's and hf_rope's operators."""
    if OPERATORS:  # add_pe's and hf_rope's operators too: at import, never inside a trace
        _add_pe_op()
        _hf_op()
    out: Dict[str, Callable[..., Any]] = {}
    for name, fn in forms.items():
        fn = getattr(fn, "_sinpe_eager", fn)  # published already: its eager function
        kind = _kind(fn)
        if not OPERATORS or kind is None:
            out[name] = fn
            continue
        _EAGER[name] = fn
        op = _register(name, kind)
        public = _single_public(name, fn, op) if kind == "single" else \
            _pair_public(name, fn, op, "position_ids" in _kind_names(fn))
        for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
            setattr(public, attr, getattr(fn, attr))
        public._sinpe_eager = fn  # type: ignore[attr-defined]
        public._sinpe_op = op  # type: ignore[attr-defined]
        out[name] = public
    return out


def _kind_names(fn: Callable[..., Any]) -> Tuple[str, ...]:
    import inspect
    return tuple(inspect.signature(fn).parameters)


# ---- add_pe on tensors ---------------------------------------------------------------------------

def _add_pe_kernel(x: torch.Tensor, base: float, offset: int, positions: Optional[torch.Tensor],
                   max_len: Optional[int], backend: Optional[str]) -> None:
    from ._api import add_pe as np_add_pe
    np_add_pe(x, base, offset=offset, positions=positions, max_len=max_len,
              backend=torch_kernels() if backend is None else backend)


_ADD_PE_OP: Any = None


def _add_pe_op() -> Any:
    global _ADD_PE_OP
    if _ADD_PE_OP is None:
        if _exists("add_pe"):
            _ADD_PE_OP = torch.ops.sinpe.add_pe.default
        else:
            op = torch.library.custom_op(
                f"{_NS}::add_pe", _add_pe_kernel, mutates_args=("x",),
                schema="(Tensor(a!) x, float base, int offset, Tensor? positions, int? max_len, "
                       "str? backend) -> ()")
            op.register_fake(lambda x, base, offset, positions, max_len, backend: None)
            _ADD_PE_OP = op
    return _ADD_PE_OP


def add_pe(x: Any, base: float = 10000.0, *, offset: int = 0, positions: Any = None,
           max_len: Optional[int] = None, backend: Optional[str] = None) -> Any:
    """:func:`sinpe.add_pe` for torch tensors as the operator ``torch.ops.sinpe.add_pe``
    (it mutates x): adds the sinusoidal table's rows to x in place and returns x, bit for bit
    as ``sinpe.add_pe``, inside ``torch.compile(fullgraph=True)`` too.  backend None: the
    kernels of the torch in this process (as the module).  positions: a tensor or None.
    No autograd (x is written in place, as sinpe.add_pe writes it)."""
    if OPERATORS and _use_op(x) and (positions is None or _use_op(positions)) \
            and not isinstance(base, bool) and isinstance(base, (int, float)) \
            and type(offset) is int and (max_len is None or type(max_len) is int):
        _add_pe_op()(x, float(base), offset, positions, max_len, backend)
        return x
    _add_pe_kernel(x, base, offset, positions, max_len, backend)
    return x


# ---- tensors out ---------------------------------------------------------------------------------

def to_torch(a: Any, device: Any = None) -> Any:
    """A NumPy array (float32, float16, float64, integers, or ml_dtypes bfloat16, which
    ``torch.from_numpy`` refuses) as a torch tensor of the same dtype sharing its memory (no
    copy; a read-only or non-contiguous array is copied once), moved to device if given.  A
    tuple or list of arrays gives a tuple of tensors; a torch tensor is returned as it is
    (moved to device if given)."""
    if isinstance(a, (tuple, list)):
        return tuple(to_torch(x, device) for x in a)
    if isinstance(a, torch.Tensor):
        return a if device is None else a.to(device)
    if not isinstance(a, np.ndarray):
        raise TypeError(f"a must be a NumPy array or a tuple of them, got {type(a).__name__}")
    if not (a.flags.c_contiguous and a.flags.writeable):
        a = np.array(a, order="C")
    if a.dtype.name == "bfloat16":
        t = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(a)
    return t if device is None or torch.device(device).type == "cpu" else t.to(device)


def _dtype_name(dtype: Any) -> Any:
    return str(dtype).replace("torch.", "") if isinstance(dtype, torch.dtype) else dtype


def preset(name: str, *args: Any, dtype: Any = None, device: Any = None, **kw: Any) -> Any:
    """``sinpe.presets.<name>(*args, **kw)`` with torch tensors out: dtype a torch dtype
    (torch.bfloat16 included) or any spelling the preset takes, device where the result goes
    (computed on the CPU, copied if the device is another).  The preset writes into a NumPy
    array that the tensor then shares (no copy), or, with ``out=`` a CPU torch tensor, into
    that tensor (returned).  Presets without dtype= (positions, slopes) are converted as they
    come; tuples come back as tuples of tensors."""
    from . import presets
    if not isinstance(name, str) or name not in presets.__all__:
        raise ValueError(f"name must be one of sinpe.presets' functions "
                         f"({', '.join(presets.__all__)}), got {name!r}")
    fn = getattr(presets, name)
    if dtype is not None:
        kw["dtype"] = _dtype_name(dtype)
    out = kw.get("out")
    res = fn(*args, **kw)
    if isinstance(out, torch.Tensor):
        return out if device is None else out.to(device)
    return to_torch(res, device)


# ---- hf_rope, tensors out, as an operator --------------------------------------------------------

def hf_rope_eager(config: Any, position_ids: Any, *, inv_freq: Any = None, dtype: Any = None,
                  layer_type: Optional[str] = None, backend: Optional[str] = None) -> Any:
    """:func:`sinpe.presets.hf_rope` with torch tensors out, on position_ids' device."""
    device = position_ids.device if isinstance(position_ids, torch.Tensor) else \
        torch.device("cpu")
    from .presets import hf_rope as np_hf_rope
    cos, sin = np_hf_rope(config, position_ids, inv_freq=inv_freq, dtype=_dtype_name(dtype),
                          layer_type=layer_type,
                          backend=torch_kernels() if backend is None else backend)
    return to_torch(cos, device), to_torch(sin, device)


def _hf_kernel(position_ids: torch.Tensor, inv_freq: Optional[torch.Tensor], config: int,
               dtype: Optional[torch.dtype], layer_type: Optional[str],
               backend: Optional[str]) -> Tuple[torch.Tensor, torch.Tensor]:
    cfg = _config(config)
    cos, sin = hf_rope_eager(cfg, position_ids, inv_freq=inv_freq, dtype=dtype,
                             layer_type=layer_type, backend=backend)
    return cos, sin  # fresh arrays' memory (to_torch copies a read-only, kept one)


def _hf_fake(position_ids: torch.Tensor, inv_freq: Optional[torch.Tensor], config: int,
             dtype: Optional[torch.dtype], layer_type: Optional[str],
             backend: Optional[str]) -> Tuple[torch.Tensor, torch.Tensor]:
    """The tables' shape from a probe: hf_rope on zeros of position_ids' shape (its symbolic
    sizes replaced by distinct odd numbers, mapped back)."""
    from .presets import hf_rope as np_hf_rope
    cfg = _config(config)
    shape = list(position_ids.shape)
    used = {s for s in shape if isinstance(s, int)}
    odd = iter(p for p in (13, 17, 19, 23, 29, 31, 37, 41, 43, 47) if p not in used)
    probe, back = [], {}
    for s in shape:
        if isinstance(s, int):
            probe.append(s)
        else:
            p = next(odd)
            probe.append(p)
            back[p] = s
    cos, _ = np_hf_rope(cfg, np.zeros(probe, dtype=np.int64), dtype=_dtype_name(dtype),
                        layer_type=layer_type, backend="builtin")
    out_shape = [back.get(d, d) for d in cos.shape]
    tdt = torch.bfloat16 if cos.dtype.name == "bfloat16" else \
        getattr(torch, np.dtype(cos.dtype).name)
    return (position_ids.new_empty(out_shape, dtype=tdt),
            position_ids.new_empty(out_shape, dtype=tdt))


_HF_OP: Any = None


def _hf_op() -> Any:
    global _HF_OP
    if _HF_OP is None:
        if _exists("hf_rope"):
            _HF_OP = torch.ops.sinpe.hf_rope.default
        else:
            op = torch.library.custom_op(
                f"{_NS}::hf_rope", _hf_kernel, mutates_args=(),
                schema="(Tensor position_ids, Tensor? inv_freq, int config, ScalarType? dtype, "
                       "str? layer_type, str? backend) -> (Tensor, Tensor)")
            op.register_fake(_hf_fake)
            _HF_OP = op
    return _HF_OP


def _config(key: int) -> Any:
    """The config of an id hf_rope's operator was given.  Under torch.compile the public
    function's ``_CONFIGS[key] = config`` is a side effect Dynamo replays after the graph
    has run, so the fake kernel (at trace time) and the first run's kernel find the object
    by its id: it is alive then, held by the caller (and guarded by identity)."""
    table = getattr(sys.modules.get(__name__), "_CONFIGS", _CONFIGS)
    cfg = table.get(key, _CONFIGS.get(key))
    if cfg is None:  # found among the live objects, never read from a raw address: a bad
        import gc    # id (a direct call of the operator) is refused, not dereferenced
        cfg = next((o for o in gc.get_objects() if id(o) == key), None)
        if cfg is None:
            raise ValueError(f"torch.ops.sinpe.hf_rope: config id {key} names no live object "
                             "(call sinpe.torch.hf_rope with the config itself)")
    return cfg


def hf_rope(config: Any, position_ids: Any, *, inv_freq: Any = None, dtype: Any = None,
            layer_type: Optional[str] = None, backend: Optional[str] = None) -> Any:
    """:func:`sinpe.presets.hf_rope` with torch tensors out: ``(cos, sin)`` in ``dtype`` (a
    torch dtype or any spelling sinpe takes; torch.bfloat16 included) on position_ids' device
    (the tables are computed on the CPU and copied when the device differs).  backend None:
    the kernels of the torch in this process (what the model computes); ``'builtin'``:
    correctly rounded tables.  With position_ids a tensor (inv_freq a tensor or None, dtype a
    torch dtype or None) it is the operator ``torch.ops.sinpe.hf_rope``: one node under
    torch.compile (the config is held by id, and kept alive)."""
    if OPERATORS and _use_op(position_ids) and (inv_freq is None or _use_op(inv_freq)) \
            and (dtype is None or isinstance(dtype, torch.dtype)) \
            and (layer_type is None or isinstance(layer_type, str)) \
            and (backend is None or isinstance(backend, str)):
        key = id(config)
        if key not in _CONFIGS:
            _CONFIGS[key] = config
        cos, sin = _hf_op()(position_ids, inv_freq, key, dtype, layer_type, backend)
        return cos, sin
    return hf_rope_eager(config, position_ids, inv_freq=inv_freq, dtype=dtype,
                         layer_type=layer_type, backend=backend)
