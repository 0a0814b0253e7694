"""The frameworks themselves, as oracles of sinpe's 'numpy', 'tensorflow', 'jax' and
'onnxruntime' backends: each computation written with that framework's own ops, run eagerly
(float32 throughout), as a user of the framework writes it.

Imported by tests/numerics/test_numerics_frameworks_live.py (the opt-in `frameworks` marker)
and by tools/fwrecord.py, which records their digests in tests/data/frameworks.json for the
suite's every pass (tests/numerics/test_numerics_frameworks.py).  The frameworks are imported
on first use only.
"""
import hashlib
import math
import os

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

FRAMEWORKS = ("numpy", "tensorflow", "jax", "onnxruntime")
# the measured release of each (its sinpe profile)
PROFILE = {"numpy": "numpy-2.4", "tensorflow": "tensorflow-2.21", "jax": "jax-0.10",
           "onnxruntime": "onnxruntime-1.32"}
FUNCS = ("exp", "sin", "cos")


# ---- inputs -------------------------------------------------------------------------------

def specials():
    """Specials, subnormals, NaNs with payloads, thresholds and their neighbours."""
    u = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
         0xFF800001, 0x7FA00000, 0x7FC12345, 0xFFFFFFFF, 0x7FFFFFFF, 0x7F7FFFFF, 0xFF7FFFFF,
         0x00800000, 0x80800000, 0x007FFFFF, 0x807FFFFF, 1, 0x80000001]
    u += list(range(1, 0x800000, 65537)) + list(range(0x80000001, 0x80800000, 65521))
    f = [0.5, 1, 2, 3, 10, 87, 88, 88.72, 88.7228, 88.723, 89, 100, 103.28, 103.97, 104,
         1e4, 71476.0625, 117435.992, 1e5, 1e6, 1e10, 1e30, 3.14159265, 1.5707964, 0.78539816,
         2.0 ** -12, 2.0 ** -126]
    f32 = np.array(f, np.float32)
    near = np.concatenate([f32, -f32]).view(np.uint32).astype(np.int64)
    steps = (np.concatenate([near + d for d in range(-3, 4)]) & 0xFFFFFFFF).astype(np.uint32)
    return np.concatenate([np.array(u, np.uint32), steps]).view(np.float32)


def dense(k=4099, tail=5):
    """Every k-th bit pattern, and `tail` more so that the length is not a multiple of 8."""
    x = np.arange(0, 1 << 32, k, dtype=np.uint64).astype(np.uint32)
    x = x[: x.size - x.size % 8 + tail] if x.size % 8 != tail else x
    return x.view(np.float32)


# ---- the frameworks ----------------------------------------------------------------------

_MOD = {}


def tf():
    if "tf" not in _MOD:
        import tensorflow
        _MOD["tf"] = tensorflow
    return _MOD["tf"]


def jnp():
    if "jnp" not in _MOD:
        import jax
        jax.config.update("jax_platforms", "cpu")
        import jax.numpy
        _MOD["jnp"] = jax.numpy
    return _MOD["jnp"]


def _ort_session(nodes, inputs, outputs, initializer=()):
    import onnxruntime
    from onnx import TensorProto, helper
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        initializer=list(initializer))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnxruntime.InferenceSession(m.SerializeToString(), onnxruntime.SessionOptions(),
                                        providers=["CPUExecutionProvider"])


def ort_map(func, x):
    from onnx import helper
    key = ("map", func)
    if key not in _MOD:
        _MOD[key] = _ort_session([helper.make_node(func.capitalize(), ["X"], ["Y"])],
                                 [("X", ["n"])], [("Y", ["n"])])
    return _MOD[key].run(None, {"X": np.ascontiguousarray(x, np.float32).reshape(-1)})[0] \
        .reshape(np.shape(x))


def elementwise(fw, func, x):
    """func(x) by the framework's own op on a float32 array (any shape)."""
    x = np.ascontiguousarray(x, np.float32)
    if fw == "numpy":
        with np.errstate(all="ignore"):
            return getattr(np, func)(x)
    if fw == "tensorflow":
        return getattr(tf().math, func)(tf().constant(x)).numpy()
    if fw == "jax":
        return np.asarray(getattr(jnp(), func)(jnp().asarray(x)))
    return ort_map(func, x)


