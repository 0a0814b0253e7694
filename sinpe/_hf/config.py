"""A model config as transformers' rotary init functions read it: :class:`Cfg` (a config
object, its ``to_dict()`` dict or any other Mapping; the text part of a composite config; the
per-layer view of a heterogeneous one; rope_parameters keyed by layer type); what hf_rope
reads of it as a plain dict (:func:`snapshot`) and as a canonical text
(:func:`config_text`, :func:`config_from_text`: the form torch's operator takes)."""
from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from .._jobs import _int
from .._memo import Memo

#: the config attributes transformers' init functions read (a layer type whose layers
#: differ in one of them has no single view).
_READ = frozenset({"head_dim", "hidden_size", "num_attention_heads", "rope_parameters",
                   "partial_rotary_factor", "max_position_embeddings",
                   "original_max_position_embeddings", "rope_scaling", "rope_theta"})


def layer_config(config: Any, layer_type: Optional[str]) -> Any:
    """The config transformers' init reads for layer_type: ``config.per_layer_config
    [layer_type]`` on a heterogeneous config (Gemma 4: head_dim differs per layer type),
    the config itself when that raises ValueError (the init functions' ``except ValueError:
    pass``); for a ``to_dict()`` dict, its ``per_layer_config`` overrides (keyed by layer
    index) of the layers of that type, merged over the dict (a ValueError when those layers
    differ in an attribute the init reads).  Any other config is returned as it is."""
    if layer_type is None:
        return config
    if isinstance(config, Mapping):
        over = config.get("per_layer_config")
        types = config.get("layer_types")
        if not isinstance(over, Mapping) or not over or not isinstance(types, (list, tuple)) or \
                layer_type not in types:
            return config
        try:
            by_index = {int(k): v for k, v in over.items()}
        except (TypeError, ValueError):
            raise ValueError("config['per_layer_config'] must be keyed by layer index") from None
        if not all(isinstance(v, Mapping) for v in by_index.values()):
            raise TypeError("config['per_layer_config'] entries must be dicts")
        ref = by_index.get(list(types).index(layer_type), {})
        mine = [by_index.get(i, {}) for i, t in enumerate(types) if t == layer_type]
        if any(m != ref for m in mine):
            keys = set().union(*mine) & _READ
            if keys:
                raise ValueError(f"layer type {layer_type!r} is not homogeneous across layers "
                                 f"in {sorted(keys)}: transformers' rotary has no single "
                                 "config for it")
            return config
        out = dict(config)
        out.update(ref)
        out.pop("per_layer_config", None)
        return out
    try:
        hetero = bool(getattr(config, "is_heterogeneous", False))
    except Exception:
        hetero = False
    if not hetero:
        return config
    try:
        return config.per_layer_config[layer_type]
    except ValueError:  # not homogeneous: transformers' init functions fall back likewise
        return config



def _getters(config: Any) -> Tuple[Callable[..., Any], Callable[[str], bool]]:
    """get(key, default) and has(key) of a config object or a Mapping."""
    if isinstance(config, Mapping):
        d: Mapping[str, Any] = config
        return (lambda k, dflt=None: d.get(k, dflt)), (lambda k: k in d)
    if not hasattr(config, "__dict__") or isinstance(config, type):
        raise TypeError(f"config must be a transformers config or a Mapping (its to_dict() "
                        f"dict), got {type(config).__name__}")
    return (lambda k, dflt=None: getattr(config, k, dflt)), (lambda k: hasattr(config, k))


def _text_part(config: Any) -> Any:
    """A composite (vision-language) config's text_config, when it has no hidden_size."""
    get, _ = _getters(config)
    sub = get("text_config")
    if get("hidden_size") is None and sub is not None and not isinstance(sub, (str, bytes)):
        _getters(sub)  # a config or a dict
        return sub
    return config


def plain_number(v: Any, key: str) -> Any:
    """v itself when it is a plain number (int, float, bool or a NumPy scalar type); a
    subclass is refused: transformers reads such a value both as it is (arithmetic) and
    through its __float__ (math functions), which may disagree."""
    t = type(v)
    if t in (int, float, bool) or (isinstance(v, np.generic) and t.__module__ == "numpy"):
        return v
    raise TypeError(f"config.rope_parameters[{key!r}] must be a plain number (int, float or a "
                    f"NumPy scalar), got an instance of {t.__module__}.{t.__qualname__}: a "
                    "subclass's __float__ need not give its value, and transformers reads both")


