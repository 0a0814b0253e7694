"""Command line: write a positional-encoding table to .npy or .npz, optionally plot it; or
check where the engines serving a model rotate it differently (rope-check).

    python -m sinpe --max-len 5000 --d-model 512 -o pe.npy
    python -m sinpe --max-len 2048 --d-model 256 --dtype float16 -o pe.npz --plot pe.png
    sinpe rope-check path/to/config.json --positions 4096 --dtype bfloat16 --json

Exit status: 0 on success (also when the reader of stdout stops early, as `| head` does),
2 for bad arguments or a bad SINPE_* environment variable, 1 when the file or the report cannot be written, 130 on Ctrl-C.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from typing import Any, List, Optional

import numpy as np

DTYPES = ("float32", "float16", "bfloat16", "float64")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sinpe",
        description="Write a sinusoidal positional-encoding table to a .npy or .npz file. Its "
                    "bits are the backend's: torch's with --backend torch (the installed torch's "
                    "own kernels) or mkl (the mkl wheel, in the releases measured equal to "
                    "torch's copy of oneMKL); correctly rounded with builtin (about 5% of values "
                    "differ from torch's); auto takes torch's bits when it can, else builtin.",
        epilog="The numerics used are printed after the table is written.")
    p.add_argument("--max-len", type=int, required=True, metavar="N", help="number of positions (rows)")
    p.add_argument("--d-model", type=int, required=True, metavar="D", help="embedding width (even, >= 2)")
    p.add_argument("--base", type=float, default=10000.0, help="wavelength base (default 10000)")
    p.add_argument("--dtype", choices=DTYPES, default="float32", help="element type (default float32)")
    from sinpe._backends.records import NAMES
    p.add_argument("--numerics", "--backend", dest="numerics", choices=["auto"] + NAMES,
                   default="auto", metavar="BACKEND",
                   help="numerics backend: auto (default: torch's bits when it can, see the "
                   "docs/backends.md), torch (the installed torch's own kernels), mkl (the mkl wheel), "
                   "builtin (correctly rounded), sleef or torch-aarch64-2.13/2.14/2.15[-sve256] "
                   "(torch on 64-bit Arm)")
    p.add_argument("--torch-threads", type=int, default=None, metavar="N",
                   help="for the torch-aarch64 profiles: torch's thread count (its vectors "
                   "depend on it; default: the running torch's, or torch's default)")
    p.add_argument("--threads", type=int, default=None, help="worker threads (default: all usable CPUs)")
    p.add_argument("-o", "--out", required=True, metavar="FILE",
                   help="output file: .npy, or .npz (compressed, array named 'pe')")
    p.add_argument("--plot", metavar="FILE.png", help="also save a heatmap of the table (needs matplotlib)")
    return p


def _fill(sinpe: Any, table: Any, args: argparse.Namespace, backend: Optional[str]) -> None:
    """Fills the table in row blocks (offset=, out=), with a progress bar on stderr when
    the whole job is predicted to take more than a second."""
    n, d = args.max_len, args.d_model
    block = max(1, (1 << 20) // d)
    from sinpe._backends.policy import get_default, resolve
    from sinpe._backends.records import PROFILES
    if resolve(backend or get_default())[0] in PROFILES:
        block = max(n, 1)  # torch's vectors on Arm span the whole table: one call
    after = float(os.environ.get("SINPE_PROGRESS_AFTER", "1.0"))  # seconds; tests set 0
    t0 = time.perf_counter()
    shown = False
    for start in range(0, n, block):
        stop = min(n, start + block)
        sinpe.positional_encoding(stop - start, d, args.base, offset=start, out=table[start:stop],
                                  backend=backend, torch_threads=args.torch_threads,
                                  threads=args.threads)
        elapsed = time.perf_counter() - t0
        if shown or (stop < n and elapsed * n / stop > after):
            shown = True
            frac = stop / n
            bar = "#" * int(30 * frac)
            sys.stderr.write(f"\rsinpe: [{bar:<30s}] {100 * frac:5.1f}%  {elapsed:5.1f} s")
            sys.stderr.flush()
    if shown:
        sys.stderr.write("\n")


def _report(sinpe: Any, args: argparse.Namespace, backend: Optional[str], shape: Any) -> None:
    info = sinpe.numerics()
    used = sinpe._policy.resolve(backend)[0] if backend else info["backend"]
    threads = args.threads if args.threads is not None else info["threads"]
    print(f"wrote {args.out}: {args.dtype} table of shape {shape}, base {args.base:g}")
    if args.dtype == "bfloat16":
        key = "np.load(path)" if args.out.endswith(".npy") else "np.load(path)['pe']"
        print(f"note: NumPy stores bfloat16 as raw 2-byte values ('|V2'); load it with "
              f"{key}.view(ml_dtypes.bfloat16)")
    # a plain name ('numpy', 'sleef') is described as such: the profile it stands for, and why
    named = backend or (info["default"] if info["default"] != "auto" else used)
    print(f"numerics: backend {used!r} ({info['kernel']} kernel, {threads} "
          f"thread{'s' if threads != 1 else ''}): {sinpe.reproduces(named, args.torch_threads)}")
    if used == "mkl":
        print(f"oneMKL: {info['mkl']['version']} ({info['mkl']['path']})")
    elif not info["available"]["mkl"]:
        print(f"(oneMKL not used: {info['mkl']['reason']})")
    if args.plot:
        print(f"plot: {args.plot}")
    sys.stdout.flush()


def main(argv: Optional[List[str]] = None) -> int:
    """The command line; sinpe's warnings (a framework's release with no measured profile)
    are printed as `sinpe: warning: ...` on stderr, the table is still written."""
    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message: Any, category: Any, *rest: Any, **kw: Any) -> None:
            if getattr(category, "__name__", "") == "SinpeWarning":
                print(f"sinpe: warning: {message}", file=sys.stderr)
            else:
                shown(message, category, *rest, **kw)
        warnings.showwarning = show
        return _main(argv)


def _check_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sinpe rope-check",
        description="Where the engines that serve a model would rotate its q differently from "
                    "transformers: a seeded q of the config's head_dim rotated by transformers' "
                    "eager rotation and by each producer (docs/engines.md); per producer the "
                    "values whose bits differ, the largest absolute difference and the first "
                    "differing position.")
    p.add_argument("config", help="a transformers config.json, or a folder holding one")
    p.add_argument("--positions", type=int, default=512, metavar="N",
                   help="positions 0 .. N-1 (default 512)")
    p.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32",
                   help="q's dtype (default float32)")
    p.add_argument("--producers", metavar="A,B,...",
                   help="producers to compare (default: every one but transformers)")
    p.add_argument("--heads", type=int, default=4, help="heads of q (default 4)")
    p.add_argument("--layer-type", metavar="NAME",
                   help="for configs whose rope is keyed by layer type (Gemma 3)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--plot", metavar="FILE.png",
                   help="also save the differences per position and column (needs matplotlib)")
    return p


def _rope_check(argv: List[str]) -> int:
    """sinpe rope-check CONFIG ...: 0, 2 for bad arguments or a config sinpe cannot read, 1
    when the plot cannot be written."""
    import json

    from sinpe import _rope_check as rc
    args = _check_parser().parse_args(argv)
    producers = None if args.producers is None else [
        p.strip() for p in args.producers.split(",") if p.strip()]
    try:
        results = rc.rope_check(args.config, positions=args.positions, dtype=args.dtype,
                                producers=producers, heads=args.heads,
                                layer_type=args.layer_type, keep=bool(args.plot))
    except (OSError, ValueError, TypeError, NotImplementedError, OverflowError,
            MemoryError) as exc:
        print(f"sinpe rope-check: error: {exc}", file=sys.stderr)
        return 2
    if args.plot:
        try:
            rc.plot(results, args.plot)
        except ImportError as exc:
            print(f"sinpe rope-check: error: --plot needs matplotlib: {exc}", file=sys.stderr)
            return 1
        except OSError as exc:
            print(f"sinpe rope-check: error: cannot write the plot: {exc}", file=sys.stderr)
            return 1
    shown = {n: {k: v for k, v in r.items() if k != "diff"} for n, r in results.items()}
    print(json.dumps(shown, indent=1) if args.json else rc.report(shown))
    return 0


def _main(argv: Optional[List[str]]) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        import sinpe  # the environment (SINPE_*) is read at import
    except (ValueError, RuntimeError, TypeError, OverflowError, Warning) as exc:
        print(f"sinpe: error: {exc}", file=sys.stderr)
        return 2
    if sinpe._ENV_ERROR is not None:
        print(f"sinpe: error: {sinpe._ENV_ERROR}", file=sys.stderr)
        return 2
    if argv and argv[0] == "rope-check":
        return _rope_check(argv[1:])
    args = _parser().parse_args(argv)
    if not args.out.endswith((".npy", ".npz")):
        print(f"sinpe: error: --out must end in .npy or .npz, got {args.out!r}", file=sys.stderr)
        return 2
    if args.plot and not args.plot.endswith(".png"):
        print(f"sinpe: error: --plot must end in .png, got {args.plot!r}", file=sys.stderr)
        return 2

    backend = None if args.numerics == "auto" else args.numerics
    try:
        # every check (sizes, base, dtype, memory) before the (possibly long) fill
        core = sinpe._backends.policy.opts(backend, args.threads, args.torch_threads)
        table = sinpe._jobs.empty_table(core, args.max_len, args.d_model, args.base,
                                         dtype=args.dtype)
        _fill(sinpe, table, args, backend)
    except (TypeError, ValueError, OverflowError, MemoryError, RuntimeError, Warning) as exc:
        # (a warning turned into an error by the user's filters: PYTHONWARNINGS=error)
        print(f"sinpe: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nsinpe: interrupted; nothing written", file=sys.stderr)
        return 130
    try:
        if args.out.endswith(".npz"):
            np.savez_compressed(args.out, pe=table)
        else:
            np.save(args.out, table)
        if args.plot:
            from sinpe import plot

            plot.heatmap(table).savefig(args.plot, dpi=100)  # drawn from a bounded sample
    except ImportError as exc:
        print(f"sinpe: error: --plot needs matplotlib (pip install 'sinpe[plot]'): {exc}",
              file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"sinpe: error: cannot write: {exc}", file=sys.stderr)
        return 1
    try:
        _report(sinpe, args, backend, table.shape)
    except BrokenPipeError:
        # the reader of stdout went away (`sinpe ... | head -1`): the table is written, so
        # this is not an error; keep Python from reporting it again at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:  # stdout itself cannot be written (e.g. /dev/full)
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        print(f"sinpe: error: the table was written to {args.out}, but the report could not "
              f"be printed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
