"""Which rotary module is which: the kind of forward a ``*RotaryEmbedding`` module has
(transformers' standard one, GPT-J/CodeGen's sincos buffer, PhiMoE's per-call mscale, complex
``torch.polar`` tables, DINOv3's patch centres, EfficientLoFTR's grid), the config it was built
with, and the spec (plain data) of the forward sinpe gives it."""
from __future__ import annotations

import inspect
import sys
import types
from typing import Any, Dict, List, Optional

import torch



_WHAT = {"hf_rope": "hf_rope", "sincos": "hf_rope (sincos table)",
         "mscale": "hf_rope (per-call mscale)", "polar": "hf_rope (complex polar table)",
         "patches": "hf_rope (patch centres)", "grid": "hf_rope (feature-map grid)"}


def plain_view(dim: int) -> Dict[str, Any]:
    """A config hf_rope reads as the plain default rope of a rotary width dim (the modules
    below compute their inv_freq themselves or as this default does)."""
    return {"model_type": "sinpe_plain", "hidden_size": dim, "num_attention_heads": 1,
            "head_dim": dim, "max_position_embeddings": 2 ** 62,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}


def family_of(model: Any) -> str:
    cfg = getattr(model, "config", None)
    return str(getattr(cfg, "model_type", None) or type(model).__name__)


def _params(cls: type) -> List[str]:
    try:
        return list(inspect.signature(inspect.unwrap(getattr(cls, "forward"))).parameters)
    except (TypeError, ValueError, AttributeError):
        return []


def rotary_signature(cls: type) -> Optional[bool]:
    """True: forward(x, position_ids, layer_type); False: forward(x, position_ids); None:
    something else."""
    params = _params(cls)
    if params[:3] != ["self", "x", "position_ids"]:
        return None
    rest = params[3:]
    if not rest:
        return False
    return True if rest == ["layer_type"] else None


def dynamic_wrapped(cls: type) -> bool:
    from transformers.modeling_rope_utils import dynamic_rope_update
    probe = dynamic_rope_update(lambda self, x, position_ids: None)  # type: ignore[no-untyped-call]
    f = getattr(cls, "forward", None)
    return isinstance(f, types.FunctionType) and f.__code__ is probe.__code__


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


def layer_types_of(module: Any) -> List[Optional[str]]:
    rt = getattr(module, "rope_type", None)
    if isinstance(rt, dict) and rt:
        return list(rt)
    lts = getattr(getattr(module, "config", None), "layer_types", None)
    if lts and all(hasattr(module, f"{t}_inv_freq") for t in set(lts)):
        return sorted(set(lts))
    return [None]


_POLAR = ("its rotary returns complex torch.polar tables, whose cos and sin torch takes from "
          "the C library's cosf/sinf: sinpe reproduces glibc's, as an x86-64 CPU with AVX2 and "
          "FMA runs them (measured: 0 of 7,968,669 random float32 angles and 0 of 6,400,000 "
          "rope angles differ), not the C library of other machines; pass backend= to take "
          "that backend's cos/sin instead")


#: the backend profile whose sin and cos are glibc's sinf/cosf (FMA variants), as torch.polar
#: calls them on x86-64 (docs/backends.md: 'jax-0.10' runs them for JAX's sin and cos)
GLIBC_SINCOS = "jax-0.10"


def glibc_like_torch() -> bool:
    """torch.polar's cosf/sinf are the C library's: glibc's FMA variants on an x86-64 Linux
    machine whose CPU has AVX2 and FMA (the avx2 code path's requirement)."""
    import platform
    from .._backends import policy
    return sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64") \
        and "avx2" in policy.kernels()


def _config_of(module: Any, family: str) -> Any:
    cfg = getattr(module, "config", None)
    if cfg is None:
        raise NotImplementedError(
            f"{family}: {type(module).__name__} has no config (a rotary module of remote code "
            "or of another library): not a transformers rotary module sinpe.torch.patch "
            "reproduces")
    return cfg


def _snapshot(module: Any, cfg: Any, layer_type: Optional[str]) -> Dict[str, Any]:
    """The config as hf_rope reads it for module (plain data), with the values the module
    fixed at init where it keeps them (mrope_section)."""
    from .._hf.config import snapshot
    snap = snapshot(cfg, layer_type)
    sec = getattr(module, "mrope_section", None)
    if isinstance(sec, (list, tuple)) and all(type(v) is int for v in sec):
        rp = snap.get("rope_parameters")
        key = "rope_parameters" if isinstance(rp, dict) else "rope_scaling"
        rp = dict(snap.get(key) or {})
        rp["mrope_section"] = list(sec)
        snap[key] = rp
    return snap


def spec_of(module: Any, family: str, backend: Optional[str]) -> Dict[str, Any]:
    """What replaces the rotary module's forward (plain data); NotImplementedError for a
    rotary sinpe does not reproduce."""
    kind = _other_kind(module) or "hf_rope"
    cls = type(module)
    spec: Dict[str, Any] = {"kind": kind, "backend": backend, "dynamic": dynamic_wrapped(cls),
                            "layer_type": False}
    if kind == "polar":
        if backend is None and not glibc_like_torch():
            raise NotImplementedError(f"{family}: {cls.__name__} cannot be reproduced here: "
                                      f"{_POLAR}")
        spec["backend"] = GLIBC_SINCOS if backend is None else backend
        spec["config"] = plain_view(2 * int(module.inv_freq.shape[-1]))
    elif kind == "sincos":
        spec["cast"] = "x.dtype" in _forward_source(cls)  # GPT-J casts, CodeGen does not
        spec["config"] = plain_view(module.pos_embd_dim)
    elif kind == "hf_rope":
        sig = rotary_signature(cls)
        if sig is None:
            return {"kind": None, "why": "forward is not (x, position_ids)"}
        spec["layer_type"] = sig
        cfg = _config_of(module, family)
        types_ = layer_types_of(module) if sig else [None]
        spec["configs"] = {lt: _snapshot(module, cfg, lt) for lt in types_}
        spec["layer_types"] = types_
    elif kind in ("mscale", "patches", "grid"):
        _config_of(module, family)
    spec["form"] = _WHAT[kind] + (" (dynamic_rope_update)" if spec["dynamic"] else "")
    return spec
