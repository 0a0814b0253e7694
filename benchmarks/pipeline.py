#!/usr/bin/env python3
"""Benchmarks at the shapes of data pipelines: small batches, in place, torch imported.

    pip install '.[test]' && python benchmarks/pipeline.py [--repeats 15] [--quick] [--compile]

Everything is measured in one run, 2 threads on both sides (--threads), the default backend
(torch is imported, so 'auto' means torch's own kernels and bits), medians of interleaved
rounds (each contender once per round, in an order shuffled per round), so that drift and
the cold caches after a heavy op cancel in the ratios.

add_pe, steady state: sinpe.add_pe on a NumPy array and on a torch tensor (in place, its
rows from the cache after the first call) against the reference module's forward
(`x + pe[:, :L]`, a new tensor), torch's in-place `x.add_(pe[:, :L])` of its buffer and
`np.add(x, cached, out=x)`.  First call: sinpe with an empty cache against building the
reference module and one forward.  Packed positions (B sequences of random lengths packed
into one (tokens, d) batch): `add_pe(x, positions=)` against torch's gather and add
`x.add_(pe[0][pos])`.  apply_rope: sinpe in place against transformers' eager
`q * cos + rotate_half(q) * sin` (cos/sin from LlamaRotaryEmbedding, computed once, as a
model's layers share them) and, with --compile, torch.compile of it (inductor, C++).
sinpe.torch.apply_rotary_pos_emb (new tensors) against transformers' own function, and
sinpe.presets.hf_rope against LlamaRotaryEmbedding with llama3 scaling.
With --training, a training step through a rotation (forward and backward) against
transformers' own function.
add_pe on torch tensors of every dtype against `x.add_(pe[:, :L])` of a held buffer of that
dtype (B 1-64, L 8-4096, d 64-1024; a model's buffer); the decode step (one token, B 1-16,
grouped-query k) and the rotary module's forward at 1 and 300 positions.
Ratios > 1 mean sinpe is faster; every ratio below its target is listed at the end by name
(the targets of issue 23).
"""
import argparse
import os
import platform
import random
import statistics
import sys
import time

import numpy as np
import torch

import sinpe

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from reference import SinusoidalPositionalEncoding  # noqa: E402


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def interleaved(fns, repeats, setup=None):
    """Medians of each contender over `repeats` rounds (one untimed warm-up round), the order
    shuffled in each round (seeded: the same orders in every run), so that no contender
    always follows the same one: a call right after a heavy torch op pays for its cold
    caches (on the 2-core Intel Xeon VM, 2026-12-05, hf_rope at 2 x 256 positions took 63 µs
    alone, 180 right after transformers' rotation, and the rotary module the same 82 -> 184:
    a fixed order charged it to whichever followed the rotation).  setup(name) runs untimed before
    each timed call."""
    for k, f in fns.items():
        if setup:
            setup(k)
        f()
    times = {k: [] for k in fns}
    order = list(fns.items())
    shuffle = random.Random(len(fns) * 1000003 + repeats).shuffle
    for _ in range(repeats):
        shuffle(order)
        for k, f in order:
            if setup:
                setup(k)
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


#: (name, ratio, target) of every ratio below its target, printed at the end.
MISSES = []


def ratio(name, r, target=1.0):
    """r formatted, and kept as a miss when below target."""
    if r < target:
        MISSES.append((name, r, target))
    return f"{r:.2f}" if r >= target else f"**{r:.2f}**"


def us(t):
    return f"{t * 1e6:.0f}" if t < 1e-2 else f"{t * 1e6:.3g}"


