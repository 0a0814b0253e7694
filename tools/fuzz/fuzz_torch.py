"""Coverage-guided fuzzing of sinpe's torch wing (atheris, libFuzzer): a patched model is the
model, and each rotation form is transformers' own function, bit for bit.

Four kinds of case, each with one invariant (bits are compared as integer views, never
within a tolerance):

- ``form``: one of the 13 (transformers modeling module, function, sinpe.torch form) pairs
  patch routes (REFS; and copies of them in other families, COPIES), called through the
  route a patched model runs in place of that function (against that function), or through
  the public form (against every function it stands for: it must be one of them), on
  hostile tensors: float32/bfloat16/float16/float64 and mixed (q one dtype, cos another),
  batch/heads/seq 0 and 1, odd head dims, partial widths, cos of width 1, broadcast tables,
  unsqueeze_dim -5..4 and non-int, transposed, expanded, sliced, offset and negative-bit
  (``torch._neg_view``) layouts, zeros of both signs, NaNs of both signs and with
  payloads, infinities, subnormals; requires_grad on any subset of q/k/cos/sin, grad mode
  on, off or inference mode, plain, ``torch.vmap``, ``torch.func.grad`` or CPU autocast
  (bfloat16, float16).  Both raise an exception of the same type at the same stage, or the
  outputs, their requires_grad flags and the gradients (of a random, zero or special
  cotangent) are equal bit for bit, and neither call wrote into its inputs.  Where sinpe's
  core computed the outputs (seen by a spy on the form's core way), its documented NaN
  rules hold instead of torch's bits for NaN elements only (``_nan_rule``): the interleave
  (DeepSeek-V3) and half (GPT-OSS) forms' NaN sign (docs/hf_patch.md, "Not done"), the NaN
  a step of two NaNs keeps and bfloat16's 0xffff where torch's scalar tail gives 0x7fc0
  (docs/numerics.md, "NaN payloads"); SINPE_FUZZ_STRICT_NAN=1 allows the first only.
- ``patch_sequence``: a tiny model of a small pool (llama, with yarn; qwen2 with linear and
  dynamic rope; gemma3_text; olmo; gpt_oss), built once per process and deep-copied per
  case, and an unpatched twin; up to ~8 operations: patch or unpatch (the model or a
  submodule), deepcopy, pickle, torch.save/torch.load, ``model.to(dtype)``, a rope config
  value edited in place, a name of the modeling module replaced (restored after the case),
  forward, generate, a training step.  Every operation but patch/unpatch is applied to the
  twin too; after every forward the logits (generate's scores, a training step's
  parameter gradients) are the twin's bit for bit, or both raise the same exception type;
  ``patched()`` is [] exactly when no module holds a ``Patched`` attribute; unpatch leaves
  none in the modules it was given; a refused patch (NotImplementedError) changes nothing;
  a copy is patched as its original.
- ``messages``: patch/unpatch/patched of anything but an ``nn.Module`` raise TypeError naming
  ``model``; ``patch(backend=<not a str>)`` a TypeError naming ``backend``; a backend string
  patches (then unpatch gives the twin's bits) or raises ValueError/RuntimeError with the
  model unchanged.
- ``framework``: a framework's plain name with a faked installed release (as
  tests/api/test_api_releases.py fakes it): a ``sinpe.SinpeWarning`` exactly when that
  release is installed and not measured (its PEP 440 release's major.minor is not the
  profile's), once per release, naming it; never for the profile's own name.

Not fuzzed here (too slow for a fuzz loop; the tests cover them): models on the meta
device (tests/robustness/test_robust_patch.py) and ``torch.compile``/``torch.export``
(tests/numerics/test_numerics_torch_grads.py, tests/api/test_api_torch_compile.py).

The fuzzed bytes choose a case and its arguments from menus of hostile values (``draw``);
a corpus file whose first byte is "{" is a JSON case of the same dict (the fuzzer's own
draws are those dicts too, so a finding's input is printed as JSON before it is raised).
tools/fuzz/corpus_torch/ holds one case per class and the issue's findings; the suite
replays them (tests/robustness/test_robust_fuzz_torch.py).

Build and run (tools/fuzz/run_torch.sh does both; docs/testing.md):
    CC=clang-14 CFLAGS="-fsanitize=fuzzer-no-link,address,undefined" pip install .
    LD_PRELOAD=$(python -c 'import atheris; print(atheris.path())')/asan_with_fuzzer.so \
        python tools/fuzz/fuzz_torch.py tools/fuzz/corpus_torch -max_total_time=300
"""
from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import importlib.util
import io
import json
import math
import os
import pickle
import sys
import warnings

try:
    import atheris
except ImportError:  # the suite replays the JSON corpus without it
    atheris = None

import numpy as np
import torch
import transformers  # noqa: F401  (imported before sinpe: not instrumented)

with atheris.instrument_imports(include=["sinpe"]) if atheris else contextlib.nullcontext():
    import sinpe
    import sinpe.torch as st
    from sinpe._torch import forms as _torch_forms, patch as _torch_patch
    from sinpe._torch import recognise as _recognise, state as _patch_state
    from sinpe._backends import policy, records

HERE = os.path.dirname(os.path.abspath(__file__))
#: SINPE_FUZZ_STRICT_NAN=1: of the NaN bits sinpe's core gives otherwise than torch, allow
#: only the interleave and half forms' NaN sign (docs/hf_patch.md), not the core's documented
#: NaN rules (docs/numerics.md, "NaN payloads"): see _nan_rule
STRICT_NAN = os.environ.get("SINPE_FUZZ_STRICT_NAN") == "1"
#: SINPE_FUZZ_FINDINGS=FILE: each finding is appended to FILE as a JSON line and the campaign
#: goes on (tools/fuzz/run_torch.sh); unset, a finding stops it (libFuzzer's crash-* input)
FINDINGS = os.environ.get("SINPE_FUZZ_FINDINGS")


