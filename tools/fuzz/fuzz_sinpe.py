"""Coverage-guided fuzzing of every public entry point of sinpe (atheris, libFuzzer).

One invariant for every call: either a documented exception (TypeError, ValueError,
OverflowError, MemoryError, RuntimeError; IndexError for a preset's padding_idx) with every
input's bytes untouched, or the right result: for tables and in-place adds the model (the
reference formula computed by torch in this process: bit for bit on the backends with
torch's bits, within one unit in the last place on the built-in one), and for every call
nothing written outside the destination (each buffer lives inside a larger one whose other
bytes are compared).  A crash, a sanitizer report or any other exception is a finding.

The fuzzed bytes choose an entry point and its arguments from menus of hostile values
(sizes near the int64 and memory edges, NaN/inf/negative bases, every buffer layout and
exporter, wrong types).  A corpus file whose first byte is "{" is instead a JSON case
(tools/fuzz/corpus/*.json: the issue-17 cases and the suite's hostile classes), decoded by
`decode` below and checked the same way.

Build and run (tools/fuzz/run.sh does both; docs/testing.md):
    CC=clang-14 CFLAGS="-fsanitize=fuzzer-no-link,address,undefined" pip install .
    LD_PRELOAD=$(python -c 'import atheris; print(atheris.path())')/asan_with_fuzzer.so \
        python tools/fuzz/fuzz_sinpe.py tools/fuzz/corpus -max_total_time=60
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import re
import sys

try:
    import atheris
except ImportError:  # the suite replays the JSON corpus without it
    atheris = None

with atheris.instrument_imports() if atheris else contextlib.nullcontext():
    import sinpe
    from sinpe import presets as P

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))

try:
    import torch
except ImportError:  # the models need torch: without it only the invariants on inputs hold
    torch = None

DOCUMENTED = (TypeError, ValueError, OverflowError, MemoryError, RuntimeError)
BIG = 1 << 22  # calls that would really compute more than this many values are skipped

INTS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 63, 64, 100, 511, 512, 4096, -1, -2, -3,
        2**31, 2**32, 2**40, 2**62, 2**63 - 2, 2**63 - 1, 2**63, -2**63, 10**30, True, False,
        2.5, 8.0, "8", None, np.int64(6), np.int32(-3), np.uint64(2**63), np.int8(4), 1j]
REALS = [10000.0, 1.0001, 500000.0, 2, 10, 0.5, 0, -1, float("nan"), float("inf"),
         -float("inf"), 1e308, 1e-320, 1e30, "1e4", True, 1j, None, np.float32(10),
         np.float16(3), np.float64(-0.0), 2**1100]
DTYPES = [None, "float32", "float16", "bfloat16", "float64", "f4", "e", "d", float, np.float16,
          "int32", "c8", ">f4", object, "bogus", "float"]
BACKENDS = [None, "builtin", "torch", "mkl", "sleef", "torch-aarch64-2.15", "bogus", 3, "auto"]
THREADS = [None, 1, 2, 3, 0, 257, -1, True, 2.0]
ARRAY_TYPES = [np.float32, np.float16, np.float64, "bfloat16", np.int32, np.int64, np.uint8,
               np.complex64, bool]
LAYOUTS = ["c", "t", "rev", "step", "zero", "overlap", "unaligned", "readonly", "memoryview",
           "ctypes", "list", "empty", "tensor", "dlpack", "param", "subclass"]
if torch is not None:
    DTYPES += [torch.float16, torch.bfloat16, torch.float64, torch.int32]


class Finding(AssertionError):
    pass


class TooBig(Exception):
    """A valid call that would really allocate more than HUGE bytes: not run (the fuzzer's
    RSS limit is below this machine's memory, which the core's memory rule admits)."""


HUGE = 1 << 30


def _guarded_admit(admit):
    def guarded(shape, opts, noun="a table", dtype=None):
        admit(shape, opts, noun, dtype)  # the rule first: its refusals are what is fuzzed
        size = int(np.prod([int(n) for n in shape], dtype=object))
        if size * 8 > HUGE:
            raise TooBig(noun)
    return guarded


J = sys.modules["sinpe._jobs"]
J._admit = _guarded_admit(J._admit)
for _name in ("sinpe.presets", "sinpe._rope"):  # their own references to it
    sys.modules[_name]._admit = J._admit
_freq_job = J.freq_job


def _guarded_freq_job(core, kind, n, **kw):  # a preset's frequency vector (float32/64)
    if isinstance(n, int) and n * 8 > HUGE:
        raise TooBig("frequencies")
    return _freq_job(core, kind, n, **kw)


J.freq_job = _guarded_freq_job


# ---- buffers inside guarded bases ---------------------------------------------------------

def _dtype(t):
    if t == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(t)


def _tensor_view(v):
    """A torch tensor on v's memory, with its strides (bfloat16 through int16), or v when
    torch cannot view it (zero or overlapping strides are still its to take)."""
    try:
        if v.dtype.name == "bfloat16":
            return torch.from_numpy(v.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(v)
    except (TypeError, ValueError, RuntimeError):
        return v


class _DLPackOnly:
    """An exporter of DLPack alone (as JAX's or CuPy's arrays), over a NumPy array."""

    def __init__(self, a):
        self.a = a
        self.shape = a.shape

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


if torch is not None:
    class _Sub(torch.Tensor):
        """A torch.Tensor subclass of the user's."""


