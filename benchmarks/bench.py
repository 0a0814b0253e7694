#!/usr/bin/env python3
"""Benchmarks: sinpe against the torch reference and NumPy, measured in one run.

    pip install '.[test]' && python benchmarks/bench.py [--repeats 7] [--quick]

Each case times its contenders in interleaved rounds (sinpe, torch, NumPy,
sinpe, ...) and reports medians, so that drift of the machine cancels in the
ratios.  Ratios > 1 mean sinpe is faster.
"""
import argparse
import math
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch

import sinpe

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from reference import SinusoidalPositionalEncoding  # noqa: E402


def numpy_formula(max_len, d_model, base=10000.0):
    """The reference steps in NumPy (float32 throughout, NumPy's own sin/cos/exp)."""
    c = np.float32(-math.log(base) / d_model)
    div = np.exp(np.arange(0, d_model, 2).astype(np.float32) * c)
    ang = np.arange(max_len, dtype=np.float32)[:, None] * div
    pe = np.empty((max_len, d_model), np.float32)
    pe[:, 0::2] = np.sin(ang)
    pe[:, 1::2] = np.cos(ang)
    return pe


def interleaved(fns, repeats):
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    a = ap.parse_args()
    L, d = (1024, 256) if a.quick else (8192, 1024)
    B, S, D = (2, 256, 256) if a.quick else (16, 2048, 1024)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.processor() or ''}")
    print(f"torch {torch.__version__}, numpy {np.__version__}, sinpe {sinpe.__version__}; "
          f"oneMKL: {sinpe.numerics()['mkl'].get('version', 'not loaded')}")
    torch.set_num_threads(1)
    SinusoidalPositionalEncoding(16, 16)
    rows = []
    backends = [b for b, ok in sinpe.backends().items() if ok]
    for threads in (1, 2):
        torch.set_num_threads(threads)
        fns = {f"sinpe[{b}]": (lambda b=b: sinpe.positional_encoding(L, d, backend=b)) for b in backends}
        fns["torch"] = lambda: SinusoidalPositionalEncoding(d, L)
        fns["numpy formula"] = lambda: numpy_formula(L, d)
        fns["np.full"] = lambda: np.full((L, d), 1.0, np.float32)
        t = interleaved(fns, a.repeats)
        for b in backends:
            s = t[f"sinpe[{b}]"]
            rows.append((f"table {L}x{d}", b, threads, s, t["torch"], t["numpy formula"], t["np.full"]))
        x = np.random.default_rng(0).standard_normal((B, S, D)).astype(np.float32)
        xt = torch.from_numpy(x.copy())
        ref = SinusoidalPositionalEncoding(D, S)
        ref.eval()
        pe = sinpe.positional_encoding(S, D)
        fns = {f"sinpe[{b}]": (lambda b=b: sinpe.add_pe(x, backend=b)) for b in backends}
        fns["torch"] = lambda: xt + ref.pe[:, :S]
        fns["np.add"] = lambda: np.add(x, pe, out=x)
        t = interleaved(fns, a.repeats)
        for b in backends:
            rows.append((f"add_pe {B}x{S}x{D}", b, threads, t[f"sinpe[{b}]"], t["torch"], t["np.add"], None))
    print()
    print("| case | backend | torch threads | sinpe ms | torch ms | torch/sinpe | NumPy ms | NumPy/sinpe | np.full ms | sinpe/np.full |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for case, b, th, s, tt, npt, full in rows:
        full_s = f"{full*1e3:.1f} | {s/full:.2f}" if full else "- | -"
        print(f"| {case} | {b} | {th} | {s*1e3:.1f} | {tt*1e3:.1f} | {tt/s:.2f} | {npt*1e3:.1f} | {npt/s:.2f} | {full_s} |")
    print("\n(sinpe runs single-threaded in this version; 'NumPy' is the formula in NumPy for tables and "
          "np.add(x, pe, out=x) with a precomputed pe for add_pe)")


if __name__ == "__main__":
    main()
