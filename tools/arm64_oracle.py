"""Oracle tables from real torch on 64-bit Arm (run under qemu-aarch64, not by the suite).

Builds the seed-000 module's tables (tests/reference.py) with the torch this Python has, at
each torch thread count given, and prints JSON: torch's version and CPU capability, then per
(shape, base, threads) the SHA-256 of the table's bytes, plus torch.sin/cos/exp of a fixed
mix of inputs (elementwise, 1 thread and the other counts).  tests/data/torch_arm64.json holds
the digests the suite compares sinpe's 'torch-aarch64-*' profiles with.

    # $P (e.g. ~/.cache/sinpe-arm64): an aarch64 Python 3.11 in $P/sysroot (Debian's arm64
    # packages unpacked with dpkg-deb -x, plus a fake aarch64 /proc/cpuinfo), torch's aarch64
    # wheel with NumPy and the nvidia-* wheels it links unzipped into $P/site, and
    # $P/pyarm.sh, which runs that Python under qemu-aarch64 -L $P/sysroot (docs/numerics.md)
    QEMU_CPU=neoverse-n1 $P/pyarm.sh tools/arm64_oracle.py > out.json  # DEFAULT (NEON)
    QEMU_CPU=max,sve-default-vector-length=16 ...                     # SVE128
    QEMU_CPU=max,sve-default-vector-length=32 ...                     # SVE256
"""
import hashlib
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

SHAPES = [(4096, 512), (333, 96), (20000, 64), (20001, 6), (4095, 510), (20001, 66), (333, 98),
          (2049, 34), (5000, 512), (1, 8192)]
BASES = [10000.0, 500000.0]
THREADS = [1, 2, 3]


def digest(a):
    return hashlib.sha256(np.ascontiguousarray(a).view(np.uint32).tobytes()).hexdigest()


def mixed_inputs():
    """Elementwise inputs mixing small, around 125, around 39000, large and special values."""
    rng = np.random.default_rng(2026)
    parts = [rng.uniform(-5000, 5000, 300_000), rng.uniform(-130, 130, 300_000),
             rng.uniform(38000, 40000, 100_000), rng.uniform(-1e6, 1e6, 100_000),
             np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 125.0, -125.0, 39000.0, 1e30])]
    x = np.concatenate(parts).astype(np.float32)
    rng.shuffle(x)
    return x


def main():
    # torch here only: the suite imports this file for mixed_inputs(), with or without torch
    import torch
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    from reference import SinusoidalPositionalEncoding
    out = {"torch": torch.__version__, "capability": torch.backends.cpu.get_cpu_capability(),
           "tables": {}, "elementwise": {}}
    x = torch.from_numpy(mixed_inputs())
    e = torch.from_numpy(np.random.default_rng(7).uniform(-14, 0, 500_000).astype(np.float32))
    for t in THREADS:
        torch.set_num_threads(t)
        for (L, d) in SHAPES:
            for base in BASES:
                pe = SinusoidalPositionalEncoding(d, L, base=base).pe[0].numpy()
                out["tables"][f"{L}x{d}@{base:g}/t{t}"] = digest(pe)
        out["elementwise"][f"sin/t{t}"] = digest(torch.sin(x).numpy())
        out["elementwise"][f"cos/t{t}"] = digest(torch.cos(x).numpy())
        out["elementwise"][f"exp/t{t}"] = digest(torch.exp(e).numpy())
    json.dump(out, sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
