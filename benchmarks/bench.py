#!/usr/bin/env python3
"""Benchmarks: sinpe against the torch reference and NumPy, measured in one run.

    pip install '.[test]' && python benchmarks/bench.py [--repeats 7] [--quick]

Each case times its contenders in interleaved rounds (sinpe, torch, NumPy,
np.full, sinpe, ...) and reports medians, so that drift of the machine
cancels in the ratios.  torch and sinpe run at the same thread count.
Ratios: torch/sinpe and NumPy/sinpe > 1 mean sinpe is faster; sinpe/np.full
is how far a table is from the cost of just writing its bytes.
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
    for f in fns.values():  # one untimed warm-up round
        f()
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def configs():
    """(backend, kernel) pairs available here; the kernel matters for builtin (the others
    use the default path only for their stores)."""
    out = [("builtin", k) for k in sinpe.kernels()]
    default = sinpe.get_kernel()
    for be in ("mkl", "torch"):
        if sinpe.backends()[be]:
            out.append((be, default))
    return out


def alternating(sinpe_call, torch_call, repeats):
    """One sinpe call, one torch call, in turn (torch gets recycled memory from its
    allocator this way, as in a loop that builds tables): medians of each."""
    sinpe_call(), torch_call()
    ts, tt = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        sinpe_call()
        t1 = time.perf_counter()
        torch_call()
        t2 = time.perf_counter()
        ts.append(t1 - t0)
        tt.append(t2 - t1)
    return statistics.median(ts), statistics.median(tt)


def torch_parallel_work():
    """Parallel torch work whose OpenMP workers may spin afterwards."""
    a = torch.randn(1024, 1024)
    for _ in range(3):
        a = torch.tanh(a @ a)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    a = ap.parse_args()
    L, d = (1024, 256) if a.quick else (8192, 1024)
    B, S, D = (2, 256, 256) if a.quick else (16, 2048, 1024)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {cpu_name()}")
    print(f"torch {torch.__version__}, numpy {np.__version__}, sinpe {sinpe.__version__}; "
          f"oneMKL: {sinpe.numerics()['mkl'].get('version', 'not loaded')}")
    torch.set_num_threads(1)
    SinusoidalPositionalEncoding(16, 16)
    old_kernel = sinpe.get_kernel()
    rows = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        x = np.random.default_rng(0).standard_normal((B, S, D)).astype(np.float32)
        xt = torch.from_numpy(x.copy())
        ref = SinusoidalPositionalEncoding(D, S)
        ref.eval()
        pe = sinpe.positional_encoding(S, D)
        for be, k in configs():
            sinpe.set_kernel(k)
            t = interleaved({
                "sinpe": lambda: sinpe.positional_encoding(L, d, backend=be, threads=threads),
                "torch": lambda: SinusoidalPositionalEncoding(d, L),
                "numpy": lambda: numpy_formula(L, d),
                "full": lambda: np.full((L, d), 1.0, np.float32),
            }, a.repeats)
            rows.append((f"table {L}x{d}", be, k, threads, t["sinpe"], t["torch"], t["numpy"], t["full"]))
            t = interleaved({
                "sinpe": lambda: sinpe.add_pe(x, backend=be, threads=threads),
                "torch": lambda: xt + ref.pe[:, :S],
                "numpy": lambda: np.add(x, pe, out=x),
            }, a.repeats)
            rows.append((f"add_pe {B}x{S}x{D}", be, k, threads, t["sinpe"], t["torch"], t["numpy"], None))
    sinpe.set_kernel(old_kernel)
    alt = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for be in [c[0] for c in configs() if c[0] != "builtin"] + ["builtin"]:
            s_, t_ = alternating(lambda: sinpe.positional_encoding(L, d, backend=be, threads=threads),
                                 lambda: SinusoidalPositionalEncoding(d, L), max(a.repeats, 9))
            alt.append((be, threads, s_, t_))
    near = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        x = np.random.default_rng(0).standard_normal((B, S, D)).astype(np.float32)
        for what, call in (("table", lambda: sinpe.positional_encoding(L, d, threads=threads)),
                           ("add_pe", lambda: sinpe.add_pe(x, threads=threads))):
            quiet = interleaved({"x": call}, a.repeats)["x"]
            after = []
            for _ in range(a.repeats):
                torch_parallel_work()
                t0 = time.perf_counter()
                call()
                after.append(time.perf_counter() - t0)
            near.append((what, threads, quiet, statistics.median(after)))
    print()
    print("| case | backend | kernel | threads | sinpe ms | torch ms | torch/sinpe | NumPy ms | NumPy/sinpe | np.full ms | sinpe/np.full |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for case, be, k, th, s, tt, npt, full in rows:
        full_s = f"{full*1e3:.1f} | {s/full:.2f}" if full else "- | -"
        print(f"| {case} | {be} | {k} | {th} | {s*1e3:.1f} | {tt*1e3:.1f} | {tt/s:.2f} | "
              f"{npt*1e3:.1f} | {npt/s:.2f} | {full_s} |")
    print("\nNumPy: the formula in NumPy (its own sin/cos) for tables; np.add(x, pe, out=x) "
          "with a precomputed pe for add_pe.")

    print(f"\nAlternating protocol, table {L}x{d}: one sinpe call, one torch constructor, in turn:")
    print("| backend | threads | sinpe ms | torch ms | torch/sinpe |")
    print("|---|---|---|---|---|")
    for be, th, s_, t_ in alt:
        print(f"| {be} | {th} | {s_*1e3:.1f} | {t_*1e3:.1f} | {t_/s_:.2f} |")

    print(f"\nRight after parallel torch work (matmuls on torch's threads; its OpenMP workers may "
          f"spin), default backend:")
    print("| call | threads | quiet ms | after torch ms | after/quiet |")
    print("|---|---|---|---|---|")
    for what, th, q_, a_ in near:
        print(f"| {what} | {th} | {q_*1e3:.2f} | {a_*1e3:.2f} | {a_/q_:.2f} |")

    print(f"\nThe write floor, table {L}x{d} into a preallocated out= (no page faults):")
    print("| backend | kernel | threads | sinpe ms | out.fill ms | sinpe/fill |")
    print("|---|---|---|---|---|---|")
    out = np.empty((L, d), np.float32)
    for threads in (1, 2):
        for be, k in configs():
            sinpe.set_kernel(k)
            t = interleaved({"s": lambda: sinpe.positional_encoding(L, d, backend=be, threads=threads, out=out),
                             "f": lambda: out.fill(1.0)}, a.repeats)
            print(f"| {be} | {k} | {threads} | {t['s']*1e3:.2f} | {t['f']*1e3:.2f} | {t['s']/t['f']:.2f} |")
    sinpe.set_kernel(old_kernel)

    print("\nKernel throughput, 1 thread, out= a preallocated table (no page faults):")
    print("| backend | kernel | ns per value (sin or cos) |")
    print("|---|---|---|")
    out = np.empty((L, d), np.float32)
    for be, k in configs():
        sinpe.set_kernel(k)
        t = interleaved({"x": lambda: sinpe.positional_encoding(L, d, backend=be, threads=1, out=out)},
                        a.repeats)["x"]
        print(f"| {be} | {k} | {t / (L * d) * 1e9:.2f} |")
    sinpe.set_kernel(old_kernel)

    print("\nScratch memory besides the output (peak RSS growth during one call, fresh process):")
    print("| call | output / x | peak RSS growth |")
    print("|---|---|---|")
    for what, code in (
        (f"positional_encoding({L}, {d}, out=...)",
         f"x = np.ones(({L}, {d}), np.float32); f = lambda: sinpe.positional_encoding({L}, {d}, out=x, threads=2)"),
        (f"add_pe(x {B}x{S}x{D})",
         f"x = np.ones(({B}, {S}, {D}), np.float32); f = lambda: sinpe.add_pe(x, threads=2)"),
    ):
        prog = ("import resource, numpy as np, sinpe\n" + code + "\n"
                "r0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
                "f()\n"
                "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - r0)\n")
        import subprocess
        r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                           cwd=os.path.dirname(os.path.abspath(__file__)))
        size = (L * d if what.startswith("pos") else B * S * D) * 4 // 1024
        print(f"| {what} | {size} KiB | {r.stdout.strip() or r.stderr.strip()} KiB |")
    print("(C scratch per call: d_model/2 divisors, plus per thread 3 x 2048 floats of stack for "
          "oneMKL blocks and one tile of PE rows: 131072 floats (512 KiB) in add_pe, 8192 "
          "floats in other-dtype tables.)")

if __name__ == "__main__":
    main()