def _coverage_tool():
    path = os.path.join(HERE, "..", "hf_patch_coverage.py")
    spec = importlib.util.spec_from_file_location("hf_patch_coverage_fuzz", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


H = _coverage_tool()
H.quiet()


class Finding(AssertionError):
    pass


class Malformed(Exception):
    """A (mutated) JSON case that describes nothing: ignored by the fuzzer, an error in the
    suite's strict replay."""


def _isin(v, names):
    """v is one of names (strings; a mutated case may hold anything)."""
    return isinstance(v, str) and v in names


def _need(cond, what):
    if not cond:
        raise Malformed(what)


# ---- bits -----------------------------------------------------------------------------------

_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_SIGN = {torch.float16: -0x8000, torch.bfloat16: -0x8000, torch.float32: -0x80000000,
         torch.float64: -0x8000000000000000}


def bits(t):
    """t's elements as integers of its width (a negative-bit or conjugate view resolved)."""
    t = t.detach().resolve_neg().resolve_conj().contiguous()
    if not t.is_floating_point():
        return t
    return t.view(_INT[t.element_size()])


def diff_bits(want, got, nan_rule=None):
    """The number of elements whose bits differ, or a sentence when shape or dtype differ.
    nan_rule "sign": a NaN whose only difference is its sign bit does not count; "core": a
    NaN of float32/float16 against any NaN does not count, nor bfloat16's 0xffff where torch
    gave 0x7fc0 (the NaN rules of sinpe's core, below)."""
    if not isinstance(want, torch.Tensor) or not isinstance(got, torch.Tensor):
        return None if want is None and got is None else \
            f"{type(want).__name__} against {type(got).__name__}"
    if want.shape != got.shape or want.dtype != got.dtype:
        return f"{tuple(want.shape)} {want.dtype} against {tuple(got.shape)} {got.dtype}"
    if not want.numel():
        return 0
    a, b = bits(want), bits(got)
    bad = a != b
    if nan_rule is not None and want.dtype in _SIGN:
        both = torch.isnan(want.detach().resolve_neg()) & torch.isnan(got.detach().resolve_neg())
        if nan_rule == "sign":
            if want.dtype in (torch.float32, torch.float16):
                bad &= ~(both & ((a ^ b) == _SIGN[want.dtype]))
        elif want.dtype == torch.bfloat16:
            bad &= ~(both & (a == 0x7fc0) & (b == -1))
        elif want.dtype in (torch.float32, torch.float16):
            bad &= ~both
    return int(bad.sum())


def _first_diffs(want, got, n=4):
    if not isinstance(want, torch.Tensor) or not isinstance(got, torch.Tensor) \
            or want.shape != got.shape or want.dtype != got.dtype or not want.numel():
        return ""
    a, b = bits(want).reshape(-1), bits(got).reshape(-1)
    idx = (a != b).nonzero().reshape(-1)[:n].tolist()
    m = (1 << (8 * want.element_size())) - 1
    return "; ".join(f"[{i}] want {int(a[i]) & m:#x} got {int(b[i]) & m:#x}" for i in idx)


# ---- the rotation forms ------------------------------------------------------------------------

#: (transformers modeling module, function, the sinpe.torch form patch routes it to): the
#: references sinpe.torch.patch recognises rotations by
REFS = list(_recognise.REFERENCES)
#: copies of those functions in other families (patch recognises them by their code): the
#: route a patched ESM, Evolla, ERNIE-4.5-MoE, GLM-4, Cohere 2, OLMo 2 or FlexOlmo runs
COPIES = [("esm", "apply_rotary_pos_emb", "apply_rotary_pos_emb_float32"),
          ("evolla", "apply_rotary_pos_emb", "apply_rotary_pos_emb_float32"),
          ("modernbert_decoder", "apply_rotary_pos_emb", "apply_rotary_pos_emb_float32"),
          ("ernie4_5_moe", "apply_rotary_pos_emb", "apply_rotary_pos_emb_glm_float32"),
          ("glm4", "apply_rotary_pos_emb", "apply_rotary_pos_emb_glm"),
          ("cohere2", "apply_rotary_pos_emb", "apply_rotary_pos_emb_cohere"),
          ("olmo2", "apply_rotary_pos_emb", "apply_rotary_pos_emb_olmo"),
          ("flex_olmo", "apply_rotary_pos_emb", "apply_rotary_pos_emb_olmo")]
REF = {r[0]: r for r in REFS + COPIES}
#: the forms whose core computes x1 * cos + (-x2) * sin where transformers computes
#: x1 * cos - x2 * sin: a NaN's sign may differ (docs/hf_patch.md, "Not done")
NAN_SIGN_FORMS = {"apply_rotary_pos_emb_interleave", "apply_rotary_pos_emb_half"}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
          "float64": torch.float64}
LAYOUTS = ["c", "t", "t12", "perm", "slice", "offset", "neg", "expand"]
SCALES = {"1": 1.0, "milli": 1e-3, "kilo": 1e3, "sub": 1e-40, "f16max": 6e4, "huge": 1e30,
          "angle": 3.0}
KINDS = ["randn", "cos", "sin", "zeros", "ones"]
#: special values as bit patterns per dtype
SPECIALS = {
    torch.float32: {"zero": 0, "nzero": 0x80000000, "nan": 0x7fc00000, "nnan": 0xffc00000,
                    "inf": 0x7f800000, "ninf": 0xff800000, "sub": 0x00000001,
                    "nsub": 0x80400000, "snan": 0x7f800001, "pnan": 0xffc12345,
                    "max": 0x7f7fffff, "nmax": 0xff7fffff, "tiny": 0x00800000},
    torch.bfloat16: {"zero": 0, "nzero": 0x8000, "nan": 0x7fc0, "nnan": 0xffc0, "inf": 0x7f80,
                     "ninf": 0xff80, "sub": 0x0001, "nsub": 0x8040, "snan": 0x7f81,
                     "pnan": 0xffc5, "max": 0x7f7f, "nmax": 0xff7f, "tiny": 0x0080},
    torch.float16: {"zero": 0, "nzero": 0x8000, "nan": 0x7e00, "nnan": 0xfe00, "inf": 0x7c00,
                    "ninf": 0xfc00, "sub": 0x0001, "nsub": 0x8200, "snan": 0x7c01,
                    "pnan": 0xfe55, "max": 0x7bff, "nmax": 0xfbff, "tiny": 0x0400},
    torch.float64: {"zero": 0, "nzero": 1 << 63, "nan": 0x7ff8 << 48, "nnan": 0xfff8 << 48,
                    "inf": 0x7ff0 << 48, "ninf": 0xfff0 << 48, "sub": 1,
                    "nsub": (1 << 63) | (1 << 51), "snan": 0x7ff0000000000001,
                    "pnan": 0xfff8000000012345, "max": 0x7fefffffffffffff,
                    "nmax": 0xffefffffffffffff, "tiny": 1 << 52},
}
SPECIAL_NAMES = sorted(SPECIALS[torch.float32])
UNSQUEEZE = [-5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 1.0, True, None, "1", {"np": 1},
             {"tensor": 1}]
MAX_ELEMENTS = 1 << 16
#: where the call runs: plainly, inside torch.vmap (over the batch axis), under
#: torch.func.grad (of the outputs' dot product with the cotangent), under CPU autocast to
#: bfloat16 or float16
CTXS = ["plain", "vmap", "func_grad", "autocast", "autocast16"]


def _signed(v, width):
    return v - (1 << (8 * width)) if v >= 1 << (8 * width - 1) else v


def _tensor_spec(spec, name):
    _need(isinstance(spec, dict), f"{name}: a dict")
    shape = spec.get("shape")
    _need(isinstance(shape, list) and len(shape) <= 6
          and all(type(n) is int and 0 <= n <= 4096 for n in shape), f"{name}: shape")
    _need(math.prod(shape) <= MAX_ELEMENTS, f"{name}: at most {MAX_ELEMENTS} elements")
    _need(_isin(spec.get("dtype"), DTYPES), f"{name}: dtype")
    _need(spec.get("layout", "c") in LAYOUTS, f"{name}: layout")
    _need(spec.get("kind", "randn") in KINDS, f"{name}: kind")
    _need(str(spec.get("scale", "1")) in SCALES, f"{name}: scale")
    _need(type(spec.get("seed", 0)) is int, f"{name}: seed")
    _need(type(spec.get("axis", 0)) is int, f"{name}: axis")
    sp = spec.get("specials", [])
    _need(isinstance(sp, list) and len(sp) <= 64 and all(
        isinstance(s, list) and len(s) == 2 and type(s[0]) is int and s[1] in SPECIAL_NAMES
        for s in sp), f"{name}: specials")


