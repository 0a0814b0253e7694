"""Record the frameworks' own results for the suite (tests/data/frameworks.json).

For each framework (NumPy, TensorFlow, JAX, ONNX Runtime: tests/framework_oracles.py runs
each one's ops eagerly) it stores the bit patterns of exp, sin and cos over the specials
(subnormals, NaNs with payloads, thresholds), the SHA-256 of their results over a dense sample
(every 4099th float32 bit pattern, a length that leaves a tail), of the tutorial tables at
framework_oracles.TABLES, of tensor2tensor's get_timing_signal_1d under TensorFlow and of keras-hub's
SinePositionEncoding under JAX and under TensorFlow and of its RotaryEmbedding under both (with
keras and keras-hub installed).
tests/numerics/test_numerics_frameworks.py compares sinpe's backends with this file in every
pass, without the frameworks.  Run with the frameworks installed (not a test dependency):

  PYTHONPATH=tests python tools/fwrecord.py            # rewrites tests/data/frameworks.json
"""
import json
import os
import sys
from importlib import metadata

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import framework_oracles as O  # noqa: E402

T2T = [(50, 64, 1.0, 1.0e4, 0), (33, 31, 1.0, 1.0e4, 5), (100, 130, 2.0, 5.0e3, 0)]
# keras-hub's SinePositionEncoding under JAX: (shape, max_wavelength, start_index)
KERAS_JAX = [((2, 50, 64), 10000, 0), ((1, 33, 30), 500, 3), ((3, 17, 7), 100000, 0)]
# keras-hub under TensorFlow: hidden sizes with every kind of tail of Eigen's 8-lane pow
KERAS_TF = KERAS_JAX + [((1, 9, 13), 10000, 5), ((2, 100, 1030), 10000.0, 0),
                        ((1, 5, 1), 10000, 0), ((1, 128, 768), 1e6, 0)]


def version(dist):
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def main():
    out = {"versions": {d: version(d) for d in ("numpy", "tensorflow-cpu", "jax", "jaxlib",
                                                 "onnxruntime")},
           "specials": O.specials().view(np.uint32).tolist(), "frameworks": {}}
    for fw in O.FRAMEWORKS:
        rec = {"specials": {}, "dense": {}, "tables": {}}
        for f in O.FUNCS:
            rec["specials"][f] = O.elementwise(fw, f, O.specials()).view(np.uint32).tolist()
            rec["dense"][f] = O.digest(O.elementwise(fw, f, O.dense()))
        for L, d, base in O.TABLES:
            rec["tables"][f"{L}x{d}@{base!r}"] = O.digest(O.table(fw, L, d, base))
        out["frameworks"][fw] = rec
        print(fw, "recorded", flush=True)
    out["tensor2tensor"] = {",".join(map(repr, a)): O.digest(O.t2t(*a)) for a in T2T}
    out["keras_hub_jax"] = [[list(shape), wl, st, O.digest(O.keras_hub("jax", shape, wl, st))]
                            for shape, wl, st in KERAS_JAX]
    out["keras_hub_tf"] = keras_tf()
    out["keras_hub_rotary"] = keras_rotary()
    out["jax_exp_short"] = jax_exp_short()
    path = os.path.join(HERE, "..", "tests", "data", "frameworks.json")
    with open(path, "w") as fh:
        json.dump(out, fh, separators=(",", ":"))
        fh.write("\n")
    print("wrote", os.path.normpath(path))


def keras_tf():
    """keras-hub's SinePositionEncoding under Keras' TensorFlow backend, as digests."""
    return [[list(shape), wl, st, O.digest(O.keras_hub("tensorflow", shape, wl, st))]
            for shape, wl, st in KERAS_TF]


def jax_exp_short():
    """jnp.exp of 1 to 15 inputs whose XLA and glibc results differ: the bit patterns."""
    return {str(n): O.elementwise("jax", "exp", O.jax_short_input(n)).view(np.uint32).tolist()
            for n in range(1, 16)}


def keras_rotary():
    """keras-hub's RotaryEmbedding under Keras' JAX and TensorFlow backends, as digests of
    framework_oracles.ROTARY's cases."""
    rec = {}
    for fw in ("jax", "tensorflow"):
        rec[fw] = [O.digest(y) for y in O.keras_hub_rotary_cases(fw)]
    return rec


if __name__ == "__main__":
    main()