def table(fw, L, d, base=10000.0):
    """The tutorial table (tests/reference.py's module) with the framework's ops:
    div = exp(arange(0, d, 2) * (-log(base) / d)); angles = position * div;
    pe[:, 0::2] = sin(angles), pe[:, 1::2] = cos(angles)."""
    c = -math.log(base) / d
    if fw == "numpy":
        div = np.exp(np.arange(0, d, 2, dtype=np.float32) * np.float32(c))
        ang = np.arange(L, dtype=np.float32)[:, None] * div
        s, co = np.sin(ang), np.cos(ang)
    elif fw == "tensorflow":
        t = tf()
        div = t.exp(t.range(0, d, 2, dtype=t.float32) * c)
        ang = t.range(L, dtype=t.float32)[:, None] * div
        s, co = t.sin(ang).numpy(), t.cos(ang).numpy()
    elif fw == "jax":
        j = jnp()
        div = j.exp(j.arange(0, d, 2, dtype=j.float32) * c)
        ang = j.arange(L, dtype=j.float32)[:, None] * div
        s, co = np.asarray(j.sin(ang)), np.asarray(j.cos(ang))
    else:
        from onnx import helper, numpy_helper
        key = ("table", d, base)
        if key not in _MOD:
            cc = numpy_helper.from_array(np.array(c, np.float32), "c")
            nodes = [helper.make_node("Mul", ["k", "c"], ["e"]),
                     helper.make_node("Exp", ["e"], ["div"]),
                     helper.make_node("Mul", ["pos", "div"], ["ang"]),
                     helper.make_node("Sin", ["ang"], ["s"]),
                     helper.make_node("Cos", ["ang"], ["co"])]
            _MOD[key] = _ort_session(nodes, [("k", ["h"]), ("pos", ["L", 1])],
                                     [("s", ["L", "h"]), ("co", ["L", "h"])], [cc])
        s, co = _MOD[key].run(None, {"k": np.arange(0, d, 2, dtype=np.float32),
                                     "pos": np.arange(L, dtype=np.float32)[:, None]})
    pe = np.zeros((L, d), np.float32)
    pe[:, 0::2] = s
    pe[:, 1::2] = co
    return pe


def t2t(length, channels, min_timescale=1.0, max_timescale=1.0e4, start_index=0):
    """tensor2tensor's get_timing_signal_1d (layers/common_attention.py) run by TensorFlow."""
    t = tf()
    position = t.cast(t.range(length) + start_index, t.float32)
    num_timescales = channels // 2
    log_timescale_increment = (math.log(float(max_timescale) / float(min_timescale))
                               / t.maximum(t.cast(num_timescales, t.float32) - 1, 1))
    inv_timescales = min_timescale * t.exp(
        t.cast(t.range(num_timescales), t.float32) * -log_timescale_increment)
    scaled_time = t.expand_dims(position, 1) * t.expand_dims(inv_timescales, 0)
    signal = t.concat([t.sin(scaled_time), t.cos(scaled_time)], axis=1)
    signal = t.pad(signal, [[0, 0], [0, t.math.mod(channels, 2)]])
    return t.reshape(signal, [1, length, channels]).numpy()


def keras_hub(keras_backend, shape, max_wavelength=10000, start_index=0):
    """keras-hub's SinePositionEncoding under a Keras backend, in a fresh process (Keras picks
    its backend at import): the layer's output for zeros of `shape`."""
    import subprocess
    import sys
    code = ("import numpy as np, keras_hub, json, sys\n"
            f"x = np.zeros({tuple(shape)!r}, np.float32)\n"
            f"y = keras_hub.layers.SinePositionEncoding(max_wavelength={max_wavelength!r})"
            f"(x, start_index={start_index!r})\n"
            "sys.stdout.buffer.write(np.asarray(y, np.float32).tobytes())\n")
    env = dict(os.environ, KERAS_BACKEND=keras_backend)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=True)
    return np.frombuffer(out.stdout, np.float32).reshape(shape)


