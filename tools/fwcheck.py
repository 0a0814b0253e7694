"""Check sinpe's models of the frameworks' float32 element functions against the frameworks.

Each model (src/elem/fw_*.c, src/elem/glibcf.c, through tools/libfwmodels.so) is compared bit
for bit with the real op, run eagerly on a float32 array:

  (a) specials, subnormals, NaNs with payloads, thresholds, 1M random values, and the scalar
      tails (TensorFlow: the last n % 8 elements of an op's output; ONNX Runtime sin/cos: n % 4);
  (b) every k-th float32 bit pattern (--k, default 64: 67,108,864 inputs);
  (c) all 2^32 patterns (--all), in chunks.

Run with the frameworks' environment (not a test dependency):
  make -C tools libfwmodels.so
  /path/to/venv-fw/bin/python tools/fwcheck.py                 # (a)+(b), every function
  /path/to/venv-fw/bin/python tools/fwcheck.py --fn tf-sin --all   # (c), one function
  /path/to/venv-fw/bin/python tools/fwcheck.py --table         # the tutorial tables
Functions: glibc-{sin,cos,exp,pow}, numpy-{sin,cos,exp}, tf-{sin,cos,exp}, ort-{sin,cos,exp},
jax-{sin,cos,exp}; glibc-pow also checks jax-pow and tf-pow (Eigen's) against the frameworks.  One thread per framework (intra-op threads 1).
"""
import argparse
import platform
import sys
import time

import numpy as np

# the models' library and the frameworks' importers, shared with fwtable.py (--table)
from fwmodels import FUSED, LIB, bits, flush, jnp, model, tf

# ---- ONNX Runtime, imported on first use ---------------------------------------------------
_ort = None
_ort_sessions = {}


def ort_run(op, x):
    global _ort
    if _ort is None:
        import onnxruntime
        _ort = onnxruntime
    if op not in _ort_sessions:
        from onnx import TensorProto, helper
        g = helper.make_graph([helper.make_node(op, ["X"], ["Y"])], "g",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n"])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["n"])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        so = _ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        _ort_sessions[op] = _ort.InferenceSession(m.SerializeToString(), so,
                                                  providers=["CPUExecutionProvider"])
    return _ort_sessions[op].run(None, {"X": x})[0]


def tf_op(name):
    def run(x):
        return getattr(tf().math, name)(tf().constant(x)).numpy()
    return run


def jax_op(name):
    def run(x):
        return np.asarray(getattr(jnp(), name)(jnp().asarray(x)))
    return run


# name: (real op, model, vector width whose remainder takes the tail, tail model)
def functions():
    g = {"sin": "glibc_sin", "cos": "glibc_cos", "exp": "glibc_exp"}
    libm = {"sin": "libm_sin", "cos": "libm_cos", "exp": "libm_exp"}
    fns = {}
    for op in ("sin", "cos", "exp"):
        fns["glibc-" + op] = (model(libm[op], 0), model(g[op], FUSED), 1, None)
        np_model = model("numpy_" + op, FUSED)
        fns["numpy-" + op] = (getattr(np, op), np_model, 1, None)
        gl = model(g[op], FUSED)
        fns["tf-" + op] = (tf_op(op), model("eigen_" + op, 1), 8,
                           lambda x, gl=gl: flush(gl(flush(x))))
        ort_model = model("mlas_exp", 1) if op == "exp" else model("eigen_" + op, 0)
        fns["ort-" + op] = (lambda x, o=op.capitalize(): ort_run(o, x), ort_model,
                            1 if op == "exp" else 4, None if op == "exp" else gl)
        fns["jax-" + op] = (jax_op(op), model("xla_exp", 0) if op == "exp" else gl, 1, None)
    return fns