class Buffer:
    """An array (or exporter) whose bytes lie inside a larger base, with its layout."""

    def __init__(self, shape, t, layout, fill):
        dt = _dtype(t)
        self.layout, self.dt = layout, dt
        n = int(np.prod(shape)) if shape else 1
        pad = 64
        self.base = np.frombuffer(bytearray(fill(2 * n * dt.itemsize + 4 * pad + 8)), np.uint8).copy()
        off = pad + (1 if layout == "unaligned" else 0)
        c = np.ndarray(shape, dt, buffer=self.base, offset=off)
        if layout == "t" and len(shape) >= 2:
            v = np.ndarray(shape[::-1], dt, buffer=self.base, offset=off).T
        elif layout == "rev" and shape and shape[0] > 0:
            v = c[::-1]
        elif layout == "step" and shape:
            v = np.ndarray(shape, dt, buffer=self.base, offset=off,
                           strides=tuple(2 * s for s in c.strides)) if 2 * n * dt.itemsize + off <= self.base.size else c
        elif layout == "zero" and len(shape) >= 2:
            v = np.lib.stride_tricks.as_strided(c, shape, (0,) + c.strides[1:])
        elif layout == "overlap" and len(shape) >= 2:
            v = np.lib.stride_tricks.as_strided(c, shape, (dt.itemsize,) + c.strides[1:])
        else:
            v = c
        self.array = v
        if layout == "readonly":
            v.flags.writeable = False
        if layout == "memoryview" and dt.kind == "f" and dt.name != "bfloat16":
            self.obj = memoryview(v)
        elif layout == "ctypes" and dt == np.float32 and v.flags.c_contiguous:
            self.obj = (ctypes.c_float * max(v.size, 1)).from_buffer(self.base, off)
            if v.size == 0:
                self.obj = v
        elif layout == "list":
            self.obj = v.tolist()
        elif layout in ("tensor", "dlpack") and torch is not None and v.flags.writeable:
            self.obj = _tensor_view(v) if layout == "tensor" else _DLPackOnly(v)
        elif layout in ("param", "subclass") and torch is not None and v.flags.writeable:
            t = _tensor_view(v)  # an nn.Parameter without grad, or any torch.Tensor subclass
            if isinstance(t, torch.Tensor):
                t = torch.nn.Parameter(t, requires_grad=False) if layout == "param" \
                    else t.as_subclass(_Sub)
            self.obj = t
        else:
            self.obj = v
        self.snapshot = self.base.tobytes()

    def untouched(self):
        return self.base.tobytes() == self.snapshot

    def element_bytes(self):
        """The byte offsets (in base) of every element of the view, or None if elements
        share bytes."""
        a = self.array
        if a.size == 0:
            return set()
        start = a.__array_interface__["data"][0] - self.base.__array_interface__["data"][0]
        idx = np.indices(a.shape).reshape(a.ndim, -1).T
        offs = start + idx @ np.array(a.strides, dtype=np.int64)
        spans = set()
        for o in offs.tolist():
            for b in range(o, o + a.itemsize):
                if b in spans:
                    return None
                spans.add(b)
        return spans


# ---- models -------------------------------------------------------------------------------

def torch_table(pos, d, base):
    div = torch.exp(torch.arange(0, d, 2).float() * (-math.log(base) / d))
    ang = torch.as_tensor(np.asarray(pos)).float()[..., None] * div
    pe = torch.empty(ang.shape[:-1] + (d,))
    pe[..., 0::2] = torch.sin(ang)
    pe[..., 1::2] = torch.cos(ang)
    return pe


def to_dtype(t, dt):
    if dt.name == "bfloat16":
        import ml_dtypes
        return t.bfloat16().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.to({np.dtype(np.float32): torch.float32, np.dtype(np.float16): torch.float16,
                 np.dtype(np.float64): torch.float64}[dt]).numpy()


