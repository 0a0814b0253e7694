"""transformers' rotary tables as torch tensors: :func:`hf_rope` (the operator
``torch.ops.sinpe.hf_rope`` while torch traces, with a fake kernel that gives the shapes at
symbolic sizes' hints), the config read once into its canonical text (the operator's argument:
no object identity in a graph, so exported programs load in any process).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from .._memo import Memo

from .._backends.policy import torch_kernels
from .._hf.config import MAPPING_KEYS, VIEW_KEYS, config_from_text, config_text
from .operators import OPERATORS, lazy_op, use_operator
from .._tensors import to_torch
from .tables import dtype_name



def hf_rope_eager(config: Any, position_ids: Any, *, inv_freq: Any = None, dtype: Any = None,
                  layer_type: Optional[str] = None, backend: Optional[str] = None,
                  attention_scaling: Any = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """:func:`sinpe.presets.hf_rope` with torch tensors out, on position_ids' device."""
    device = position_ids.device if isinstance(position_ids, torch.Tensor) else \
        torch.device("cpu")
    from ..presets import hf_rope as np_hf_rope
    cos, sin = np_hf_rope(config, position_ids, inv_freq=inv_freq, dtype=dtype_name(dtype),
                          layer_type=layer_type,
                          backend=torch_kernels() if backend is None else backend,
                          attention_scaling=attention_scaling)
    return to_torch(cos, device), to_torch(sin, device)


def _hf_kernel(position_ids: torch.Tensor, inv_freq: Optional[torch.Tensor], config: str,
               dtype: Optional[torch.dtype], layer_type: Optional[str], backend: Optional[str],
               attention_scaling: Optional[float]) -> Tuple[torch.Tensor, torch.Tensor]:
    cos, sin = hf_rope_eager(config_from_text(config), position_ids, inv_freq=inv_freq,
                             dtype=dtype, layer_type=layer_type, backend=backend,
                             attention_scaling=attention_scaling)
    return cos, sin  # fresh arrays' memory (to_torch copies a read-only, kept one)


#: sizes an unbacked symbolic size (no hint) is probed with, and recognised by in the result
_PRIMES = (13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73)


#: the fake kernel's findings: (text, sizes, ...) -> (result's sizes, dtype, fixed sizes)
_FAKE_SHAPES: "Memo[Any, Any]" = Memo(256)


def _np_dtype(dtype: torch.dtype) -> Any:
    name = str(dtype).replace("torch.", "")
    if name == "bfloat16":
        from .._dtypes import bfloat16
        return bfloat16()
    try:
        return np.dtype(name)
    except TypeError:
        return np.dtype(np.float32)  # (the real kernel names what it cannot read)


