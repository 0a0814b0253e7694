"""One line swaps a transformers model's rotary position embedding to sinpe:
:func:`patch`, :func:`unpatch`, :func:`patched` (re-exported by :mod:`sinpe.torch`), the
torch-tensor :func:`hf_rope`, and the rotation forms that the existing ones in
:mod:`sinpe.torch` did not cover (half-width tables, rotate in float32 and cast back).

How a model is patched (docs/hf_patch.md):

- **Rotary modules.** Every submodule whose class is named ``*RotaryEmbedding`` and whose
  forward is ``(x, position_ids[, layer_type])`` gets, on the instance, a forward that returns
  :func:`sinpe.presets.hf_rope`'s tables for the module's own config, read from the module's
  own ``inv_freq`` buffer (``f"{layer_type}_inv_freq"`` per layer type), as it is at call
  time (after ``model.to(dtype)``, after a dynamic rope regrew it).  A forward that
  transformers wraps in ``dynamic_rope_update`` stays wrapped by the same function, so the
  dynamic and longrope state (``inv_freq``, ``max_seq_len_cached``, ``attention_scaling``)
  evolves exactly as transformers keeps it.
- **Rotations.** The modeling module's rotation functions (``apply_rotary_pos_emb`` and
  kin) are recognised by their code: the syntax tree of the function and of the helpers it
  calls (``rotate_half``), compared with the reference functions of transformers' own
  modules (Llama, GPT-NeoX, GLM, Cohere, OLMo, DeepSeek-V3, GPT-OSS, ModernBERT, ERNIE 4.5,
  Gemma 3n...).  Each recognised function maps to the sinpe.torch form that computes the same
  bits; the methods of the model's modules that call it get, on the instance, a copy of
  their function whose globals name the sinpe form instead.  Unrecognised rotations are left
  as the model computes them (listed by :func:`patched` as ``kept``).

- **Rotary modules of other forms.** GPT-J/CodeGen's precomputed ``embed_positions`` sincos
  table (the default rope's sin and cos, recomputed whole and compared at patch time) and
  PhiMoE's forward (inv_freq recomputed from the config, a per-call mscale) get forwards of
  their own; so do complex ``torch.polar`` tables (DeepSeek-V2, Llama 4), whose cos and sin
  torch takes from the C library's cosf/sinf: glibc's, reproduced on x86-64 Linux with AVX2
  and FMA (elsewhere refused unless ``backend=`` names whose cos/sin to use).

Nothing is changed until every rotary module has been checked: a family whose rotary
:func:`sinpe.presets.hf_rope` does not reproduce raises NotImplementedError naming the
family and why, and the model is left as it was.
"""
from __future__ import annotations

import ast
import copy
import inspect
import math
import sys
import textwrap
import types
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import numpy as np
import torch


__all__ = ["patch", "unpatch", "patched", "hf_rope", "FORMS"]

#: the sinpe.torch rotation forms by name, filled by sinpe.torch when it imports this module
#: (this module sits below sinpe.torch and imports nothing of it).
FORMS: Dict[str, Callable[..., Any]] = {}

_Pair = Tuple[torch.Tensor, torch.Tensor]
_ATTR = "_sinpe_patch"


# ---- hf_rope as torch tensors: sinpe/_torch_ops.py (an operator under torch.compile) --------

from ._torch_ops import hf_rope  # noqa: E402


# ---- recognising the modeling module's rotation functions --------------------------------------

#: reference rotation functions: (module, function name) -> the sinpe.torch form.
_REFERENCES: List[Tuple[str, str, str]] = [
    ("llama", "apply_rotary_pos_emb", "apply_rotary_pos_emb"),
    ("gpt_neox", "apply_rotary_pos_emb", "apply_rotary_pos_emb"),
    ("phi3", "apply_rotary_pos_emb", "apply_rotary_pos_emb"),
    ("nemotron", "apply_rotary_pos_emb", "apply_rotary_pos_emb"),
    ("deepseek_v3", "apply_rotary_pos_emb_interleave", "apply_rotary_pos_emb_interleave"),
    ("glm", "apply_rotary_pos_emb", "apply_rotary_pos_emb_glm"),
    ("helium", "apply_rotary_pos_emb", "apply_rotary_pos_emb_glm"),
    ("cohere", "apply_rotary_pos_emb", "apply_rotary_pos_emb_cohere"),
    ("olmo", "apply_rotary_pos_emb", "apply_rotary_pos_emb_olmo"),
    ("gpt_oss", "apply_rotary_pos_emb", "apply_rotary_pos_emb_half"),
    ("modernbert", "apply_rotary_pos_emb", "apply_rotary_pos_emb_float32"),
    ("ernie4_5", "apply_rotary_pos_emb", "apply_rotary_pos_emb_glm_float32"),
    ("gemma3n", "apply_rotary_pos_emb", "apply_rotary_pos_emb_single"),
]