class Cfg:
    """The attributes transformers' init functions read, from a config or its to_dict()."""

    def __init__(self, config: Any, layer_type: Optional[str]):
        # a heterogeneous config (Gemma 4): the layer type's view, as transformers' init reads it
        config = self.raw = layer_config(_text_part(config), layer_type)
        get, has = _getters(config)
        self.model_type = str(get("model_type", "") or "")
        self.hidden_size: Any = get("hidden_size")
        self.num_attention_heads: Any = get("num_attention_heads")
        self.max_position_embeddings: Any = get("max_position_embeddings")
        self.has_head_dim, self.head_dim = has("head_dim"), get("head_dim")
        self.omp_attr = get("original_max_position_embeddings") if has(
            "original_max_position_embeddings") else None
        rp = get("rope_parameters")
        if rp is None:
            rp = get("rope_scaling")
        if rp is not None and not isinstance(rp, Mapping):
            raise TypeError(f"config.rope_parameters must be a dict (a Mapping), got "
                            f"{type(rp).__name__}")
        rp = dict(rp or {})
        labels = get("_rope_type_labels") or get("layer_types") or ()
        nested = [k for k in rp if k in labels]
        theta = get("rope_theta", 10000.0)
        prf = get("partial_rotary_factor", None)
        if nested:
            if layer_type is None:
                raise ValueError(f"config.rope_parameters is keyed by layer type ({nested}): "
                                 "pass layer_type= (the module's forward takes it)")
            if layer_type not in nested:
                raise ValueError(f"layer_type={layer_type!r} is not one of the config's "
                                 f"rope_parameters keys {nested}")
            p = rp[layer_type]
            if p is None:
                raise ValueError(f"layer type {layer_type!r} has no rope (rope_parameters None)")
            if not isinstance(p, Mapping):
                raise TypeError(f"config.rope_parameters[{layer_type!r}] must be a dict, got "
                                f"{type(p).__name__}")
            p = dict(p)
            self.top_truncate = rp.get("truncate", True)  # yarn reads the top-level dict
        else:
            if layer_type is not None:
                raise ValueError(f"layer_type={layer_type!r} given, but config.rope_parameters "
                                 "is not keyed by layer type")
            p = rp
            self.top_truncate = None
        p.setdefault("rope_type", p.get("type", "default"))
        p.setdefault("rope_theta", theta)
        if prf is not None:
            p.setdefault("partial_rotary_factor", prf)
        if p["rope_type"] in ("llama3", "yarn", "longrope"):
            if self.omp_attr is not None and not nested:
                p["original_max_position_embeddings"] = self.omp_attr
            else:
                p.setdefault("original_max_position_embeddings", self.max_position_embeddings)
        self.p = p
        if self.top_truncate is None:
            self.top_truncate = p.get("truncate", True)

    def need(self, key: str) -> Any:
        if self.p.get(key) is None:
            raise ValueError(f"config.rope_parameters needs {key!r} for rope_type "
                             f"{self.p['rope_type']!r}")
        return self.p[key]

    def num(self, key: str, value: Any = None) -> Any:
        v = self.need(key) if value is None else value
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                                  np.floating)):
            raise TypeError(f"config.rope_parameters[{key!r}] must be a number, got {v!r}")
        return plain_number(v, key)

    def head(self, or_none: bool) -> int:
        """head_dim as the init reads it: ``getattr(config, "head_dim", None) or hidden //
        heads`` (or_none) or ``getattr(config, "head_dim", hidden // heads)`` (dynamic, yarn,
        longrope)."""
        if or_none:
            return _int(self.head_dim, "config.head_dim") if self.head_dim else self._derived()
        if self.has_head_dim:
            if self.head_dim is None:
                raise ValueError(f"config.head_dim is None: transformers' "
                                 f"{self.p['rope_type']!r} init multiplies it (a TypeError)")
            return _int(self.head_dim, "config.head_dim")
        return self._derived()

    def _derived(self) -> int:
        h = _int(self.hidden_size, "config.hidden_size", minimum=1)
        n = _int(self.num_attention_heads, "config.num_attention_heads", minimum=1)
        return h // n

    def dim(self, or_none: bool = True) -> int:
        prf = self.num("partial_rotary_factor", self.p.get("partial_rotary_factor", 1.0))
        head = self.head(or_none)
        if not (math.isfinite(prf) and prf >= 0):
            raise ValueError(f"config.partial_rotary_factor must be finite and >= 0, got {prf!r}")
        if head * prf >= 2.0 ** 62:
            raise OverflowError(f"config.partial_rotary_factor {prf!r} makes a rotary dim of "
                                f"{head * prf:g}")
        return int(head * prf)