def angle_scale(positions, d, base):
    """Per element, 1 + |angle|: a backend whose divisors differ from torch's in the last bit
    moves the angle p * div by up to |p * div| units of its last place (docs/numerics.md),
    and the value by that many ulps; divisors pass 1 when base < 1, so not |p| alone."""
    p = np.abs(np.asarray(positions, np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        div = np.exp(np.arange(0, d, 2, dtype=np.float64) * (-math.log(base) / d))
        ang = np.repeat(p[..., None] * div, 2, axis=-1)[..., :d]
    return 1.0 + np.nan_to_num(ang, nan=0.0, posinf=1e300)


def diff_report(got, want, x0=None, n=6):
    """The first n elements that differ, as bit patterns (and x's before an add)."""
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape or g.dtype != w.dtype or not g.size:
        return ""
    u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[g.dtype.itemsize]
    gb, wb = g.view(u), w.view(u)
    idx = np.argwhere(gb != wb)[:n]
    x = None if x0 is None else np.ascontiguousarray(x0).view(u)
    return "; ".join(f"{tuple(int(v) for v in i)}: got {int(gb[tuple(i)]):#x} want "
                     f"{int(wb[tuple(i)]):#x}" + ("" if x is None else f" x {int(x[tuple(i)]):#x}")
                     for i in idx)


def close(got, want, exact, ulps=2, scale=1.0):
    """Bit for bit (exact), or within ulps units of the result's type scaled by `scale`
    (angle_scale: how far the angle may move)."""
    g = np.ascontiguousarray(got)  # (a strided out=: its elements, packed, to view as bytes)
    w = np.ascontiguousarray(want)
    if g.shape != w.shape or g.dtype != w.dtype:
        return False
    if exact:
        return g.view(np.uint8).tobytes() == w.view(np.uint8).tobytes() if g.size else True
    gf, wf = g.astype(np.float64), w.astype(np.float64)
    ulp = {2: 2.0 ** -8 if g.dtype.name == "bfloat16" else 2.0 ** -10, 4: 2.0 ** -23, 8: 2.0 ** -23}
    tol = ulps * ulp[g.dtype.itemsize] * np.maximum(1.0, np.abs(wf)) * scale
    with np.errstate(invalid="ignore"):  # infinities: only equal ones match (by ==)
        near = np.isfinite(gf) & np.isfinite(wf) & (np.abs(gf - wf) <= tol)
    return bool(np.all(near | (gf == wf) | (np.isnan(gf) & np.isnan(wf))))


def backend_exact(backend):
    name = sinpe.get_backend() if backend is None else backend
    return name in ("torch", "mkl")


def ulps_of(backend):
    """The model's tolerance off torch's bits: 2 ulps (the built-in's correctly rounded
    functions), 8 for SLEEF's profiles (its u35 sin/cos err by up to 3.5 ulps)."""
    name = sinpe.get_backend() if backend is None else backend
    return 8 if name == "sleef" or str(name).startswith("torch-aarch64") else 2


# ---- the cases --------------------------------------------------------------------------

def valid_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def check_call(f, buffers, model=None):
    """f() raises a documented exception with every buffer untouched, or returns a result;
    model(result) then checks it and every buffer's bytes (those the call may write)."""
    versions = [(b, b.obj._version) for b in buffers
                if torch is not None and isinstance(b.obj, torch.Tensor)]
    try:
        result = f()
    except DOCUMENTED:
        bad = [b.layout for b in buffers if not b.untouched()]
        if bad:
            raise Finding(f"an exception left inputs changed: {bad}")
        return
    for b, v in versions:  # written in place (its bytes changed): the version moved
        if not b.untouched() and b.obj._version == v:
            raise Finding(f"a {type(b.obj).__name__} was written in place and its version "
                          f"counter did not move")
    if model is not None:
        model(result)


def case_table(g):
    rows, d = g.pick(INTS), g.pick(INTS[:20])
    base, backend = g.pick(REALS[:8] if g.flag() else REALS), g.pick(BACKENDS)
    dt, threads = g.pick(DTYPES), g.pick(THREADS)
    use_pos, use_out = g.flag(), g.flag()
    kw = {"base": base, "dtype": dt, "backend": backend, "threads": threads}
    buffers, pos = [], None
    if use_pos:
        pb = Buffer(g.shape(2), g.pick(ARRAY_TYPES), g.pick(LAYOUTS), g.bytes)
        buffers.append(pb)
        pos = pb.obj
        kw["positions"] = pos
        rows = None
    else:
        kw["offset"] = g.pick([0, 0, 3, 4096, -1, 2**63 - 2, 2.5])
    out = None
    if use_out and valid_int(d) and 0 <= d <= 64:
        shape = (g.small(), d) if pos is None else np.shape(pos) + (d,)
        ob = Buffer(shape, g.pick(ARRAY_TYPES[:4] + [np.int32]), g.pick(LAYOUTS), g.bytes)
        buffers.append(ob)
        out = ob
        kw["out"] = ob.obj
    if valid_int(rows) and valid_int(d) and BIG < abs(int(rows)) * abs(int(d)) < 2**40:
        return  # would really compute, slowly

    def model(res):
        if torch is None or not isinstance(base, (int, float)) or isinstance(base, bool):
            return
        positions = (np.arange(int(rows)) + int(kw.get("offset", 0))) if pos is None else \
            np.asarray(pb.array) if torch is not None and isinstance(pos, torch.Tensor) \
            else np.asarray(pos if not isinstance(pos, memoryview) else np.asarray(pos))
        # (a tensor of any dtype or subclass: its NumPy view; others as sinpe sees them)
        try:
            want = torch_table(positions, int(d), float(base))
        except (RuntimeError, TypeError, ValueError, OverflowError):
            return  # torch itself cannot form these positions: no model

        dst = out.array if out is not None else res
        want = to_dtype(want, np.asarray(dst).dtype)
        got = np.asarray(dst)
        p = np.abs(np.asarray(positions, np.float64))
        scale = angle_scale(positions, int(d), float(base))
        if np.asarray(positions).dtype == np.float16 and np.isnan(p).any():
            # documented divergence (numerics() "differs"): torch's float16 .float() tail
            # makes NaN 0x7fffffff, sinpe keeps the payload; NaN rows compare as NaN
            nan_rows = np.isnan(p)
            if not np.isnan(np.asarray(got, np.float64)[nan_rows]).all():
                raise Finding("a NaN float16 position gave a non-NaN row")
            got, want = np.asarray(got)[~nan_rows], np.asarray(want)[~nan_rows]
            scale = scale[~nan_rows]
        if not close(got, want, backend_exact(backend), ulps_of(backend), scale):
            raise Finding(f"table differs: rows={rows} d={d} base={base} backend={backend} "
                          f"{kw} got {got.dtype}{got.shape} want {want.dtype}{want.shape}")
        if out is not None:
            outside = out.element_bytes()
            if outside is None:
                raise Finding("a table was written into an out whose elements share memory")
            before, after = out.snapshot, out.base.tobytes()
            changed = [i for i in range(len(before)) if before[i] != after[i] and i not in outside]
            if changed:
                raise Finding(f"bytes outside out written: {changed[:8]}")
        for b in buffers:
            if b is not out and not b.untouched():
                raise Finding("positions changed by a table call")
    check_call(lambda: sinpe.positional_encoding(rows, d, **kw), buffers, model)


def case_add(g):
    shape = g.shape(3, min_dims=1)
    xb = Buffer(shape, g.pick(ARRAY_TYPES), g.pick(LAYOUTS), g.bytes)
    base, backend, threads = g.pick(REALS), g.pick(BACKENDS), g.pick(THREADS)
    kw = {"backend": backend, "threads": threads}
    offset = None
    buffers = [xb]
    if g.flag():
        pb = Buffer(g.shape(2), g.pick(ARRAY_TYPES), g.pick(LAYOUTS[:4]), g.bytes)
        buffers.append(pb)
        kw["positions"] = pb.obj
    else:
        offset = g.pick([0, 0, 5, 4096, -1, 2**63 - 2, 2**63 - 1, True])
        kw["offset"] = offset
    if "positions" not in kw and threads is None and g.flag():
        # the held route: a first plain call on a C-ordered x of the same type, dtype and
        # shape holds the rows; the hostile x below then meets the route before the core
        prime = np.zeros(xb.array.shape, xb.array.dtype)
        try:
            sinpe.add_pe(prime, base, offset=offset, backend=backend)
        except DOCUMENTED:
            pass
        kw.pop("threads")
    x0 = np.array(xb.array, copy=True)

    def model(res):
        if torch is None or offset is None or not isinstance(base, (int, float)) or isinstance(base, bool):
            return
        a = xb.array
        L, d = a.shape[-2], a.shape[-1]
        try:
            pe = torch_table(np.arange(L) + int(offset), d, float(base))
        except (RuntimeError, TypeError, ValueError, OverflowError):
            return
        if a.dtype.name == "bfloat16":
            t = torch.from_numpy(np.ascontiguousarray(x0).view(np.int16).copy()).view(torch.bfloat16)
            t.add_(pe)
            want = t.view(torch.int16).numpy().view(a.dtype)
        else:
            t = torch.from_numpy(np.ascontiguousarray(x0).copy())
            t.add_(pe)
            want = t.numpy()
        scale = angle_scale(np.arange(L, dtype=np.float64) + float(offset), d, float(base))
        if a.dtype == np.float16 and np.isnan(x0).any():
            # documented divergence (numerics() "differs"): torch's float16 add_ makes NaN
            # 0x7fff in its scalar tail, sinpe keeps the payload; NaN compares as NaN there
            nan = np.isnan(x0)
            if not np.isnan(np.asarray(a)[nan]).all():
                raise Finding("add_pe turned a float16 NaN into a number")
            want = np.where(nan, np.asarray(a), want)
        if not close(np.ascontiguousarray(a), want, backend_exact(backend), ulps_of(backend),
                     np.maximum(scale, 1.0 + np.abs(x0.astype(np.float64)))):
            raise Finding(f"add_pe differs: shape={a.shape} {a.dtype} offset={offset} "
                          + diff_report(np.ascontiguousarray(a), want, x0))
        inside = xb.element_bytes()
        if inside is None:
            raise Finding("add_pe wrote into an x whose elements share memory")
        before, after = xb.snapshot, xb.base.tobytes()
        if any(before[i] != after[i] and i not in inside for i in range(len(before))):
            raise Finding("bytes outside x written")
    check_call(lambda: sinpe.add_pe(xb.obj, base, **kw), buffers, model)


def case_elementwise(g):
    xb = Buffer(g.shape(2), g.pick(ARRAY_TYPES), g.pick(LAYOUTS), g.bytes)
    func = g.pick(["exp", "sin", "cos", "tan", 3])
    check_call(lambda: sinpe.elementwise(func, xb.obj, backend=g.pick(BACKENDS)), [xb])


def case_rope(g):
    xb = Buffer(g.shape(4, min_dims=1), g.pick(ARRAY_TYPES), g.pick(LAYOUTS), g.bytes)
    kw = {"base": g.pick(REALS), "layout": g.pick(["half", "pairs", "bogus"]),
          "seq_dim": g.pick([-2, -3, 1, 0, 5, 1.0, "1", None]), "offset": g.pick(INTS[:12] + [2**63 - 2]),
          "rot_dim": g.pick([None, 2, 4, 3, 0, -2, 2.0]), "backend": g.pick(BACKENDS),
          "threads": g.pick(THREADS),
          "producer": g.pick([None, None, "transformers", "onnxruntime", "inductor", "mlx",
                              "ort", 3, b"onnxruntime"])}
    check_call(lambda: sinpe.apply_rope(xb.obj, **kw), [xb])


def case_rope_qk(g):
    """apply_rope_qk: q and k of any buffer kinds and layouts (k sometimes q itself or a view
    of it), every argument fuzzed; twice, so that the second call takes the kept plan."""
    qb = Buffer(g.shape(4, min_dims=1), g.pick(ARRAY_TYPES), g.pick(LAYOUTS), g.bytes)
    kb = qb if g.pick([False, False, False, True]) else \
        Buffer(g.shape(4, min_dims=1), g.pick(ARRAY_TYPES), g.pick(LAYOUTS), g.bytes)
    kw = {"layout": g.pick(["half", "pairs"]), "seq_dim": g.pick([-2, -3, 1]),
          "offset": g.pick(INTS[:12]), "backend": g.pick(BACKENDS),
          "producer": g.pick([None, "inductor", "onnxruntime"])}
    for _ in range(2):
        check_call(lambda: sinpe.apply_rope_qk(qb.obj, kb.obj, **kw), [qb, kb])


def _hf_rope(x, cos, sin):
    """transformers' apply_rotary_pos_emb on one tensor, in torch (the model)."""
    h = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., h:], x[..., :h]), dim=-1) * sin


