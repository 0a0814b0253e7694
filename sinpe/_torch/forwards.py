"""The rotary modules' forwards sinpe gives them: transformers' tables of the module's own
state (``inv_freq``, ``attention_scaling``, per layer type) from :func:`hf_rope`, and the
forwards of their own for the other kinds (sincos buffers, per-call mscale, complex tables,
patch centres, grids); each falls back to the module's own forward where sinpe reads no values
(meta tensors, torch.func transforms) or hf_rope refuses the inputs."""
from __future__ import annotations

import math
import types
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np
import torch

from .hf_rope import hf_rope
from .rotaries import dynamic_wrapped, plain_view
from .shadow import own


_Pair = Tuple[torch.Tensor, torch.Tensor]


def _meta(*ts: Any) -> bool:
    """A tensor without values sinpe can read: on the meta device, or inside a torch
    function transform (vmap, grad, jvp, functionalize): the module's own forward then."""
    if torch.compiler.is_compiling():  # (fake tensors under a trace: the operators take them)
        return any(isinstance(t, torch.Tensor) and t.is_meta for t in ts)
    return any(isinstance(t, torch.Tensor) and (t.is_meta or _FUNCTORCH_WRAPPED(t))
               for t in ts)


_FUNCTORCH_WRAPPED = torch._C._functorch.is_functorch_wrapped_tensor


def _scaling(self: Any, layer_type: Optional[str]) -> float:
    """attention_scaling as the module's forward reads it: the layer type's own where the
    module keeps one, else the module's, else 1 (a module that does not scale)."""
    v: Any = getattr(self, f"{layer_type}_attention_scaling", None) if layer_type is not None \
        else None
    if v is None:
        v = getattr(self, "attention_scaling", 1.0)
    return float(v)


def _hf_forward(module: Any, spec: Dict[str, Any]) -> Callable[..., Any]:
    configs, backend = spec["configs"], spec["backend"]

    def forward(self: Any, x: torch.Tensor, position_ids: torch.Tensor,
                layer_type: Optional[str] = None) -> _Pair:
        name = f"{layer_type}_inv_freq" if layer_type is not None else "inv_freq"
        inv = getattr(self, name)
        if _meta(x, position_ids, inv):  # no values: the module's own forward's meta tensors
            args = (x, position_ids) if layer_type is None else (x, position_ids, layer_type)
            return _unwrapped_own(self)(*args)  # type: ignore[no-any-return]
        cfg = configs.get(layer_type)
        args = (x, position_ids) if layer_type is None else (x, position_ids, layer_type)
        if cfg is None:  # a layer type the module did not have at patch time: its own forward
            return _unwrapped_own(self)(*args)  # type: ignore[no-any-return]
        if torch.compiler.is_compiling():
            return hf_rope(cfg, position_ids, inv_freq=inv, dtype=x.dtype,
                           layer_type=layer_type, backend=backend,
                           attention_scaling=_scaling(self, layer_type))
        try:
            return hf_rope(cfg, position_ids, inv_freq=inv, dtype=x.dtype,
                           layer_type=layer_type, backend=backend,
                           attention_scaling=_scaling(self, layer_type))
        except (ValueError, TypeError, IndexError):
            # inputs hf_rope refuses (an mrope module given (batch, n, 2) pairs, which it
            # broadcasts): the module's own forward, which takes them or raises its own error,
            # as unpatched
            return _unwrapped_own(self)(*args)  # type: ignore[no-any-return]

    if spec["layer_type"]:
        return forward

    def forward_pos(self: Any, x: torch.Tensor, position_ids: torch.Tensor) -> _Pair:
        return forward(self, x, position_ids)
    return forward_pos


def _unwrapped_own(self: Any) -> Callable[..., Any]:
    """The module's own forward without transformers' dynamic_rope_update (the patched forward
    already ran it)."""
    mine = own(self)
    f = getattr(mine, "__func__", None)
    if f is not None and getattr(f, "__wrapped__", None) is not None \
            and dynamic_wrapped(type(self)):
        return types.MethodType(f.__wrapped__, self)
    return mine


