"""Smoke check of an installed sinpe (a wheel, an sdist build): run from any directory.

A table, add_pe, the float16 output and numerics(), without torch.  The built-in kernels
are correctly rounded, so the table must equal, bit for bit, float64 NumPy's exp/sin/cos of
the same float32 steps rounded to float32: the double results are within an ulp, which
decides the float32 rounding everywhere but on a few hard inputs of all 2^32 (tests/data),
none of them among these values.  Prints the kernel, the backend and sha256 of the table.
Exit status 0 when everything holds.

    python tools/smoke.py
"""
import hashlib
import json
import math
import os
import sys

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != os.path.dirname(here)]
import sinpe  # noqa: E402  (the installed package, never the source tree's)


def reference(max_len, d_model, base):
    """The seed-000 formula step by step in float32, each exp/sin/cos in float64 then rounded."""
    c = np.float32(-math.log(base) / d_model)
    arg = np.arange(0, d_model, 2).astype(np.float32) * c
    div = np.exp(arg.astype(np.float64)).astype(np.float32)
    ang = np.arange(max_len).astype(np.float32)[:, None] * div[None, :]
    pe = np.empty((max_len, d_model), np.float32)
    pe[:, 0::2] = np.sin(ang.astype(np.float64)).astype(np.float32)
    pe[:, 1::2] = np.cos(ang.astype(np.float64)).astype(np.float32)
    return pe


def main():
    t = sinpe.positional_encoding(128, 64, backend="builtin")
    want = reference(128, 64, 10000.0)
    bad = int(np.count_nonzero(t.view(np.uint32) != want.view(np.uint32)))
    x = np.ones((2, 128, 64), np.float32)
    sinpe.add_pe(x, backend="builtin")
    added = bool(np.array_equal((np.float32(1) + want)[None].repeat(2, 0).view(np.uint32),
                                x.view(np.uint32)))
    h = sinpe.positional_encoding(16, 8, dtype="float16", backend="builtin")
    half = h.dtype == np.float16 and np.array_equal(h, reference(16, 8, 10000.0).astype(np.float16))
    info = sinpe.numerics()
    print(json.dumps({"python": sys.version.split()[0], "numpy": np.__version__,
                      "sinpe": sinpe.__version__, "kernel": sinpe.get_kernel(),
                      "kernels": sinpe.kernels(), "default_backend": info.get("backend"),
                      "sha256": hashlib.sha256(t.tobytes()).hexdigest(),
                      "differences": bad, "add_pe": added, "float16": bool(half)}))
    return 0 if bad == 0 and added and half else 1


if __name__ == "__main__":
    sys.exit(main())