def _forms() -> Dict[str, Callable[..., Any]]:
    return {name: FORMS[name] for name in {f for _, _, f in _REFERENCES}}


def _body_dump(fn: Callable[..., Any]) -> Optional[str]:
    try:
        src = textwrap.dedent(inspect.getsource(fn))
        node = ast.parse(src).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return None
    if not isinstance(node, ast.FunctionDef):
        return None
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    args = ast.dump(node.args, annotate_fields=False)
    return args + ast.dump(ast.Module(body=body, type_ignores=[]), annotate_fields=False)


def _fingerprint(fn: Any, seen: Optional[Set[int]] = None) -> Optional[str]:
    """The code of fn and of the module-level Python functions it calls, as syntax trees
    (names of the helpers included: ``rotate_half`` differs between families)."""
    fn = inspect.unwrap(fn) if callable(fn) else fn
    if not isinstance(fn, types.FunctionType):
        return None
    seen = set() if seen is None else seen
    if id(fn) in seen:
        return "<recursive>"
    seen.add(id(fn))
    body = _body_dump(fn)
    if body is None:
        return None
    parts = [body]
    for name in sorted(set(_names(fn.__code__))):
        g = fn.__globals__.get(name)
        if isinstance(inspect.unwrap(g) if callable(g) else g, types.FunctionType):
            parts.append(f"{name}={_fingerprint(g, seen)}")
    return "|".join(parts)