def _hf_shapes(config: str, position_ids: torch.Tensor, inv_freq: Optional[torch.Tensor],
               dtype: Optional[torch.dtype], layer_type: Optional[str],
               attention_scaling: Optional[float]) -> Tuple[List[Any], Any, List[int]]:
    """The tables' sizes, dtype, and the input sizes that must keep their value, from probes:
    hf_rope on zeros of the inputs' sizes (a symbolic size at its hint, read without a
    guard; an unbacked one at a distinct prime), then once more per symbolic size with that
    size one larger.  A result's size that followed it (the hint, then the hint + 1) is that
    symbol; a size whose change the probe refuses (the 3 of mrope's rows, the 2 of axial
    (h, w) pairs) or that changes the result otherwise (inv_freq's length makes the width)
    is fixed at its hint.  Each size in the result is a symbol of the inputs or a number."""
    from ..presets import hf_rope as np_hf_rope
    cfg = config_from_text(config)
    n_pos = position_ids.dim()
    dims = list(position_ids.shape) + ([] if inv_freq is None else list(inv_freq.shape))
    used = {d for d in dims if isinstance(d, int)}
    primes = iter(p for p in _PRIMES if p not in used)
    base: List[int] = []
    hints: Dict[int, int] = {}
    unbacked: Dict[int, int] = {}
    for i, d in enumerate(dims):
        if isinstance(d, int):
            base.append(d)
            continue
        node = d.node
        hint = node.hint if node.has_hint() else None
        if isinstance(hint, int):
            base.append(hint)
            hints[i] = hint
        else:
            base.append(next(primes))
            unbacked[i] = base[-1]
    inv_dt = None if inv_freq is None else _np_dtype(inv_freq.dtype)
    key = (config, tuple(base), tuple(sorted(hints)), n_pos, str(inv_dt), str(dtype),
           layer_type, attention_scaling)
    kept = _FAKE_SHAPES.get(key)
    if kept is None:
        def probe(sizes: List[int]) -> Tuple[Tuple[int, ...], Any]:
            inv = None if inv_dt is None else np.zeros(sizes[n_pos:], inv_dt)
            cos, _ = np_hf_rope(cfg, np.zeros(sizes[:n_pos], np.int64), inv_freq=inv,
                                dtype=dtype_name(dtype), layer_type=layer_type,
                                backend="builtin", attention_scaling=attention_scaling)
            return tuple(cos.shape), cos.dtype

        out, out_dt = probe(base)
        pattern: List[Any] = [("n", v) for v in out]
        fixed = []
        for i, hint in hints.items():
            bumped = list(base)
            bumped[i] = hint + 1
            try:
                out_i = probe(bumped)[0]
            except (ValueError, TypeError, NotImplementedError, OverflowError):
                fixed.append(i)
                continue
            changed = [j for j in range(len(out)) if j >= len(out_i) or out_i[j] != out[j]]
            if len(out_i) == len(out) and all(pattern[j][0] == "n" and out[j] == hint
                                              and out_i[j] == hint + 1 for j in changed):
                for j in changed:
                    pattern[j] = ("d", i)
            else:
                fixed.append(i)
        for i, p in unbacked.items():  # (the old rule: a result's size equal to the prime)
            pattern = [("d", i) if q == ("n", p) else q for q in pattern]
        tdt = torch.bfloat16 if out_dt.name == "bfloat16" else getattr(torch, np.dtype(out_dt).name)
        kept = (pattern, tdt, fixed)
        _FAKE_SHAPES[key] = kept
    pattern, tdt, fixed = kept
    return [dims[v] if kind == "d" else v for kind, v in pattern], tdt, fixed


def _hf_fake(position_ids: torch.Tensor, inv_freq: Optional[torch.Tensor], config: str,
             dtype: Optional[torch.dtype], layer_type: Optional[str], backend: Optional[str],
             attention_scaling: Optional[float]) -> Tuple[torch.Tensor, torch.Tensor]:
    """The tables' shape and dtype (_hf_shapes), on position_ids' device (meta when
    inv_freq is a meta tensor)."""
    shape, tdt, fixed = _hf_shapes(config, position_ids, inv_freq, dtype, layer_type,
                                   attention_scaling)
    dims = list(position_ids.shape) + ([] if inv_freq is None else list(inv_freq.shape))
    for i in fixed:  # sizes the tables' shape has no rule for: their value (a guard)
        d: Any = dims[i]
        if not isinstance(d, int):
            torch._check(d == d.node.hint)  # type: ignore[no-untyped-call]
    if inv_freq is not None and inv_freq.is_meta and not position_ids.is_meta:
        return (torch.empty(shape, dtype=tdt, device="meta"),
                torch.empty(shape, dtype=tdt, device="meta"))
    return (position_ids.new_empty(shape, dtype=tdt),
            position_ids.new_empty(shape, dtype=tdt))


def hf_op() -> Any:
    return lazy_op("hf_rope", _hf_kernel, _hf_fake,
                    "(Tensor position_ids, Tensor? inv_freq, str config, ScalarType? dtype, "
                    "str? layer_type, str? backend, float? attention_scaling) "
                    "-> (Tensor, Tensor)")


_MISSING = object()


#: what a dict config's reading keeps (an object's: VIEW_KEYS; a heterogeneous one is
#: handed over whole)
_DICT_KEYS = VIEW_KEYS + MAPPING_KEYS + ("per_layer_config",)


