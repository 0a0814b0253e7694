"""Command line: write a positional-encoding table to a .npy file.

    python -m sinpe --max-len 5000 --d-model 512 -o pe.npy
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

import numpy as np


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sinpe", description=__doc__.splitlines()[1])
    p.add_argument("--max-len", type=int, required=True, help="number of positions (rows)")
    p.add_argument("--d-model", type=int, required=True, help="embedding width (even)")
    p.add_argument("--base", type=float, default=10000.0, help="wavelength base (default 10000)")
    p.add_argument("--backend", choices=("builtin", "mkl"), default=None,
                   help="numerics backend (default: automatic, see sinpe.numerics())")
    p.add_argument("-o", "--out", required=True, help="output file (.npy)")
    args = p.parse_args(argv)

    import sinpe

    try:
        if args.backend:
            sinpe.set_backend(args.backend)
        table = sinpe.positional_encoding(args.max_len, args.d_model, args.base)
    except (TypeError, ValueError, OverflowError, MemoryError, RuntimeError) as exc:
        print(f"sinpe: error: {exc}", file=sys.stderr)
        return 2
    np.save(args.out, table)
    info = sinpe.numerics()
    print(f"wrote {args.out}: float32 table of shape {table.shape}, base {args.base:g}")
    print(f"numerics: backend {info['backend']!r}: {info['reproduces']}")
    if info["backend"] == "mkl":
        print(f"oneMKL: {info['mkl']['version']} ({info['mkl']['path']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
