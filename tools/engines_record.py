"""Records the inference engines' rotations for the default suite (tests/data/engines.npz).

Each case: seeded x of shape (batch, seq, heads, head_dim), transformers' cos/sin of its
positions, and what the engine returned for them (tests/engine_oracles.py drives each engine
as its users do).  tests/numerics/test_numerics_engines.py checks sinpe's producer= against
these records in every run; the live tests (pytest -m engines) run the engines themselves.

    python tools/engines_record.py            # every engine installed (others: said, skipped)
    python tools/engines_record.py --check    # compare the records with the engines again

Needs the engines it records: onnxruntime (with onnx), openvino; torch for inductor.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import engine_oracles as E  # noqa: E402

OUT = os.path.join(ROOT, "tests", "data", "engines.npz")
#: (batch, seq, heads, head_dim, rot): decode, prefill, partial widths, the tails of 16 columns
SHAPES = [(1, 1, 8, 64, 64), (2, 9, 3, 128, 128), (1, 5, 2, 80, 44), (3, 2, 4, 48, 40),
          (1, 7, 2, 32, 8), (1, 2, 1, 256, 254)]


def cases():
    """(engine, producer, dtype name, layout, runner) of every recorded engine."""
    out = []
    for dt in ("float32", "float16"):
        for layout in E.LAYOUTS:
            out.append(("onnxruntime", "onnxruntime", dt, layout,
                        lambda x, c, s, lay: E.onnxruntime(x, c, s, lay)))
    # ONNX's opset-23 op runs the same kernel (measured: the same bits): one case
    out.append(("onnxruntime-opset23", "onnxruntime", "float32", "pairs",
                lambda x, c, s, lay: E.onnxruntime(x, c, s, lay, opset23=True)))
    return out


def inputs(i, shape, dt, layout):
    b, s, h, d, rot = shape
    rng = np.random.default_rng(1000 + i)
    pos = rng.integers(0, 8192, (b, s))
    c, s_ = E.transformers_tables(pos, rot, layout=layout)
    x = (rng.standard_normal((b, s, h, d)) * 3).astype(E.np_dtype(dt))
    if i == len(SHAPES) - 1:  # specials: NaNs of both signs, infinities, zeros, subnormals
        flat = x.reshape(-1)
        u = E.uint_view(x).reshape(-1)
        k = rng.integers(0, 8, flat.size)
        flat[k == 0], flat[k == 1], flat[k == 2], flat[k == 3] = np.nan, np.inf, -np.inf, -0.0
        flat[k == 4] = np.finfo(x.dtype).smallest_subnormal
        u[(k == 0) & (rng.random(flat.size) < 0.5)] |= u.dtype.type(1 << (8 * u.itemsize - 1))
    return x, c, s_


def record(check):
    have = dict(np.load(OUT)) if check and os.path.exists(OUT) else {}
    rec, bad = {}, 0
    for engine, producer, dt, layout, run in cases():
        for i, shape in enumerate(SHAPES):
            x, c, s = inputs(i, shape, dt, layout)
            try:
                y = run(x, c, s, layout)
            except ImportError as e:
                print(f"{engine}: not installed ({e}); not recorded")
                break
            key = f"{engine}|{producer}|{dt}|{layout}|{i}"
            rec[key + "|x"], rec[key + "|cos"], rec[key + "|sin"], rec[key + "|y"] = x, c, s, y
            if check:
                same = key + "|y" in have and np.array_equal(E.uint_view(have[key + "|y"]), E.uint_view(y))
                bad += not same
                print(f"{key}: {'same' if same else 'DIFFERS'}")
    if check:
        return 1 if bad else 0
    np.savez_compressed(OUT, **{k: E.storable(v) for k, v in rec.items()})
    print(f"wrote {OUT}: {len(rec) // 4} cases")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare the records with the engines")
    return record(ap.parse_args().check)


if __name__ == "__main__":
    sys.exit(main())