# ---- configs read once per content ---------------------------------------------------------
#
# Reading a transformers config costs about 27 us (its __getattribute__ is Python, layered),
# more than a decode step's whole table.  A config's reading is kept with a deep copy of the
# config's own attributes (its __dict__, or the Mapping itself) and reused while the config
# compares equal to that copy: a config changed in place (rope_parameters edited, a new
# attribute) is read again.  Values that do not compare (arrays) are never kept.

#: what _entered finds below a snapshot's top: (attribute, its keys, its values' types)
_Entered = List[Tuple[Any, Optional[List[Any]], Optional[List[type]]]]
#: a kept reading: (config, snapshot, reading, the snapshot's keys, their values' types,
#: _entered(snapshot))
_Kept = Tuple[Any, Any, Cfg, List[Any], List[type], _Entered]
_READS_MAX = 16
_READS: "Memo[Tuple[int, Optional[str]], _Kept]" = Memo(_READS_MAX)


def read(config: Any, layer_type: Optional[str]) -> Cfg:
    """Cfg(config, layer_type), kept per config object while its attributes are unchanged."""
    own = _own(config)
    key = (id(config), layer_type)
    kept = _READS.get(key)
    if kept is not None and kept[0] is config:
        try:
            if _unchanged(own, kept):
                return kept[2]
        except Exception:  # a value whose comparison raises: read again
            pass
    snapshot = None
    if type(own) is dict or isinstance(own, Mapping):
        try:  # taken before the reading: a write during it leaves the two unequal
            snapshot = copy.deepcopy(own)
        except Exception:  # a value that cannot be copied: never kept
            pass
    c = Cfg(config, layer_type)
    if snapshot is not None:
        try:
            if _same(snapshot, own, 0):  # values that compare by identity would never hit
                _READS[key] = (config, snapshot, c, list(snapshot),
                               list(map(type, snapshot.values())), _entered(snapshot))
        except Exception:  # a value that cannot be compared: never kept
            pass
    return c


#: per config type: (its instances are what they say, it is a Mapping)
_TYPES: "Memo[type, Tuple[bool, bool]]" = Memo(256)
_GETSET = type(type.__dict__["__dict__"])


def _plain_type(t: type) -> bool:
    """No class of t (but object) redefines __class__ or __dict__, and its __getattribute__ is
    object's or a transformers config's (which maps attribute names only): its __dict__ and
    its type are the config's own, read without its Python __getattribute__."""
    ga: object = t.__getattribute__
    if ga is not object.__getattribute__ and \
            not str(getattr(ga, "__module__", "")).startswith("transformers."):
        return False
    for k in t.__mro__[:-1]:
        d = vars(k)
        if "__class__" in d or ("__dict__" in d and type(d["__dict__"]) is not _GETSET):
            return False
    return True


def _own(config: Any) -> Any:
    """What a reading is kept against: the Mapping itself, or the object's own attributes (its
    __dict__), or None.  For a plain type (a transformers config: isinstance reads __class__
    and getattr __dict__ through its Python __getattribute__, 2 and 1.4 us) by its type and
    object's own access; for any other (a proxy) as isinstance and getattr see it."""
    t = type(config)
    if t is dict:
        return config
    known = _TYPES.get(t)
    if known is None:
        known = _TYPES[t] = (_plain_type(t), issubclass(t, Mapping))
    if not known[0]:
        return config if isinstance(config, Mapping) else getattr(config, "__dict__", None)
    if known[1]:
        return config
    try:
        return object.__getattribute__(config, "__dict__")
    except AttributeError:
        return None


def _entered(snapshot: Any) -> _Entered:
    """The attributes _same enters below the top, each with its keys and its values' types
    when it is a dict of leaves (rope_parameters: compared in one pass), else None."""
    out: _Entered = []
    for k, v in snapshot.items():
        if type(v) not in _LEAVES and k in _DEEP:
            types = list(map(type, v.values())) if type(v) is dict else None
            if types is not None and _LEAVES.issuperset(types):
                out.append((k, list(v), types))
            else:
                out.append((k, None, None))
    return out