def _expand_axis(spec):
    nd = len(spec["shape"])
    return spec.get("axis", 0) % nd if nd else None


def values(spec):
    """The tensor a spec describes, contiguous, in its dtype (an expanded layout's: 1 along
    the expanded axis)."""
    dtype = DTYPES[spec["dtype"]]
    shape = list(spec["shape"])
    ax = _expand_axis(spec) if spec.get("layout") == "expand" else None
    if ax is not None:
        shape[ax] = min(shape[ax], 1)
    kind = spec.get("kind", "randn")
    g = torch.Generator().manual_seed(spec.get("seed", 0) & 0xFFFFFFFF)
    a = torch.randn(shape, generator=g, dtype=torch.float64) * SCALES[str(spec.get("scale", "1"))]
    if kind == "cos":
        a = a.cos()
    elif kind == "sin":
        a = a.sin()
    elif kind == "zeros":
        a = torch.zeros(shape, dtype=torch.float64)
    elif kind == "ones":
        a = torch.ones(shape, dtype=torch.float64)
    t = a.to(dtype).contiguous()
    if t.numel():
        iv = t.view(-1).view(_INT[t.element_size()])
        for i, name in spec.get("specials", []):
            iv[i % t.numel()] = _signed(SPECIALS[dtype][name], t.element_size())
    return t


def layout(x, spec):
    """x (a leaf, or anything derived from it differentiably) in the spec's memory layout,
    the same values: transposed, permuted, a strided slice, at a storage offset, a
    negative-bit view, expanded."""
    lay = spec.get("layout", "c")
    nd = x.dim()
    if lay == "t" and nd >= 2:
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    if lay == "t12" and nd >= 3:
        return x.transpose(1, 2).contiguous().transpose(1, 2)
    if lay == "perm" and nd >= 2:
        rev = tuple(range(nd))[::-1]
        return x.permute(rev).contiguous().permute(rev)
    if lay == "slice" and nd >= 1:
        return torch.stack((x, torch.zeros_like(x).detach()), -1).flatten(-2)[..., ::2]
    if lay == "offset":
        pad = torch.zeros(3, dtype=x.dtype)
        return torch.cat((pad, x.reshape(-1)))[3:].view(x.shape)
    if lay == "neg":
        return torch._neg_view(-x)
    if lay == "expand" and nd:
        return x.expand(spec["shape"])
    return x


def _unsqueeze_value(v):
    if isinstance(v, dict):
        if "np" in v:
            return np.int64(v["np"])
        if "tensor" in v:
            return torch.tensor(v["tensor"])
    return v


def _norm_form(case):
    _need(_isin(case.get("ref"), REF), "ref")
    single = REF[case["ref"]][2].endswith("single")
    names = ("x", "cos", "sin") if single else ("q", "k", "cos", "sin")
    for n in names:
        _tensor_spec(case.get(n), n)
    _need(sum(math.prod(case[n]["shape"]) for n in names) <= 2 * MAX_ELEMENTS, "size")
    ud = case.get("unsqueeze_dim", 1)
    _need(type(ud) in (int, float, bool, str) or ud is None or (
        isinstance(ud, dict) and len(ud) == 1 and ud.get("np", ud.get("tensor")) in range(-5, 5)),
        "unsqueeze_dim")
    _need(type(ud) is not int or -64 <= ud <= 64, "unsqueeze_dim range")
    rg = case.get("requires_grad", [False] * len(names))
    _need(isinstance(rg, list) and len(rg) == len(names) and all(type(b) is bool for b in rg),
          "requires_grad")
    _need(case.get("mode", "grad") in ("grad", "no_grad", "inference"), "mode")
    _need(case.get("ctx", "plain") in CTXS, "ctx")
    _need(case.get("via", "public") in ("public", "route"), "via")
    _need(case.get("call", "pos") in ("pos", "kw", "default", "allkw", "extra"), "call")
    cot = case.get("cot", {"kind": "randn", "seed": 0})
    _need(isinstance(cot, dict) and cot.get("kind") in ("randn", "zeros", "specials", "ones")
          and type(cot.get("seed", 0)) is int, "cot")
    return names, single


def _reference(mod, fn):
    return getattr(importlib.import_module(f"transformers.models.{mod}.modeling_{mod}"), fn)


def _cotangent(out, i, cot):
    """The cotangent of output i (the same for both sides: made from its shape and dtype)."""
    g = torch.Generator().manual_seed((cot.get("seed", 0) + 7919 * i) & 0xFFFFFFFF)
    kind = cot["kind"]
    if kind == "zeros":
        return torch.zeros(out.shape, dtype=out.dtype)
    if kind == "ones":
        return torch.ones(out.shape, dtype=out.dtype)
    c = torch.randn(out.shape, generator=g, dtype=torch.float64).to(out.dtype)
    if kind == "specials" and c.numel():
        iv = c.view(-1).view(_INT[c.element_size()])
        for j, name in enumerate(SPECIAL_NAMES):
            iv[(j * 31 + cot.get("seed", 0)) % c.numel()] = _signed(SPECIALS[c.dtype][name],
                                                                     c.element_size())
        c.view(-1)[::3] = 0.0  # masked positions: zero cotangents of both signs meet NaNs
    return c


def _call(fn, ts, case, single):
    ud = _unsqueeze_value(case.get("unsqueeze_dim", 1))
    how = case.get("call", "pos")
    interleave = case["ref"] == "deepseek_v3"
    names = ("x", "cos", "sin") if single else ("q", "k", "cos", "sin")
    if how == "pos":
        return fn(*ts, *((None,) if interleave else ()), ud)
    if how == "kw":
        return fn(*ts, unsqueeze_dim=ud)
    if how == "default":
        return fn(*ts)
    if how == "allkw":
        return fn(**dict(zip(names, ts)), unsqueeze_dim=ud)
    return fn(*ts, unsqueeze_dim=ud, bogus=1)


def _as_tuple(out):
    if isinstance(out, torch.Tensor):
        return (out,)
    return tuple(out)


def _mode(case):
    m = case.get("mode", "grad")
    return torch.enable_grad() if m == "grad" else torch.no_grad() if m == "no_grad" \
        else torch.inference_mode()


