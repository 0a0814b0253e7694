"""Command line: write a positional-encoding table to .npy or .npz, optionally plot it.

    python -m sinpe --max-len 5000 --d-model 512 -o pe.npy
    python -m sinpe --max-len 2048 --d-model 256 --dtype float16 -o pe.npz --plot pe.png

Exit status: 0 on success, 2 for bad arguments, 1 when writing fails.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, List, Optional

import numpy as np

DTYPES = ("float32", "float16", "bfloat16", "float64")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m sinpe",
        description="Write a sinusoidal positional-encoding table (bit for bit equal to the "
                    "PyTorch reference on the 'mkl' numerics) to a .npy or .npz file.",
        epilog="The numerics used are printed after the table is written.")
    p.add_argument("--max-len", type=int, required=True, metavar="N", help="number of positions (rows)")
    p.add_argument("--d-model", type=int, required=True, metavar="D", help="embedding width (even, >= 2)")
    p.add_argument("--base", type=float, default=10000.0, help="wavelength base (default 10000)")
    p.add_argument("--dtype", choices=DTYPES, default="float32", help="element type (default float32)")
    p.add_argument("--numerics", "--backend", dest="numerics", choices=("auto", "builtin", "mkl"),
                   default="auto", help="numerics backend: mkl = torch's bits (x86-64, needs the "
                   "mkl extra), builtin = correctly rounded (default: auto)")
    p.add_argument("--threads", type=int, default=None, help="worker threads (default: all usable CPUs)")
    p.add_argument("-o", "--out", required=True, metavar="FILE",
                   help="output file: .npy, or .npz (compressed, array named 'pe')")
    p.add_argument("--plot", metavar="FILE.png", help="also save a heatmap of the table (needs matplotlib)")
    return p


def _fill(sinpe: Any, table: Any, args: argparse.Namespace, backend: Optional[str]) -> None:
    """Fills the float32 table in row blocks, with a progress bar on stderr when the
    whole job is predicted to take more than a second."""
    n, d = args.max_len, args.d_model
    block = max(1, (1 << 20) // d)
    after = float(os.environ.get("SINPE_PROGRESS_AFTER", "1.0"))  # seconds; tests set 0
    t0 = time.perf_counter()
    shown = False
    for start in range(0, n, block):
        stop = min(n, start + block)
        sinpe.positional_encoding(d_model=d, positions=np.arange(start, stop), base=args.base,
                                  out=table[start:stop], backend=backend, threads=args.threads)
        elapsed = time.perf_counter() - t0
        if shown or (stop < n and elapsed * n / stop > after):
            shown = True
            frac = stop / n
            bar = "#" * int(30 * frac)
            sys.stderr.write(f"\rsinpe: [{bar:<30s}] {100 * frac:5.1f}%  {elapsed:5.1f} s")
            sys.stderr.flush()
    if shown:
        sys.stderr.write("\n")


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    if not args.out.endswith((".npy", ".npz")):
        print(f"sinpe: error: --out must end in .npy or .npz, got {args.out!r}", file=sys.stderr)
        return 2
    if args.plot and not args.plot.endswith(".png"):
        print(f"sinpe: error: --plot must end in .png, got {args.plot!r}", file=sys.stderr)
        return 2

    import sinpe

    backend = None if args.numerics == "auto" else args.numerics
    try:
        # validate everything before the (possibly long) fill
        sinpe.positional_encoding(0, args.d_model, args.base, dtype=args.dtype, backend=backend,
                                  threads=args.threads)
        if args.max_len < 0:
            raise ValueError(f"max_len must be >= 0, got {args.max_len}")
        table = np.empty((args.max_len, args.d_model), np.float32)
        _fill(sinpe, table, args, backend)
        dt = sinpe._api.resolve_dtype(args.dtype)
        result = table if dt == np.float32 else table.astype(dt)
    except (TypeError, ValueError, OverflowError, MemoryError, RuntimeError) as exc:
        print(f"sinpe: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nsinpe: interrupted; nothing written", file=sys.stderr)
        return 130
    try:
        if args.out.endswith(".npz"):
            np.savez_compressed(args.out, pe=result)
        else:
            np.save(args.out, result)
        if args.plot:
            from sinpe import plot

            plot.heatmap(table).savefig(args.plot, dpi=100)
    except ImportError as exc:
        print(f"sinpe: error: --plot needs matplotlib (pip install 'sinpe[plot]'): {exc}",
              file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"sinpe: error: cannot write: {exc}", file=sys.stderr)
        return 1
    info = sinpe.numerics()
    used = backend or info["backend"]
    print(f"wrote {args.out}: {args.dtype} table of shape {result.shape}, base {args.base:g}")
    print(f"numerics: backend {used!r} ({info['kernel']} kernel, {info['threads']} threads): "
          f"{sinpe.REPRODUCES[used]}")
    if used == "mkl":
        print(f"oneMKL: {info['mkl']['version']} ({info['mkl']['path']})")
    elif not info["available"]["mkl"]:
        print(f"(oneMKL not used: {info['mkl']['reason']})")
    if args.plot:
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
