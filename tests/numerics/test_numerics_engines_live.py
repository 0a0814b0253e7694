"""producer= against the inference engines themselves (opt-in: -m engines).

Needs ONNX Runtime 1.32 (with onnx), OpenVINO 2026.4 and MLX 0.32 (mlx[cpu]); .ci/run runs
this once, in the frameworks' venv, where they are installed.  Shapes are drawn at random from a seed the run prints (SINPE_ENGINES_SEED
sets it), so that each run checks shapes no record holds: batch 1-8, seq 1-2048, heads 1-64,
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
    """Seeded shapes over the issue's ranges: batch 1-8, seq 1 (decode) or 1-2048, heads
    1-64, head_dim 32-256, partial widths; a shape of more than 2^21 values gives up heads,
    then batch, then seq (long sequences with few heads, many heads with short ones)."""
    for _ in range(n):
        d = int(rng.choice([32, 48, 64, 80, 96, 128, 160, 256]))
        rot = d if rng.random() < 0.6 else int(rng.integers(1, d // 2 + 1)) * 2
        b, s, h = (int(rng.integers(1, 9)), int(rng.integers(1, 2049)) if rng.random() < 0.6
                   else 1, int(rng.integers(1, 65)))
        while b * s * h * d > 1 << 21:
            if h > 1:
                h = max(1, h // 2)
            elif b > 1:
                b //= 2
            else:
                s //= 2
        yield b, s, h, d, rot


def _x(rng, shape, dt):
    """Seeded values of three magnitudes, a few specials among them (NaNs of both signs,
    infinities, zeros)."""
    x = (rng.standard_normal(shape) * rng.choice([1e-3, 1.0, 50.0], shape)).astype(np.float32)
    x.reshape(-1)[rng.integers(0, x.size, 6)] = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0]
    return x.astype(E.np_dtype(dt))


def _check(run, producer, dt, layout, n, tables=True):
    """n seeded shapes: the engine's output against sinpe's (E.differ: bits; a NaN of the
    engine's own sign as a NaN for the producers that say so).  tables: transformers' cos/sin
    given to both; else (MLX) both compute theirs from an offset and a base."""
    rng = np.random.default_rng([SEED, zlib.crc32(f"{producer} {dt} {layout}".encode())])
    total = 0
    for b, s, h, d, rot in _shapes(rng, n):
        x = _x(rng, (b, s, h, d), dt)
        got = x.copy()
        if tables:
            pos = rng.integers(0, 32768, (b, s))
            c, s_ = E.transformers_tables(pos, rot, layout=layout)
            want = run(x, c, s_, layout)
            sinpe.apply_rope(got, cos=c, sin=s_, layout=layout, seq_dim=1, producer=producer)
        else:
            base, offset = float(rng.choice([1e4, 5e5, 1e6])), int(rng.integers(0, 100000))
            want = run(x, rot, base, layout, offset)
            sinpe.apply_rope(got, base=base, offset=offset, rot_dim=rot, layout=layout,
                             seq_dim=1, producer=producer)
        bad = E.differ(got, want, producer)
        assert bad == 0, (producer, dt, layout, (b, s, h, d, rot), bad, "seed", SEED)
        total += x.size
    print(f"{producer} {dt} {layout}: {total} values, 0 differ (seed {SEED})")


@pytest.mark.parametrize("layout", E.LAYOUTS)
@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("opset23", [False, True])
def test_onnxruntime(dt, layout, opset23):
    _check(lambda x, c, s, lay: E.onnxruntime(x, c, s, lay, opset23), "onnxruntime", dt,
           layout, 12)


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].split() for line in f
                         if line.startswith("flags")), [])
    except OSError:
        return []


FLAGS = _cpu_flags()
#: OpenVINO's default precision is bfloat16 on CPUs with AVX512-BF16 (or AMX)
BF16_CPU = "avx512_bf16" in FLAGS or "amx_bf16" in FLAGS


@pytest.mark.parametrize("dt, layout", [(dt, lay) for dt in ("float32", "float16", "bfloat16")
                                        for lay in E.LAYOUTS
                                        if not (lay == "pairs" and dt == "bfloat16")])
@pytest.mark.parametrize("bf16", [False, True])
def test_openvino(dt, layout, bf16):
    """OpenVINO's fused RoPE node at hint f32 ('openvino') and at its default precision
    ('openvino-bf16' on a CPU with AVX512-BF16, else 'openvino': the default is float32
    there).  The interleaved JIT kernel's width is measured on AVX-512 CPUs; on another CPU
    the pairs rotate widths its C++ loop takes (not a multiple of 16), the same on any CPU."""
    avx512 = "avx512f" in FLAGS
    producer = "openvino-bf16" if bf16 and BF16_CPU else "openvino"

    def run(x, c, s, lay):
        return E.openvino(x, c, s, lay, bf16)

    rng = np.random.default_rng([SEED, zlib.crc32(f"ov {dt} {layout} {bf16}".encode())])
    total = 0
    for b, s, h, d, rot in _shapes(rng, 6):
        if layout == "pairs" and not avx512 and rot % 16 == 0 and rot < d:
            rot -= 2  # (the C++ loop's widths on a CPU that is not AVX-512)
        x = _x(rng, (b, s, h, d), dt)
        pos = rng.integers(0, 32768, (b, s))
        c, s_ = E.transformers_tables(pos, rot, layout=layout)
        want = run(x, c, s_, layout)
        got = x.copy()
        sinpe.apply_rope(got, cos=c, sin=s_, layout=layout, seq_dim=1, producer=producer)
        bad = E.differ(got, want, producer)
        assert bad == 0, (producer, dt, layout, (b, s, h, d, rot), bad, "seed", SEED)
        total += x.size
    assert total > 0
    print(f"{producer} {dt} {layout}: {total} values, 0 differ (seed {SEED})")


@pytest.mark.parametrize("layout", E.LAYOUTS)
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_mlx(dt, layout):
    """MLX's mx.fast.rope on the CPU: its own frequencies and sin/cos from an offset."""
    _check(E.mlx, "mlx", dt, layout, 6, tables=False)


@pytest.mark.parametrize("layout", E.LAYOUTS)
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_mlx_freqs(dt, layout):
    """mx.fast.rope with freqs= (engine_args={'freqs': ...}): the inverse frequencies 1 / freqs."""
    rng = np.random.default_rng([SEED, zlib.crc32(f"mlx freqs {dt} {layout}".encode())])
    total = 0
    for b, s, h, d, rot in _shapes(rng, 4):
        freqs = (rng.random(rot // 2) * 1e4 + 1).astype(np.float32)
        x = _x(rng, (b, s, h, d), dt)
        offset = int(rng.integers(0, 100000))
        want = E.mlx(x, rot, None, layout, offset, freqs=freqs)
        got = x.copy()
        sinpe.apply_rope(got, offset=offset, rot_dim=rot, layout=layout, seq_dim=1,
                         producer="mlx", engine_args={"freqs": freqs})
        bad = E.differ(got, want, "mlx")
        assert bad == 0, ("mlx freqs", dt, layout, (b, s, h, d, rot), bad, "seed", SEED)
        total += x.size
    print(f"mlx freqs= {dt} {layout}: {total} values, 0 differ (seed {SEED})")
