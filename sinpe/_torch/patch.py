"""One line swaps a transformers model's rotary position embedding to sinpe: :func:`patch`,
:func:`unpatch`, :func:`patched` (re-exported by :mod:`sinpe.torch`).

How a model is patched (docs/hf_patch.md):

- **Rotary modules.** Every submodule whose class is named ``*RotaryEmbedding`` and whose
  forward is ``(x, position_ids[, layer_type])`` gets, on the instance, a forward that returns
  :func:`sinpe.presets.hf_rope`'s tables of the module's own state: its ``inv_freq`` buffer
  (``f"{layer_type}_inv_freq"`` per layer type) and its ``attention_scaling``, as they are at
  call time (after ``model.to(dtype)``, after a dynamic rope regrew them), in the layout of
  the config the module was built with.  A forward that transformers wraps in
  ``dynamic_rope_update`` stays wrapped by the same function, so the dynamic and longrope
  state evolves exactly as transformers keeps it.  GPT-J/CodeGen's sincos buffer, PhiMoE's
  per-call mscale, complex ``torch.polar`` tables (DeepSeek-V2, Llama 4), DINOv3's patch
  centres and EfficientLoFTR's grid get forwards of their own.
- **Rotations.** The modeling module's rotation functions (``apply_rotary_pos_emb`` and kin)
  are recognised by their code (the syntax tree of the function and of the helpers it calls,
  compared with transformers' own reference functions).  The methods of the model's modules
  that call one get, on the instance, a copy whose code names a private alias instead
  (``_sinpe_route__apply_rotary_pos_emb`` in the modeling module, a :class:`route` to the
  sinpe form); every other name the method reads resolves through the live module, as the
  class's own method resolves it.  Unrecognised rotations are left as the model computes
  them (listed by :func:`patched` as ``kept``).

**Proof on the instance.** Before anything changes, each rotary module's own forward and
sinpe's are called on the module (its state saved and restored, torch's random state
untouched) at a few positions in float32 and bfloat16, and each routed rotation and its form
on a few random vectors: a module whose outputs differ in any bit keeps its own forward
(:func:`patched` says why), a rotation that differs is not routed.  A module on the meta
device is proven on a CPU twin built from its config.  A family whose rotary
:func:`sinpe.presets.hf_rope` does not reproduce raises NotImplementedError naming the family
and why, and the model is left as it was.

**State is plain data.** What patch sets on an instance is a :class:`Patched` attribute (what
it replaces and how, as names and numbers) that builds its function again when copied,
pickled or loaded (``copy.deepcopy``, ``pickle``, ``torch.save``/``torch.load``), so a copy is
patched as its original was and :func:`unpatch` restores every module of a model, in any
order, whoever patched it.  ``save_pretrained`` saves weights and config only: a model loaded
with ``from_pretrained`` is unpatched (``patched()`` empty).
"""
from __future__ import annotations

import inspect
import types
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import torch

from .proof import check_rotary, proof_of
from .recognise import own_code
from .rotaries import family_of, spec_of
from .routing import Router, calls_routed, chain_names, recodable, router
from .state import Patched



#: a model's record of its patch call (plain data): the backend and the rotations kept
_ROOT = "_sinpe_patch"


#: a rotary module whose own forward was kept (plain data: its record)
_KEPT = "_sinpe_kept"


def _model_arg(model: Any) -> None:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")


def _rotaries(model: Any) -> Iterator[Tuple[str, Any]]:
    for name, m in model.named_modules():
        if type(m).__name__.endswith("RotaryEmbedding"):
            yield name, m


def _routes(model: Any, family: str) -> Tuple[List[Tuple[Any, str, Dict[str, Any]]], List[str]]:
    """The methods of model's modules that name a routed rotation: (module, attribute, spec)
    for each, and the rotations kept (nothing is changed here)."""
    plan: List[Tuple[Any, str, Dict[str, Any]]] = []
    routers: List[Router] = []
    seen: Set[Tuple[type, str]] = set()
    hooked: List[str] = []
    for mod_name, m in model.named_modules():
        if type(m).__name__.endswith("RotaryEmbedding"):
            continue
        done: Set[str] = set()
        for cls in type(m).__mro__:
            if cls is torch.nn.Module or not cls.__module__.startswith("transformers."):
                break
            for attr, fn in vars(cls).items():
                if attr.startswith("__") or attr in done or not isinstance(fn, types.FunctionType):
                    continue
                done.add(attr)
                d = m.__dict__.get(attr)
                if d is not None and not isinstance(d, Patched):
                    # an instance attribute stands in for the method (a hook): left as it is
                    if calls_routed(fn, router(inspect.unwrap(fn).__globals__).names):
                        hooked.append(f"{type(m).__name__}.{attr} (an instance attribute "
                                      "stands in for it)")
                    continue
                r = router(inspect.unwrap(fn).__globals__)
                if r not in routers:
                    routers.append(r)
                if not r.names or not calls_routed(fn, r.names):
                    continue
                if not recodable(fn, r.names):
                    r.kept[f"{cls.__name__}.{attr}"] = "its code names a rotation otherwise"
                    continue
                used = sorted(n for n in set(chain_names(fn)) if n in r.names)
                form = ", ".join(f"{n} -> {r.routes.get(n, 'helper')}" for n in used)
                plan.append((m, attr, {"kind": "method", "table": r.table(), "form": form,
                                       "class": type(m).__name__}))
                seen.add((type(m), attr))
    kept = sorted({f"{n} ({why})" for r in routers for n, why in r.kept.items()} | set(hooked))
    return plan, kept


