"""The tutorial table through each framework and through sinpe's models of it (fwcheck.py --table).

div_term = exp(arange(0, d, 2) * (-ln(10000) / d)); angles = position * div_term; the table's
even columns sin(angles), odd columns cos(angles): float32 throughout, each step one framework
op run eagerly.  The models take the same IEEE products (computed here with NumPy float32, which
rounds them identically) and the frameworks' exp/sin/cos from src/elem, with each framework's
scalar-tail rule per op output (TensorFlow: the last n % 8 elements through glibc under
FTZ/DAZ; ONNX Runtime sin/cos: the last n % 4 through glibc).  Prints the differing elements.
"""
import math

import numpy as np

import fwmodels as F

# the two tables, and two whose op outputs leave tails (n % 8 and n % 4 nonzero)
SHAPES = [(2048, 512), (8192, 1024), (2047, 510), (333, 98)]
BASE = 10000.0


def steps(d):
    """The exact steps shared by every framework: arange * c in float32."""
    return np.arange(0, d, 2, dtype=np.float32) * np.float32(-math.log(BASE) / d)


def with_tail(vec, tail, width):
    def run(x):
        flat = x.reshape(-1)
        out = vec(flat)
        j = flat.size % width if width > 1 else 0
        if j:
            out[-j:] = tail(flat[-j:])
        return out.reshape(x.shape)
    return run


def models():
    g = {op: F.model("glibc_" + op, F.FUSED) for op in ("sin", "cos", "exp")}
    tf_tail = {op: (lambda x, f=g[op]: F.flush(f(F.flush(x)))) for op in g}
    return {
        "numpy": {op: F.model("numpy_" + op, F.FUSED) for op in g},
        "tensorflow": {op: with_tail(F.model("eigen_" + op, 1), tf_tail[op], 8) for op in g},
        "onnxruntime": {"exp": F.model("mlas_exp", 1),
                        "sin": with_tail(F.model("eigen_sin", 0), g["sin"], 4),
                        "cos": with_tail(F.model("eigen_cos", 0), g["cos"], 4)},
        "jax": {"exp": F.model("xla_exp", 0), "sin": g["sin"], "cos": g["cos"]},
    }


def model_table(fns, L, d):
    div = fns["exp"](steps(d))
    ang = np.arange(L, dtype=np.float32)[:, None] * div[None, :]
    return fns["sin"](ang), fns["cos"](ang)


def real_numpy(L, d):
    div = np.exp(np.arange(0, d, 2, dtype=np.float32) * np.float32(-math.log(BASE) / d))
    ang = np.arange(L, dtype=np.float32)[:, None] * div
    return np.sin(ang), np.cos(ang)


def real_tensorflow(L, d):
    tf = F.tf()
    div = tf.exp(tf.range(0, d, 2, dtype=tf.float32) * (-math.log(BASE) / d))
    ang = tf.range(L, dtype=tf.float32)[:, None] * div
    return tf.sin(ang).numpy(), tf.cos(ang).numpy()


def real_jax(L, d):
    jnp = F.jnp()
    div = jnp.exp(jnp.arange(0, d, 2, dtype=jnp.float32) * (-math.log(BASE) / d))
    ang = jnp.arange(L, dtype=jnp.float32)[:, None] * div
    return np.asarray(jnp.sin(ang)), np.asarray(jnp.cos(ang))


def real_onnxruntime(L, d):
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper
    c = numpy_helper.from_array(np.array(-math.log(BASE) / d, np.float32), "c")
    nodes = [helper.make_node("Mul", ["k", "c"], ["e"]), helper.make_node("Exp", ["e"], ["div"]),
             helper.make_node("Mul", ["pos", "div"], ["ang"]),
             helper.make_node("Sin", ["ang"], ["s"]), helper.make_node("Cos", ["ang"], ["co"])]
    g = helper.make_graph(nodes, "pe",
                          [helper.make_tensor_value_info("k", TensorProto.FLOAT, ["h"]),
                           helper.make_tensor_value_info("pos", TensorProto.FLOAT, ["L", 1])],
                          [helper.make_tensor_value_info("s", TensorProto.FLOAT, ["L", "h"]),
                           helper.make_tensor_value_info("co", TensorProto.FLOAT, ["L", "h"])],
                          initializer=[c])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = 1
    sess = onnxruntime.InferenceSession(m.SerializeToString(), so,
                                        providers=["CPUExecutionProvider"])
    s, co = sess.run(None, {"k": np.arange(0, d, 2, dtype=np.float32),
                            "pos": np.arange(L, dtype=np.float32)[:, None]})
    return s, co


REAL = {"numpy": real_numpy, "tensorflow": real_tensorflow, "jax": real_jax,
        "onnxruntime": real_onnxruntime}


def main():
    ms = models()
    bad_total = 0
    ref = {shape: real_numpy(*shape) for shape in SHAPES}
    for fw, real in REAL.items():
        for L, d in SHAPES:
            rs, rc = real(L, d)
            ms_, mc = model_table(ms[fw], L, d)
            bad = int((F.bits(rs) != F.bits(ms_)).sum() + (F.bits(rc) != F.bits(mc)).sum())
            other = int((F.bits(rs) != F.bits(ref[L, d][0])).sum()
                        + (F.bits(rc) != F.bits(ref[L, d][1])).sum())
            print(f"{fw:12s} {L:5d} x {d:5d}  model vs framework: {bad:,d} of {L * d:,d} differ"
                  f"  (framework vs NumPy's table: {other:,d})", flush=True)
            bad_total += bad
    return 1 if bad_total else 0