def case_rope_tables(g):
    """apply_rope with cos/sin given: views of x itself (rows of it, NumPy or torch), other
    dtypes than x's (float64 tables of non-float32 values for a non-float32 x are refused):
    the bits of transformers' formula on copies, or a documented refusal with x untouched."""
    if torch is None:
        return
    dt = g.pick([torch.float32, torch.float16, torch.bfloat16, torch.float64])
    tdt = g.pick([None, torch.float32, torch.float64, torch.float16])
    heads, seq, d = g.small() + 2, g.small() + 1, 2 * (g.small() + 1)
    x = torch.from_numpy(np.frombuffer(g.bytes(heads * seq * d), np.uint8)
                         .astype(np.float32).reshape(1, heads, seq, d) / 128 - 1).to(dt)
    if tdt is None:  # rows of x itself
        cos, sin = x[0, 0], x[0, g.small() % heads]
        if g.flag() and dt != torch.bfloat16:
            cos, sin = cos.numpy(), sin.numpy()
    else:
        cos = torch.rand(seq, d, dtype=torch.float64).to(tdt)
        sin = torch.rand(seq, d, dtype=torch.float64).to(tdt)
    x0 = x.clone()
    c, s_ = torch.as_tensor(cos).clone(), torch.as_tensor(sin).clone()
    try:
        sinpe.apply_rope(x, cos=cos, sin=sin)
    except DOCUMENTED:
        if not torch.equal(x.view(torch.uint8), x0.view(torch.uint8)):
            raise Finding("a refused apply_rope wrote x")
        if not (c.dtype == torch.float64 and dt != torch.float32):
            raise
        return
    cc, ss = (c.to(dt), s_.to(dt)) if c.dtype != torch.float64 or dt != torch.float64 else (c, s_)
    if c.dtype == torch.float64 and dt == torch.float32:
        cc, ss = c.float(), s_.float()
    want = _hf_rope(x0, cc, ss)
    a = x.view(torch.int16) if dt in (torch.float16, torch.bfloat16) else x
    b = want.view(torch.int16) if dt in (torch.float16, torch.bfloat16) else want
    if not torch.equal(a, b) and not (torch.isnan(x).any() and torch.isnan(want).any()):
        raise Finding(f"apply_rope with given tables differs from transformers' ({dt}, "
                      f"tables {tdt}, {int((a != b).sum())} values)")