#: float32 inputs whose exp differs between XLA's polynomial and glibc's expf (found at
#: random): an exp of n < 16 of them shows which of its elements each one computed
JAX_SHORT = [0x410ed46f, 0x42a87024, 0x41023fa4, 0x40d39118, 0x42b17211, 0xc2407669,
             0x42ac6761]


def jax_short_input(n):
    """n of JAX_SHORT, repeated."""
    return np.resize(np.array(JAX_SHORT, np.uint32), n).view(np.float32)


#: keras-hub RotaryEmbedding cases: (shape, seed, keyword arguments); "tiny" scales the
#: input to 1e-37 (subnormal products: the frameworks' FTZ) with a NaN, infinities and a
#: subnormal in front; positions are given as lists
ROTARY = [((2, 17, 4, 64), 0, {}), ((1, 33, 30), 1, {"start_index": 3}),
          ((3, 9, 2, 18), 2, {"max_wavelength": 500, "scaling_factor": 2.5}),
          ((2, 64, 8, 10), 3, {"feature_axis": 2}),
          ((1, 7, 6), 4, {"positions": [0, 3, 6, 9, 12, 15, 18]}),
          ((2, 40, 256), 5, {"scaling_factor": 3.0}),
          ((1, 50, 2, 512), 6, {"scaling_factor": 7.3, "max_wavelength": 123456.0}),
          ((2, 30, 64), 7, {"tiny": True}), ((1, 11, 6), 8, {"start_index": -5}),
          ((2, 8, 34), 9, {"positions": [[0, 1, 2, 3, 100000, 7, 8, 9],
                                         [5, 6, 7, 8, 9, 10, 11, 12]]})]


_ROTARY_RUNS = {}


def keras_hub_rotary_cases(keras_backend):
    """The layer's outputs for every ROTARY case under a Keras backend, in one fresh process
    (importing keras-hub takes seconds), kept per backend."""
    import subprocess
    import sys
    if keras_backend not in _ROTARY_RUNS:
        here = os.path.dirname(os.path.abspath(__file__))
        code = ("import sys, numpy as np, keras_hub\n"
                f"sys.path.insert(0, {here!r})\n"
                "import framework_oracles as O\n"
                "for shape, seed, kw in O.ROTARY:\n"
                "    x, kw = O.rotary_case(shape, seed, kw)\n"
                "    kw = dict(kw)\n"
                "    pos = kw.pop('positions', None)\n"
                "    start = kw.pop('start_index', 0)\n"
                "    y = keras_hub.layers.RotaryEmbedding(**kw)(x, start_index=start, "
                "positions=pos)\n"
                "    sys.stdout.buffer.write(np.asarray(y, np.float32).tobytes())\n")
        env = dict(os.environ, KERAS_BACKEND=keras_backend)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             check=True).stdout
        res, at = [], 0
        for shape, seed, kw in ROTARY:
            n = int(np.prod(shape))
            res.append(np.frombuffer(out[4 * at:4 * (at + n)], np.float32).reshape(shape))
            at += n
        _ROTARY_RUNS[keras_backend] = res
    return _ROTARY_RUNS[keras_backend]


def rotary_case(shape, seed, kw):
    """The input array and the keyword arguments (positions as an array) of a ROTARY case."""
    kw = dict(kw)
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    if kw.pop("tiny", False):
        x *= np.float32(1e-37)
        x.flat[:4] = [np.nan, np.inf, -np.inf, 1e-45]
    if "positions" in kw:
        kw["positions"] = np.asarray(kw["positions"], np.int64)
    return x, kw


def _odd_positions(n, seed, batch=None):
    """Small integers with +-inf, NaN and -0.0 strewn among them (float32), (n,) or (batch, n)."""
    rng = np.random.default_rng(seed)
    special = [np.inf, -np.inf, np.nan, -0.0, -np.inf, np.inf]
    rows = []
    for _ in range(batch or 1):
        p = rng.integers(-50, 50, n).astype(np.float64)
        for k, i in enumerate(rng.choice(n, min(n, 3 * len(special)), replace=False)):
            p[i] = special[k % len(special)]
        rows.append(p.astype(np.float32))
    return rows[0] if batch is None else np.stack(rows)