def _side(fn, base, case, names, single):
    """One side's run: ('raise', stage, exception type name, message) or ('ok', outputs,
    gradients, the outputs' requires_grad); the inputs' bits afterwards too."""
    rg = case.get("requires_grad", [False] * len(names))
    leaves = [b.clone().requires_grad_(r) for b, r in zip(base, rg)]
    ts = [layout(l, case[n]) for l, n in zip(leaves, names)]
    seen = [bits(t).clone() for t in ts]
    ctx = case.get("ctx", "plain")
    cot = case.get("cot", {"kind": "randn", "seed": 0})
    stage = "forward"
    try:
        with _mode(case):
            if ctx in ("plain", "autocast", "autocast16"):
                with contextlib.nullcontext() if ctx == "plain" else torch.autocast(
                        "cpu", dtype=torch.bfloat16 if ctx == "autocast" else torch.float16):
                    outs = _as_tuple(_call(fn, ts, case, single))
                flags = [bool(o.requires_grad) for o in outs]
                pairs = [(o, _cotangent(o, i, cot)) for i, o in enumerate(outs)
                         if o.requires_grad]
                stage = "backward"
                if pairs:
                    torch.autograd.backward([p[0] for p in pairs], [p[1] for p in pairs])
                grads = [l.grad for l in leaves]
            elif ctx == "vmap":
                batched = [0 if i < len(names) - 2 and t.dim() >= 1
                           else 0 if t.dim() >= 2 and ts[0].dim() >= 1
                           and t.shape[0] == ts[0].shape[0] else None
                           for i, t in enumerate(ts)]

                def per(*us):
                    return _call(fn, [u[None] if d == 0 else u for u, d in zip(us, batched)],
                                 case, single)
                outs = _as_tuple(torch.vmap(per, in_dims=tuple(batched))(*ts))
                flags, grads = [], []
            else:
                argnums = tuple(i for i, r in enumerate(rg) if r) or (0,)

                def loss(*us):
                    out = _as_tuple(_call(fn, us, case, single))
                    return sum((o.double() * _cotangent(o, i, cot).double()).sum()
                               for i, o in enumerate(out))
                outs = _as_tuple(torch.func.grad(loss, argnums=argnums)(*ts))
                flags, grads = [], []
    except Exception as e:  # noqa: BLE001  (compared with the other side's)
        return ("raise", stage, type(e).__name__, str(e)[:300]), ts, seen
    return ("ok", outs, grads, flags), ts, seen


def _said(res):
    return f"raised {res[2]} in the {res[1]} ({res[3][:200]})" if res[0] == "raise" \
        else "returned"


def run_form(case):
    """The route (what a patched model runs in place of the chosen function) against that
    function; the public form against every function it stands for (it must be one of
    them: Llama's apply_rotary_pos_emb with GPT-NeoX's partial widths, GLM's and Helium's,
    which differ from each other at widths below 2, past q's, and where cos broadcasts q
    up)."""
    names, single = _norm_form(case)
    mod, fn_name, form = REF[case["ref"]]
    if case.get("via", "public") == "public":
        refs = [(mod, fn_name)] + [r[:2] for r in REFS if r[2] == form and r[0] != mod]
        sf = getattr(st, form)
    else:
        refs = [(mod, fn_name)]
        fn = _reference(mod, fn_name)
        found = _recognise.classify(fn)  # (form, the reference its code matched), as patch
        sf = _torch_forms.route(form, fn, found[1] if found else "")
    base = [values(case[n]) for n in names]
    with _core_spy(form) as used:
        got, *gl = _side(sf, base, case, names, single)
    _untouched("sinpe", names, *gl)
    core = any(used)  # the outputs are the core's (its NaN rules), the gradients the graph's
    verdicts = []
    for m, f in refs:
        want, *wl = _side(_reference(m, f), base, case, names, single)
        _untouched(f"transformers' {m}", names, *wl)
        v = _verdict(want, got, names, _nan_rule(form) if core else None)
        if v is None:
            return
        verdicts.append(f"{m}: {v}")
    raise Finding("; ".join(verdicts))


@contextlib.contextmanager
def _core_spy(form):
    """Whether sinpe's core computed the call (the form's core way returned tensors), as a
    list that fills while the block runs."""
    f = _torch_forms.FORMS[form]
    real, used = f.core, []

    def spy(*a, **kw):
        out = real(*a, **kw)
        used.append(out is not None)
        return out
    f.core = spy
    try:
        yield used
    finally:
        f.core = real


def _untouched(side, names, ts, seen):
    for n, t, b in zip(names, ts, seen):
        if not torch.equal(bits(t), b):
            raise Finding(f"{side}'s call wrote into {n}")


def _nan_rule(form):
    """The NaN bits a call sinpe's core takes may give otherwise (documented): the core's
    rules (docs/numerics.md, "NaN payloads": where both operands of a step are NaN, the
    NaN torch's vector loops keep, and bfloat16's NaN 0xffff, where torch's scalar tail
    keeps the other NaN and rounds to 0x7fc0; docs/hf_patch.md, "Not done": the interleave
    and half forms' x1 * cos + (-x2) * sin); with SINPE_FUZZ_STRICT_NAN=1 only the latter,
    a NaN's sign in those two forms, in float32 and float16."""
    if STRICT_NAN:
        return "sign" if form in NAN_SIGN_FORMS else None
    return "core"


def _verdict(want, got, names, nan_rule):
    """None when got is want (the same exception type at the same stage, or the same
    outputs, requires_grad flags and gradients, bit for bit), else what differs."""
    if want[0] == "raise" or got[0] == "raise":
        if want[0] != got[0] or want[1:3] != got[1:3]:
            return f"transformers {_said(want)}; sinpe {_said(got)}"
        return None
    if len(want[1]) != len(got[1]):
        return f"{len(want[1])} outputs against {len(got[1])}"
    for i, (w, g) in enumerate(zip(want[1], got[1])):
        d = diff_bits(w, g, nan_rule)
        if d:
            return f"output {i} differs: {d} ({_first_diffs(w, g)})"
    if want[3] != got[3]:
        return f"outputs' requires_grad {want[3]} against {got[3]}"
    for n, w, g in zip(names, want[2], got[2]):
        d = diff_bits(w, g)  # (gradients are transformers' graph's, NaNs included)
        if d:
            return f"{n}.grad differs: {d} ({_first_diffs(w, g)})"
    return None


# ---- patch state sequences ----------------------------------------------------------------------

#: name -> (model type, rope_parameters or None, other config values)
MODELS = {
    "llama": ("llama", None, {}),
    "llama_yarn": ("llama", {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0,
                             "original_max_position_embeddings": 32}, {}),
    "qwen2_linear": ("qwen2", {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}, {}),
    "qwen2_dynamic": ("qwen2", {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0},
                      {"max_position_embeddings": 16}),
    "gemma3_text": ("gemma3_text", None, {}),
    "olmo": ("olmo", None, {}),
    "gpt_oss": ("gpt_oss", None, {}),
}
_POOL = {}
TARGETS = ["", "model", "model.layers.0", "model.layers.1", "model.layers.0.self_attn",
           "model.rotary_emb", "lm_head", "model.embed_tokens"]
EDIT_KEYS = ["factor", "attention_factor", "rope_theta", "partial_rotary_factor", "beta_fast",
             "beta_slow", "original_max_position_embeddings", "rope_type", "mscale",
             "truncate"]