def _cache_step(g):
    """One call of a cache sequence (failing ones among them), as a function returning its
    result's bytes or the exception's type."""
    d = g.pick([4, 8, 64])
    L = g.pick([1, 2, 7, 50, 100, 150, 180])
    off = g.pick([0, 0, 1, 99, 100, 149, 150, 2**40])
    be = g.pick(["builtin", "torch", "mkl", "sleef", None])
    kind = g.pick(["table", "add", "addpos", "masked", "tablepos", "rope", "bad_dtype",
                   "bad_out", "bad_threads", "clear"])
    ints = [g.pick([0, 1, 2, 99, 100, 149, 150, 180, 1000, -3]) for _ in range(3)]
    mask = [g.flag() for _ in range(3)]

    def run():
        if kind == "table":
            return sinpe.positional_encoding(L, d, offset=off, backend=be)
        if kind in ("add", "addpos", "masked"):
            x = np.ones((2, 3 if kind != "add" else L, d), np.float32)
            if kind == "add":
                sinpe.add_pe(x, offset=off, backend=be)
            else:
                pos = np.array(ints) if kind == "addpos" else np.ma.array(ints, mask=mask)
                sinpe.add_pe(x, positions=pos, backend=be)
            return x
        if kind == "tablepos":
            return sinpe.positional_encoding(d_model=d, positions=np.ma.array(ints, mask=mask),
                                             backend=be)
        if kind == "rope":
            q = np.ones((1, 2, L, d), np.float32)
            return sinpe.apply_rope(q, offset=off % 1000, backend=be)
        if kind == "bad_dtype":
            return sinpe.positional_encoding(L + 30, d, dtype="int8", backend=be)
        if kind == "bad_out":
            return sinpe.positional_encoding(L + 30, d, out=np.zeros((1, 1), np.float32))
        if kind == "bad_threads":
            return sinpe.add_pe(np.ones((L + 30, d), np.float32), threads=0)
        sinpe.clear_cache()
        return None

    def result():
        try:
            r = run()
        except DOCUMENTED as exc:
            return type(exc).__name__
        return None if r is None else np.ascontiguousarray(r).tobytes()
    return result