#: keras-hub SinePositionEncoding at odd inputs (issue 35): (name, shape, layer keyword
#: arguments, call keyword arguments).  Positions past 2^31 (keras-hub adds start_index to an
#: int32 arange: it wraps, or the backend refuses the Python int or the array scalar's
#: type; 64-bit integer positions, which JAX and NumPy take as 32-bit), +-inf and NaN angles
#: (keras' sin*mask + cos*mask keeps the sine's NaN, whose sign TensorFlow's sin and cos
#: do not share), -0.0 and subnormal positions, hidden size 0, and other sizes.
KERAS_ODD = [
    ("wrap", (1, 6, 8), {}, {"start_index": 2**31 - 3}),
    ("wrap_batch", (2, 4, 5), {}, {"start_index": 2**31 - 1}),
    ("wrap_negative", (1, 4, 6), {}, {"start_index": -2**31 - 2}),
    ("wrap_far", (1, 3, 4), {}, {"start_index": 2**40 + 7}),
    ("wrap_int64_max", (1, 3, 4), {}, {"start_index": 2**63 - 1}),
    ("wrap_int64_min", (1, 3, 4), {}, {"start_index": -2**63}),
    ("wrap_past_int64", (1, 3, 4), {}, {"start_index": 2**63}),
    ("wrap_past_uint64", (1, 3, 4), {}, {"start_index": 2**64 + 3}),
    ("wrap_long", (1, 3000, 16), {}, {"start_index": 2**31 - 1000}),
    ("wrap_rank4", (2, 3, 5, 6), {}, {"start_index": 2**31 - 2}),
    ("wrap_odd_hidden", (1, 7, 5), {"max_wavelength": 500}, {"start_index": 2**31 - 4}),
    ("start_np_int32", (1, 6, 4), {}, {"start_index": np.int32(2**31 - 3)}),
    ("start_np_int64", (1, 6, 4), {}, {"start_index": np.int64(2**31 - 3)}),
    ("start_np_int64_far", (1, 3, 4), {}, {"start_index": np.int64(2**40 + 3)}),
    ("start_np_uint32", (1, 3, 4), {}, {"start_index": np.uint32(2**32 - 2)}),
    ("start_np_uint64", (1, 3, 4), {}, {"start_index": np.uint64(2**40)}),
    ("start_np_int16", (1, 3, 4), {}, {"start_index": np.int16(-7)}),
    ("positions_int64", (2, 3, 6), {},
     {"positions": np.array([[2**31, 1, 2], [2**33 + 9, -2**31 - 1, 4]], np.int64)}),
    ("positions_int64_ends", (1, 4, 6), {},
     {"positions": np.array([2**31 + 1, -2**40 - 1, 2**63 - 1, -2**63], np.int64)}),
    ("positions_uint64", (1, 3, 6), {},
     {"positions": np.array([2**63 + 5, 2**32 + 7, 2**31], np.uint64)}),
    ("positions_int32", (1, 3, 4), {},
     {"positions": np.array([2**31 - 1, -2**31, 5], np.int32)}),
    ("inf", (1, 4, 6), {}, {"positions": np.array([np.inf, -np.inf, 1, np.nan], np.float32)}),
    ("inf_batch", (2, 19, 7), {}, {"positions": _odd_positions(19, 12, 2)}),
    ("inf_wide", (1, 37, 1030), {}, {"positions": _odd_positions(37, 1)}),
    ("inf_513", (2, 64, 513), {"max_wavelength": 1e6}, {"positions": _odd_positions(64, 17, 2)}),
    ("inf_33", (4, 17, 33), {}, {"positions": _odd_positions(17, 6)}),
    ("inf_hidden1", (1, 5, 1), {}, {"positions": np.array([-np.inf, np.inf, np.nan, -0.0, 2],
                                                           np.float32)}),
    ("inf_hidden2", (1, 33, 2), {}, {"positions": _odd_positions(33, 5)}),
    ("inf_all", (1, 50, 100), {}, {"positions": np.full(50, -np.inf, np.float32)}),
    ("overflow", (1, 8, 64), {"max_wavelength": 0.5},
     {"positions": np.array([3e38, -3e38, 1e38, -1e38, 5, -5, 0, -0.0], np.float32)}),
    ("overflow_start", (1, 4, 64), {"max_wavelength": 1e-30}, {"start_index": -2**31 + 5}),
    ("nan_payloads", (1, 4, 6), {},
     {"positions": np.array([0x7FC12345, 0xFFC00001, 0x7F800001, 0xFF812345],
                            np.uint32).view(np.float32)}),
    ("float64_positions", (1, 4, 6), {}, {"positions": np.array([1e300, -1e300, 1e-300, -1e-300])}),
    ("negative_zero", (2, 6, 9), {},
     {"positions": np.array([-0.0, 0.0, -0.0, 1, -1, -0.0], np.float32)}),
    ("subnormal", (1, 6, 8), {},
     {"positions": np.array([1e-40, -1e-40, 1e-45, -1e-45, 1e-38, -1e-38], np.float32)}),
    ("float16_positions", (1, 3, 6), {}, {"positions": np.array([65504, -0.0, np.inf], np.float16)}),
    ("hidden0", (2, 3, 0), {}, {}),
    ("hidden0_rank4", (2, 3, 4, 0), {}, {}),
    ("hidden0_positions", (2, 3, 0), {}, {"positions": np.array([1, 2, 3])}),
    ("hidden0_wrap", (1, 5, 0), {}, {"start_index": 2**31 - 2}),
    ("hidden0_seq0", (2, 0, 0), {}, {}),
    ("hidden1", (1, 4, 1), {}, {}),
    ("hidden3_negative_start", (1, 4, 3), {}, {"start_index": -5}),
    ("seq0", (2, 0, 4), {}, {}),
    ("rank4_positions", (2, 5, 3, 4), {}, {"positions": np.arange(15).reshape(5, 3)}),
]