EDIT_VALUES = [8.0, 0.5, 16.0, 500.0, 1.0, 0.0, -1.0, 3.0, 64, 8, float("nan"),
               float("inf"), "linear", "dynamic", None, True, 1e30]
ATTRS = ["head_dim", "partial_rotary_factor", "max_position_embeddings", "rope_theta",
         "hidden_size", "num_attention_heads"]
ATTR_VALUES = [8, 32, 0.5, 16, 4096, 1.0, 500.0, None]
REPLACEABLE = ["eager_attention_forward", "repeat_kv", "apply_rotary_pos_emb", "rotate_half",
               "_apply_rotary_emb"]
#: names a replacement may change the results of (the routed rotations stay sinpe's forms:
#: docs/hf_patch.md, "Live globals")
CHANGEABLE = {"eager_attention_forward", "repeat_kv"}
HOWS = ["spy", "wraps", "double"]
DTYPE_NAMES = ["bfloat16", "float32", "float16"]
OPS = ["patch", "unpatch", "deepcopy", "pickle", "save", "to", "edit", "attr", "replace",
       "forward", "generate", "train"]


def pool_model(name):
    """A tiny model of the pool, built once per process (callers deep-copy it)."""
    if name not in _POOL:
        mt, rope, extra = MODELS[name]
        cfg = H.tiny_config(mt)
        if rope is not None:
            cfg.rope_parameters = dict(rope)
        for k, v in extra.items():
            setattr(cfg, k, v)
        from transformers import AutoModelForCausalLM
        torch.manual_seed(0)
        _POOL[name] = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    return _POOL[name]


def _norm_sequence(case):
    _need(_isin(case.get("model"), MODELS), "model")
    ops = case.get("ops")
    _need(isinstance(ops, list) and 1 <= len(ops) <= 12, "ops")
    for op in ops:
        _need(isinstance(op, list) and op and op[0] in OPS, "op")
        k, a = op[0], op[1:]
        if k in ("patch", "unpatch"):
            _need(len(a) == 1 and a[0] in TARGETS, "target")
        elif k == "to":
            _need(len(a) == 1 and a[0] in DTYPE_NAMES, "dtype")
        elif k == "edit":
            _need(len(a) == 3 and a[0] in EDIT_KEYS and type(a[2]) is int
                  and (a[1] in EDIT_VALUES or type(a[1]) in (int, float)), "edit")
        elif k == "attr":
            _need(len(a) == 2 and a[0] in ATTRS and (a[1] in ATTR_VALUES
                                                      or type(a[1]) in (int, float)), "attr")
        elif k == "replace":
            _need(len(a) == 2 and a[0] in REPLACEABLE and a[1] in HOWS
                  and (a[1] != "double" or a[0] in CHANGEABLE), "replace")
        elif k in ("forward", "train"):
            _need(len(a) == 3 and all(type(v) is int for v in a) and a[0] in (1, 2)
                  and a[1] in (1, 3, 8, 24, 40), "ids")
        elif k == "generate":
            _need(len(a) == 1 and type(a[0]) is int and a[0] in (1, 2, 4), "tokens")
        else:
            _need(not a, "no arguments")


def _has_patch(m):
    return any(isinstance(v, _patch_state.Patched) for v in m.__dict__.values()) \
        or _torch_patch._KEPT in m.__dict__


def _state(model):
    """Which attribute of which module holds which Patched (by identity)."""
    return sorted((name, attr, id(v)) for name, m in model.named_modules()
                  for attr, v in m.__dict__.items()
                  if isinstance(v, _patch_state.Patched) or attr == _torch_patch._KEPT)


def _consistent(model, where):
    has = any(_has_patch(m) for m in model.modules())
    recs = st.patched(model)
    if (recs == []) == has:
        raise Finding(f"after {where}: patched() is {'[]' if not recs else 'not []'} where "
                      f"{'a' if has else 'no'} module holds a Patched attribute")
    return recs


def _sub(model, path):
    try:
        return model.get_submodule(path) if path else model
    except AttributeError:
        return None


def _ids(model, batch, length, seed):
    g = torch.Generator().manual_seed(seed & 0xFFFFFFFF)
    vocab = int(getattr(model.config, "vocab_size", 128) or 128)
    return torch.randint(3, max(4, min(vocab, 128)), (batch, length), generator=g)


def _outcome(f):
    try:
        return ("ok", f())
    except Exception as e:  # noqa: BLE001  (compared with the twin's)
        return ("raise", type(e).__name__, str(e)[:300])


def _compare(what, want, got):
    if want[0] != got[0] or (want[0] == "raise" and want[1] != got[1]):
        def said(r):
            return f"raised {r[1]} ({r[2][:200]})" if r[0] == "raise" else "returned"
        raise Finding(f"{what}: the twin {said(want)}; the patched model {said(got)}")
    if want[0] == "raise":
        return
    ws, gs = want[1], got[1]
    if len(ws) != len(gs):
        raise Finding(f"{what}: {len(ws)} tensors against {len(gs)}")
    for i, (w, g) in enumerate(zip(ws, gs)):
        d = diff_bits(w, g)
        if d:
            raise Finding(f"{what}: tensor {i} differs: {d} ({_first_diffs(w, g)})")


def _forward(model, ids):
    with torch.no_grad():
        torch.manual_seed(0)
        return [model(input_ids=ids).logits]


def _generate(model, n):
    ids = _ids(model, 1, 6, 5)
    torch.manual_seed(0)
    out = model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                         attention_mask=torch.ones_like(ids), pad_token_id=0,
                         output_scores=True, return_dict_in_generate=True)
    return [out.sequences] + list(out.scores)


def _train(model, ids):
    model.zero_grad(set_to_none=True)
    try:
        with torch.enable_grad():
            torch.manual_seed(0)
            model(input_ids=ids).logits.float().square().mean().backward()
        return [p.grad for _, p in model.named_parameters()]
    finally:
        model.zero_grad(set_to_none=True)


def _rope_dicts(cfg):
    rp = getattr(cfg, "rope_parameters", None)
    if not isinstance(rp, dict):
        return []
    nested = [v for v in rp.values() if isinstance(v, dict)]
    return nested or [rp]


def _edit(model, key, value, which):
    dicts = _rope_dicts(model.config)
    if dicts:
        d = dicts[which % len(dicts)]
        d[key] = value  # in place: the config's own dict


def _replace(module, name, how, saved):
    orig = getattr(module, name, None)
    if not callable(orig):
        return
    saved.append((name, orig))

    def spy(*a, **kw):
        return orig(*a, **kw)

    if how == "wraps":
        spy = functools.wraps(orig)(spy)
    elif how == "double":
        def spy(*a, **kw):  # noqa: F811  (a replacement that changes the result)
            out = orig(*a, **kw)
            return (out[0] * 2,) + tuple(out[1:]) if isinstance(out, tuple) else out * 2
    setattr(module, name, spy)


def _clone(model, how):
    if how == "deepcopy":
        return copy.deepcopy(model)
    if how == "pickle":
        return pickle.loads(pickle.dumps(model))
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


