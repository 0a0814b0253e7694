"""Coverage of sinpe.presets.hf_rope, measured on the installed transformers itself.

Walks every model family of the installed transformers (transformers/models/*/modeling_*.py)
that defines a ``*RotaryEmbedding`` class.  For each class it finds the family's config class
(the annotation of the class's ``config`` argument; for a composite config, its text or
vision sub-config), builds a small config, instantiates the rotary as the model does
(``XRotaryEmbedding(config)``), and for each rope_type of
``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS`` (plus "default", and "native": the
config class's own rope_parameters) calls a fresh module with a dummy ``x`` (float32, bfloat16,
float16) and two sets of per-batch offset ``position_ids`` (one past max_position_embeddings,
one inside it; (3, batch, seq) for multimodal rope, (N, 2) for vision axial rope), then calls
``sinpe.presets.hf_rope(config, position_ids, dtype=x.dtype[, layer_type=...])`` on a copy of
the same config and compares the bits of both outputs (never a tolerance).

Each (family, class, rope_type) is one of:
  bit-for-bit                                  every value of cos and sin, every dtype
  differs (n of m values)                      hf_rope's arrays are not the module's
  refused by hf_rope: <message>                hf_rope raised
  not a config-driven rotary (needs ...)       forward() is not (x, position_ids[, layer_type]),
                                               or it returns no (cos, sin) pair
  config rejects rope_type: <message>          the config or the rotary's __init__ raised
  harness could not build: <reason>            no valid config / module call was found

The report is a Markdown table (stdout, or --markdown FILE), a summary, and --json FILE.

    python tools/hf_rope_coverage.py --markdown docs/hf_rope_coverage.md --json cov.json
    python tools/hf_rope_coverage.py --families llama,qwen2_vl,gemma3
    python tools/hf_rope_coverage.py --sample      # exit status 1 unless all bit for bit

Exit status is 0 (it is a report) unless the harness itself crashes; with --sample it is 1
when any sampled case is not bit for bit.  The tests (tests/numerics/
test_numerics_hf_coverage.py) import this file and run the sample in-process.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import datetime
import functools
import glob
import importlib
import inspect
import json
import logging
import os
import platform
import re
import signal
import sys
import time
import warnings

import numpy as np



def _rope_types():
    """hf_rope's rope types: the keys of its init table (sinpe._hf.ROPE_INIT_FUNCTIONS, which
    mirrors transformers' ROPE_INIT_FUNCTIONS plus "default"); without sinpe (the --stub
    development mode), transformers' own keys after "default"."""
    try:
        from sinpe._hf import ROPE_INIT_FUNCTIONS
    except ImportError:
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
        return ["default"] + [k for k in ROPE_INIT_FUNCTIONS if k != "default"]
    return list(ROPE_INIT_FUNCTIONS)


ROPE_TYPES = _rope_types()
#: The columns: "native" is the config class's own rope_parameters, unchanged (a family
#: whose default is yarn, proportional, mrope-interleaved, ... is tested as shipped).
COLUMNS = ["native"] + ROPE_TYPES
DTYPES = ["float32", "bfloat16", "float16"]  # x's dtype (the module casts its tables to it)

#: The fixed sample (--sample, and the test): diverse text rotaries, as (family, class).
SAMPLE = [
    ("llama", "LlamaRotaryEmbedding"),
    ("mistral", "MistralRotaryEmbedding"),
    ("qwen2", "Qwen2RotaryEmbedding"),
    ("gemma", "GemmaRotaryEmbedding"),
    ("gpt_neox", "GPTNeoXRotaryEmbedding"),
    ("phi", "PhiRotaryEmbedding"),
    ("phi3", "Phi3RotaryEmbedding"),
    ("stablelm", "StableLmRotaryEmbedding"),
    ("glm", "GlmRotaryEmbedding"),
    ("cohere", "CohereRotaryEmbedding"),
    ("deepseek_v3", "DeepseekV3RotaryEmbedding"),
    ("qwen2_vl", "Qwen2VLRotaryEmbedding"),
    ("gemma3", "Gemma3RotaryEmbedding"),
]

#: Statuses (the first word(s) of each case's status).
BIT = "bit-for-bit"
DIFFERS = "differs"
REFUSED = "refused by hf_rope"
NOT_CONFIG = "not a config-driven rotary"
REJECTS = "config rejects rope_type"
NO_BUILD = "harness could not build"

#: Short forms for the table's cells.
SHORT = {BIT: "bit-for-bit", DIFFERS: "differs", REFUSED: "refused", NOT_CONFIG: "n/a",
         REJECTS: "rejected", NO_BUILD: "no build"}

#: rope_parameters keys that belong to one rope_type (dropped from the family's defaults
#: before another rope_type's are set).  Every other key (rope_theta, partial_rotary_factor,
#: mrope_section, mrope_interleaved, ...) is the family's and kept.
TYPE_KEYS = {"rope_type", "type", "factor", "original_max_position_embeddings",
             "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
             "truncate", "short_factor", "long_factor", "low_freq_factor", "high_freq_factor"}

