"""Records the inference engines' rotations for the default suite (tests/data/engines.npz).

Each case: seeded x of shape (batch, seq, heads, head_dim), transformers' cos/sin of its
positions (MLX's: its own, from an offset and a base), and what the engine returned for them (tests/engine_oracles.py drives each engine
as its users do).  tests/numerics/test_numerics_engines.py checks sinpe's producer= against
these records in every run; the live tests (pytest -m engines) run the engines themselves.

    python tools/engines_record.py            # every engine installed (others: said, skipped)
    python tools/engines_record.py --check    # compare the records with the engines again

Needs the engines it records: onnxruntime (with onnx), openvino, mlx (its CPU wheel,
mlx[cpu] on Linux).
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
          (1, 7, 2, 32, 8), (1, 2, 1, 256, 254), (2, 3, 2, 128, 64)]
SPECIALS = 5  # the case of specials (NaNs of both signs, infinities, zeros, subnormals)


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
    # OpenVINO fuses the interleaved pairs only as GPT-J writes them (rot < head_dim; over
    # the whole head its op-by-op graph); not a bfloat16 x's, which the producer refuses
    for bf16 in (False, True):
        name = "openvino-bf16" if bf16 else "openvino"
        for dt in ("float32", "float16", "bfloat16"):
            for layout in E.LAYOUTS:
                if layout == "pairs" and dt == "bfloat16":
                    continue
                out.append(("openvino", name, dt, layout,
                            lambda x, c, s, lay, bf16=bf16: E.openvino(x, c, s, lay, bf16)))
    # MLX computes its own tables: from an offset (the record's cos holds rot, base, offset)
    for dt in ("float32", "float16", "bfloat16"):
        for layout in E.LAYOUTS:
            out.append(("mlx", "mlx", dt, layout, lambda x, c, s, lay: E.mlx(
                x, c.shape[-1], float(s.flat[0]), lay, int(s.flat[1]))))
    return out


def runs(engine, layout, shape):
    """Whether a recorded case runs this shape (all do)."""
    return True


def inputs(i, shape, dt, layout, engine=""):
    b, s, h, d, rot = shape
    rng = np.random.default_rng(1000 + i)
    pos = rng.integers(0, 8192, (b, s))
    c, s_ = E.transformers_tables(pos, rot, layout=layout)
    if engine == "mlx":  # MLX's own tables: (rot columns, [base, offset])
        c = np.zeros((1, 1, rot), np.float32)
        s_ = np.array([[(10000.0, 500000.0, 1e6)[i % 3], int(pos[0, 0])]], np.float64)
    x = (rng.standard_normal((b, s, h, d)) * 3).astype(E.np_dtype(dt))
    if i == SPECIALS:
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
            if not runs(engine, layout, shape):
                continue
            x, c, s = inputs(i, shape, dt, layout, engine)
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