def run_sequence(case):
    _norm_sequence(case)
    base = pool_model(case["model"])
    model, twin = copy.deepcopy(base), copy.deepcopy(base)
    module = sys.modules[type(base).__module__]
    saved = []
    try:
        for step, op in enumerate(case["ops"]):
            model, twin = _op(model, twin, op, module, saved, f"op {step} {op}")
    finally:
        for name, orig in reversed(saved):
            setattr(module, name, orig)


def _op(model, twin, op, module, saved, where):
    """One operation on the patched model and (but patch/unpatch) on the twin; the pair
    after it (a copy replaces both)."""
    k, a = op[0], op[1:]
    if k in ("patch", "unpatch"):
        target = _sub(model, a[0])
        if target is not None:
            (_patch if k == "patch" else _unpatch)(model, target, where)
    elif k in ("deepcopy", "pickle", "save"):
        recs = _consistent(model, where)
        state = _state(model)
        new_model, new_twin = _clone(model, k), _clone(twin, k)
        if st.patched(new_model) != recs:
            raise Finding(f"{where}: the copy's patched() differs from its original's")
        if _state(model) != state:
            raise Finding(f"{where}: copying changed the original")
        if st.patched(new_twin):
            raise Finding(f"{where}: a copy of the unpatched twin is patched")
        model, twin = new_model, new_twin
    elif k == "to":
        model.to(DTYPES[a[0]])
        twin.to(DTYPES[a[0]])
    elif k == "edit":
        _edit(model, *a)
        _edit(twin, *a)
    elif k == "attr":  # (the config's validators may refuse the value: both alike)
        _compare(where, _outcome(lambda: setattr(twin.config, a[0], a[1]) or []),
                 _outcome(lambda: setattr(model.config, a[0], a[1]) or []))
    elif k == "replace":
        _replace(module, a[0], a[1], saved)
    elif k in ("forward", "train"):
        ids = _ids(twin, *a)
        f = _forward if k == "forward" else _train
        _compare(where, _outcome(lambda: f(twin, ids)), _outcome(lambda: f(model, ids)))
    elif k == "generate":
        _compare(where, _outcome(lambda: _generate(twin, a[0])),
                 _outcome(lambda: _generate(model, a[0])))
    _consistent(model, where)
    return model, twin


def _patch(model, target, where):
    before = _state(model)
    try:
        st.patch(target)
    except NotImplementedError:  # refused: nothing changed
        if _state(model) != before:
            raise Finding(f"{where}: a refused patch changed the model") from None
        return
    if not st.patched(target):
        raise Finding(f"{where}: patch succeeded and patched() is []")


def _unpatch(model, target, where):
    st.unpatch(target)
    left = [n for n, m in target.named_modules() if _has_patch(m)]
    if left:
        raise Finding(f"{where}: unpatch left Patched attributes in {left}")
    if target is model and any("forward" in m.__dict__ for m in model.modules()):
        raise Finding(f"{where}: unpatch of the model left an instance forward")


# ---- messages ------------------------------------------------------------------------------

NOT_MODULES = {"int": 7, "none": None, "str": "model", "list": [], "dict": {}, "float": 1.5,
               "bytes": b"x", "tensor": torch.zeros(2), "object": object(),
               "class": torch.nn.Linear, "lambda": lambda x: x, "config": None,
               "state_dict": None, "array": np.zeros(2), "bool": True}
NOT_STR = {"int": 1, "float": 1.5, "bool": True, "bytes": b"torch", "list": ["torch"],
           "object": object(), "dtype": torch.float32, "dict": {"backend": "torch"}}
BACKEND_STRS = ["bogus", "", "builtin", "torch", "numpy-2.4", "sleef", "auto", "mkl", "TORCH",
                "torch "]


def _norm_messages(case):
    _need(case.get("fn") in ("patch", "unpatch", "patched"), "fn")
    _need(isinstance(case.get("model"), str) and (case["model"] in NOT_MODULES
                                                   or case["model"] in MODELS
                                                   or case["model"] == "linear"), "model")
    b = case.get("backend")
    _need(b is None or (isinstance(b, str) and b in NOT_STR)
          or (isinstance(b, dict) and b.get("str") in BACKEND_STRS), "backend")


def _not_module(name):
    if name == "config":
        return pool_model("llama").config
    if name == "state_dict":
        return {"w": torch.zeros(1)}
    return NOT_MODULES[name]


def run_messages(case):
    _norm_messages(case)
    fn_name, name, b = case["fn"], case["model"], case.get("backend")
    fn = getattr(st, fn_name)
    kw = {}
    if fn_name == "patch" and b is not None:
        kw["backend"] = NOT_STR[b] if isinstance(b, str) else b["str"]
    if name in NOT_MODULES:  # checked first: a TypeError naming model
        try:
            fn(_not_module(name), **kw)
        except TypeError as e:
            if "model" not in str(e):
                raise Finding(f"{fn_name}({name}): a TypeError not naming model: {e}") from None
            return
        raise Finding(f"{fn_name}({name}) raised nothing")
    model = torch.nn.Linear(2, 2) if name == "linear" else copy.deepcopy(pool_model(name))
    before = _state(model)
    if isinstance(b, str) and fn_name == "patch":  # backend not a str: a TypeError naming it
        try:
            fn(model, **kw)
        except TypeError as e:
            if "backend" not in str(e):
                raise Finding(f"patch(backend={kw['backend']!r}): a TypeError not naming "
                              f"backend: {e}") from None
            if _state(model) != before:
                raise Finding("patch raised TypeError and changed the model") from None
            return
        raise Finding(f"patch(backend={kw['backend']!r}) raised nothing")
    if fn_name == "patched":
        if fn(model) != []:
            raise Finding("patched() of an unpatched model is not []")
        return
    if fn_name == "unpatch":
        if fn(model) is not model or _state(model) != before:
            raise Finding("unpatch of an unpatched model changed it or returned another")
        return
    # a backend is checked first (a name refused, or a library not installed: ValueError,
    # RuntimeError, naming backend=), then the model (no rotary: NotImplementedError)
    refusals = ((ValueError, RuntimeError) if kw.get("backend") is not None else ()) + \
        ((NotImplementedError,) if name == "linear" else ())
    try:
        out = fn(model, **kw)
    except refusals as e:  # a model with no rotary; a backend name refused (or unavailable)
        if _state(model) != before:
            raise Finding(f"patch raised {type(e).__name__} and changed the model") from None
        if isinstance(e, (ValueError, RuntimeError)) and not isinstance(e, NotImplementedError) \
                and "backend=" not in str(e):
            raise Finding(f"patch raised {type(e).__name__} not naming backend=: {e}") from None
        return
    if out is not model or not st.patched(model):
        raise Finding("patch returned another object, or patched() is []")
    twin = copy.deepcopy(pool_model(name))
    st.unpatch(model)
    if any(_has_patch(m) for m in model.modules()):
        raise Finding("unpatch left a Patched attribute")
    ids = _ids(twin, 2, 8, 1)
    _compare("patch then unpatch", _outcome(lambda: _forward(twin, ids)),
             _outcome(lambda: _forward(model, ids)))


