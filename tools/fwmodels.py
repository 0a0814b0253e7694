"""The frameworks' element models (tools/libfwmodels.so: src/elem/fw_*.c, src/elem/glibcf.c)
and the frameworks themselves (TensorFlow, JAX), imported on first use with one intra-op
thread: what fwcheck.py and fwtable.py both use.  Not a script.
"""
import ctypes
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = ctypes.CDLL(os.path.join(HERE, "libfwmodels.so"))
LIB.fw_map.restype = ctypes.c_int
LIB.fw_map.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_int64]
LIB.fw_pow.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_int64]
FUSED = LIB.fw_glibc_fused()


def model(name, flag):
    def run(x):
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.empty_like(x)
        if LIB.fw_map(name.encode(), flag, x.ctypes.data, out.ctypes.data, x.size) != 0:
            raise KeyError(name)
        return out
    return run


def flush(x):
    """Subnormals to signed zero (FTZ/DAZ)."""
    u = x.view(np.uint32)
    sub = ((u & 0x7F800000) == 0) & ((u & 0x7FFFFF) != 0)
    return np.where(sub, u & 0x80000000, u).astype(np.uint32).view(np.float32)


# ---- the frameworks, imported on first use -------------------------------------------------
_tf = _jnp = None


def tf():
    global _tf
    if _tf is None:
        import tensorflow
        tensorflow.config.threading.set_intra_op_parallelism_threads(1)
        tensorflow.config.threading.set_inter_op_parallelism_threads(1)
        _tf = tensorflow
    return _tf


def jnp():
    global _jnp
    if _jnp is None:
        import jax
        jax.config.update("jax_platforms", "cpu")
        import jax.numpy
        _jnp = jax.numpy
    return _jnp


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