def _unchanged(own: Any, kept: _Kept) -> bool:
    """_same(own, snapshot, 0), with the snapshot's keys, their order, their values' types and
    the attributes entered below the top read from the snapshot once (a decode step's check:
    about 1.5 us where _same takes 4)."""
    snapshot = kept[1]
    if not (own == snapshot and list(own) == kept[3]
            and list(map(type, own.values())) == kept[4]):
        return False
    for k, keys, types in kept[5]:
        v = own[k]
        if types is None:
            if not _same_types(v, snapshot[k], 1):
                return False
        elif type(v) is not dict or list(v) != keys or list(map(type, v.values())) != types:
            return False
    return True


def forget() -> None:
    _READS.clear()


_LEAVES = frozenset({str, int, float, bool, type(None), bytes})
#: a config's own attributes whose values' types are compared throughout (the others, such
#: as id2label, only by their own type and value): what a reading reads, and the parts of
#: composite and per-layer configs
_DEEP = _READ | {"text_config", "per_layer_config", "layer_types", "_rope_type_labels"}


def _same(a: Any, b: Any, depth: int) -> bool:
    """a and b equal with the same types throughout (64 and 64.0, 1 and True, a float and a
    float subclass differ: the init functions read them differently); mappings, sequences
    and objects' attributes compared item by item, 8 levels deep at most (deeper: unequal)."""
    return bool(a == b) and _same_types(a, b, depth)


def _same_types(a: Any, b: Any, depth: int) -> bool:
    """The types of two equal values, throughout (the leaves' in one pass each); at the top,
    only the attributes a reading reads are entered."""
    t = type(a)
    if t is not type(b) or depth > 8:
        return False
    if t in _LEAVES:
        return True
    if t is dict or isinstance(a, Mapping):  # (the ABC check is slow: dicts first)
        if list(map(type, a.values())) != list(map(type, b.values())):
            return False  # (a key order that differs reads the config again: never wrong)
        return all(_same_types(v, b[k], depth + 1) for k, v in a.items()
                   if type(v) not in _LEAVES and (depth or k in _DEEP))
    if t is list or t is tuple:
        return list(map(type, a)) == list(map(type, b)) and all(
            _same_types(x, y, depth + 1) for x, y in zip(a, b) if type(x) not in _LEAVES)
    if hasattr(a, "__dict__") and not isinstance(a, type):  # a sub-config
        return _same_types(vars(a), vars(b), depth + 1)
    return True


# ---- a config's snapshot, and its text ------------------------------------------------------
#
# What hf_rope reads of a config, as a plain dict (snapshot), and that dict as a canonical text
# (config_text) from which config_from_text gives it back: the form in which torch's operator
# takes a config (a string: a compiled graph or an exported program holds the text, never an
# object or its id).

#: the attributes hf_rope reads of a config's view (Cfg's, and the axial layouts' sizes)
VIEW_KEYS = ("model_type", "hidden_size", "num_attention_heads", "max_position_embeddings",
             "head_dim", "original_max_position_embeddings", "rope_parameters", "rope_scaling",
             "rope_theta", "partial_rotary_factor", "layer_types", "_rope_type_labels",
             "embed_dim", "memory_attention_hidden_size", "memory_attention_downsample_rate",
             "memory_attention_num_attention_heads")
#: read only of a Mapping (the axial sizes' fallback for a to_dict() that keeps num_heads)
MAPPING_KEYS = ("num_heads",)


def _plain_copy(v: Any) -> Any:
    """v with its containers copied (Mappings as dicts, lists, tuples; NumPy arrays copied),
    its leaves as they are."""
    if isinstance(v, Mapping):
        return {k: _plain_copy(x) for k, x in v.items()}
    if type(v) is list:
        return [_plain_copy(x) for x in v]
    if type(v) is tuple:
        return tuple(_plain_copy(x) for x in v)
    if isinstance(v, np.ndarray):
        return v.copy()
    return v


def snapshot(config: Any, layer_type: Optional[str] = None) -> Dict[str, Any]:
    """The attributes hf_rope reads of config for layer_type, as a plain dict: those of its
    view (a composite config's text part, a heterogeneous config's per-layer view, a
    to_dict() dict's per_layer_config merged), copied (Mappings as dicts); an attribute the
    view lacks is absent, one that is None stays None.  ``hf_rope(snapshot(config, lt),
    position_ids, layer_type=lt)`` gives the bits of ``hf_rope(config, position_ids,
    layer_type=lt)``, and keeps giving them after config is edited in place."""
    view = layer_config(_text_part(config), layer_type)
    get, has = _getters(view)
    keys = VIEW_KEYS + (MAPPING_KEYS if isinstance(view, Mapping) else ())
    return {k: _plain_copy(get(k)) for k in keys if has(k)}


