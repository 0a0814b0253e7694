"""Recognising transformers' code: a modeling module's rotation functions by their code
(the syntax tree of the function and of the helpers it calls, compared with transformers' own
reference functions), and a rotary module's class whose methods are code of the user's own (a
subclass, remote code, decorators and wrappers compared)."""
from __future__ import annotations

import ast
import inspect
import os
import sys
import textwrap
import types
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import torch

from .._memo import Memo

from .shadow import Shadow



#: reference rotation functions: (module, function name) -> the sinpe.torch form.
REFERENCES: List[Tuple[str, str, str]] = [
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


def _definition(fn: Any) -> Optional[Tuple[ast.FunctionDef, List[ast.stmt]]]:
    """A function's definition as written (its source parsed) and its body without the
    docstring; None when its source cannot be read."""
    try:
        node = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return None
    if not isinstance(node, ast.FunctionDef):
        return None
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return node, body


def _body_dump(fn: Callable[..., Any]) -> Optional[str]:
    """The syntax tree of a function's arguments and body (its decorators left out)."""
    d = _definition(fn)
    if d is None:
        return None
    node, body = d
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
    for name in sorted(set(code_names(fn.__code__))):
        g = fn.__globals__.get(name)
        if isinstance(inspect.unwrap(g) if callable(g) else g, types.FunctionType):
            parts.append(f"{name}={_fingerprint(g, seen)}")
    return "|".join(parts)


def code_names(code: types.CodeType) -> List[str]:
    out = list(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out.extend(code_names(c))
    return out


_KNOWN: Optional[Dict[str, Tuple[str, str]]] = None


def _known() -> Dict[str, Tuple[str, str]]:
    """fingerprint -> (form name, reference module), from transformers' installed reference
    modules."""
    global _KNOWN
    if _KNOWN is None:
        import importlib
        known: Dict[str, Tuple[str, str]] = {}
        for mod, fn, form in REFERENCES:
            try:
                m = importlib.import_module(f"transformers.models.{mod}.modeling_{mod}")
            except Exception:  # a transformers without that family
                continue
            fp = _fingerprint(getattr(m, fn, None))
            if fp is not None:
                known.setdefault(fp, (form, mod))
        _KNOWN = known
    return _KNOWN


def classify(fn: Any) -> Optional[Tuple[str, str]]:
    """(form, reference module) of a rotation function recognised by its code, or None; kept
    per function object (a copy's rebuild classifies the module's functions again)."""
    kept = _CLASSIFIED.get(id(fn))
    if kept is not None and kept[0] is fn:
        return kept[1]  # type: ignore[no-any-return]
    fp = _fingerprint(fn)
    got = None if fp is None else _known().get(fp)
    _CLASSIFIED[id(fn)] = (fn, got)
    return got


_CLASSIFIED: "Memo[int, Tuple[Any, Any]]" = Memo(1024)  # (fn kept: its id stays its own)


def is_rotation_name(name: str) -> bool:
    n = name.lower()
    return "rot" in n and ("apply" in n or "emb" in n) or n.startswith("apply_rope")


def own_code(module: Any) -> Optional[str]:
    """Why a rotary module's forward is not one sinpe may replace, or None: an instance
    attribute stands in for its forward (a hook, as accelerate sets), or a class of its own
    (a subclass, remote code) defines a method that is not a copy of transformers' code for
    it (the proof on the instance probes a few positions; code of the user's own may differ
    past them: position interpolation, clamping)."""
    d = module.__dict__.get("forward")
    if d is not None and not isinstance(d, Shadow):
        return "an instance attribute stands in for its forward (a hook): its own forward"
    cls = type(module)
    base = next((c for c in cls.__mro__ if c.__module__.startswith("transformers.")), None)
    ref = base if base is not None else _llama_rotary()
    for c in cls.__mro__:
        if c is base or c is torch.nn.Module or c is object:
            break
        for attr, fn in vars(c).items():
            if attr.startswith("__") and attr != "__call__" or attr == "__init__":
                continue
            theirs = getattr(ref, attr, None) if ref is not None else None
            if not _same_code(fn, inspect.getattr_static(ref, attr, None) if ref is not None
                              else None) and fn is not theirs:
                return (f"{c.__qualname__}.{attr} is code of its own, not transformers': "
                        "its own forward")
    return None


def _same_code(mine: Any, theirs: Any) -> bool:
    """Whether a class attribute is a copy of transformers' code for it: plain functions (or
    static/class methods of them) whose syntax trees are equal, decorators included, and
    whose wrappers, if any, are transformers' or torch's own (dynamic_rope_update,
    torch.no_grad: a wrapper of the user's own may change positions past every probe)."""
    a, b = _plain_function(mine), _plain_function(theirs)
    if a is None or b is None or type(mine) is not type(theirs):
        return False
    return _def_dump(a) == _def_dump(b) and _library_wrappers(a) and _library_wrappers(b)


def _plain_function(obj: Any) -> Optional[types.FunctionType]:
    f = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
    return f if isinstance(f, types.FunctionType) else None


def _def_dump(fn: types.FunctionType) -> Optional[str]:
    """The syntax tree of a function's definition, its decorators and arguments included."""
    d = _definition(inspect.unwrap(fn))
    if d is None:
        return None
    node, body = d
    return ast.dump(ast.Module(body=[ast.FunctionDef(
        name="f", args=node.args, body=body, decorator_list=node.decorator_list,
        returns=None, type_comment=None)], type_ignores=[]), annotate_fields=False)


_LIBRARY_FILES = (os.path.dirname(torch.__file__) + os.sep,)


def _library_wrappers(fn: Any) -> bool:
    """Every wrapper in fn's chain (functools.wraps' __wrapped__) is code of transformers or
    torch (their decorators), never the user's."""
    lib = _LIBRARY_FILES + _transformers_files()
    while isinstance(fn, types.FunctionType):
        wrapped = getattr(fn, "__wrapped__", None)
        if wrapped is None:
            break
        if not fn.__code__.co_filename.startswith(lib):
            return False
        fn = wrapped
    return True


def _transformers_files() -> Tuple[str, ...]:
    mod = sys.modules.get("transformers")
    path = getattr(mod, "__file__", None)
    return (os.path.dirname(path) + os.sep,) if path else ()


def _llama_rotary() -> Any:
    """transformers' Llama rotary class: what remote code's rotary classes copy."""
    try:
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    except Exception:
        return None
    return LlamaRotaryEmbedding