#: The config sizes: a small model first (falls back to the family's own sizes).
SMALL = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
         "embed_dim": 64, "num_heads": 4}
MAX_POS = 128          # max_position_embeddings: the second batch row goes past it
ORIG_MAX_POS = 64      # original_max_position_embeddings for yarn, longrope, llama3
SEQ = 40
#: Per-batch position offsets, one position set each: the first set ends at 189, past
#: max_position_embeddings (dynamic grows its base) and original_max_position_embeddings
#: (longrope's long factors); the second ends at 46, inside both (dynamic at its init-time
#: base, longrope's short factors).
OFFSET_SETS = ((0, 150), (0, 7))
OFFSETS = OFFSET_SETS[0]
FAMILY_TIMEOUT = 60.0  # seconds per family (the timeout guard)


class HarnessTimeout(Exception):
    pass


# ---- the rope_parameters of each rope_type ---------------------------------------------------

def type_parameters(rope_type, rot_dim):
    """The rope-type-specific keys for a rotary dimension rot_dim (the rotated width)."""
    half = max(rot_dim // 2, 1)
    if rope_type == "default":
        return {"rope_type": "default"}
    if rope_type == "linear":
        return {"rope_type": "linear", "factor": 2.0}
    if rope_type == "dynamic":
        return {"rope_type": "dynamic", "factor": 2.0}
    if rope_type == "yarn":
        return {"rope_type": "yarn", "factor": 4.0,
                "original_max_position_embeddings": ORIG_MAX_POS}
    if rope_type == "longrope":
        return {"rope_type": "longrope",
                "short_factor": [1.0 + 0.05 * i for i in range(half)],
                "long_factor": [1.0 + 0.5 * i for i in range(half)],
                "original_max_position_embeddings": ORIG_MAX_POS}
    if rope_type == "llama3":
        return {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": ORIG_MAX_POS}
    if rope_type == "proportional":
        # _compute_proportional_rope_parameters: rope_theta (required), partial_rotary_factor
        # (rotated share of head_dim, the rest zero frequencies) and factor (optional).
        return {"rope_type": "proportional", "partial_rotary_factor": 0.5, "factor": 2.0}
    raise ValueError(rope_type)


# ---- discovery -------------------------------------------------------------------------------

def transformers_models_dir():
    import transformers
    return os.path.join(os.path.dirname(transformers.__file__), "models")


def families():
    """family -> [modeling module names] for every family with a *RotaryEmbedding class."""
    out = {}
    for path in sorted(glob.glob(os.path.join(transformers_models_dir(), "*", "modeling_*.py"))):
        with open(path, encoding="utf-8") as f:
            src = f.read()
        if re.search(r"^class \w*RotaryEmbedding\(", src, re.M):
            fam = os.path.basename(os.path.dirname(path))
            out.setdefault(fam, []).append(os.path.basename(path)[:-3])
    return out


def rotary_classes(family, modules):
    """[(module, class)] defined in the family's modeling files, in source order."""
    found = []
    for modname in modules:
        mod = importlib.import_module(f"transformers.models.{family}.{modname}")
        path = mod.__file__
        with open(path, encoding="utf-8") as f:
            names = re.findall(r"^class (\w*RotaryEmbedding)\(", f.read(), re.M)
        for n in names:
            found.append((mod, getattr(mod, n)))
    return found


def _annotation(cls):
    """The config class the rotary's __init__ names for its first argument (or None)."""
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return None, None
    params = [p for p in sig.parameters.values() if p.name != "self"]
    if not params:
        return None, None
    p = params[0]
    ann = p.annotation
    if isinstance(ann, str):
        ann = sys.modules[cls.__module__].__dict__.get(ann.split("|")[0].strip(), None)
    if ann is inspect.Parameter.empty:
        ann = None
    return p.name, ann


def site_config_class(cls):
    """The config class the model passes: the annotation of the enclosing ``__init__``'s
    config argument where the modeling file constructs ``cls(config)`` (None if not found)."""
    mod = sys.modules[cls.__module__]
    try:
        with open(mod.__file__, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    call = re.compile(rf"\b{cls.__name__}\((?:config=)?(?:self\.)?config\)")
    for i, line in enumerate(lines):
        if not call.search(line) or line.lstrip().startswith("class "):
            continue
        for j in range(i - 1, -1, -1):
            if re.match(r"\s*def __init__\(", lines[j]):
                head = " ".join(lines[j:j + 4])
                m = re.search(r"def __init__\(\s*self,\s*config\s*:\s*([\w\.]+)", head)
                if m:
                    ann = mod.__dict__.get(m.group(1).split(".")[-1])
                    if isinstance(ann, type):
                        return ann
                break
            if re.match(r"class \w", lines[j]):
                break
    return None


def _instance(cfg_cls):
    try:
        return cfg_cls()
    except Exception:
        return None


def _has_rope(inst):
    if inst is None:
        return False
    try:
        return bool(getattr(inst, "rope_parameters", None)) or getattr(inst, "rope_theta", None) is not None
    except Exception:
        return False


def config_class(cls):
    """The config class to build for rotary class cls.  Candidates, in order: the class the
    model passes (the annotation at the construction site ``cls(config)``), the rotary's own
    annotation, and for a composite config (sub_configs) its sub-config the rotary reads
    (vision for *Vision*, audio for *Audio*, text otherwise).  The first whose default
    instance carries rope parameters wins (else the first candidate)."""
    cands = []
    for c in (site_config_class(cls), _annotation(cls)[1]):
        if not isinstance(c, type) or c in cands:
            continue
        cands.append(c)
        subs = getattr(c, "sub_configs", None) or {}
        if subs:
            name = cls.__name__
            want = (["vision_config"] if "Vision" in name else ["audio_config"] if "Audio" in name
                    else []) + ["text_config", "thinker_config", "audio_config", "vision_config"]
            want += [k for k in subs if k not in want]  # encoder, decoder, ...
            inst = _instance(c)
            for key in want:
                sub = getattr(inst, key, None) if inst is not None else None
                if sub is not None and hasattr(sub, "to_dict"):
                    sc = type(sub)
                    inner = getattr(sub, "text_config", None)  # e.g. thinker_config.text_config
                    if not _has_rope(sub) and inner is not None and hasattr(inner, "to_dict"):
                        sc = type(inner)
                    if sc not in cands:
                        cands.append(sc)
    for c in cands:
        if _has_rope(_instance(c)):
            return c
    return cands[0] if cands else None


def forward_params(cls):
    try:
        return [p for p in inspect.signature(cls.forward).parameters if p != "self"]
    except (TypeError, ValueError):
        return []


@functools.lru_cache(maxsize=None)
def _source(cls):
    """The class's source (cached: inspect parses the whole modeling file each time)."""
    if cls is None:
        return ""
    try:
        return inspect.getsource(cls)
    except (OSError, TypeError):
        return ""


def variant(cls, config):
    """The variant kind of a rotary class, from its source and its default config."""
    src = _source(cls)
    kinds = []
    default_type = getattr(config, "default_rope_type", "default") if config is not None else "default"
    if default_type == "axial" or "axial" in src:
        kinds.append("vision axial 2D")
    elif "mrope" in src or "expand(3" in src:
        kinds.append("mrope (axes, batch, seq)")
    else:
        kinds.append("text")
    if config is not None and _nested_keys(config):
        kinds.append("per layer_type")
    if "ROPE_INIT_FUNCTIONS" not in src:
        kinds.append("no ROPE_INIT_FUNCTIONS")
    return ", ".join(kinds)


def _nested_keys(config):
    rp = getattr(config, "rope_parameters", None)
    if not isinstance(rp, dict) or not hasattr(config, "nested_rope_parameter_keys"):
        return []
    try:
        return [k for k in config.nested_rope_parameter_keys(rp) if rp.get(k) is not None]
    except Exception:
        return []


# ---- configs ---------------------------------------------------------------------------------

def _fields(cfg_cls):
    """The keyword arguments a config class takes (dataclass fields, or __init__'s)."""
    names = set()
    if dataclasses.is_dataclass(cfg_cls):
        names |= {f.name for f in dataclasses.fields(cfg_cls)}
    try:
        names |= set(inspect.signature(cfg_cls.__init__).parameters)
    except (TypeError, ValueError):
        pass
    return names


def size_overrides(cfg_cls, small):
    """The size keywords for cfg_cls: the small model's (small True), only
    max_position_embeddings (False), or none: the family's own sizes (None)."""
    fields = _fields(cfg_cls)
    amap = getattr(cfg_cls, "attribute_map", {}) or {}
    kw = {}
    if small is None:
        return kw
    if small:
        for k, v in SMALL.items():
            name = k if k in fields else amap.get(k)
            if name in fields:
                kw[name] = v
    for k, v in (("max_position_embeddings", MAX_POS),):
        name = k if k in fields else amap.get(k)
        if name in fields:
            kw[name] = v
    return kw


def _attr(config, name, layer_type=None):
    """config.name, or the layer type's value on a heterogeneous (per-layer) config."""
    if layer_type is not None:
        try:
            return getattr(config.per_layer_config[layer_type], name, None)
        except Exception:
            pass
    try:
        return getattr(config, name, None)
    except Exception:  # AmbiguousGlobalPerLayerAttributeError
        return None


def rotary_dim(config, layer_type=None, full=False):
    """The rotated width (head_dim * partial_rotary_factor; full: head_dim)."""
    rp = getattr(config, "rope_parameters", None) or {}
    if layer_type is not None:
        rp = rp.get(layer_type) or {}
    head_dim = _attr(config, "head_dim", layer_type)
    if not head_dim:
        hidden = _attr(config, "hidden_size", layer_type) or _attr(config, "embed_dim", layer_type)
        heads = (_attr(config, "num_attention_heads", layer_type)
                 or _attr(config, "num_heads", layer_type))
        head_dim = hidden // heads if hidden and heads else 64
    return head_dim if full else int(head_dim * (rp or {}).get("partial_rotary_factor", 1.0))


#: Family-specific rope_parameters keys that the family's config requires for scaled types
#: (its validate_rope refuses the config without them).
FAMILY_EXTRA = {"phimoe": {"short_mscale": 1.0, "long_mscale": 1.25,
                           "original_max_position_embeddings": ORIG_MAX_POS}}


def mrope_sections(half, family_sections=None):
    """Sections for half = rot_dim // 2 frequencies: the family's own when they fit, else
    its proportions (or 2:3:3, Qwen2-VL's 16:24:24) scaled to half."""
    if family_sections and sum(family_sections) == half:
        return list(family_sections)
    props = list(family_sections) if family_sections else [2, 3, 3]
    tot = sum(props)
    out = [max(1, (half * p) // tot) for p in props]
    out[-1] += half - sum(out)  # the remainder on the last axis (Ernie-VL needs h == w)
    return out


def with_type(params, rope_type, rot_dim, family=None, mrope=False, head_dim=None,
              theta=None):
    """A family's rope_parameters dict with rope_type's keys in place of its own."""
    if rope_type == "native":
        return copy.deepcopy(params)
    out = {k: copy.deepcopy(v) for k, v in (params or {}).items() if k not in TYPE_KEYS}
    tp = type_parameters(rope_type, rot_dim)
    if rope_type == "proportional" and "partial_rotary_factor" in out:
        tp.pop("partial_rotary_factor")  # the family's own share is kept
    out.update(tp)
    if rope_type != "default":
        out.update(FAMILY_EXTRA.get(family, {}))
    if out.get("rope_theta") is None and theta is not None:
        out["rope_theta"] = theta  # the config class gives none: its default_theta
    if mrope:
        # proportional keeps head_dim // 2 angles (the unrotated ones at zero frequency)
        half = (head_dim or rot_dim) // 2 if rope_type == "proportional" else rot_dim // 2
        out["mrope_section"] = mrope_sections(half, out.get("mrope_section") or mrope)
    return out


class NoRopeParameters(LookupError):
    pass


def build_config(cfg_cls, rope_type, small, family=None, cls=None):
    """A config of cfg_cls with rope_type (raises what the config raises).  The family's own
    rope_parameters (theta, partial factor, mrope sections, per-layer nesting) are kept; only
    the rope-type keys change ("native": the config class's own parameters, untouched)."""
    sizes = size_overrides(cfg_cls, small)
    base = cfg_cls(**sizes)
    fields = _fields(cfg_cls)
    rp = copy.deepcopy(getattr(base, "rope_parameters", None))
    if not rp and "rope_parameters" not in fields:
        if rope_type in ("default", "native"):
            return base  # an older config (rope_theta, rotary_dim): its own fields only
        raise NoRopeParameters(f"{cfg_cls.__name__} has no rope_parameters field")
    src = _source(cls)
    mrope = None  # the rotary reads rope_parameters["mrope_section"]: its in-code default
    if cls is not None and variant(cls, base).startswith("mrope") and "mrope_section" in src:
        m = re.search(r"get\(\s*[\"']mrope_section[\"']\s*,\s*\[([\d,\s]+)\]", src)
        mrope = [int(v) for v in m.group(1).split(",") if v.strip()] if m else [2, 3, 3]
    nested = _nested_keys(base)
    layer_types = getattr(base, "layer_types", None)
    if not nested and layer_types and "rope_parameters[layer_type]" in src:
        # the rotary reads one dict per layer type where the config holds one flat dict
        rp = {lt: copy.deepcopy(rp) for lt in sorted(set(layer_types))}
        nested = sorted(rp)
    theta = getattr(base, "default_theta", None)
    if nested:
        new = dict(rp)
        for lt in nested:
            new[lt] = with_type(rp[lt], rope_type, rotary_dim(base, lt), family, mrope,
                                rotary_dim(base, lt, full=True), theta)
    else:
        new = with_type(rp, rope_type, rotary_dim(base), family, mrope,
                        rotary_dim(base, full=True), theta)
    kw = dict(sizes, rope_parameters=new)
    if rope_type in ("yarn", "longrope", "llama3") and "original_max_position_embeddings" in fields:
        kw["original_max_position_embeddings"] = ORIG_MAX_POS  # phi3's top-level field
    return cfg_cls(**kw)


# ---- positions and module calls --------------------------------------------------------------

def positions(kind, src="", offsets=OFFSETS):
    """The candidate position_ids forms (NumPy int64) for a variant kind, in the order tried
    (src: the rotary's source, for the forms that index a batch axis)."""
    row = np.arange(SEQ, dtype=np.int64)
    pos2 = np.stack([row + o for o in offsets])  # (2, SEQ)
    if kind.startswith("mrope"):
        t = pos2
        h = pos2 // 2 + 3
        w = pos2 % 7 + 11
        # (3, batch, seq); (2, batch, seq) for two-axis forms (NeoMME: row, column); (batch, seq)
        return [np.stack([t, h, w]), np.stack([t, h]), pos2]
    if kind.startswith("vision axial"):
        hw = np.stack([row // 8 + 2 + offsets[1] // 8, row % 8], axis=-1)  # (N, 2): h, w
        batched = np.stack([hw, hw + 1])                  # (batch, N, 2) (Gemma 4's vision)
        if "[:, :, 0]" in src:
            return [batched, hw]
        return [hw, batched, np.ascontiguousarray(hw.T)]
    return [pos2]


def torch_dtype(name):
    import torch
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def call_module(module, pos, dtype, layer_type=None):
    import torch
    x = torch.zeros(pos.shape[-1], 8, dtype=torch_dtype(dtype)).unsqueeze(0)
    p = torch.from_numpy(pos)
    with torch.no_grad():
        if layer_type is not None:
            return module(x, p, layer_type)
        return module(x, p)


def to_numpy(t):
    """A torch tensor as a NumPy array of the same dtype (bfloat16 through ml_dtypes)."""
    import torch
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def pair(out):
    """The module's output as two real arrays (first, second), or a reason it is not one."""
    import torch
    if isinstance(out, torch.Tensor) and out.is_complex():
        return (to_numpy(out.real), to_numpy(out.imag)), "complex freqs_cis (torch.polar)"
    if isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(o, torch.Tensor) for o in out):
        return (to_numpy(out[0]), to_numpy(out[1])), None
    what = type(out).__name__
    if isinstance(out, (tuple, list)):
        what += f" of {len(out)}"
    return None, f"returns {what}, not a (cos, sin) pair"


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def compare(got, want):
    """(n_diff, n_total, note): got is hf_rope's pair, want the module's."""
    n, m, notes = 0, 0, []
    for g, w in zip(got, want):
        g = np.asarray(g)
        m += w.size
        if g.shape != w.shape:
            notes.append(f"shape {g.shape} vs the module's {w.shape}")
            n += w.size
            continue
        if g.dtype.name != w.dtype.name:
            notes.append(f"dtype {g.dtype.name} vs the module's {w.dtype.name}")
            n += w.size
            continue
        n += int(np.count_nonzero(bits(g) != bits(w)))
    return n, m, "; ".join(notes)


# ---- hf_rope ---------------------------------------------------------------------------------

def load_hf_rope():
    """(function, None) or (None, reason)."""
    try:
        from sinpe import presets
    except Exception as e:  # pragma: no cover - the package itself is broken
        return None, f"import sinpe.presets: {type(e).__name__}: {e}"
    fn = getattr(presets, "hf_rope", None)
    if fn is None:
        return None, "sinpe.presets has no hf_rope"
    return fn, None


class StubHfRope:
    """Development only (--stub): runs the HF module itself.  Never counted as coverage."""

    def __init__(self):
        self.cls = None

    def __call__(self, config, position_ids, *, dtype=None, layer_type=None, **_):
        module = self.cls(copy.deepcopy(config))
        return tuple(pair(call_module(module, np.asarray(position_ids), dtype or "float32",
                                      layer_type))[0])


def accepts_layer_type(fn):
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "layer_type" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


# ---- one case --------------------------------------------------------------------------------

def _message(e):
    msg = " ".join(str(e).split())  # one line: validators put the reason on later lines
    msg = f"{type(e).__name__}: {msg}" if msg else type(e).__name__
    return msg if len(msg) <= 240 else msg[:237] + "..."


def _build(cls, cfg_cls, rope_type, dtypes, family):
    """The small config first, the family's own sizes next: (config, kind, nested layer types,
    positions, the module's outputs by (position set, layer type, dtype)) and which config
    ran, or (None, None, the last failure as (where, exception))."""
    last_err = None
    for small in (True, False, None):
        try:
            config = build_config(cfg_cls, rope_type, small, family, cls)
        except Exception as e:
            last_err = ("config", e)
            continue
        try:
            cls(copy.deepcopy(config))
        except Exception as e:
            last_err = ("init", e)
            continue
        kind = variant(cls, config)
        nested = _nested_keys(config)
        layer_types = nested or [None]
        forms = [positions(kind, _source(cls), o) for o in OFFSET_SETS]
        for i in range(len(forms[0])):
            try:
                outs = {}
                for k, cands in enumerate(forms):
                    pos = cands[i]
                    for lt in layer_types:
                        for dt in dtypes:
                            m = cls(copy.deepcopy(config))  # fresh: dynamic/longrope state
                            outs[(k, lt, dt)] = (pos, call_module(m, pos, dt, lt))
                return (config, kind, nested, forms[0][i], outs), small, None
            except Exception as e:
                last_err = ("call", e)
    return None, None, last_err


def _unbuilt_status(rope_type, last_err):
    where, e = last_err
    if where in ("config", "init") and rope_type not in ("default", "native"):
        return f"{REJECTS}: {_message(e)}"
    if rope_type == "native":
        return f"{NO_BUILD}: the config class's own defaults do not run: {where}: {_message(e)}"
    return f"{NO_BUILD}: {where}: {_message(e)}"


def _compare_all(hf_rope, config, nested, want):
    """hf_rope on a copy of config for each of the module's calls: its status."""
    lt_ok = accepts_layer_type(hf_rope)
    n = m = 0
    notes, swapped_all = [], True
    for (_, lt, dt), (pos, w) in want.items():
        kw = {"dtype": dt}
        if lt is not None and lt_ok:
            kw["layer_type"] = lt
        try:
            got = hf_rope(copy.deepcopy(config), pos.copy(), **kw)
            got = tuple(got)
            if len(got) != 2:
                raise TypeError(f"hf_rope returned {len(got)} arrays")
        except Exception as e:
            return f"{REFUSED}: {_message(e)}"
        dn, dm, note = compare(got, w)
        if dn:
            sn, _, _ = compare(got[::-1], w)
            swapped_all = swapped_all and sn == 0
        if note:
            notes.extend(f"hf_rope {x}" for x in note.split("; "))
        n += dn
        m += dm
    if n == 0:
        return BIT
    extra = "; module returns (sin, cos), hf_rope (cos, sin)" if swapped_all else ""
    extra += ("; " + "; ".join(sorted(set(notes)))) if notes else ""
    if nested and not lt_ok:
        extra += "; hf_rope takes no layer_type"
    return f"{DIFFERS} ({n} of {m} values{extra})"


def run_case(cls, cfg_cls, rope_type, hf_rope, dtypes=DTYPES, family=None):
    """One (class, rope_type): a dict with status, detail and the facts found."""
    res = {"rope_type": rope_type}
    params = forward_params(cls)
    if params[:2] != ["x", "position_ids"] or len(params) > 3:
        res["status"] = f"{NOT_CONFIG} (needs forward({', '.join(params)}))"
        return res
    built, small, last_err = _build(cls, cfg_cls, rope_type, dtypes, family)
    if not built:
        res["status"] = _unbuilt_status(rope_type, last_err)
        return res
    res["small_config"] = small
    config, kind, nested, pos, outs = built
    res["kind"] = kind
    res["position_ids_shape"] = list(pos.shape)
    res["layer_types"] = nested
    res["head_dim"] = _attr(config, "head_dim")
    # The module's pairs.
    want = {}
    for key, (pos, out) in outs.items():
        p, why = pair(out)
        if p is None:
            res["status"] = f"{NOT_CONFIG} (needs forward output handling: {why})"
            return res
        if why:
            res["note"] = why
        want[key] = (pos, p)
    if hf_rope is None:
        res["status"] = f"{REFUSED}: hf_rope unavailable"
        return res
    if isinstance(hf_rope, StubHfRope):
        hf_rope.cls = cls
    res["status"] = _compare_all(hf_rope, config, nested, want)
    return res


# ---- the walk --------------------------------------------------------------------------------

@contextlib.contextmanager
def time_limit(seconds):
    if not hasattr(signal, "setitimer") or seconds is None:
        yield
        return

    def handler(signum, frame):
        raise HarnessTimeout(f"over {seconds:.0f} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def quiet():
    """Silence transformers' config warnings (they would flood the report)."""
    warnings.filterwarnings("ignore")
    try:
        from transformers.utils import logging as hf_logging
        hf_logging.set_verbosity_error()
    except Exception:
        pass
    logging.getLogger("transformers").setLevel(logging.ERROR)


def check_class(family, mod, cls, hf_rope, rope_types=COLUMNS, dtypes=DTYPES):
    """The row of one rotary class."""
    row = {"family": family, "module": mod.__name__, "class": cls.__name__, "cases": {}}
    cfg_cls = config_class(cls)
    row["config_class"] = cfg_cls.__name__ if cfg_cls else None
    if cfg_cls is None:
        arg, _ = _annotation(cls)
        for rt in rope_types:
            row["cases"][rt] = {"rope_type": rt,
                                "status": f"{NOT_CONFIG} (needs __init__({arg}) without a config class)"}
        row["kind"] = "not config-driven"
        return row
    try:
        default_cfg = cfg_cls(**size_overrides(cfg_cls, True))
    except Exception:
        try:
            default_cfg = cfg_cls()
        except Exception:
            default_cfg = None
    params = forward_params(cls)
    row["kind"] = (variant(cls, default_cfg) if params[:2] == ["x", "position_ids"]
                   else f"forward({', '.join(params)})")
    for rt in rope_types:
        try:
            row["cases"][rt] = run_case(cls, cfg_cls, rt, hf_rope, dtypes, family)
        except HarnessTimeout:
            raise
        except Exception as e:
            row["cases"][rt] = {"rope_type": rt, "status": f"{NO_BUILD}: {_message(e)}"}
        if row["cases"][rt].get("kind"):
            row["kind"] = row["cases"][rt]["kind"]
    return row


def walk(selected=None, hf_rope=None, rope_types=COLUMNS, dtypes=DTYPES,
         classes=None, timeout=FAMILY_TIMEOUT, progress=None):
    """Rows for the selected families (all when None); classes: only these class names."""
    quiet()
    fams = families()
    names = sorted(fams) if selected is None else list(selected)
    rows = []
    for fam in names:
        t0 = time.perf_counter()
        if fam not in fams:
            rows.append({"family": fam, "module": None, "class": None, "kind": "",
                         "cases": {rt: {"rope_type": rt, "status": f"{NO_BUILD}: no rotary class "
                                        "in this transformers"} for rt in rope_types}})
            continue
        done = []
        try:
            with time_limit(timeout):
                for mod, cls in rotary_classes(fam, fams[fam]):
                    if classes is not None and cls.__name__ not in classes:
                        continue
                    done.append(check_class(fam, mod, cls, hf_rope, rope_types, dtypes))
        except Exception as e:  # import error, timeout: the family's remaining classes
            done.append({"family": fam, "module": None, "class": "(remaining)", "kind": "",
                         "cases": {rt: {"rope_type": rt, "status": f"{NO_BUILD}: {_message(e)}"}
                                   for rt in rope_types}})
        for r in done:
            r["seconds"] = round(time.perf_counter() - t0, 3)
        rows.extend(done)
        if progress:
            progress(fam, done)
    return rows


# ---- report ----------------------------------------------------------------------------------

def category(status):
    for c in (BIT, DIFFERS, REFUSED, NOT_CONFIG, REJECTS, NO_BUILD):
        if status.startswith(c):
            return c
    return status


def summary(rows, rope_types=COLUMNS):
    fams = sorted({r["family"] for r in rows})
    out = {"families": len(fams), "classes": len(rows), "per_rope_type": {}}
    for rt in rope_types:
        covered, accepted = set(), set()
        cls_bit = 0
        for r in rows:
            c = r["cases"].get(rt)
            if not c:
                continue
            cat = category(c["status"])
            if cat not in (REJECTS, NOT_CONFIG):
                accepted.add(r["family"])
            if cat == BIT:
                covered.add(r["family"])
                cls_bit += 1
        out["per_rope_type"][rt] = {"families_bit_for_bit": len(covered),
                                    "families_accepting": len(accepted),
                                    "classes_bit_for_bit": cls_bit}
    all_default = {f for f in fams if all(category(r["cases"].get("default", {}).get("status", ""))
                                          == BIT for r in rows if r["family"] == f)}
    out["families_all_classes_default_bit_for_bit"] = len(all_default)
    return out


def summary_lines(s):
    d = s["per_rope_type"]["default"]
    lines = [f"Families covered bit for bit for at least the default rope_type (some rotary class "
             f"of the family): {d['families_bit_for_bit']} / {s['families']} "
             f"(every rotary class of the family: {s['families_all_classes_default_bit_for_bit']}"
             f"; classes: {d['classes_bit_for_bit']} / {s['classes']})."]
    per = ", ".join(f"{rt} {v['families_bit_for_bit']}/{v['families_accepting']}"
                    for rt, v in s["per_rope_type"].items())
    lines.append(f"Per rope_type, families bit for bit / families whose config accepts it: {per}.")
    return lines


def _cell(case):
    st = case["status"]
    cat = category(st)
    if cat == DIFFERS:
        m = re.match(r"differs \((\d+) of (\d+)", st)
        return f"differs {m.group(1)}/{m.group(2)}" if m else "differs"
    return SHORT.get(cat, st)


def markdown(rows, meta, rope_types=COLUMNS):
    s = summary(rows, rope_types)
    out = ["# hf_rope coverage", ""]
    out.append(f"Generated by `python tools/hf_rope_coverage.py` on {meta['date']}: "
               f"transformers {meta['transformers']}, torch {meta['torch']}, "
               f"NumPy {meta['numpy']}, Python {meta['python']}, {meta['cpu']}; "
               f"hf_rope: {meta['hf_rope']}; dtypes {', '.join(meta['dtypes'])}; "
               f"walk time {meta['seconds']:.0f} s.")
    out.append("")
    out.extend(summary_lines(s))
    out.append("")
    out.append("Cells: bit-for-bit (every value of cos and sin, every dtype); differs n/m "
               "(values that differ / values compared); refused (hf_rope raised); rejected "
               "(the config or the rotary's __init__ refuses the rope_type); n/a (not a "
               "config-driven (cos, sin) rotary); no build (the harness found no valid config). "
               "The reasons are listed after the table.")
    out.append("")
    out.append("| family | rotary class | variant | " + " | ".join(rope_types) + " |")
    out.append("|---|---|---|" + "---|" * len(rope_types))
    for r in rows:
        cells = [_cell(r["cases"][rt]) if rt in r["cases"] else "" for rt in rope_types]
        out.append(f"| {r['family']} | {r['class']} | {r.get('kind', '')} | " + " | ".join(cells) + " |")
    out.append("")
    out.append("## Reasons, by status")
    out.append("")
    groups = {}
    for r in rows:
        for rt in rope_types:
            c = r["cases"].get(rt)
            if c and category(c["status"]) != BIT:
                groups.setdefault(_generic(c["status"], r, rt), []).append(
                    f"{r['family']}/{r['class']}:{rt}")
    for st in sorted(groups, key=lambda k: (category(k), k)):
        items = groups[st]
        out.append(f"- **{st}** ({len(items)}): " + ", ".join(_compact(items)))
    out.append("")
    return "\n".join(out), s


def _generic(status, row, rope_type):
    """A status with its rope_type, class and config names as placeholders, so that one
    reason met by many (class, rope_type) pairs is listed once."""
    out = status
    for name, tag in ((row.get("config_class"), "<config>"), (row.get("class"), "<class>")):
        if name:
            out = out.replace(name, tag)
    if category(status) == REJECTS:
        out = re.sub(rf"\b{re.escape(rope_type)}\b", "<rope_type>", out)
        out = re.sub(r"'\w+Config'", "'<config>'", out)
    if category(status) == REFUSED:
        out = re.sub(r"model_type '\w+'", "model_type '<model_type>'", out)
    return out


def _compact(items):
    """family/class:rt lists grouped as family/class (rt, rt, ...)."""
    by = {}
    for it in items:
        k, rt = it.rsplit(":", 1)
        by.setdefault(k, []).append(rt)
    return [f"{k} ({', '.join(v) if len(v) < len(COLUMNS) else 'all'})" for k, v in by.items()]


def metadata(hf_desc, seconds, dtypes):
    import torch
    import transformers
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            info = f.read()
        name = re.search(r"^model name\s*:\s*(.*)$", info, re.M)
        fam = re.search(r"^cpu family\s*:\s*(\d+)$", info, re.M)
        cpu = (name.group(1).strip() if name else cpu) + (f" (family {fam.group(1)})" if fam else "")
    except OSError:
        pass
    cpu += f", {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}"
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "transformers": transformers.__version__, "torch": torch.__version__,
            "numpy": np.__version__, "python": platform.python_version(), "cpu": cpu,
            "hf_rope": hf_desc, "seconds": seconds, "dtypes": list(dtypes)}


def sample_failures(rows):
    """The sampled cases (config-accepted rope_types) that are not bit for bit."""
    bad = []
    for r in rows:
        for rt, c in r["cases"].items():
            if category(c["status"]) not in (BIT, REJECTS):
                bad.append(f"{r['family']}/{r['class']}:{rt}: {c['status']}")
    return bad


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--markdown", metavar="FILE", help="write the Markdown report here (else stdout)")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON here")
    ap.add_argument("--families", help="comma-separated families (default: all)")
    ap.add_argument("--sample", action="store_true", help="run the fixed sample; exit 1 unless "
                    "every sampled case is bit for bit")
    ap.add_argument("--dtypes", default=",".join(DTYPES), help="x dtypes (default float32,bfloat16,float16)")
    ap.add_argument("--timeout", type=float, default=FAMILY_TIMEOUT, help="seconds per family")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--stub", action="store_true", help=argparse.SUPPRESS)  # harness development
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    a = ap.parse_args(argv)

    import torch
    torch.set_num_threads(a.threads)
    dtypes = [d for d in a.dtypes.split(",") if d]
    if a.stub:
        hf_rope, desc = StubHfRope(), "STUB (the HF module itself; development only, not coverage)"
    else:
        hf_rope, why = load_hf_rope()
        desc = "sinpe.presets.hf_rope" if hf_rope else f"unavailable ({why})"
    classes = None
    if a.sample:
        selected = [f for f, _ in SAMPLE]
        classes = {c for _, c in SAMPLE}
    elif a.families:
        selected = [f.strip() for f in a.families.split(",") if f.strip()]
    else:
        selected = None

    def progress(fam, done):
        if not a.quiet:
            cells = "; ".join(f"{r['class']}: " + " ".join(_cell(c) for c in r["cases"].values())
                              for r in done)
            print(f"{fam}: {cells}", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    rows = walk(selected, hf_rope, COLUMNS, dtypes, classes, a.timeout, progress)
    seconds = time.perf_counter() - t0
    meta = metadata(desc, seconds, dtypes)
    text, s = markdown(rows, meta)
    if a.markdown:
        with open(a.markdown, "w", encoding="utf-8") as f:
            f.write(text)
        print("\n".join(summary_lines(s)))
    else:
        print(text)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "summary": s, "rows": rows}, f, indent=1, default=str)
    print(f"walk: {seconds:.1f} s, {len(rows)} rotary classes", file=sys.stderr)
    if a.sample:
        bad = sample_failures(rows)
        for b in bad:
            print("NOT BIT FOR BIT: " + b, file=sys.stderr)
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