def case_cache(g):
    """A sequence of calls under a small or large cache budget, failing calls among them:
    every result has the bits of the same call with the cache off (growth, eviction, masked
    positions whose max() ignores a masked far position), and set_cache_size(0) then
    leaves nothing used."""
    steps = [_cache_step(g) for _ in range(g.small() + 2)]
    budget = g.pick([0, 1 << 10, 40 << 10, 1 << 20, 64 << 20])
    saved = sinpe.get_cache_size()
    try:
        sinpe.set_cache_size(0)
        want = [s() for s in steps]
        sinpe.set_cache_size(budget)
        sinpe.clear_cache()
        for _ in range(2):
            got = [s() for s in steps]
            for i, (a, b) in enumerate(zip(got, want)):
                if a != b:
                    raise Finding(f"call {i} of a cache sequence differs with the cache on "
                                  f"(budget {budget})")
        info = sinpe.cache_info()
        if info["used"] > budget:
            raise Finding(f"the cache holds {info['used']} bytes over its budget {budget}")
        sinpe.set_cache_size(0)
        info = sinpe.cache_info()
        if info["used"] or info["entries"]:
            raise Finding(f"set_cache_size(0) left {info['used']} bytes in {info['entries']} "
                          f"entries")
    finally:
        sinpe.set_cache_size(saved)


#: keras_hub's odd positions (issue 35): non-finite, -0.0, overflowing angles, 64-bit integers
#: past int32 (JAX and NumPy take them as 32-bit), uint64 (keras' torch backend refuses them)
KERAS_POSITIONS = [None, [np.inf, -np.inf, np.nan, -0.0], [3e38, -3e38, 0.0, -1e-40],
                   [2**31 + 1, -2**40, 2**63 - 1, 5], np.array([2**63, 1, 2, 3], np.uint64),
                   np.full(4, -np.inf, np.float32), np.array([[1, -0.0, 2, 3], [np.nan, 0, 1, 2]])]

PRESETS = {
    "fairseq": lambda g, k: P.fairseq(g.pick(INTS), g.pick(INTS), g.pick([None, 1, -1, 100]), **k),
    "fairseq2": lambda g, k: P.fairseq2(g.pick(INTS), g.pick(INTS), **k),
    "tensor2tensor": lambda g, k: P.tensor2tensor(g.pick(INTS), g.pick(INTS), g.pick(REALS),
                                                  g.pick(REALS), g.pick(INTS), **k),
    "keras_hub": lambda g, k: P.keras_hub(g.shape(3), g.pick(REALS), g.pick(INTS), **k),
    "keras_hub_odd": lambda g, k: P.keras_hub(  # under the Keras backends' rules too
        (g.pick([1, 2]), 4, g.pick([0, 1, 2, 7, 64])), g.pick([10000.0, 0.5, 1e-30, 1e6]),
        g.pick(INTS), positions=g.pick(KERAS_POSITIONS),
        **dict(k, backend=g.pick(["tensorflow", "jax", "numpy", k["backend"]]))),
    "tf_tutorial": lambda g, k: P.tf_tutorial(g.pick(INTS), g.pick(INTS), legacy=g.flag(), **k),
    "xlm": lambda g, k: P.xlm(g.pick(INTS), g.pick(INTS), **k),
    "marian": lambda g, k: P.marian(g.pick(INTS), g.pick(INTS), **k),
    "whisper": lambda g, k: P.whisper(g.pick(INTS), g.pick(INTS), g.pick(REALS), **k),
    "diffusers": lambda g, k: P.diffusers_timestep(np.arange(g.small()) * 1.5, g.pick(INTS), g.flag(),
                                                   g.pick(REALS), g.pick(REALS), g.pick(REALS), **k),
    "mae_2d": lambda g, k: P.mae_2d(g.pick(INTS), g.pick(INTS), g.flag(), **k),
    "flax": lambda g, k: P.flax_sinusoidal_init(g.pick(INTS), g.pick(INTS), g.pick(REALS),
                                                g.pick(REALS), **k),
    "keras_hub_rotary": lambda g, k: P.keras_hub_rotary(
        np.ones(g.shape(4)), g.pick(REALS), g.pick(REALS), g.pick([1, 2, -2, 0, 5, 1.0, "1"]),
        g.pick([-1, 1, 3, -4, 9]), g.pick(INTS), backend=k["backend"], threads=k["threads"]),
    "timm_2d": lambda g, k: P.timm_2d((g.pick(INTS), g.pick(INTS)), g.pick(INTS), g.pick(REALS), **k),
    "llama_rope": lambda g, k: P.llama_rope(g.pick(INTS), g.pick(INTS), g.pick(REALS),
                                            **{a: b for a, b in k.items() if a != "out"}),
    "rotary": lambda g, k: P.rotary_embedding_torch(g.pick(INTS), g.pick(INTS), theta=g.pick(REALS), **k),
    "tatp22_1d": lambda g, k: P.tatp22_1d(g.pick(INTS), g.shape(3), **k),
    "tatp22_2d": lambda g, k: P.tatp22_2d(g.pick(INTS), g.shape(4), **k),
    "alibi": lambda g, k: P.alibi_bias(None, g.pick(INTS), seq_length=g.pick(INTS),
                                       method=g.pick(["bloom", "paper", "x"]),
                                       dtype=k["dtype"], backend=k["backend"]),
}