def _names(code: types.CodeType) -> List[str]:
    out = list(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out.extend(_names(c))
    return out


_KNOWN: Optional[Dict[str, str]] = None


def _known() -> Dict[str, str]:
    """fingerprint -> form name, from transformers' installed reference modules."""
    global _KNOWN
    if _KNOWN is None:
        import importlib
        known: Dict[str, str] = {}
        for mod, fn, form in _REFERENCES:
            try:
                m = importlib.import_module(f"transformers.models.{mod}.modeling_{mod}")
            except Exception:  # a transformers without that family
                continue
            fp = _fingerprint(getattr(m, fn, None))
            if fp is not None:
                known.setdefault(fp, form)
        _KNOWN = known
    return _KNOWN


def _classify(fn: Any) -> Optional[str]:
    fp = _fingerprint(fn)
    return None if fp is None else _known().get(fp)


def _is_rotation_name(name: str) -> bool:
    n = name.lower()
    return "rot" in n and ("apply" in n or "emb" in n) or n.startswith("apply_rope")


# ---- globals routing ----------------------------------------------------------------------------

class _Router:
    """Per modeling module (its globals dict): the rotation functions it names and their sinpe
    forms, and copies of its module-level helpers that call them."""

    def __init__(self, g: Dict[str, Any]):
        forms = _forms()
        self.routes: Dict[str, str] = {}
        self.kept: Dict[str, str] = {}
        for name, obj in list(g.items()):
            if not _is_rotation_name(name) or not callable(obj):
                continue
            f = inspect.unwrap(obj)
            if not isinstance(f, types.FunctionType) or not f.__module__.startswith(
                    "transformers."):
                continue
            form = _classify(obj)
            if form is None:
                self.kept[name] = "unrecognised"
            else:
                self.routes[name] = form
        self.overrides: Dict[str, Any] = {n: forms[f] for n, f in self.routes.items()}
        self.globals: Optional[Dict[str, Any]] = None
        self.g = g
        if self.overrides:
            ng = dict(g)
            ng.update(self.overrides)
            # no __name__: torch.compile reads a function's globals through sys.modules[__name__]
            # (the unpatched module) when the globals name a module; unnamed, it reads ng itself
            ng.pop("__name__", None)
            # module-level helpers calling a routed function get copies reading ng
            changed = True
            done: Set[str] = set()
            while changed:
                changed = False
                for name, obj in list(g.items()):
                    if name in done or name in self.overrides:
                        continue
                    if isinstance(obj, types.FunctionType) and obj.__globals__ is g and \
                            _calls(obj, ng, g):
                        ng[name] = _rebuild(obj, ng, g)
                        done.add(name)
                        changed = True
            self.globals = ng


def _calls(fn: Any, ng: Dict[str, Any], g: Dict[str, Any]) -> bool:
    """Whether fn (through its decorators' chain) names a global that ng replaces."""
    while fn is not None:
        if isinstance(fn, types.FunctionType):
            if fn.__globals__ is g and any(ng.get(n, g.get(n)) is not g.get(n)
                                           for n in _names(fn.__code__) if n in ng):
                return True
        fn = getattr(fn, "__wrapped__", None)
    return False


def _rebuild(fn: types.FunctionType, ng: Dict[str, Any], g: Dict[str, Any]) -> Any:
    """A copy of fn (and of the functions its decorators wrap) whose globals are ng where
    they were g."""
    inner = getattr(fn, "__wrapped__", None)
    closure = fn.__closure__
    new_inner = None
    if isinstance(inner, types.FunctionType) and closure:
        new_inner = _rebuild(inner, ng, g)
        cells = []
        for c in closure:
            try:
                val = c.cell_contents
            except ValueError:
                cells.append(c)
                continue
            cells.append(types.CellType(new_inner) if val is inner else c)
        closure = tuple(cells)
    new = types.FunctionType(fn.__code__, ng if fn.__globals__ is g else fn.__globals__,
                             fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__dict__.update(fn.__dict__)
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__  # ng has no __name__ to take it from
    if new_inner is not None:
        setattr(new, "__wrapped__", new_inner)
    return new


# ---- rotary modules ------------------------------------------------------------------------------

def _family(model: Any) -> str:
    cfg = getattr(model, "config", None)
    return str(getattr(cfg, "model_type", None) or type(model).__name__)


def _rotary_signature(cls: type) -> Optional[bool]:
    """True: forward(x, position_ids, layer_type); False: forward(x, position_ids); None:
    something else."""
    try:
        params = list(inspect.signature(inspect.unwrap(getattr(cls, "forward"))).parameters)
    except (TypeError, ValueError):
        return None
    if params[:3] != ["self", "x", "position_ids"]:
        return None
    rest = params[3:]
    if not rest:
        return False
    return True if rest == ["layer_type"] else None


def _dynamic_wrapped(cls: type) -> bool:
    from transformers.modeling_rope_utils import dynamic_rope_update
    probe = dynamic_rope_update(lambda self, x, position_ids: None)  # type: ignore[no-untyped-call]
    f = getattr(cls, "forward", None)
    return isinstance(f, types.FunctionType) and f.__code__ is probe.__code__


def _layer_types(module: Any) -> List[Optional[str]]:
    rt = getattr(module, "rope_type", None)
    if isinstance(rt, dict):
        return list(rt)
    lts = getattr(getattr(module, "config", None), "layer_types", None)
    if lts and all(hasattr(module, f"{t}_inv_freq") for t in set(lts)):
        return sorted(set(lts))
    return [None]


def _view_config(module: Any) -> Any:
    """The config hf_rope reads for module: its own, except that a dynamic rope's regrowth is
    left to transformers' own wrapper (hf_rope then reads the module's current inv_freq)."""
    cfg = module.config
    rp = getattr(cfg, "rope_parameters", None)
    types_ = [rp.get("rope_type")] if isinstance(rp, dict) and "rope_type" in rp else \
        [v.get("rope_type") for v in rp.values() if isinstance(v, dict)] \
        if isinstance(rp, dict) else []
    if not any(isinstance(t, str) and "dynamic" in t for t in types_):
        return cfg
    view = copy.deepcopy(cfg)
    view.max_position_embeddings = 2 ** 62  # never regrow: the buffer is transformers' state
    return view


def _make_forward(module: Any, backend: Optional[str], with_layer_type: bool,
                  dynamic: bool) -> Callable[..., Any]:
    view = _view_config(module)

    def tables(self: Any, x: torch.Tensor, position_ids: torch.Tensor,
               layer_type: Optional[str] = None) -> "_Pair":
        name = f"{layer_type}_inv_freq" if layer_type is not None else "inv_freq"
        inv = getattr(self, name)
        return hf_rope(view, position_ids, inv_freq=inv, dtype=x.dtype,
                       layer_type=layer_type, backend=backend)

    if dynamic:
        from transformers.modeling_rope_utils import dynamic_rope_update
        fwd = dynamic_rope_update(tables)  # type: ignore[no-untyped-call]
    else:
        fwd = tables
    def forward_lt(self: Any, x: torch.Tensor, position_ids: torch.Tensor,
                   layer_type: Optional[str] = None) -> "_Pair":
        out: "_Pair" = fwd(self, x, position_ids, layer_type)
        return out

    def forward(self: Any, x: torch.Tensor, position_ids: torch.Tensor) -> "_Pair":
        out: "_Pair" = fwd(self, x, position_ids)
        return out
    return types.MethodType(forward_lt if with_layer_type else forward, module)


def _check_rotary(module: Any, family: str, backend: Optional[str]) -> None:
    """hf_rope on the module's config for two positions: refused families raise here, before
    anything changes.  The result is compared with the module's own forward."""
    pos = torch.arange(2)[None]
    x = torch.zeros(1, dtype=torch.float32)
    for lt in _layer_types(module):
        name = f"{lt}_inv_freq" if lt is not None else "inv_freq"
        inv = getattr(module, name, None)
        if not isinstance(inv, torch.Tensor):
            raise NotImplementedError(f"{family}: {type(module).__name__} has no {name} buffer "
                                      "(not the inv_freq form sinpe.torch.patch reproduces)")
        try:
            try:
                hf_rope(_view_config(module), pos, inv_freq=inv, dtype=x.dtype,
                        layer_type=lt, backend=backend)
            except ValueError:  # a vision tower's axial rope: (batch, N, 2) positions
                hf_rope(_view_config(module), torch.arange(4).view(1, 2, 2), inv_freq=inv,
                        dtype=x.dtype, layer_type=lt, backend=backend)
        except NotImplementedError as e:
            raise NotImplementedError(f"{family}: {type(module).__name__} cannot be "
                                      f"reproduced: {e}") from None


# ---- rotary modules of other forms ---------------------------------------------------------------

def _forward_source(cls: type) -> str:
    try:
        return inspect.getsource(inspect.unwrap(getattr(cls, "forward")))
    except (OSError, TypeError, AttributeError):
        return ""


def _other_kind(module: Any) -> Optional[str]:
    """'sincos': GPT-J/CodeGen's precomputed ``embed_positions`` table (sin | cos halves,
    looked up by position); 'mscale': PhiMoE's forward, which recomputes inv_freq from the
    config and scales by a per-call mscale; 'polar': complex ``torch.polar`` tables;
    'patches': DINOv3's forward(pixel_values), the patch centres of the image's grid;
    'grid': EfficientLoFTR's forward(x), the feature map's grid; None: the inv_freq form
    hf_rope reproduces."""
    if isinstance(getattr(module, "embed_positions", None), torch.Tensor) and \
            isinstance(getattr(module, "pos_embd_dim", None), int):
        return "sincos"
    src = _forward_source(type(module))
    if "short_mscale" in src and "rope_init_fn" in src:
        return "mscale"
    if "torch.polar" in src:
        return "polar"
    if "get_patches_center_coordinates" in src and _params(type(module)) == [
            "self", "pixel_values"]:
        return "patches"
    if "compute_embeddings" in src and "q_aggregation_stride" in src \
            and _params(type(module)) == ["self", "x"]:
        return "grid"
    return None


def _params(cls: type) -> List[str]:
    try:
        return list(inspect.signature(inspect.unwrap(getattr(cls, "forward"))).parameters)
    except (TypeError, ValueError):
        return []


def _plain_view(dim: int) -> Dict[str, Any]:
    """A config hf_rope reads as the plain default rope of a rotary width dim (the modules
    above compute their inv_freq themselves or as this default does)."""
    return {"model_type": "sinpe_plain", "hidden_size": dim, "num_attention_heads": 1,
            "head_dim": dim, "max_position_embeddings": 2 ** 62,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}


def _sincos_tables(module: Any, position_ids: torch.Tensor, dtype: Any,
                   backend: Optional[str]) -> "_Pair":
    """(sin, cos), each (..., pos_embd_dim // 2): GPT-J/CodeGen's
    ``embed_positions[position_ids]`` split in halves.  Their table is the default rope's
    sin and cos of ``position * inv_freq`` (theta 10000) in float32, which is hf_rope's
    first half of columns; in the buffer's dtype, rounded once as ``model.to`` rounds it."""
    d = module.pos_embd_dim
    cos, sin = hf_rope(_plain_view(d), position_ids, dtype=dtype, backend=backend)
    return sin[..., : d // 2], cos[..., : d // 2]


def _check_sincos(module: Any, family: str, backend: Optional[str]) -> None:
    """The whole buffer, recomputed, bit for bit (backend None only: 'builtin' differs by
    design); a buffer that is not the table refuses the family."""
    buf = module.embed_positions
    if backend is not None:
        return
    if buf.dim() != 2 or buf.shape[-1] != module.pos_embd_dim:
        raise NotImplementedError(f"{family}: {type(module).__name__}.embed_positions has "
                                  f"shape {tuple(buf.shape)}, not (positions, "
                                  f"{module.pos_embd_dim})")
    sin, cos = _sincos_tables(module, torch.arange(buf.shape[0])[None], buf.dtype, backend)
    got = torch.cat((sin, cos), dim=-1)[0].to(buf.device)
    n = int((_bits(got) != _bits(buf)).sum())
    if n:
        raise NotImplementedError(f"{family}: {type(module).__name__}.embed_positions is not "
                                  f"the sin/cos table sinpe computes ({n} of {buf.numel()} "
                                  "values differ)")


def _bits(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().contiguous()
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def _make_other_forward(module: Any, backend: Optional[str], kind: str,
                        dynamic: bool) -> Callable[..., Any]:
    if kind == "sincos":
        cast = "x.dtype" in _forward_source(type(module))  # GPT-J casts, CodeGen does not

        def sincos(self: Any, x: torch.Tensor, position_ids: torch.Tensor) -> "_Pair":
            sin, cos = _sincos_tables(self, position_ids, self.embed_positions.dtype, backend)
            if self.embed_positions.device != sin.device:
                sin, cos = sin.to(self.embed_positions.device), cos.to(
                    self.embed_positions.device)
            return (sin.to(x.dtype), cos.to(x.dtype)) if cast else (sin, cos)
        return types.MethodType(sincos, module)

    if kind == "polar":
        sincos_backend = _GLIBC_SINCOS if backend is None else backend

        def polar(self: Any, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
            # DeepSeek-V2, Llama 4: torch.polar(1, position * inv_freq) (cos and sin from the
            # C library, times 1: exact), times attention_scaling as the module multiplies
            inv = self.inv_freq.to(device=x.device, dtype=torch.float)
            n = int(inv.shape[-1])
            cos, sin = hf_rope(_plain_view(2 * n), position_ids, inv_freq=inv,
                               dtype=torch.float32, backend=sincos_backend)
            freqs_cis = torch.complex(cos[..., :n], sin[..., :n]).to(x.device)
            return freqs_cis * self.attention_scaling
        fwd0: Callable[..., Any] = polar
        if dynamic:
            from transformers.modeling_rope_utils import dynamic_rope_update
            fwd0 = dynamic_rope_update(polar)  # type: ignore[no-untyped-call]
        return types.MethodType(fwd0, module)

    if kind == "patches":
        return types.MethodType(_patches_forward(type(module).forward, backend), module)
    if kind == "grid":
        return types.MethodType(_grid_forward(type(module).forward, backend), module)

    def mscale(self: Any, x: torch.Tensor, position_ids: torch.Tensor) -> "_Pair":
        # PhiMoE: inv_freq recomputed from the config by the module's own init function on
        # every call, scaled by long_mscale or short_mscale as the call's length decides
        # (transformers' rule, read from the module's config); the tables are sinpe's
        # float32 cos/sin of position * inv_freq, scaled and cast as the module does.
        rp = self.config.rope_parameters
        scale = None
        seq_len = torch.max(position_ids) + 1
        if rp["rope_type"] != "default" and seq_len:
            scale = rp["long_mscale"] if seq_len > rp["original_max_position_embeddings"] \
                else rp["short_mscale"]
        inv, attention_scaling = self.rope_init_fn(self.config)
        scale = attention_scaling if scale is None else scale
        cos, sin = hf_rope(_plain_view(2 * int(inv.shape[-1])), position_ids, inv_freq=inv,
                           dtype=torch.float32, backend=backend)
        return (cos * scale).to(x.dtype), (sin * scale).to(x.dtype)

    fwd: Callable[..., Any] = mscale
    if dynamic:
        from transformers.modeling_rope_utils import dynamic_rope_update
        fwd = dynamic_rope_update(mscale)  # type: ignore[no-untyped-call]
    return types.MethodType(fwd, module)


def _patch_centres(nh: int, nw: int) -> np.ndarray:
    """DINOv3's patch centres, (nh * nw, 2) (y, x) in [-1, 1], by the same float32 steps as
    its get_patches_center_coordinates (arange(0.5, n) / n, then 2 c - 1: each exact or
    correctly rounded, so NumPy's float32 gives torch's bits), times 2 pi rounded to float32
    (torch's float32 product by a Python float scalar)."""
    ch = np.arange(0.5, nh, dtype=np.float32) / np.float32(nh)
    cw = np.arange(0.5, nw, dtype=np.float32) / np.float32(nw)
    c = np.stack(np.meshgrid(ch, cw, indexing="ij"), -1).reshape(-1, 2)
    c = np.float32(2.0) * c - np.float32(1.0)
    return c * np.float32(2 * math.pi)


def _patches_forward(original: Callable[..., Any], backend: Optional[str]) -> Callable[..., Any]:
    """DINOv3's rotary (EoMT-DINOv3): angles ``2 pi c * inv_freq`` of the patch centres c,
    flattened (y then x) and tiled twice, cos and sin, cast to the pixels' dtype: the
    vision axial hwhw layout of those float32 positions (sinpe._hf.axial), bit for bit.  In
    training mode the module jitters the centres with torch's generator: its own forward."""

    def forward(self: Any, pixel_values: torch.Tensor) -> "_Pair":
        ph = self.config.patch_size
        ph, pw = (ph[0], ph[1]) if isinstance(ph, (tuple, list)) else (ph, ph)
        h, w = pixel_values.shape[-2:]
        if self.training or not _plain_grid(self.inv_freq, pixel_values, 4) or h < ph \
                or w < pw:
            out: "_Pair" = original(self, pixel_values)
            return out
        return _axial_pair(_patch_centres(h // ph, w // pw), self.inv_freq, "hwhw", backend,
                           pixel_values, None)
    return forward


def _plain_grid(inv_freq: Any, x: Any, ndim: int) -> bool:
    """The case the grid forms reproduce: a float32 CPU (or other real device's) inv_freq
    (after ``model.to(bfloat16)`` or float64 the module computes its angles in that type:
    its own forward then) and an x of ndim axes with memory (a meta x: the module's forward,
    which returns meta tensors)."""
    return (inv_freq.dtype == torch.float32 and not inv_freq.is_meta and not x.is_meta
            and x.dim() == ndim)


def _grid_forward(original: Callable[..., Any], backend: Optional[str]) -> Callable[..., Any]:
    """EfficientLoFTR's rotary: the aggregated feature map's grid of 1-based (row, column)
    positions (``ones.cumsum``: exact), angles ``row * inv_freq`` and ``column * inv_freq``
    interleaved per frequency, sin and cos each repeated twice, as (1, h, w, 2 * angles) in
    x's dtype: the vision axial hw_repeat layout (sinpe._hf.axial), bit for bit."""

    def forward(self: Any, x: torch.Tensor) -> "_Pair":
        cfg = self.config
        fh, fw = x.shape[-2:]
        eh = (fh - cfg.q_aggregation_kernel_size) // cfg.q_aggregation_stride + 1
        ew = (fw - cfg.q_aggregation_kernel_size) // cfg.q_aggregation_stride + 1
        # the module's angle tensor has hidden_size // 2 columns, its inv_freq a quarter of
        # hidden_size (other lengths broadcast or raise there), and a grid of at least one
        if not _plain_grid(self.inv_freq, x, 4) or eh < 1 or ew < 1 \
                or 4 * self.inv_freq.numel() != cfg.hidden_size:
            out: "_Pair" = original(self, x)
            return out
        g = np.stack(np.meshgrid(np.arange(1, eh + 1, dtype=np.float32),
                                 np.arange(1, ew + 1, dtype=np.float32), indexing="ij"), -1)
        return _axial_pair(g.reshape(-1, 2), self.inv_freq, "hw_repeat", backend, x,
                           (1, eh, ew))
    return forward


def _axial_pair(positions: np.ndarray, inv_freq: torch.Tensor, layout: str,
                backend: Optional[str], like: torch.Tensor,
                lead: Optional[Tuple[int, ...]]) -> "_Pair":
    """The grid forms' (cos, sin): the vision axial layout's float32 tables of (N, 2)
    positions and the module's (float32) inv_freq, shaped lead + (columns,) when given, on
    like's device in like's dtype (the modules' closing ``.to``)."""
    from ._hf import axial
    from ._jobs import _opts
    inv = inv_freq.detach().to("cpu", torch.float32).numpy()
    c, s = axial._tables(positions, inv, layout, _opts(None, None, backend, None, None), None)
    if lead is not None:
        c, s = c.reshape(lead + c.shape[-1:]), s.reshape(lead + s.shape[-1:])
    return (torch.from_numpy(c).to(device=like.device, dtype=like.dtype),
            torch.from_numpy(s).to(device=like.device, dtype=like.dtype))


_POLAR = ("its rotary returns complex torch.polar tables, whose cos and sin torch takes from "
          "the C library's cosf/sinf: sinpe reproduces glibc's, as an x86-64 CPU with AVX2 and "
          "FMA runs them (measured: 0 of 7,968,669 random float32 angles and 0 of 6,400,000 "
          "rope angles differ), not the C library of other machines; pass backend= to take "
          "that backend's cos/sin instead")

#: the backend profile whose sin and cos are glibc's sinf/cosf (FMA variants), as torch.polar
#: calls them on x86-64 (docs/backends.md: 'jax-0.10' runs them for JAX's sin and cos)
_GLIBC_SINCOS = "jax-0.10"


def _glibc_like_torch() -> bool:
    """torch.polar's cosf/sinf are the C library's: glibc's FMA variants on an x86-64 Linux
    machine whose CPU has AVX2 and FMA (the avx2 code path's requirement)."""
    import platform
    from ._backends import policy
    return sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64") \
        and "avx2" in policy.kernels()


# ---- the public face ------------------------------------------------------------------------------

def _route(model: Any, plan: List[Tuple[Any, str, Any, Dict[str, Any]]],
           records: List[Dict[str, Any]], routers: Dict[int, "_Router"]) -> None:
    """The methods of model's modules that name a recognised rotation: a copy of each whose
    globals name the sinpe form, added to plan (nothing is changed here)."""
    for mod_name, m in model.named_modules():
        if type(m).__name__.endswith("RotaryEmbedding"):
            continue
        for cls in type(m).__mro__:
            if cls is torch.nn.Module or not cls.__module__.startswith("transformers."):
                break
            for attr, fn in vars(cls).items():
                if attr.startswith("__") or not isinstance(fn, types.FunctionType) \
                        or any(p[1] == attr for p in plan if p[0] is m):
                    continue
                g = inspect.unwrap(fn).__globals__
                r = routers.get(id(g))
                if r is None:
                    r = routers[id(g)] = _Router(g)
                if r.globals is None or not _calls(fn, r.globals, g):
                    continue
                new = _rebuild(fn, r.globals, g)
                plan.append((m, attr, types.MethodType(new, m), {}))
                used = sorted(n for n in _names_chain(fn) if n in r.globals
                              and r.globals[n] is not g.get(n))
                records.append({"module": mod_name, "class": type(m).__name__,
                                "kind": "rotation", "method": attr,
                                "form": ", ".join(f"{n} -> {r.routes.get(n, 'helper')}"
                                                  for n in used)})


def patch(model: Any, *, backend: Optional[str] = None) -> Any:
    """patch(model, *, backend=None) -> model

    Swap a transformers model's rotary position embedding to sinpe, on the instances: every
    ``*RotaryEmbedding`` module's forward returns sinpe's tables (from the module's own
    ``inv_freq`` buffers, per layer type; dynamic and longrope state kept by transformers'
    own wrapper), and every rotation function the model's modules call is routed to the
    sinpe.torch form that computes the same bits, recognised from the model's own code.
    backend None: the kernels of the torch in this process, so logits are bit for bit the
    model's (float32, bfloat16, cast before or after patching, generate()); ``'builtin'``:
    correctly rounded tables (logits then differ in their last bits).

    Raises NotImplementedError naming the family and why when a rotary module is not one
    sinpe reproduces; the model is then left as it was.  Patching twice re-patches (with the
    new backend).  :func:`unpatch` restores; :func:`patched` lists what was replaced."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"backend must be None or a str, got {type(backend).__name__}")
    if getattr(model, _ATTR, None):
        unpatch(model)
    family = _family(model)
    plan: List[Tuple[Any, str, Any, Dict[str, Any]]] = []
    # 1. rotary modules: check every one before changing anything
    rotaries: List[Tuple[str, Any, Any]] = []
    for mod_name, m in model.named_modules():
        if not type(m).__name__.endswith("RotaryEmbedding"):
            continue
        kind = _other_kind(m)
        if kind == "polar" and backend is None and not _glibc_like_torch():
            raise NotImplementedError(f"{family}: {type(m).__name__} cannot be reproduced "
                                      f"here: {_POLAR}")
        if kind is not None:
            if kind == "sincos":
                _check_sincos(m, family, backend)
            rotaries.append((mod_name, m, kind))
            continue
        sig = _rotary_signature(type(m))
        if sig is None:
            rotaries.append((mod_name, m, None))
            continue
        _check_rotary(m, family, backend)
        rotaries.append((mod_name, m, sig))
    if not any(sig is not None for _, _, sig in rotaries):
        if not rotaries:
            raise NotImplementedError(f"{family}: the model has no *RotaryEmbedding module")
        raise NotImplementedError(
            f"{family}: no rotary module is a forward(x, position_ids) one (found "
            f"{sorted({type(m).__name__ for _, m, _ in rotaries})})")
    # 2. rotations: the modules whose methods name a routed function
    routers: Dict[int, _Router] = {}
    records: List[Dict[str, Any]] = []
    for mod_name, m, sig in rotaries:
        if sig is None:
            records.append({"module": mod_name, "class": type(m).__name__, "kind": "rotary",
                            "form": "kept (forward is not (x, position_ids))"})
            continue
        dyn = _dynamic_wrapped(type(m))
        if isinstance(sig, str):
            fwd = _make_other_forward(m, backend, sig, dyn)
            what = {"sincos": "hf_rope (sincos table)",
                    "mscale": "hf_rope (per-call mscale)",
                    "polar": "hf_rope (complex polar table)",
                    "patches": "hf_rope (patch centres)",
                    "grid": "hf_rope (feature-map grid)"}[sig]
        else:
            fwd = _make_forward(m, backend, sig, dyn)
            what = "hf_rope"
        plan.append((m, "forward", fwd, {}))
        records.append({"module": mod_name, "class": type(m).__name__, "kind": "rotary",
                        "form": what + (" (dynamic_rope_update)" if dyn else "")})
    _route(model, plan, records, routers)
    kept = sorted({f"{n} ({why})" for r in routers.values() for n, why in r.kept.items()})
    # 3. apply (nothing above changed the model)
    saved = []
    for m, attr, new, _ in plan:
        saved.append((m, attr, m.__dict__.get(attr, _MISSING)))
        m.__dict__[attr] = new
    object.__setattr__(model, _ATTR, {"saved": saved, "records": records, "kept": kept,
                                      "backend": backend})
    return model


_MISSING = object()


def _names_chain(fn: Any) -> List[str]:
    out: List[str] = []
    while fn is not None:
        if isinstance(fn, types.FunctionType):
            out.extend(_names(fn.__code__))
        fn = getattr(fn, "__wrapped__", None)
    return out


def unpatch(model: Any) -> Any:
    """Restore a model patched by :func:`patch` (the instances' own attributes as they were);
    a model that is not patched is returned unchanged."""
    state = model.__dict__.get(_ATTR)
    if not state:
        return model
    for m, attr, old in reversed(state["saved"]):
        if old is _MISSING:
            m.__dict__.pop(attr, None)
        else:
            m.__dict__[attr] = old
    del model.__dict__[_ATTR]
    return model


def patched(model: Any) -> List[Dict[str, Any]]:
    """What :func:`patch` replaced in model: one dict per replaced method (module path,
    class, kind 'rotary' or 'rotation', form), plus rotary modules and rotation functions
    left as the model computes them (form 'kept ...'); [] when the model is not patched."""
    state = model.__dict__.get(_ATTR)
    if not state:
        return []
    out = [dict(r) for r in state["records"]]
    out += [{"module": "", "class": "", "kind": "rotation", "form": f"kept: {k}"}
            for k in state["kept"]]
    return out
