"""Drives ggml's CPU ggml_rope_ext through ctypes (the llama.cpp oracle: tools/llama_cpp_record.py).

run_rope(lib_path, x, positions, n_dims, mode, ..., n_threads) -> numpy array.
x has shape (n_tokens, n_head, head_dim) in NumPy (C order), which is exactly
ggml's [ne0=head_dim, ne1=n_head, ne2=n_tokens] tensor memory layout.
"""
import ctypes as C
import os
import numpy as np

GGML_TYPE_F32 = 0
GGML_TYPE_F16 = 1
GGML_TYPE_I32 = 26


class ggml_init_params(C.Structure):
    _fields_ = [("mem_size", C.c_size_t), ("mem_buffer", C.c_void_p), ("no_alloc", C.c_bool)]


_LIBS = {}


def load(lib_path):
    """lib_path: path to libggml-cpu.so (libggml-base.so must sit beside it)."""
    lib_path = os.path.abspath(lib_path)
    if lib_path in _LIBS:
        return _LIBS[lib_path]
    d = os.path.dirname(lib_path)
    base = C.CDLL(os.path.join(d, "libggml-base.so"), mode=C.RTLD_GLOBAL)
    cpu = C.CDLL(lib_path, mode=C.RTLD_GLOBAL)
    P = C.c_void_p
    base.ggml_init.argtypes = [ggml_init_params]
    base.ggml_init.restype = P
    base.ggml_free.argtypes = [P]
    base.ggml_new_tensor_1d.argtypes = [P, C.c_int, C.c_int64]
    base.ggml_new_tensor_1d.restype = P
    base.ggml_new_tensor_3d.argtypes = [P, C.c_int, C.c_int64, C.c_int64, C.c_int64]
    base.ggml_new_tensor_3d.restype = P
    base.ggml_get_data.argtypes = [P]
    base.ggml_get_data.restype = P
    base.ggml_rope_ext.argtypes = [P, P, P, P, C.c_int, C.c_int, C.c_int] + [C.c_float] * 6
    base.ggml_rope_ext.restype = P
    base.ggml_new_graph.argtypes = [P]
    base.ggml_new_graph.restype = P
    base.ggml_build_forward_expand.argtypes = [P, P]
    cpu.ggml_graph_compute_with_ctx.argtypes = [P, P, C.c_int]
    cpu.ggml_graph_compute_with_ctx.restype = C.c_int
    cpu.ggml_cpu_init.argtypes = []
    cpu.ggml_cpu_init()
    _LIBS[lib_path] = (base, cpu)
    return base, cpu


def run_rope(lib_path, x, positions, n_dims, mode, freq_base, freq_scale=1.0, ext_factor=0.0,
             attn_factor=1.0, beta_fast=32.0, beta_slow=1.0, n_ctx_orig=0, freq_factors=None,
             n_threads=1):
    base, cpu = load(lib_path)
    x = np.ascontiguousarray(x)
    assert x.ndim == 3 and x.dtype in (np.float32, np.float16)
    T, H, D = x.shape
    pos = np.ascontiguousarray(positions, dtype=np.int32)
    assert pos.shape == (T,)
    typ = GGML_TYPE_F32 if x.dtype == np.float32 else GGML_TYPE_F16
    mem = 3 * x.nbytes + pos.nbytes + (0 if freq_factors is None else 4 * len(freq_factors)) \
        + (D + 64) * 4 * 8 + (1 << 20)
    ctx = base.ggml_init(ggml_init_params(mem, None, False))
    assert ctx
    try:
        tx = base.ggml_new_tensor_3d(ctx, typ, D, H, T)
        tp = base.ggml_new_tensor_1d(ctx, GGML_TYPE_I32, T)
        C.memmove(base.ggml_get_data(tx), x.ctypes.data, x.nbytes)
        C.memmove(base.ggml_get_data(tp), pos.ctypes.data, pos.nbytes)
        tf = None
        if freq_factors is not None:
            ff = np.ascontiguousarray(freq_factors, dtype=np.float32)
            tf = base.ggml_new_tensor_1d(ctx, GGML_TYPE_F32, len(ff))
            C.memmove(base.ggml_get_data(tf), ff.ctypes.data, ff.nbytes)
        ty = base.ggml_rope_ext(ctx, tx, tp, tf, int(n_dims), int(mode), int(n_ctx_orig),
                                freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow)
        gf = base.ggml_new_graph(ctx)
        base.ggml_build_forward_expand(gf, ty)
        st = cpu.ggml_graph_compute_with_ctx(ctx, gf, int(n_threads))
        assert st == 0, st
        out = np.empty_like(x)
        C.memmove(out.ctypes.data, base.ggml_get_data(ty), out.nbytes)
        return out
    finally:
        base.ggml_free(ctx)
