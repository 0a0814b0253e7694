"""The frameworks' backends against the installed frameworks themselves (opt-in: -m frameworks).

Needs NumPy 2.4, TensorFlow 2.21, jax/jaxlib 0.10, ONNX Runtime 1.32 (with onnx), keras 3,
SciPy (Keras' NumPy backend imports it) and keras-hub 0.32 (its layers under JAX, TensorFlow
and NumPy, in subprocesses); .ci/run
runs this once, in a venv of its own with them installed.  Each framework's ops run eagerly (tests/framework_oracles.py); every
comparison is of bits.  Without the frameworks these tests fail (they are never skipped):
the marker is deselected by default (pyproject's addopts).
"""
import os
import sys

import numpy as np
import pytest

import sinpe
from sinpe import presets

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import framework_oracles as O  # noqa: E402
from conftest import bits  # noqa: E402

pytestmark = pytest.mark.frameworks


def equal(want, got, what):
    bad = np.nonzero(bits(want).ravel() != bits(got).ravel())[0]
    assert bad.size == 0, (what, bad.size, bad[:5].tolist())


@pytest.mark.parametrize("fw", O.FRAMEWORKS)
@pytest.mark.parametrize("func", O.FUNCS)
def test_elementwise_maps(fw, func):
    rng = np.random.default_rng(26)
    for x in (O.specials(), O.dense(k=8191, tail=3), rng.uniform(-200, 200, 100_003)
              .astype(np.float32), rng.uniform(-1e6, 1e6, (301, 7)).astype(np.float32)):
        equal(O.elementwise(fw, func, x), sinpe.elementwise(func, x, backend=fw), (fw, func))


@pytest.mark.parametrize("fw", O.FRAMEWORKS)
@pytest.mark.parametrize("func", O.FUNCS)
def test_elementwise_every_short_length(fw, func):
    """Short ops leave tails (TensorFlow n % 8, ONNX Runtime n % 4, XLA's exp below 16 elements
    when 3, 5, 6 or 7 are left over; 4 left over are one 4-lane vector of XLA's own)."""
    rng = np.random.default_rng(1)
    pool = np.concatenate([O.specials(), rng.uniform(-90, 90, 3000).astype(np.float32)])
    for n in range(1, 40):
        for start in range(0, pool.size - n, 331):
            x = pool[start:start + n].copy()
            equal(O.elementwise(fw, func, x), sinpe.elementwise(func, x, backend=fw), (fw, n))


@pytest.mark.parametrize("fw", O.FRAMEWORKS)
@pytest.mark.parametrize("func", O.FUNCS)
def test_elementwise_short_arrays_of_rank_2(fw, func):
    """The tails of arrays of rank 2 and 3 (XLA's short-exp tail is a vector's only)."""
    rng = np.random.default_rng(5)
    for shape in [(1, 3), (3, 5), (1, 11), (2, 7), (1, 1, 14), (3, 3, 3)]:
        x = rng.uniform(-90, 90, shape).astype(np.float32)
        equal(O.elementwise(fw, func, x), sinpe.elementwise(func, x, backend=fw), (fw, shape))


@pytest.mark.parametrize("fw", O.FRAMEWORKS)
@pytest.mark.parametrize("L,d,base", O.TABLES + [(1, 2, 10000.0), (16, 6, 10000.0),
                                                  (257, 22, 123.0), (2000, 768, 10000.0)])
def test_tutorial_tables(fw, L, d, base):
    equal(O.table(fw, L, d, base), sinpe.positional_encoding(L, d, base, backend=fw), (fw, L, d))


@pytest.mark.parametrize("args", [(50, 64), (33, 31, 1.0, 1.0e4, 5), (100, 130, 2.0, 5.0e3),
                                  (7, 6), (129, 258, 1.0, 1.0e5, 0)])
def test_tensor2tensor_under_tensorflow(args):
    equal(O.t2t(*args), presets.tensor2tensor(*args, backend="tensorflow"), args)


@pytest.mark.parametrize("shape,wl,start", [((2, 50, 64), 10000, 0), ((1, 33, 30), 500, 3),
                                             ((1, 300, 258), 10000, 11), ((4, 1, 2), 77, 0)])
def test_keras_hub_under_jax(shape, wl, start):
    equal(O.keras_hub("jax", shape, wl, start), presets.keras_hub(shape, wl, start, backend="jax"),
          shape)


@pytest.mark.parametrize("shape,wl,start", [((2, 50, 64), 10000, 0), ((1, 33, 30), 500, 3),
                                             ((1, 300, 258), 10000, 11), ((4, 1, 2), 77, 0),
                                             ((1, 17, 1027), 3.5e5, 0)])
def test_keras_hub_under_tensorflow(shape, wl, start):
    equal(O.keras_hub("tensorflow", shape, wl, start),
          presets.keras_hub(shape, wl, start, backend="tensorflow"), shape)


@pytest.mark.parametrize("fw", ["tensorflow", "jax", "numpy"])
def test_keras_hub_odd_inputs(fw):
    """keras-hub's layer at O.KERAS_ODD (positions past 2^31, +-inf/NaN/-0.0/subnormal
    positions, hidden size 0, ...) under the Keras backend: the same digests, or an
    exception where the layer raises one (TensorFlow's InvalidArgumentError is TypeError)."""
    bad = []
    for (name, shape, lkw, ckw), want in zip(O.KERAS_ODD, O.keras_hub_odd_cases(fw)):
        try:
            y = presets.keras_hub(shape, **lkw, **ckw, backend=fw)
            got = ["ok", list(y.shape), O.digest(y)]
        except (TypeError, ValueError, OverflowError) as e:
            got = ["err", type(e).__name__]
        if want[0] == "err":
            want = ["err", {"InvalidArgumentError": "TypeError"}.get(want[1], want[1])]
        if got != want:
            bad.append((name, want[:2], got[:2]))
    assert not bad, bad


@pytest.mark.parametrize("shape,wl,start", [((2, 50, 64), 10000, 0), ((1, 33, 30), 500, 3),
                                             ((1, 300, 258), 10000, 11), ((4, 1, 2), 77, 0),
                                             ((1, 128, 1030), 1e6, -5)])
def test_keras_hub_under_numpy(shape, wl, start):
    """Keras' NumPy backend: NumPy's own float32 pow (Intel SVML's on AVX-512 machines)."""
    equal(O.keras_hub("numpy", shape, wl, start),
          presets.keras_hub(shape, wl, start, backend="numpy"), shape)


@pytest.mark.parametrize("fw", ["jax", "tensorflow", "numpy"])
@pytest.mark.parametrize("i", range(len(O.ROTARY)), ids=lambda i: str(O.ROTARY[i][:2]))
def test_keras_hub_rotary_under_the_frameworks(fw, i):
    x, kw = O.rotary_case(*O.ROTARY[i])
    equal(O.keras_hub_rotary_cases(fw)[i], presets.keras_hub_rotary(x, backend=fw, **kw),
          O.ROTARY[i])


def test_the_profiles_follow_the_installed_releases():
    from sinpe._backends import policy
    for fw in O.FRAMEWORKS:
        assert policy.resolve(fw)[0] == O.PROFILE[fw]
        assert "the installed" in policy.reproduces(fw)