def compare(real, mdl, x, width):
    """Count differing elements; x's length a multiple of width (no tail)."""
    pad = (-x.size) % width
    if pad:
        x = np.concatenate([x, np.zeros(pad, np.float32)])
    r, m = bits(real(x)), bits(mdl(x))
    bad = np.nonzero(r != m)[0]
    if pad:
        bad = bad[bad < x.size - pad]
    return bad, r, m


def specials():
    u = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
         0xFF800001, 0x7FA00000, 0x7FC12345, 0xFFFFFFFF, 0x7FFFFFFF, 0x7F7FFFFF, 0xFF7FFFFF,
         0x00800000, 0x80800000, 0x007FFFFF, 0x807FFFFF, 1, 0x80000001]
    u += list(range(0, 0x800000, 997)) + list(range(0x80000000, 0x80800000, 991))
    f = [0.5, 1, 2, 3, 10, 87, 87.5, 88, 88.72, 88.7228, 88.723, 88.776, 88.8, 89, 100,
         103.28, 103.97, 104, 120, 1e4, 18838, 25966, 71476.0625, 117435.992, 1e5, 1e6, 1e10,
         1e20, 1e30, 3.14159265, 1.5707964, 0.78539816, 2.0 ** -12, 2.0 ** -126, 2.0 ** -149]
    v = np.array(u, np.uint32).view(np.float32)
    f32 = np.array(f, np.float32)
    near = np.concatenate([f32, -f32])
    nb = near.view(np.uint32).astype(np.int64)
    steps = np.concatenate([nb + d for d in range(-64, 65)]) & 0xFFFFFFFF
    rng = np.random.default_rng(26)
    rand = rng.integers(0, 2 ** 32, 1_000_000, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([v, steps.astype(np.uint32).view(np.float32), rand.view(np.float32),
                           rng.uniform(-1e5, 1e5, 200_000).astype(np.float32),
                           rng.uniform(-120, 120, 200_000).astype(np.float32)])


def report(name, what, n, bad, x, r, m, secs):
    print(f"{name:10s} {what:12s} inputs {n:>12,d} wrong {bad.size:>10,d}  {secs:8.1f} s",
          flush=True)
    for i in bad[:5]:
        print(f"    x={x[i]!r} (0x{x.view(np.uint32)[i]:08x}) real 0x{r[i]:08x} model 0x{m[i]:08x}")


def check_specials(name, fn):
    real, mdl, width, tail = fn
    x = specials()
    t = time.time()
    bad, r, m = compare(real, mdl, x, width)
    report(name, "specials", x.size, bad, x, r, m, time.time() - t)
    wrong = bad.size
    if tail is not None and width > 1:
        # the scalar tail: n = width*k + j, the last j elements through the C library
        tb = 0
        diff = x[bits(tail(x)) != bits(mdl(x))]  # inputs where the two functions differ
        assert diff.size >= width, "no inputs tell the tail from the vector function"
        for j in range(1, width):
            y = np.concatenate([x[: (x.size // width - 1) * width], diff[:j]])
            out = bits(real(y))
            lo = y.size - j
            exp_t = bits(tail(y[lo:]))
            exp_v = bits(mdl(y[:lo]))
            tb += int((out[lo:] != exp_t).sum()) + int((out[:lo] != exp_v).sum())
        print(f"{name:10s} {'tails':12s} lengths n%{width}=1..{width - 1}: wrong {tb}")
        wrong += tb
    return wrong


def check_stride(name, fn, k, start=0, chunk=1 << 24):
    real, mdl, width, _ = fn
    t = time.time()
    total = wrong = 0
    shown = 0
    for lo in range(start, 1 << 32, chunk * k):
        hi = min(lo + chunk * k, 1 << 32)
        x = np.arange(lo, hi, k, dtype=np.uint64).astype(np.uint32).view(np.float32)
        bad, r, m = compare(real, mdl, x, width)
        total += x.size
        wrong += bad.size
        for i in bad[: max(0, 5 - shown)]:
            print(f"    x=0x{x.view(np.uint32)[i]:08x} real 0x{r[i]:08x} model 0x{m[i]:08x}")
            shown += 1
    secs = time.time() - t
    what = "all 2^32" if k == 1 else f"every {k}th"
    print(f"{name:10s} {what:12s} inputs {total:>12,d} wrong {wrong:>10,d}  {secs:8.1f} s",
          flush=True)
    return wrong, total, secs


def check_pow():
    rng = np.random.default_rng(1)
    x = np.concatenate([np.full(512, 10000, np.float32),
                        rng.uniform(0, 100, 1_000_000).astype(np.float32),
                        rng.integers(0, 2 ** 32, 1_000_000, dtype=np.uint64)
                        .astype(np.uint32).view(np.float32)])
    y = np.concatenate([(-np.arange(0, 1024, 2, dtype=np.float32) / 1024),
                        rng.uniform(-10, 10, 1_000_000).astype(np.float32),
                        rng.integers(0, 2 ** 32, 1_000_000, dtype=np.uint64)
                        .astype(np.uint32).view(np.float32)])
    outs = []
    for which in (FUSED, 2):
        o = np.empty_like(x)
        LIB.fw_pow(which, x.ctypes.data, y.ctypes.data, o.ctypes.data, x.size)
        outs.append(bits(o))
    bad = int((outs[0] != outs[1]).sum())
    print(f"{'glibc-pow':10s} {'pairs':12s} inputs {x.size:>12,d} wrong {bad:>10,d}")
    # JAX's pow is glibc's powf under FTZ/DAZ; NumPy's float32 power is measured for the record
    o = np.empty_like(x)
    LIB.fw_pow(3 + FUSED, x.ctypes.data, y.ctypes.data, o.ctypes.data, x.size)
    real = {"jax-pow": (lambda: np.asarray(jnp().power(jnp().asarray(x), jnp().asarray(y))),
                        bits(o), "glibc powf, FTZ/DAZ"),
            "numpy-pow": (lambda: np.power(x, y), outs[0], "glibc powf")}
    # TensorFlow's is Eigen's generic_pow (FTZ/DAZ; lengths here are multiples of 8: no tail)
    te = np.empty_like(x)
    LIB.fw_pow(5, x.ctypes.data, y.ctypes.data, te.ctypes.data, x.size)
    real["tf-pow"] = (lambda: tf().pow(tf().constant(x), tf().constant(y)).numpy(), bits(te),
                      "Eigen's generic_pow, FTZ/DAZ")
    for name, (f, want, what) in real.items():
        w = int((bits(f()) != want).sum())
        print(f"{name:10s} {'pairs':12s} inputs {x.size:>12,d} wrong {w:>10,d}  (model: {what})")
        bad += w if name in ("jax-pow", "tf-pow") else 0
    return bad


@np.errstate(all="ignore")
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fn", nargs="*", help="functions (default: all)")
    ap.add_argument("--k", type=int, default=64, help="every k-th bit pattern (default 64)")
    ap.add_argument("--all", action="store_true", help="all 2^32 inputs (one function at a time)")
    ap.add_argument("--no-stride", action="store_true", help="specials only")
    ap.add_argument("--table", action="store_true", help="the tutorial tables instead")
    a = ap.parse_args()
    print(f"# {platform.machine()} {platform.processor() or ''} glibc {platform.libc_ver()[1]}"
          f" fused={FUSED} {time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    if a.table:
        from fwtable import main as table_main
        return table_main()
    fns = functions()
    names = a.fn or list(fns) + ["glibc-pow"]
    wrong = 0
    for name in names:
        if name == "glibc-pow":
            wrong += check_pow()
            continue
        fn = fns[name]
        wrong += check_specials(name, fn)
        if a.all:
            wrong += check_stride(name, fn, 1)[0]
        elif not a.no_stride:
            wrong += check_stride(name, fn, a.k)[0]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