def _pin(v: Any) -> Any:
    """v, whose numbers Dynamo keeps as constants: an int or float read from an object
    becomes a symbolic input of the graph once it has changed between calls (torch's
    automatic dynamic scalars), which no constant function takes; as a dict's key it is
    specialised (its value guarded).  Containers are rebuilt, other values kept as they are."""
    t = type(v)
    if t is int or t is float:
        for k in {v: None}:
            return k
    if t is dict:
        return {k: _pin(x) for k, x in v.items()}
    if t is list:
        return [_pin(x) for x in v]
    if t is tuple:
        return tuple(_pin(x) for x in v)
    return v


def _reading(config: Any, top: bool = True) -> Any:
    """What hf_rope reads of config, as a plain dict, in code that Dynamo traces; None for a
    config read only as a whole (a Mapping other than dict, a heterogeneous config object
    whose per-layer view transformers builds by copying it)."""
    if type(config) is dict:
        out = {k: _pin(config[k]) for k in _DICT_KEYS if k in config}
        sub = config.get("text_config") if top and out.get("hidden_size") is None else None
    elif isinstance(config, (Mapping, str, bytes)) or not hasattr(config, "__dict__") \
            or getattr(config, "is_heterogeneous", False):
        return None
    else:
        out = {}
        for k in VIEW_KEYS:
            v = getattr(config, k, _MISSING)
            if v is not _MISSING:
                out[k] = _pin(v)
        sub = getattr(config, "text_config", None) if top and out.get("hidden_size") is None \
            else None
    if sub is not None and not isinstance(sub, (str, bytes)):
        r = _reading(sub, False)
        if r is None:
            return None
        out["text_config"] = r
    return out


def _text_of(config: Any, layer_type: Optional[str]) -> str:
    return config_text(config, layer_type)


# what torch._dynamo.assume_constant_result sets (without importing torch._dynamo for it)
_text_of._dynamo_marked_constant = True  # type: ignore[attr-defined]


def hf_rope(config: Any, position_ids: Any, *, inv_freq: Any = None, dtype: Any = None,
            layer_type: Optional[str] = None, backend: Optional[str] = None,
            attention_scaling: Any = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """:func:`sinpe.presets.hf_rope` with torch tensors out: ``(cos, sin)`` in ``dtype`` (a
    torch dtype or any spelling sinpe takes; torch.bfloat16 included) on position_ids' device
    (the tables are computed on the CPU and copied when the device differs).  backend None:
    the kernels of the torch in this process (what the model computes); ``'builtin'``:
    correctly rounded tables.  inv_freq with attention_scaling: the tables of a module's
    state (its buffer and its attention_scaling; see sinpe.presets.hf_rope).

    While torch.compile or torch.export traces it (position_ids a tensor, inv_freq a tensor
    or None, dtype a torch dtype or None, attention_scaling a Python number or None) it is
    the operator ``torch.ops.sinpe.hf_rope``, one node of the graph, which holds the
    config's text (``sinpe._hf.config.config_text``): the values hf_rope reads of it, each
    guarded by torch.compile (an edit in place compiles again), except for a Mapping that
    is not a dict and a heterogeneous config (guarded by identity).  On meta or fake tensors
    it gives tables of the right shape and dtype, computing nothing.  An eager call on
    tensors with data runs the eager function directly."""
    if OPERATORS and use_operator(position_ids, inv_freq) \
            and (dtype is None or isinstance(dtype, torch.dtype)) \
            and (layer_type is None or isinstance(layer_type, str)) \
            and (backend is None or isinstance(backend, str)) \
            and (attention_scaling is None or type(attention_scaling) in (int, float)):
        r = _reading(config)
        text = _text_of(config if r is None else r, layer_type)
        scaling = None if attention_scaling is None else float(_pin(attention_scaling))
        cos, sin = hf_op()(position_ids, inv_freq, text, dtype, layer_type, backend, scaling)
        return cos, sin
    return hf_rope_eager(config, position_ids, inv_freq=inv_freq, dtype=dtype,
                         layer_type=layer_type, backend=backend,
                         attention_scaling=attention_scaling)


if OPERATORS:  # the operator at import (never inside a trace)
    hf_op()