_ODD_RUNS = {}


def keras_hub_odd_cases(keras_backend):
    """The layer at every KERAS_ODD case under a Keras backend, in one fresh process: per
    case ["ok", shape, digest] or ["err", the exception's type name]."""
    import json
    import subprocess
    import sys
    if keras_backend not in _ODD_RUNS:
        here = os.path.dirname(os.path.abspath(__file__))
        code = ("import sys, json, numpy as np, keras_hub\n"
                f"sys.path.insert(0, {here!r})\n"
                "import framework_oracles as O\n"
                "res = []\n"
                "for name, shape, lkw, ckw in O.KERAS_ODD:\n"
                "    try:\n"
                "        y = keras_hub.layers.SinePositionEncoding(**lkw)("
                "np.zeros(shape, np.float32), **ckw)\n"
                "        y = np.asarray(y.cpu() if hasattr(y, 'cpu') else y, np.float32)\n"
                "        res.append(['ok', list(y.shape), O.digest(y)])\n"
                "    except Exception as e:\n"
                "        res.append(['err', type(e).__name__])\n"
                "print(json.dumps(res))\n")
        env = dict(os.environ, KERAS_BACKEND=keras_backend)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             check=True, text=True).stdout
        _ODD_RUNS[keras_backend] = json.loads(out.strip().splitlines()[-1])
    return _ODD_RUNS[keras_backend]


# ---- digests ------------------------------------------------------------------------------

def digest(a):
    return hashlib.sha256(np.ascontiguousarray(a, np.float32).view(np.uint32).tobytes()).hexdigest()


# the tables recorded: shapes and bases with tails of every kind (n % 8, n % 4, d/2 % 8)
TABLES = [(64, 512, 10000.0), (333, 98, 10000.0), (101, 36, 500.0), (1000, 130, 1.0e6),
          (7, 6, 10000.0), (2047, 510, 10000.0)]