def add_rows(shapes, repeats):
    print("\n## add_pe, steady state (µs; ratios: the other / sinpe on NumPy)\n")
    print("| B x L x d | sinpe NumPy | sinpe torch | reference forward | torch add_ | np.add cached "
          "| ref/sinpe | add_/sinpe | np.add/sinpe |")
    print("|---|---|---|---|---|---|---|---|---|")
    firsts = []
    for B, L, d in shapes:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((B, L, d)).astype(np.float32)
        xt = torch.from_numpy(x.copy())
        xt2 = torch.from_numpy(x.copy())
        ref = SinusoidalPositionalEncoding(d, 5000)
        ref.eval()
        cached = sinpe.positional_encoding(L, d)
        pe = ref.pe
        torch_ok = sinpe_takes_tensors()
        fns = {
            "np": lambda: sinpe.add_pe(x),
            "ref": lambda: ref(xt),
            "add_": lambda: xt2.add_(pe[:, :L]),
            "npadd": lambda: np.add(x, cached, out=x),
        }
        if torch_ok:
            fns["torch"] = lambda: sinpe.add_pe(xt)
        with torch.no_grad():
            t = interleaved(fns, repeats)
        ts = t.get("torch")
        shape = f"{B} x {L} x {d}"
        print(f"| {shape} | {us(t['np'])} | {us(ts) if ts else '-'} | {us(t['ref'])} | "
              f"{us(t['add_'])} | {us(t['npadd'])} | {t['ref'] / t['np']:.2f} | "
              f"{t['add_'] / t['np']:.2f} | "
              f"{ratio(f'add_pe NumPy vs np.add cached {shape}', t['npadd'] / t['np'], 0.95)} |")

        size = sinpe.get_cache_size()

        def cold(k):
            sinpe.set_cache_size(0 if k == "off" else size)  # set_cache_size(0) empties it

        with torch.no_grad():
            f = interleaved({"sinpe": lambda: sinpe.add_pe(x),
                             "off": lambda: sinpe.add_pe(x),
                             "ref": lambda: SinusoidalPositionalEncoding(d, 5000).eval()(xt)},
                            max(5, repeats // 2), setup=cold)
        sinpe.set_cache_size(size)
        firsts.append((B, L, d, f["sinpe"], f["off"], f["ref"]))
    print("\n## add_pe, first call (µs): sinpe with an empty cache (it computes the rows and "
          "keeps them), sinpe with the cache off (computing as before the cache), the reference "
          "module built (max_len 5000) and run once\n")
    print("| B x L x d | sinpe | cache off | reference | off/sinpe | ref/sinpe |")
    print("|---|---|---|---|---|---|")
    for B, L, d, s, o, r in firsts:
        print(f"| {B} x {L} x {d} | {us(s)} | {us(o)} | {us(r)} | {o / s:.2f} | {r / s:.2f} |")


def held_rows(shapes, repeats):
    """add_pe on a torch tensor against torch's in-place add of a held buffer of x's dtype
    (a model's registered pe, sliced per call), per dtype."""
    print("\n## add_pe on torch tensors against `x.add_(pe[:, :L])` of a held buffer (µs; "
          "ratio: add_ / sinpe, target 0.95, 1.0 at the median)\n")
    print("| B x L x d | dtype | sinpe | add_ | add_/sinpe |")
    print("|---|---|---|---|---|")
    rs = []
    for B, L, d in shapes:
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            x = torch.randn(B, L, d).to(dt)
            x2 = x.clone()
            pe = torch.from_numpy(sinpe.positional_encoding(max(L, 5000), d))[None].to(dt)
            with torch.no_grad():
                t = interleaved({"s": lambda: sinpe.add_pe(x), "a": lambda: x2.add_(pe[:, :L])},
                                repeats)
            name = f"add_pe torch {B} x {L} x {d} {str(dt).split('.')[1]}"
            r = t["a"] / t["s"]
            rs.append(r)
            print(f"| {B} x {L} x {d} | {str(dt).split('.')[1]} | {us(t['s'])} | {us(t['a'])} | "
                  f"{ratio(name, r, 0.95)} |")
    if rs:
        med = statistics.median(rs)
        print(f"\nmedian add_/sinpe: {ratio('add_pe torch median', med, 1.0)}")


def packed_rows(cases, repeats):
    print("\n## add_pe with packed positions= (µs): B sequences of random lengths in one "
          "(tokens, d) batch, against torch's gather and add `x.add_(pe[0][pos])`\n")
    print("| B, L max, d | tokens | sinpe | torch gather+add_ | torch/sinpe |")
    print("|---|---|---|---|---|")
    for B, L, d in cases:
        rng = np.random.default_rng(1)
        lens = rng.integers(L // 2, L + 1, B)
        pos = np.concatenate([np.arange(n) for n in lens]).astype(np.int64)
        x = rng.standard_normal((len(pos), d)).astype(np.float32)
        xt = torch.from_numpy(x.copy())
        pe = SinusoidalPositionalEncoding(d, 5000).pe
        pt = torch.from_numpy(pos)
        with torch.no_grad():
            t = interleaved({"s": lambda: sinpe.add_pe(x, positions=pos),
                             "t": lambda: xt.add_(pe[0][pt])}, repeats)
        print(f"| {B}, {L}, {d} | {len(pos)} | {us(t['s'])} | {us(t['t'])} | {t['t'] / t['s']:.2f} |")


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def hf_eager(q, cos, sin):
    return q * cos + rotate_half(q) * sin


def rope_rows(shapes, repeats, compile_too):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    print("\n## apply_rope (µs): sinpe in place (cos/sin cached) against transformers' eager "
          "`q * cos + rotate_half(q) * sin` with its cos/sin computed once"
          + (", and torch.compile of it" if compile_too else "") + "\n")
    head = "| B x H x L x hd | dtype | sinpe | HF eager | eager/sinpe |"
    if compile_too:
        head += " compiled | compiled/sinpe |"
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    compiled = torch.compile(hf_eager) if compile_too else None
    for B, H, L, hd in shapes:
        cfg = LlamaConfig(hidden_size=H * hd, num_attention_heads=H, head_dim=hd,
                          max_position_embeddings=max(L, 2048))
        rope = LlamaRotaryEmbedding(cfg)
        pos_ids = torch.arange(L)[None].expand(B, -1)
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            q = torch.randn(B, H, L, hd).to(dt)
            with torch.no_grad():
                cos, sin = rope(q, pos_ids)
                cos, sin = cos[:, None], sin[:, None]
            qs = q.clone()
            qn = None if sinpe_takes_tensors() else numpy_view(qs)
            target = qs if qn is None else qn
            fns = {"s": lambda: sinpe.apply_rope(target, np.arange(L)),
                   "e": lambda: hf_eager(q, cos, sin)}
            if compiled is not None:
                with torch.no_grad():
                    compiled(q, cos, sin)  # compile outside the timing
                fns["c"] = lambda: compiled(q, cos, sin)
            with torch.no_grad():
                t = interleaved(fns, repeats)
            row = (f"| {B} x {H} x {L} x {hd} | {str(dt).split('.')[1]} | {us(t['s'])} | "
                   f"{us(t['e'])} | {t['e'] / t['s']:.2f} |")
            if compiled is not None:
                name = f"apply_rope vs torch.compile {B} x {H} x {L} x {hd} {str(dt).split('.')[1]}"
                row += f" {us(t['c'])} | {ratio(name, t['c'] / t['s'])} |"
            print(row)


def hf_rows(shapes, repeats):
    """sinpe.torch.apply_rotary_pos_emb (new tensors, as transformers returns) against
    transformers' own apply_rotary_pos_emb (q with H heads, k with H // 4: grouped-query
    attention), and sinpe.presets.hf_rope against the model's rotary module (llama3)."""
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama as ml
    import sinpe.torch as st
    from sinpe.presets import hf_rope
    print("\n## apply_rotary_pos_emb (µs): sinpe.torch's (new tensors) against transformers' "
          "function, q (B, H, L, hd), k (B, H/4, L, hd); hf_rope against LlamaRotaryEmbedding "
          "(llama3 scaling) for (B, L) positions\n")
    print("| B x H x L x hd | dtype | sinpe apply | HF apply | HF/sinpe | sinpe hf_rope | HF module | HF/sinpe |")
    print("|---|---|---|---|---|---|---|---|")
    for B, H, L, hd in shapes:
        cfg = LlamaConfig(hidden_size=H * hd, num_attention_heads=H, num_key_value_heads=max(1, H // 4),
                          head_dim=hd, max_position_embeddings=max(L, 16384),
                          rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                           "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                           "original_max_position_embeddings": 8192})
        rope = ml.LlamaRotaryEmbedding(cfg)
        pos_ids = torch.arange(L)[None].expand(B, -1)
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            q = torch.randn(B, H, L, hd).to(dt)
            k = torch.randn(B, max(1, H // 4), L, hd).to(dt)
            with torch.no_grad():
                cos, sin = rope(q, pos_ids)
                t = interleaved({"s": lambda: st.apply_rotary_pos_emb(q, k, cos, sin),
                                 "h": lambda: ml.apply_rotary_pos_emb(q, k, cos, sin),
                                 "sr": lambda: hf_rope(cfg, pos_ids, dtype=dt),
                                 "hr": lambda: rope(q, pos_ids)}, repeats)
            name = f"{B} x {H} x {L} x {hd} {str(dt).split('.')[1]}"
            print(f"| {B} x {H} x {L} x {hd} | {str(dt).split('.')[1]} | {us(t['s'])} | "
                  f"{us(t['h'])} | {ratio('apply_rotary_pos_emb ' + name, t['h'] / t['s'])} | "
                  f"{us(t['sr'])} | {us(t['hr'])} | "
                  f"{ratio('hf_rope vs rotary forward ' + name, t['hr'] / t['sr'])} |")


def decode_rows(repeats, misses):
    """Issue 23's RoPE targets: sinpe.torch.apply_rotary_pos_emb against transformers' function
    at the decode step (one token, q B x 32 x 1 x 128, k 8 heads: grouped-query attention, B
    1-16) and at prefill (q 2 x 16 x 256 x 64, k 4 heads), cos/sin as LlamaRotaryEmbedding
    returns them (x's dtype); sinpe.presets.hf_rope against the module's forward at 1 and 300
    positions (the default rope, and llama3).  Each ratio < 1 is a miss, named at the end."""
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama as ml
    import sinpe.torch as st
    from sinpe.presets import hf_rope
    print("\n## apply_rotary_pos_emb at decode and prefill (µs): sinpe.torch's against "
          "transformers' function (cos/sin from LlamaRotaryEmbedding, in x's dtype)\n")
    print("| q | k heads | dtype | sinpe | HF | HF/sinpe |")
    print("|---|---|---|---|---|---|")
    cases = [((B, 32, 1, 128), 8, 300) for B in (1, 2, 4, 8, 16)] + [((2, 16, 256, 64), 4, 0)]
    for (B, H, L, hd), kh, at in cases:
        cfg = LlamaConfig(hidden_size=H * hd, num_attention_heads=H, num_key_value_heads=kh,
                          head_dim=hd, max_position_embeddings=4096)
        rope = ml.LlamaRotaryEmbedding(cfg)
        pos_ids = (at + torch.arange(L))[None].expand(B, -1)
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            q = torch.randn(B, H, L, hd).to(dt)
            k = torch.randn(B, kh, L, hd).to(dt)
            with torch.no_grad():
                cos, sin = rope(q, pos_ids)
                t = interleaved({"s": lambda: st.apply_rotary_pos_emb(q, k, cos, sin),
                                 "h": lambda: ml.apply_rotary_pos_emb(q, k, cos, sin)}, repeats)
            r = t["h"] / t["s"]
            name = f"apply_rotary_pos_emb q {B}x{H}x{L}x{hd} k {kh} heads {str(dt).split('.')[1]}"
            if r < 1.0:
                misses.append((name, r))
            print(f"| {B} x {H} x {L} x {hd} | {kh} | {str(dt).split('.')[1]} | {us(t['s'])} | "
                  f"{us(t['h'])} | {r:.2f} |")
    print("\n## hf_rope against the rotary module's forward (µs), (1, n) positions, the decode "
          "step's n = 1 at position 300 and a prompt's n = 300\n")
    print("| rope | positions | dtype | sinpe hf_rope | module forward | module/sinpe |")
    print("|---|---|---|---|---|---|")
    ropes = {"default": {"rope_type": "default", "rope_theta": 500000.0},
             "llama3": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 8192}}
    for kind, rp in ropes.items():
        cfg = LlamaConfig(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                          head_dim=128, max_position_embeddings=16384, rope_parameters=rp)
        rope = ml.LlamaRotaryEmbedding(cfg)
        for n in (1, 300):
            pos_ids = (torch.arange(n) + (300 if n == 1 else 0))[None]
            for dt in (torch.float32, torch.bfloat16):
                x = torch.zeros(1, dtype=dt)
                with torch.no_grad():
                    t = interleaved({"s": lambda: hf_rope(cfg, pos_ids, dtype=dt),
                                     "h": lambda: rope(x, pos_ids)}, repeats)
                r = t["h"] / t["s"]
                name = f"hf_rope {kind} {n} positions {str(dt).split('.')[1]}"
                if r < 1.0:
                    misses.append((name, r))
                print(f"| {kind} | {n} | {str(dt).split('.')[1]} | {us(t['s'])} | {us(t['h'])} | "
                      f"{r:.2f} |")


def training_rows(repeats, misses):
    """Issue 35's training target: a training step through a rotation (forward, then backward
    of a loss), sinpe.torch's forms against transformers' own functions, per call; the forms
    run transformers' graph where autograd records, so their gradients are transformers'."""
    import importlib
    import sinpe.torch as st
    print("\n## training step through the rotation (µs, forward + backward): sinpe.torch's "
          "form against transformers' function, q (B, H, L, hd), k (B, H/4, L, hd)\n")
    print("| form (transformers' module) | B x H x L x hd | dtype | sinpe | HF | HF/sinpe |")
    print("|---|---|---|---|---|---|")
    forms = [("apply_rotary_pos_emb", "llama"), ("apply_rotary_pos_emb_olmo", "olmo"),
             ("apply_rotary_pos_emb_float32", "modernbert"),
             ("apply_rotary_pos_emb_cohere", "cohere")]
    for form, mod in forms:
        ref = importlib.import_module(f"transformers.models.{mod}.modeling_{mod}")
        ref = ref.apply_rotary_pos_emb
        # the small shape, a prefill's, and a training batch's (2 x 32 x 1024 x 128:
        # past 1 M values, where the forms take the core's forward and the captured backward)
        for B, H, L, hd in ((1, 8, 64, 64), (2, 16, 256, 64), (2, 32, 1024, 128)):
            for dt in (torch.float32, torch.bfloat16):
                q0 = torch.randn(B, H, L, hd).to(dt)
                k0 = torch.randn(B, max(1, H // 4), L, hd).to(dt)
                ang = torch.randn(B, L, hd)
                cdt = torch.float32 if mod == "olmo" else dt
                cos, sin = ang.cos().to(cdt), ang.sin().to(cdt)
                gq, gk = torch.randn(q0.shape).to(dt), torch.randn(k0.shape).to(dt)
                leaves = {}

                def setup(name):
                    leaves["q"] = q0.clone().requires_grad_()
                    leaves["k"] = k0.clone().requires_grad_()

                def step(f):
                    def run():
                        a, b = f(leaves["q"], leaves["k"], cos, sin)
                        torch.autograd.backward((a, b), (gq, gk))
                    return run
                t = interleaved({"s": step(getattr(st, form)), "h": step(ref)}, repeats, setup)
                r = t["h"] / t["s"]
                name = f"training {form} {B}x{H}x{L}x{hd} {str(dt).split('.')[1]}"
                if r < 1.0:
                    misses.append((name, r))
                print(f"| {form} ({mod}) | {B} x {H} x {L} x {hd} | {str(dt).split('.')[1]} | "
                      f"{us(t['s'])} | {us(t['h'])} | {r:.2f} |")


def numpy_view(t):
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def sinpe_takes_tensors():
    try:
        x = torch.zeros(1, 2, 4)
        sinpe.add_pe(x)
        return True
    except TypeError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="a few shapes (a smoke run)")
    ap.add_argument("--compile", action="store_true", help="also torch.compile of HF's eager rope")
    ap.add_argument("--decode", action="store_true",
                    help="only the RoPE rows of issue 23 (decode step, prefill, hf_rope)")
    ap.add_argument("--training", action="store_true",
                    help="only the training rows of issue 35 (forward + backward)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    sinpe.set_threads(a.threads)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {cpu_name()}")
    print(f"torch {torch.__version__}, numpy {np.__version__}, sinpe {sinpe.__version__}, "
          f"backend {sinpe.get_backend()}, kernel {sinpe.get_kernel()}, {a.threads} threads; "
          f"cache: {getattr(sinpe, 'cache_info', lambda: 'none')()}")
    if a.quick:
        shapes = [(8, 128, 512), (1, 2048, 1024), (64, 64, 256)]
        held = [(1, 8, 64), (2, 256, 768), (1, 4096, 512)]
        packed = [(8, 128, 512)]
        ropes = [(1, 32, 512, 128)]
        decode = [(1, 32, 1, 128), (8, 32, 1, 128), (1, 32, 300, 128)]
    else:
        shapes = [(B, L, d) for B in (1, 8, 64) for L in (64, 128, 512, 2048)
                  for d in (256, 512, 768, 1024) if B * L * d <= 64 * 512 * 1024]
        packed = [(8, 128, 512), (64, 64, 256), (8, 512, 768), (1, 2048, 1024)]
        ropes = [(1, 32, 512, 128), (8, 8, 128, 64), (1, 32, 2048, 128), (64, 8, 64, 64)]
        held = [(1, 8, 64), (2, 256, 768), (1, 4096, 512), (32, 128, 1024), (64, 8, 256),
                (8, 512, 512), (1, 1024, 1024), (16, 64, 128), (64, 64, 1024)]
        # the decode step (one token, k with H / 4 heads) and the rotary module at 300
        decode = [(1, 32, 1, 128), (4, 32, 1, 128), (8, 32, 1, 128), (16, 32, 1, 128),
                  (1, 32, 300, 128), (2, 16, 256, 64)]
    if a.decode or a.training:
        misses = []
        (decode_rows if a.decode else training_rows)(a.repeats, misses)
        print("\nmisses (ratio < 1):" if misses else "\nno misses")
        for name, r in misses:
            print(f"MISS {name}: {r:.2f}")
        return
    add_rows(shapes, a.repeats)
    held_rows(held, a.repeats)
    packed_rows(packed, a.repeats)
    rope_rows(ropes, a.repeats, a.compile)
    hf_rows(ropes + decode, a.repeats)
    print(f"\n## misses ({len(MISSES)}): ratios below their target\n")
    for name, r, target in MISSES:
        print(f"- {name}: {r:.2f} (target {target:.2f})")


if __name__ == "__main__":
    main()