# ---- framework aliases -------------------------------------------------------------------------

FRAMEWORKS = sorted(records.FRAMEWORKS)
RELEASES = ["2.4.6", "2.4.0", "2.4", "2.4.0rc1", "2.4rc1", "2.4.6+cpu", "2.4.post1", "2.4.dev0",
            "1.26.4", "2.5.0rc1", "2.21.0", "2.20.0", "2.21.0rc0", "2.21rc0", "0.10.2", "0.10",
            "0.10rc1", "0.9.2", "0.11.0", "1.32.1", "1.31.0", "1.4.2", "1.32", "1.32.0a1", "2",
            "10.2.0", "", "x", "2.04.1", "v2.4.1", " 2.4.1", "2!2.4.0", "2.4.6.1.2", None]
CALLS = ["plain", "profile", "elementwise", "set_backend", "numerics", "resolve"]


def _norm_framework(case):
    _need(_isin(case.get("framework"), FRAMEWORKS), "framework")
    v = case.get("version")
    _need(v is None or (isinstance(v, str) and len(v) <= 40), "version")
    calls = case.get("calls")
    _need(isinstance(calls, list) and 1 <= len(calls) <= 8 and all(c in CALLS for c in calls),
          "calls")


def _measured(fw, version):
    """Whether the oracle calls version a measured release of fw: PEP 440 versions in their
    canonical spelling (as metadata carries them), final (no pre-release, no development
    release: builds from before the release measured; post releases and local versions are
    that release) and of epoch 0, whose release's major.minor is the profile's; None: a
    spelling no metadata carries (either answer is taken)."""
    if version is None:
        return False
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return None
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    if str(v) != version:
        return None
    rels = {tuple(int(x) for x in r.split(".")) for p in records.FRAMEWORKS[fw].values()
            for r in records.releases(p)}  # every profile's measured releases
    return v.epoch == 0 and not v.is_prerelease and tuple((v.release + (0, 0))[:2]) in rels


@contextlib.contextmanager
def _fresh_release(fw, version):
    """Nothing warned, resolved or kept yet, and fw's installed release faked (None: not
    installed); everything restored afterwards."""
    saved = (set(sinpe._warn._WARNED), dict(policy._OPTS_CACHE), dict(records._RELEASES),
             records._installed, policy._STATE["backend"])
    dists = list(records.FRAMEWORKS[fw].values())[-1][1]
    real = records._installed
    sinpe.clear_cache()
    sinpe._warn._WARNED.clear()
    policy._OPTS_CACHE.clear()
    records._RELEASES.clear()
    records._installed = lambda d: version if d == dists else real(d)
    try:
        yield
    finally:
        records._installed = saved[3]
        sinpe._warn._WARNED.clear()
        sinpe._warn._WARNED.update(saved[0])
        policy._OPTS_CACHE.clear()
        policy._OPTS_CACHE.update(saved[1])
        records._RELEASES.clear()
        records._RELEASES.update(saved[2])
        policy._STATE["backend"] = saved[4]
        sinpe.clear_cache()


def run_framework(case):
    _norm_framework(case)
    fw, version = case["framework"], case.get("version")
    profile = list(records.FRAMEWORKS[fw])[-1]
    measured = _measured(fw, version)
    with _fresh_release(fw, version):
        for i, c in enumerate(case["calls"]):
            with warnings.catch_warnings(record=True) as rec:
                warnings.simplefilter("always")
                if c == "plain":
                    sinpe.positional_encoding(4, 8, backend=fw)
                elif c == "profile":
                    sinpe.positional_encoding(4, 8, backend=profile)
                elif c == "elementwise":
                    sinpe.elementwise("sin", np.ones(5, np.float32), backend=fw)
                elif c == "set_backend":
                    sinpe.set_backend(fw)
                    sinpe.positional_encoding(3, 4)
                elif c == "numerics":
                    sinpe.set_backend(profile)
                    sinpe.numerics()
                else:
                    policy.resolve(profile)
            ws = [w for w in rec if issubclass(w.category, sinpe.SinpeWarning)]
            first_plain = c in ("plain", "elementwise", "set_backend") and not any(
                p in ("plain", "elementwise", "set_backend") for p in case["calls"][:i])
            if len(ws) > 1 or (ws and not first_plain):
                raise Finding(f"call {i} ({c}): {len(ws)} warnings "
                              f"({[str(w.message) for w in ws]}) for {fw} {version!r}")
            if ws and version is not None and (f"{version} is installed" not in
                                               str(ws[0].message)
                                               or profile not in str(ws[0].message)):
                raise Finding(f"the warning names neither {version!r} nor {profile}: "
                              f"{ws[0].message}")
            if first_plain and measured is not None and bool(ws) != (
                    version is not None and not measured):
                said = "measured" if measured else "not measured"
                raise Finding(f"{fw} {version!r} installed ({said} by its PEP 440 release): "
                              f"{len(ws)} warnings at its plain name")


# ---- the fuzzer's choices ----------------------------------------------------------------------

class Gen:
    """Choices from the fuzzed bytes (0 once they run out)."""

    def __init__(self, data):
        self.data, self.i = data, 0

    def below(self, n):
        if n <= 1:
            return 0
        width = 1 if n <= 256 else 2
        chunk = self.data[self.i:self.i + width]
        self.i += width
        return int.from_bytes(chunk.ljust(width, b"\0"), "little") % n

    def pick(self, seq):
        return seq[self.below(len(seq))]

    def flag(self):
        return self.below(2) == 1


def _draw_tensor(g, shape, dtype, kind="randn", seed=None):
    spec = {"shape": list(shape), "dtype": dtype,
            "layout": g.pick(["c", "c", "c"] + LAYOUTS), "kind": kind,
            "seed": g.below(1 << 16) if seed is None else seed,
            "scale": g.pick(["1", "1", "angle"] + list(SCALES))}
    if spec["layout"] == "expand":
        spec["axis"] = g.below(8)
    n = g.pick([0, 0, 0, 1, 2, 4, 9])
    if n:
        spec["specials"] = [[g.below(1 << 16), g.pick(SPECIAL_NAMES)] for _ in range(n)]
    return spec