def patch(model: Any, *, backend: Optional[str] = None) -> Any:
    """patch(model, *, backend=None) -> model

    Swap a transformers model's rotary position embedding to sinpe, on the instances: every
    ``*RotaryEmbedding`` module's forward returns sinpe's tables of the module's own state
    (its ``inv_freq`` buffers and ``attention_scaling``, per layer type; dynamic and longrope
    state kept by transformers' own wrapper), and every rotation function the model's modules
    call is routed to the sinpe.torch form that computes the same bits, recognised from the
    model's own code (gradients are those of the model's own graph).  backend None: the
    kernels of the torch in this process, so outputs are bit for bit the model's (float32,
    bfloat16, cast before or after patching, generate(), backward); ``'builtin'``: correctly
    rounded tables (outputs then differ in their last bits).

    Each rotary module is proven on the instance first (its own forward and sinpe's on a few
    positions, bit for bit): one that differs keeps its own forward (``patched()`` says why).
    Raises NotImplementedError naming the family and why when a rotary module is not one
    sinpe reproduces; the model is then left as it was.  Patching twice re-patches (with the
    new backend).  :func:`unpatch` restores; :func:`patched` lists what was replaced.
    Copies, pickles and ``torch.save`` of a patched model are patched."""
    _model_arg(model)
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"backend must be None or a str, got {type(backend).__name__}")
    if backend is not None:
        from .._backends import policy
        try:
            policy.opts(backend, None, None)
        except (ValueError, RuntimeError) as e:  # a name refused, a library not installed
            raise type(e)(f"backend={backend!r}: {e}") from None
    family = family_of(model)
    # 1. rotary modules: check and prove every one before changing anything
    plan: List[Tuple[Any, str, Dict[str, Any]]] = []
    keep: List[Tuple[Any, Dict[str, Any]]] = []
    found = False
    for mod_name, m in _rotaries(model):
        found = True
        own = own_code(m)
        if own is not None:  # code sinpe cannot prove at every position: the module's own
            keep.append((m, {"class": type(m).__name__, "kind": "rotary",
                             "form": f"kept ({own})"}))
            continue
        spec = spec_of(m, family, backend)
        if spec["kind"] is None:
            keep.append((m, {"class": type(m).__name__, "kind": "rotary",
                             "form": f"kept ({spec['why']})"}))
            continue
        if spec["kind"] == "hf_rope":
            check_rotary(m, spec, family)
        why = proof_of(m, spec, family)
        if why is not None:
            keep.append((m, {"class": type(m).__name__, "kind": "rotary",
                             "form": f"kept ({why})"}))
            continue
        spec["record"] = {"class": type(m).__name__, "kind": "rotary", "form": spec["form"]}
        plan.append((m, "forward", spec))
    if not found:
        raise NotImplementedError(f"{family}: the model has no *RotaryEmbedding module")
    if not plan and all(r["form"].startswith("kept (forward is not") for _, r in keep):
        raise NotImplementedError(
            f"{family}: no rotary module is a forward(x, position_ids) one (found "
            f"{sorted({r['class'] for _, r in keep})})")
    # 2. rotations: the methods that name a routed function
    methods, kept = _routes(model, family)
    for m, attr, spec in methods:
        spec["record"] = {"class": spec["class"], "kind": "rotation", "method": attr,
                          "form": spec["form"]}
    # 3. apply (nothing above changed the model); a patch of this model or of a module in it
    # made earlier is undone first
    unpatch(model)
    for m, attr, spec in plan + methods:
        prev = m.__dict__.get(attr)
        m.__dict__[attr] = Patched(m, attr, spec, prev)
    for m, record in keep:
        m.__dict__[_KEPT] = record
    model.__dict__[_ROOT] = {"backend": backend, "kept": kept}
    return model


def unpatch(model: Any) -> Any:
    """unpatch(model) -> model

    Restore every module of model that :func:`patch` changed (whichever call patched it: the
    model's own, an earlier one of a module inside it, the original of a copy): each patched
    method is the class's own again (or the instance's own attribute it shadowed).  A model
    that is not patched is returned unchanged."""
    _model_arg(model)
    for m in model.modules():
        d = m.__dict__
        for attr, v in list(d.items()):
            if isinstance(v, Patched):
                if v.previous is None or isinstance(v.previous, Patched):
                    del d[attr]
                else:
                    d[attr] = v.previous
        d.pop(_KEPT, None)
        d.pop(_ROOT, None)
    return model


def patched(model: Any) -> List[Dict[str, Any]]:
    """patched(model) -> list of dicts

    What :func:`patch` replaced in model: one dict per replaced method (module path, class,
    kind 'rotary' or 'rotation', form), plus the rotary modules that keep their own forward
    and the rotation functions left as the model computes them (form 'kept ...'); [] when
    nothing in the model is patched."""
    _model_arg(model)
    out: List[Dict[str, Any]] = []
    kept: List[str] = []
    for name, m in model.named_modules():
        d = m.__dict__
        for attr, v in d.items():
            if isinstance(v, Patched):
                out.append(dict(v.spec["record"], module=name))
        if _KEPT in d:
            out.append(dict(d[_KEPT], module=name))
        root = d.get(_ROOT)
        if isinstance(root, dict):
            kept += [k for k in root.get("kept", ()) if k not in kept]
    if not out:
        return []
    out += [{"module": "", "class": "", "kind": "rotation", "form": f"kept: {k}"} for k in kept]
    return out