def case_preset(g):
    name = g.pick(sorted(PRESETS))
    buffers = []
    kw = {"dtype": g.pick(DTYPES), "backend": g.pick(BACKENDS), "threads": g.pick(THREADS)}
    if name not in ("alibi",) and g.flag():
        ob = Buffer(g.shape(3), g.pick(ARRAY_TYPES[:4]), g.pick(LAYOUTS), g.bytes)
        buffers.append(ob)
        kw["out"] = ob.obj

    def run():
        return PRESETS[name](g, kw)

    def model(res):
        if "out" in kw:  # the result is out= itself (a torch bfloat16 tensor has no __array__):
            return       # its bytes are the buffers' check
        for r in (res if isinstance(res, tuple) else (res,)):
            a = np.asarray(r) if not isinstance(r, (list, memoryview)) else None
            if a is not None and not a.flags.writeable:
                raise Finding(f"{name} returned a read-only array")
    try:
        check_call(run, buffers, model)
    except IndexError:  # a padding_idx out of range: the library's own exception
        if any(not b.untouched() for b in buffers):
            raise Finding("IndexError with inputs changed")


def case_settings(g):
    f = g.pick([sinpe.set_threads, sinpe.set_kernel, sinpe.set_backend])
    v = g.pick(THREADS + ["scalar", "avx9", "neon", "builtin", "bogus", None, 7])
    saved = (sinpe.get_threads(), sinpe.get_kernel(), sinpe._policy.get_default())
    try:
        f(v)
    except DOCUMENTED:
        pass
    finally:
        sinpe.set_threads(saved[0])
        sinpe.set_kernel(saved[1])
        sinpe.set_backend(saved[2])


CASES = [case_table, case_add, case_elementwise, case_rope, case_preset, case_settings,
         case_rope_tables, case_cache, case_rope_qk]


class Gen:
    """Choices from the fuzzed bytes."""

    def __init__(self, data):
        self.fdp = atheris.FuzzedDataProvider(data)

    def pick(self, seq):
        return seq[self.fdp.ConsumeIntInRange(0, len(seq) - 1)]

    def flag(self):
        return self.fdp.ConsumeBool()

    def small(self):
        return self.fdp.ConsumeIntInRange(0, 9)

    def shape(self, max_dims, min_dims=0):
        n = self.fdp.ConsumeIntInRange(min_dims, max_dims)
        return tuple(self.fdp.ConsumeIntInRange(0, 12) for _ in range(n))

    def bytes(self, n):
        b = self.fdp.ConsumeBytes(n)
        return b + bytes(n - len(b))


# ---- JSON cases of the corpus -----------------------------------------------------------------

def _fsub(value, other):
    class Float(np.float64):
        def __float__(self):
            return float(other)
    return Float(float(value))


def _isub(index, other):
    class Int(np.int64):
        def __int__(self):
            return int(other)

        def __index__(self):
            return int(index)
    return Int(int(index))


