"""producer= against the inference engines themselves (opt-in: -m engines).

Needs ONNX Runtime 1.32 (with onnx); .ci/run runs this once, in the frameworks' venv, where
they are installed.  Shapes are drawn at random from a seed the run prints (SINPE_ENGINES_SEED
sets it), so that each run checks shapes no record holds: batch 1-8, seq 1-300, heads 1-16,
head_dim 32-256, partial widths.  Without the engines these tests fail (never skipped): the
marker is deselected by default (pyproject's addopts).
"""
import os
import sys
import zlib

import numpy as np
import pytest

import sinpe

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import engine_oracles as E  # noqa: E402

pytestmark = pytest.mark.engines
SEED = int(os.environ.get("SINPE_ENGINES_SEED", np.random.SeedSequence().entropy % 2**32))


def _shapes(rng, n):
    for _ in range(n):
        d = int(rng.choice([32, 48, 64, 80, 96, 128, 160, 256]))
        rot = d if rng.random() < 0.6 else int(rng.integers(1, d // 2 + 1)) * 2
        yield (int(rng.integers(1, 9)), int(rng.integers(1, 301)) if rng.random() < 0.5 else 1,
               int(rng.integers(1, 17)), d, rot)


def _check(run, producer, dt, layout, n):
    rng = np.random.default_rng([SEED, zlib.crc32(f"{producer} {dt} {layout}".encode())])
    total = 0
    for b, s, h, d, rot in _shapes(rng, n):
        pos = rng.integers(0, 32768, (b, s))
        c, s_ = E.transformers_tables(pos, rot, layout=layout)
        x = (rng.standard_normal((b, s, h, d)) * 4).astype(E.np_dtype(dt))
        want = run(x, c, s_, layout)
        got = x.copy()
        sinpe.apply_rope(got, cos=c, sin=s_, layout=layout, seq_dim=1, producer=producer)
        bad = np.count_nonzero(E.uint_view(got) != E.uint_view(want))
        assert bad == 0, (producer, dt, layout, (b, s, h, d, rot), bad, "seed", SEED)
        total += x.size
    print(f"{producer} {dt} {layout}: {total} values, 0 differ (seed {SEED})")


@pytest.mark.parametrize("layout", E.LAYOUTS)
@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("opset23", [False, True])
def test_onnxruntime(dt, layout, opset23):
    _check(lambda x, c, s, lay: E.onnxruntime(x, c, s, lay, opset23), "onnxruntime", dt,
           layout, 12)