_TAG = "$"  # the tags' prefix (a dict with a key that starts with it is written as pairs)


def _bad(path: str, v: Any) -> TypeError:
    t = type(v)
    return TypeError(f"config{path}: a {t.__module__}.{t.__qualname__} cannot be written in "
                     "the config's text (plain numbers, strings, None, NumPy numbers and "
                     "arrays, lists, tuples and dicts of them only)")


def _encode(v: Any, path: str) -> Any:
    """v as JSON values, with tags for what JSON would lose (tuples, NumPy numbers and arrays,
    floats that are not finite, dicts with keys other than strings)."""
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        if math.isfinite(v):
            return v
        return {_TAG + "f": np.float64(v).tobytes().hex()}  # NaN's sign and payload kept
    if t is list:
        return [_encode(x, f"{path}[{i}]") for i, x in enumerate(v)]
    if t is tuple:
        return {_TAG + "t": [_encode(x, f"{path}[{i}]") for i, x in enumerate(v)]}
    if t is dict:
        if all(type(k) is str and not k.startswith(_TAG) for k in v):
            return {k: _encode(x, f"{path}[{k!r}]") for k, x in v.items()}
        pairs = [[_encode(k, f"{path} key {k!r}"), _encode(x, f"{path}[{k!r}]")]
                 for k, x in v.items()]
        pairs.sort(key=lambda kv: json.dumps(kv[0], sort_keys=True))
        return {_TAG + "d": pairs}
    if t.__module__ == "numpy" and isinstance(v, (np.generic, np.ndarray)) and \
            v.dtype.kind in "biufc" and not v.dtype.hasobject:
        if isinstance(v, np.ndarray):
            return {_TAG + "a": [v.dtype.str, list(v.shape),
                                 np.ascontiguousarray(v).tobytes().hex()]}
        return {_TAG + "n": [v.dtype.str, v.tobytes().hex()]}
    raise _bad(path, v)


def _decode(v: Any) -> Any:
    if type(v) is list:
        return [_decode(x) for x in v]
    if type(v) is not dict:
        return v
    if len(v) == 1:
        (k, x), = v.items()
        if k == _TAG + "f":
            return float(np.frombuffer(bytes.fromhex(x), np.float64)[0])
        if k == _TAG + "t":
            return tuple(_decode(e) for e in x)
        if k == _TAG + "d":
            return {_decode(a): _decode(b) for a, b in x}
        if k == _TAG + "n":
            return np.frombuffer(bytes.fromhex(x[1]), np.dtype(x[0]))[0]
        if k == _TAG + "a":
            a = np.frombuffer(bytes.fromhex(x[2]), np.dtype(x[0])).reshape(x[1]).copy()
            a.flags.writeable = False  # shared by every caller of the same text
            return a
    return {k: _decode(x) for k, x in v.items()}


def config_text(config: Any, layer_type: Optional[str] = None) -> str:
    """snapshot(config, layer_type) as a canonical text: JSON (keys sorted, no spaces) with
    tags for what JSON loses (tuples, NumPy numbers and arrays, floats that are not finite,
    dicts keyed by other than strings), so that ``config_from_text`` gives back the same
    values of the same types (1, 1.0 and True; lists and tuples).  Equal snapshots give the
    same text.  TypeError, naming the key, for a value that cannot be written."""
    return json.dumps(_encode(snapshot(config, layer_type), ""), sort_keys=True,
                      separators=(",", ":"), allow_nan=False)


_FROM_TEXT_MAX = 64
_FROM_TEXT: "Memo[str, Dict[str, Any]]" = Memo(_FROM_TEXT_MAX)


def config_from_text(text: str) -> Dict[str, Any]:
    """The snapshot a config_text gave, kept per text (the same dict for the same text, so
    that hf_rope's reading of it is kept too; the last 64 texts).  The dict is shared: not
    to be changed."""
    hit = _FROM_TEXT.get(text)  # (a str's hash is kept by the str)
    if hit is not None:
        return hit
    if type(text) is not str:
        raise TypeError(f"config must be a config's text (config_text), got "
                        f"{type(text).__name__}")
    try:
        d = _decode(json.loads(text))
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise ValueError(f"config is not a config's text (config_text): {exc}") from None
    if type(d) is not dict:
        raise ValueError("config is not a config's text (config_text): not a dict")
    kept: Dict[str, Any] = _FROM_TEXT.setdefault(text, d)  # (a racing thread's, if first)
    return kept
