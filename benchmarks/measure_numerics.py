#!/usr/bin/env python3
"""Measure how torch computes the table and which sinpe backend reproduces it.

Needs the test extras (torch==2.13.0, mkl==2024.2.0):
    pip install '.[test]' && python benchmarks/measure_numerics.py
Prints mismatch counts (uint32 comparisons) that the README's Numerics
section quotes.  Run from outside the source tree or after `pip install .`.
"""
import math
import os
import sys

import numpy as np
import torch

import sinpe

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from reference import SinusoidalPositionalEncoding  # noqa: E402


def ndiff(a, b):
    return int((np.ascontiguousarray(a).view(np.uint32) != np.ascontiguousarray(b).view(np.uint32)).sum())


def main():
    print("torch", torch.__version__)
    cfg = [l.strip() for l in torch.__config__.show().splitlines() if "Math Kernel" in l]
    print("torch bundles:", cfg[0] if cfg else "no oneMKL")
    print("sinpe numerics:", sinpe.numerics()["mkl"].get("version"))
    default_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    SinusoidalPositionalEncoding(16, 16)  # warm-up, single-threaded
    rng = np.random.default_rng(0)
    d = 512
    div_t = torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d)).numpy()
    angles = {
        "table 5000x512 angles": (np.arange(5000, dtype=np.float32)[:, None] * div_t).ravel(),
        "2e6 uniform [0, 200)": rng.uniform(0, 200, 2_000_000).astype(np.float32),
        "2e6 uniform [0, 1e5)": rng.uniform(0, 1e5, 2_000_000).astype(np.float32),
        "2e6 uniform [0, 2^24)": rng.uniform(0, 2**24, 2_000_000).astype(np.float32),
    }
    exp_args = {
        "div_term args, d=512": np.arange(0, d, 2).astype(np.float32) * np.float32(-math.log(1e4) / d),
        "2e6 uniform [-14, 0)": rng.uniform(-14, 0, 2_000_000).astype(np.float32),
    }
    print("\n1. elementwise: values that differ from torch (count / total)")
    print(f"{'input':28s} {'fn':4s} {'threads':>7s} {'mkl backend':>14s} {'builtin (CR)':>14s}")
    for nt in sorted({1, default_threads}):
        torch.set_num_threads(nt)
        for name, a in angles.items():
            for fn in ("sin", "cos"):
                ref = getattr(torch, fn)(torch.from_numpy(a)).numpy()
                m = ndiff(sinpe.elementwise(fn, a, backend="mkl"), ref)
                b = ndiff(sinpe.elementwise(fn, a, backend="builtin"), ref)
                print(f"{name:28s} {fn:4s} {nt:7d} {m:8d}/{a.size:<7d} {b:8d}/{a.size}")
        for name, a in exp_args.items():
            ref = torch.exp(torch.from_numpy(a)).numpy()
            m = ndiff(sinpe.elementwise("exp", a, backend="mkl"), ref)
            b = ndiff(sinpe.elementwise("exp", a, backend="builtin"), ref)
            print(f"{name:28s} {'exp':4s} {nt:7d} {m:8d}/{a.size:<7d} {b:8d}/{a.size}")

    print("\n2. oneMKL results do not depend on how an array is cut (values differing from one whole call)")
    a = angles["2e6 uniform [0, 1e5)"]
    for fn in ("sin", "cos"):
        whole = sinpe.elementwise(fn, a, backend="mkl")
        for ch in (1, 3, 7, 13, 2048, 100_003):
            sub = a[:20_000] if ch < 10 else a
            parts = np.concatenate([sinpe.elementwise(fn, sub[i:i + ch], backend="mkl")
                                    for i in range(0, sub.size, ch)])
            print(f"  {fn} chunks of {ch:>6d} over {sub.size:>7d} values: {ndiff(parts, whole[:sub.size])} differ")
        for s in (1, 5):
            print(f"  {fn} start shifted by {s}: {ndiff(sinpe.elementwise(fn, a[s:], backend='mkl'), whole[s:])} differ")

    print("\n3. whole tables vs the reference module (values that differ)")
    for nt in sorted({1, default_threads}):
        torch.set_num_threads(nt)
        for (L, dm) in ((5000, 512), (20000, 1024)):
            ref = SinusoidalPositionalEncoding(dm, L).pe[0].numpy()
            m = ndiff(sinpe.positional_encoding(L, dm, backend="mkl"), ref)
            b = ndiff(sinpe.positional_encoding(L, dm, backend="builtin"), ref)
            print(f"  {L}x{dm} threads={nt}: mkl {m}, builtin {b} of {ref.size}")

    print("\n4. torch.arange(float) positions vs round-to-nearest(i)")
    n = 2**27 + 4096
    pos = torch.arange(0, n, dtype=torch.float).numpy()
    exact = np.arange(n, dtype=np.float64).astype(np.float32)
    bad = np.nonzero(pos.view(np.uint32) != exact.view(np.uint32))[0]
    print(f"  first differing position: {bad[0] if bad.size else None} (2^27 = {2**27}); "
          f"{bad.size} of {n} differ")
    torch.set_num_threads(default_threads)


if __name__ == "__main__":
    main()