def decode(v):
    """A JSON value of a corpus case: {"nd": [shape, dtype, layout]} an array in a guarded
    buffer, {"f": "nan"} a float, {"i": "2**63-2"} a big integer, {"dt": "torch.float16"} a
    dtype, {"tuple": [...]} a tuple; other values as they are."""
    if isinstance(v, list):
        return [decode(x) for x in v]
    if not isinstance(v, dict):
        return v
    if len(v) != 1:  # a marker is a one-key object: anything else is a plain dict (kwargs)
        return {k: decode(x) for k, x in v.items()}
    if "nd" in v:
        shape, t, layout = v["nd"]
        shape = tuple(int(n) for n in shape)
        if len(shape) > 6 or any(n < 0 for n in shape) or int(np.prod(shape)) > 4096:
            raise ValueError("a corpus array is at most 4096 elements")
        return Buffer(shape, t, layout, lambda n: bytes(range(256)) * (n // 256 + 1))
    if "f" in v:
        return float(v["f"])
    if "i" in v:  # "2**63-2": a power and an offset, nothing else
        m = re.fullmatch(r"(-?\d{1,40})(?:\*\*(\d{1,3}))?([+-]\d{1,40})?", str(v["i"]))
        if not m:
            raise ValueError("not a big integer")
        n = int(m.group(1)) ** int(m.group(2) or 1)
        return n + int(m.group(3) or 0)
    if "dt" in v:
        return getattr(torch, v["dt"].split(".")[1]) if v["dt"].startswith("torch.") else v["dt"]
    if "tuple" in v:
        return tuple(decode(x) for x in v["tuple"])
    if "fsub" in v:  # {"fsub": [value, float]}: a np.float64 whose __float__ says another
        return _fsub(*v["fsub"])
    if "isub" in v:  # {"isub": [index, int]}: a np.int64 whose __index__ and __int__ disagree
        return _isub(*v["isub"])
    if "masked" in v:  # {"masked": [values, mask]}: a NumPy masked array
        values, mask = v["masked"]
        return np.ma.array(decode(values), mask=decode(mask))
    if "torch" in v:  # {"torch": [values, dtype]}: a fresh torch tensor of those values
        values, t = v["torch"]
        return torch.tensor(decode(values)).to(getattr(torch, t)) if torch is not None else None
    return {k: decode(x) for k, x in v.items()}


ENTRIES = {"positional_encoding": sinpe.positional_encoding, "add_pe": sinpe.add_pe,
           "apply_rope": sinpe.apply_rope, "apply_rope_qk": sinpe.apply_rope_qk,
           "elementwise": sinpe.elementwise,
           "shift_matrix": sinpe.shift_matrix}


def run_json(case, strict=False):
    """strict: the case must describe a call (the suite's replay of the corpus).  The entry
    "cache_sequence" runs its "calls" (cases) with the cache off, then twice under
    "budget": the same results (bytes or exception types), and nothing left used after
    set_cache_size(0)."""
    if case["entry"] == "cache_sequence":
        return _run_sequence(case, strict)
    f = ENTRIES.get(case["entry"]) or getattr(P, case["entry"])
    try:
        args = decode(case.get("args", []))
        kwargs = {k: decode(x) for k, x in case.get("kwargs", {}).items()}
    except Exception:  # np.dtype of a mutated string may raise even SyntaxError
        if strict:
            raise
        return  # a mutated case that describes nothing
    buffers = [a for a in args if isinstance(a, Buffer)] + [v for v in kwargs.values()
                                                            if isinstance(v, Buffer)]
    args = [a.obj if isinstance(a, Buffer) else a for a in args]
    kwargs = {k: v.obj if isinstance(v, Buffer) else v for k, v in kwargs.items()}
    try:
        check_call(lambda: f(*args, **kwargs), buffers)
    except IndexError:  # a preset's padding_idx out of range: the library's own exception
        if any(not b.untouched() for b in buffers):
            raise Finding("IndexError with inputs changed") from None


def _outcome(case):
    f = ENTRIES.get(case["entry"]) or getattr(P, case["entry"])
    args = [a.obj if isinstance(a, Buffer) else a for a in decode(case.get("args", []))]
    kwargs = {k: v.obj if isinstance(v, Buffer) else v
              for k, v in {k: decode(x) for k, x in case.get("kwargs", {}).items()}.items()}
    try:
        r = f(*args, **kwargs)
    except DOCUMENTED as exc:
        return type(exc).__name__
    if isinstance(r, tuple):
        return b"".join(np.ascontiguousarray(np.asarray(a)).tobytes() for a in r)
    return np.ascontiguousarray(np.asarray(r if not isinstance(r, np.ma.MaskedArray)
                                           else r.data)).tobytes()


def _run_sequence(case, strict):
    calls = case.get("calls")
    budget = case.get("budget", 64 << 20)
    if not isinstance(calls, list) or not all(
            isinstance(c, dict) and isinstance(c.get("entry"), str)
            and (c["entry"] in ENTRIES or c["entry"] in P.__all__) for c in calls) \
            or not isinstance(budget, int) or not 0 <= budget <= 1 << 30 or len(calls) > 16:
        if strict:
            raise ValueError("a cache sequence: calls of known entries, a budget up to 1 GiB")
        return
    saved = sinpe.get_cache_size()
    try:
        sinpe.set_cache_size(0)
        try:
            want = [_outcome(c) for c in calls]
        except Exception:  # a mutated case that describes nothing
            if strict:
                raise
            return
        sinpe.set_cache_size(budget)
        sinpe.clear_cache()
        for _ in range(2):
            got = [_outcome(c) for c in calls]
            if got != want:
                raise Finding(f"a cache sequence differs with the cache on (budget {budget})")
        sinpe.set_cache_size(0)
        if sinpe.cache_info()["used"] or sinpe.cache_info()["entries"]:
            raise Finding("set_cache_size(0) left bytes used")
    finally:
        sinpe.set_cache_size(saved)


def TestOneInput(data):
    if data[:1] == b"{":
        try:
            case = json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return
        if isinstance(case, dict) and isinstance(case.get("entry"), str) and (
                case["entry"] in ENTRIES or case["entry"] in P.__all__
                or case["entry"] == "cache_sequence") and \
                isinstance(case.get("args", []), list) and isinstance(case.get("kwargs", {}), dict):
            try:
                run_json(case)
            except TooBig:
                pass
        return
    g = Gen(data)
    try:
        g.pick(CASES)(g)
    except TooBig:
        pass


def main():
    sinpe.set_threads(2)
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