def draw_form(g):
    ref = g.pick([r[0] for r in REFS] * 2 + [r[0] for r in COPIES])
    form = REF[ref][2]
    single = form.endswith("single")
    d = g.pick([16, 8, 4, 2, 6, 32, 64, 0, 1, 3, 5, 18])
    b, h, hk, s = g.pick([2, 1, 0, 3]), g.pick([4, 2, 1, 0, 3]), g.pick([2, 1, 4, 0]), \
        g.pick([5, 1, 8, 0, 2, 17])
    natural = d // 2 if form.endswith("half") else d
    width = g.pick(["natural"] * 4 + ["partial", "one", "odd", "wide", "zero", "two"])
    r = {"natural": natural, "partial": (d // 4) * 2, "one": 1, "odd": max(d - 1, 0),
         "wide": d + 2, "zero": 0, "two": 2}[width]
    lay = g.pick(["bhsd", "bhsd", "bshd", "3d", "2d", "5d"])
    if lay == "bhsd":
        qs, ks, cs, ud = (b, h, s, d), (b, hk, s, d), [b, s, r], 1
    elif lay == "bshd":
        qs, ks, cs, ud = (b, s, h, d), (b, s, hk, d), [b, s, r], 2
    elif lay == "3d":
        qs, ks, cs, ud = (h, s, d), (hk, s, d), [s, r], 0
    elif lay == "2d":
        qs, ks, cs, ud = (s, d), (s, d), [s, r], 0
    else:
        qs, ks, cs, ud = (2, b, h, s, d), (2, b, hk, s, d), [2, b, s, r], 2
    bc = g.pick(["full"] * 3 + ["b1", "nob", "s1", "one"])
    if bc == "b1" and len(cs) >= 3:
        cs[-3] = 1
    elif bc == "nob" and len(cs) >= 3:
        cs, ud = cs[-2:], ud - (len(cs) - 2)
    elif bc == "s1":
        cs[-2] = 1
    elif bc == "one":
        cs, ud = cs[-1:], 0
    if not g.flag() and not g.flag():
        ud = g.pick(UNSQUEEZE)
    qd = g.pick(["float32", "bfloat16", "float16", "float64"])
    kd = qd if g.below(8) else g.pick(sorted(DTYPES))
    cd = g.pick([qd, qd, "float32"] + sorted(DTYPES))
    sd = cd if g.below(8) else g.pick(sorted(DTYPES))
    kind = g.pick(["cos", "cos", "randn"])
    seed = g.below(1 << 16)
    case = {"entry": "form", "ref": ref, "via": g.pick(["public", "route"]),
            "call": g.pick(["pos", "pos", "kw", "default", "allkw", "extra"]),
            "unsqueeze_dim": ud}
    if single:
        case["x"] = _draw_tensor(g, qs, qd)
    else:
        case["q"] = _draw_tensor(g, qs, qd)
        case["k"] = _draw_tensor(g, ks, kd)
    case["cos"] = _draw_tensor(g, cs, cd, kind, seed)
    case["sin"] = _draw_tensor(g, cs, sd, "sin" if kind == "cos" else kind,
                               seed if g.below(4) else None)
    n = 3 if single else 4
    case["requires_grad"] = [g.flag() for _ in range(n)]
    case["mode"] = g.pick(["grad", "grad", "no_grad", "inference"])
    case["ctx"] = g.pick(["plain", "plain", "plain"] + CTXS[1:])
    case["cot"] = {"kind": g.pick(["randn", "randn", "zeros", "specials", "ones"]),
                   "seed": g.below(1 << 16)}
    return case


def draw_sequence(g):
    ops = []
    if g.below(4):
        ops.append(["patch", ""])
    for _ in range(g.below(8) + 1):
        k = g.pick(OPS + ["forward", "forward", "patch"])
        if k in ("patch", "unpatch"):
            ops.append([k, g.pick(["", "", "model"] + TARGETS)])
        elif k == "to":
            ops.append([k, g.pick(DTYPE_NAMES)])
        elif k == "edit":
            ops.append([k, g.pick(EDIT_KEYS), g.pick(EDIT_VALUES), g.below(4)])
        elif k == "attr":
            ops.append([k, g.pick(ATTRS), g.pick(ATTR_VALUES)])
        elif k == "replace":
            name = g.pick(REPLACEABLE)
            how = g.pick(HOWS if name in CHANGEABLE else HOWS[:2])
            ops.append([k, name, how])
        elif k in ("forward", "train"):
            ops.append([k, g.pick([2, 1]), g.pick([8, 24, 1, 3, 40]), g.below(1 << 16)])
        elif k == "generate":
            ops.append([k, g.pick([2, 1, 4])])
        else:
            ops.append([k])
    ops.append(["forward", 2, g.pick([8, 24, 40]), g.below(1 << 16)])
    return {"entry": "patch_sequence", "model": g.pick(sorted(MODELS)), "ops": ops[:12]}


def draw_messages(g):
    fn = g.pick(["patch", "unpatch", "patched"])
    case = {"entry": "messages", "fn": fn}
    what = g.below(4)
    if what == 0:
        case["model"] = g.pick(sorted(NOT_MODULES))
        if fn == "patch" and g.flag():
            case["backend"] = g.pick(sorted(NOT_STR))
    elif what == 1 and fn == "patch":
        case["model"] = g.pick(["linear", "llama"])
        case["backend"] = g.pick(sorted(NOT_STR))
    else:
        case["model"] = g.pick(["linear", "llama", "olmo"])
        if fn == "patch":
            case["backend"] = {"str": g.pick(BACKEND_STRS)}
    return case


def draw_framework(g):
    return {"entry": "framework", "framework": g.pick(FRAMEWORKS), "version": g.pick(RELEASES),
            "calls": [g.pick(CALLS) for _ in range(g.below(4) + 1)]}


ENTRIES = {"form": run_form, "patch_sequence": run_sequence, "messages": run_messages,
           "framework": run_framework}
#: the fuzzer's draws, weighted by their cost: a form case takes milliseconds, a sequence
#: up to a second
DRAWS = [draw_form] * 12 + [draw_sequence] * 2 + [draw_messages, draw_framework]


def run_json(case, strict=False):
    """Check one case (a dict).  strict: a case that describes nothing is an error (the
    suite's replay); otherwise it is ignored (a mutated corpus file)."""
    train_min = _torch_forms._TRAIN_MIN
    try:
        _need(isinstance(case, dict) and _isin(case.get("entry"), ENTRIES), "entry")
        # a training call (q or k requiring grad) takes the core's forward and the captured
        # backward from _TRAIN_MIN values on: the fuzzer's tensors are small, so a case runs
        # that way at every size unless it says "way": "graph" (or, drawn, by its text's
        # parity: both ways are fuzzed)
        way = case.get("way")
        if way is None:
            way = "graph" if len(json.dumps(case, sort_keys=True)) % 2 else "captured"
        if way == "captured":
            _torch_forms._TRAIN_MIN = 0
        ENTRIES[case["entry"]](case)
    except Malformed:
        if strict:
            raise
    except Exception as e:
        if not isinstance(e, Finding):
            e = Finding(f"{type(e).__name__}: {e}")
        if FINDINGS and not strict:  # a campaign that collects findings and goes on
            with open(FINDINGS, "a") as f:
                f.write(json.dumps({"finding": str(e)[:2000], "case": case}) + "\n")
            return
        sys.stderr.write(f"\nfinding: {e}\ncase: {json.dumps(case)}\n")
        raise e
    finally:
        _torch_forms._TRAIN_MIN = train_min


def TestOneInput(data):
    if data[:1] == b"{":
        try:
            case = json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return
        run_json(case)
        return
    g = Gen(data)
    run_json(g.pick(DRAWS)(g))


def main():
    torch.set_num_threads(1)
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