def sincos_tables(module: Any, position_ids: torch.Tensor, dtype: Any,
                   backend: Optional[str]) -> _Pair:
    """(sin, cos), each (..., pos_embd_dim // 2): GPT-J/CodeGen's
    ``embed_positions[position_ids]`` split in halves.  Their table is the default rope's
    sin and cos of ``position * inv_freq`` (theta 10000) in float32, which is hf_rope's
    first half of columns; in the buffer's dtype, rounded once as ``model.to`` rounds it."""
    d = module.pos_embd_dim
    cos, sin = hf_rope(plain_view(d), position_ids, dtype=dtype, backend=backend)
    return sin[..., : d // 2], cos[..., : d // 2]


def _sincos_forward(module: Any, spec: Dict[str, Any]) -> Callable[..., Any]:
    cast, backend, view = spec["cast"], spec["backend"], spec["config"]

    def sincos(self: Any, x: torch.Tensor, position_ids: torch.Tensor) -> _Pair:
        buf = self.embed_positions
        if _meta(x, position_ids, buf):
            return own(self)(x, position_ids)  # type: ignore[no-any-return]
        d = self.pos_embd_dim
        cos, sin = hf_rope(view, position_ids, dtype=buf.dtype, backend=backend)
        sin, cos = sin[..., : d // 2], cos[..., : d // 2]
        if buf.device != sin.device:
            sin, cos = sin.to(buf.device), cos.to(buf.device)
        return (sin.to(x.dtype), cos.to(x.dtype)) if cast else (sin, cos)
    return sincos


def _polar_forward(module: Any, spec: Dict[str, Any]) -> Callable[..., Any]:
    backend, view = spec["backend"], spec["config"]

    def polar(self: Any, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        # DeepSeek-V2, Llama 4: torch.polar(1, position * inv_freq) (cos and sin from the C
        # library, times 1: exact), times attention_scaling as the module multiplies
        if _meta(x, position_ids, self.inv_freq):
            return _unwrapped_own(self)(x, position_ids)  # type: ignore[no-any-return]
        inv = self.inv_freq.to(device=x.device, dtype=torch.float)
        n = int(inv.shape[-1])
        cfg = view if 2 * n == view["head_dim"] else plain_view(2 * n)
        cos, sin = hf_rope(cfg, position_ids, inv_freq=inv, dtype=torch.float32,
                           backend=backend)
        freqs_cis = torch.complex(cos[..., :n], sin[..., :n]).to(x.device)
        scaled: torch.Tensor = freqs_cis * self.attention_scaling
        return scaled
    return polar


def _mscale_forward(module: Any, spec: Dict[str, Any]) -> Callable[..., Any]:
    backend = spec["backend"]

    def mscale(self: Any, x: torch.Tensor, position_ids: torch.Tensor) -> _Pair:
        # PhiMoE: inv_freq recomputed from the config by the module's own init function on
        # every call, scaled by long_mscale or short_mscale as the call's length decides
        # (transformers' rule, read from the module's config as its forward reads it); the
        # tables are sinpe's float32 cos/sin of position * inv_freq, scaled and cast as the
        # module does.
        if _meta(x, position_ids, getattr(self, "inv_freq", None)):
            return _unwrapped_own(self)(x, position_ids)  # type: ignore[no-any-return]
        rp = self.config.rope_parameters
        scale = None
        seq_len = torch.max(position_ids) + 1
        if rp["rope_type"] != "default" and seq_len:
            scale = rp["long_mscale"] if seq_len > rp["original_max_position_embeddings"] \
                else rp["short_mscale"]
        inv, attention_scaling = self.rope_init_fn(self.config)
        scale = attention_scaling if scale is None else scale
        cos, sin = hf_rope(plain_view(2 * int(inv.shape[-1])), position_ids, inv_freq=inv,
                           dtype=torch.float32, backend=backend)
        return (cos * scale).to(x.dtype), (sin * scale).to(x.dtype)
    return mscale


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


def _patches_forward(module: Any, spec: Dict[str, Any]) -> Callable[..., Any]:
    """DINOv3's rotary (EoMT-DINOv3): angles ``2 pi c * inv_freq`` of the patch centres c,
    flattened (y then x) and tiled twice, cos and sin, cast to the pixels' dtype: the
    vision axial hwhw layout of those float32 positions (sinpe._hf.axial), bit for bit.  In
    training mode the module jitters the centres with torch's generator: its own forward."""
    backend = spec["backend"]

    def forward(self: Any, pixel_values: torch.Tensor) -> _Pair:
        ph = self.config.patch_size
        ph, pw = (ph[0], ph[1]) if isinstance(ph, (tuple, list)) else (ph, ph)
        h, w = pixel_values.shape[-2:]
        if self.training or not _plain_grid(self.inv_freq, pixel_values, 4) or h < ph \
                or w < pw:
            return own(self)(pixel_values)  # type: ignore[no-any-return]
        return _axial_pair(_patch_centres(h // ph, w // pw), self.inv_freq, "hwhw", backend,
                           pixel_values, None)
    return forward


def _plain_grid(inv_freq: Any, x: Any, ndim: int) -> bool:
    """The case the grid forms reproduce: a float32 CPU (or other real device's) inv_freq
    (after ``model.to(bfloat16)`` or float64 the module computes its angles in that type:
    its own forward then) and an x of ndim axes with memory (a meta x: the module's forward,
    which returns meta tensors)."""
    return (inv_freq.dtype == torch.float32 and not _meta(inv_freq, x) and x.dim() == ndim)


def _grid_forward(module: Any, spec: Dict[str, Any]) -> Callable[..., Any]:
    """EfficientLoFTR's rotary: the aggregated feature map's grid of 1-based (row, column)
    positions (``ones.cumsum``: exact), angles ``row * inv_freq`` and ``column * inv_freq``
    interleaved per frequency, sin and cos each repeated twice, as (1, h, w, 2 * angles) in
    x's dtype: the vision axial hw_repeat layout (sinpe._hf.axial), bit for bit."""
    backend = spec["backend"]

    def forward(self: Any, x: torch.Tensor) -> _Pair:
        cfg = self.config
        fh, fw = x.shape[-2:]
        eh = (fh - cfg.q_aggregation_kernel_size) // cfg.q_aggregation_stride + 1
        ew = (fw - cfg.q_aggregation_kernel_size) // cfg.q_aggregation_stride + 1
        # the module's angle tensor has hidden_size // 2 columns, its inv_freq a quarter of
        # hidden_size (other lengths broadcast or raise there), and a grid of at least one
        if not _plain_grid(self.inv_freq, x, 4) or eh < 1 or ew < 1 \
                or 4 * self.inv_freq.numel() != cfg.hidden_size:
            return own(self)(x)  # type: ignore[no-any-return]
        g = np.stack(np.meshgrid(np.arange(1, eh + 1, dtype=np.float32),
                                 np.arange(1, ew + 1, dtype=np.float32), indexing="ij"), -1)
        return _axial_pair(g.reshape(-1, 2), self.inv_freq, "hw_repeat", backend, x,
                           (1, eh, ew))
    return forward


def _axial_pair(positions: np.ndarray, inv_freq: torch.Tensor, layout: str,
                backend: Optional[str], like: torch.Tensor,
                lead: Optional[Tuple[int, ...]]) -> _Pair:
    """The grid forms' (cos, sin): the vision axial layout's float32 tables of (N, 2)
    positions and the module's (float32) inv_freq, shaped lead + (columns,) when given, on
    like's device in like's dtype (the modules' closing ``.to``)."""
    from .._hf import axial
    from .._backends.policy import call_opts as _opts
    inv = inv_freq.detach().to("cpu", torch.float32).numpy()
    c, s = axial._tables(positions, inv, layout, _opts(None, None, backend, None, None), None)
    if lead is not None:
        c, s = c.reshape(lead + c.shape[-1:]), s.reshape(lead + s.shape[-1:])
    return (torch.from_numpy(c).to(device=like.device, dtype=like.dtype),
            torch.from_numpy(s).to(device=like.device, dtype=like.dtype))


FORWARDS: Dict[str, Callable[[Any, Dict[str, Any]], Callable[..., Any]]] = {
    "hf_rope": _hf_forward, "sincos": _sincos_forward, "polar": _polar_forward,
    "mscale": _mscale_forward, "patches": _patches_forward, "grid": _grid_forward}


