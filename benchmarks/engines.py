"""sinpe's rotation against the inference engines' own RoPE kernels, at decode and prefill.

    python benchmarks/engines.py [--repeats N] [--quick]

Every row: one shape (batch, seq, heads, head_dim), dtype and layout; each engine installed
(ONNX Runtime's com.microsoft RotaryEmbedding through IOBinding, MLX's mx.fast.rope on the
CPU, torch.compile of transformers' rotation; ONNX Runtime and torch with 2 threads), and
sinpe's ``apply_rope`` with positions ("pos": it finds or computes its tables) and with the
tables given ("cos": as the engine gets its cache).  Times are medians of interleaved rounds (each round runs every contestant
once, best of 5 calls); a ratio is the engine's time over sinpe's (> 1: sinpe is faster).
The floor of a prefill row is the machine's copy of the same bytes (read and write, 2 threads
through torch's copy_ when torch is installed, else NumPy's one thread): "floor" is that
copy's time over sinpe's.  Misses (ratio < 1, floor < 0.85) are listed at the end.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from bench import cpu_name  # noqa: E402

import sinpe  # noqa: E402

THREADS = 2
CACHE_ROWS = 4096
DECODE = [(1, 1, 32, 128), (8, 1, 32, 128), (16, 1, 8, 64), (4, 1, 64, 256)]
PREFILL = [(1, 512, 32, 128), (2, 256, 16, 64), (1, 2048, 8, 128), (1, 64, 32, 128)]


def best(f, n=5):
    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        t.append(time.perf_counter() - t0)
    return min(t)


def rounds(fns, repeats):
    for f in fns.values():
        f()
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            times[k].append(best(f))
    return {k: statistics.median(v) for k, v in times.items()}


def tables(positions, rot, layout, base=10000.0):
    """transformers' cos/sin rows (float64 reference is not needed here: speed only)."""
    inv = 1.0 / (base ** (np.arange(0, rot, 2, dtype=np.float32) / rot))
    ang = positions[..., None].astype(np.float32) * inv
    emb = np.concatenate([ang, ang], -1) if layout == "half" else np.repeat(ang, 2, -1)
    return np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)


def ort_case(x, pos, layout):
    """ONNX Runtime's RotaryEmbedding on x (batch, seq, heads * head_dim) with a cache of
    CACHE_ROWS positions (the suite's session, tests/engine_oracles.py, at THREADS threads),
    bound once (IOBinding): the call is run_with_iobinding."""
    if importlib.util.find_spec("onnxruntime") is None:
        return None
    from engine_oracles import onnxruntime_session
    if x.dtype not in (np.float32, np.float16):
        return None
    b, s, h, d = x.shape
    c, sn = tables(np.arange(CACHE_ROWS), d, layout)
    half = (slice(None), slice(0, d // 2)) if layout == "half" else (slice(None), slice(0, d, 2))
    cc, ss = (np.ascontiguousarray(t[half]).astype(x.dtype) for t in (c, sn))
    sess = onnxruntime_session(x.shape, x.dtype, CACHE_ROWS, pos.shape, d, layout,
                               threads=THREADS)
    io = sess.io_binding()
    x3 = np.ascontiguousarray(x).reshape(b, s, h * d)
    y = np.empty_like(x3)
    for name, a in (("x", x3), ("pos", pos), ("cos", cc), ("sin", ss)):
        io.bind_cpu_input(name, a)
    io.bind_output("y", "cpu", 0, y.dtype, y.shape, y.ctypes.data)
    keep = (x3, pos, cc, ss, y)  # IOBinding holds raw pointers: the arrays live with the call
    return lambda: sess.run_with_iobinding(io) or keep


def compiled_case(x, c, s, layout):
    """torch.compile of transformers' rotation (out of place, as a model runs it)."""
    try:
        import torch
    except ImportError:
        return None
    xt = torch.from_numpy(x).transpose(1, 2)  # (b, h, s, d)
    ct = torch.from_numpy(c)[:, None].to(xt.dtype)
    st = torch.from_numpy(s)[:, None].to(xt.dtype)

    def rot(v):
        if layout == "half":
            h = v.shape[-1] // 2
            return torch.cat((-v[..., h:], v[..., :h]), -1)
        return torch.stack((-v[..., 1::2], v[..., 0::2]), -1).flatten(-2)

    torch._dynamo.reset()  # each case compiled afresh (no recompile limit across cases)
    f = torch.compile(lambda v, cc, ss: v * cc + rot(v) * ss, dynamic=False)
    return lambda: f(xt, ct, st)


def mlx_case(x, start, layout):
    """MLX's mx.fast.rope on the CPU (its own tables from the offset; evaluated each call)."""
    try:
        import mlx.core as mx
    except ImportError:
        return None
    mx.set_default_device(mx.cpu)
    xm = mx.array(np.ascontiguousarray(x.transpose(0, 2, 1, 3)))  # (b, h, s, d)
    d = x.shape[-1]
    return lambda: mx.eval(mx.fast.rope(xm, d, traditional=layout == "pairs", base=10000.0,
                                        scale=1.0, offset=start))


def copy_case(x):
    """The same bytes read and written once (the floor of a rotation in place)."""
    try:
        import torch
        a = torch.from_numpy(x.copy())
        b = torch.empty_like(a)
        return lambda: b.copy_(a)
    except ImportError:
        a, b = x.copy(), np.empty_like(x)
        return lambda: np.copyto(b, a)


def row(shape, dtype, layout, decode, repeats):
    b, s, h, d = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    start = 100 if decode else 0
    pos = np.arange(start, start + s, dtype=np.int64)[None].repeat(b, 0)
    if not decode:
        pos = pos[:1] if b == 1 else pos
    c, sn = tables(pos, d, layout)
    xs = x.copy()
    fns = {
        "pos": lambda: sinpe.apply_rope(xs, pos, layout=layout, seq_dim=1, threads=THREADS),
        "cos": lambda: sinpe.apply_rope(xs, cos=c, sin=sn, layout=layout, seq_dim=1,
                                        threads=THREADS),
    }
    ort = ort_case(x, pos if pos.shape[0] == b else pos.repeat(b, 0), layout) \
        if dtype != "bfloat16" else None
    if ort is not None:
        fns["onnxruntime"] = ort
    mlx = mlx_case(x, start, layout)
    if mlx is not None:
        fns["mlx"] = mlx
    comp = compiled_case(x, c, sn, layout)
    if comp is not None:
        fns["torch.compile"] = comp
    if not decode:
        fns["copy"] = copy_case(x)
    first = {}
    for k in ("pos", "cos"):  # first call: a fresh cache
        sinpe.clear_cache()
        first[k] = best(fns[k], 1)
    t = rounds(fns, repeats)
    return t, first


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="two shapes, float32")
    a = ap.parse_args()
    try:
        import torch
        torch.set_num_threads(THREADS)
    except ImportError:
        pass
    print(f"CPU: {cpu_name()}; {THREADS} threads; sinpe {sinpe.__version__}, NumPy "
          f"{np.__version__}")
    cases = [(sh, True) for sh in DECODE] + [(sh, False) for sh in PREFILL]
    dtypes = ["float32"] if a.quick else ["float32", "float16"]
    if a.quick:
        cases = cases[:1] + cases[len(DECODE):len(DECODE) + 1]
    misses = []
    print(f"{'case (B, S, H, D)':28} {'dtype':8} {'layout':6} {'pos us':>8} {'cos us':>8} "
          f"{'first pos':>9} {'engine':14} {'eng us':>8} {'pos x':>6} {'cos x':>6} {'floor':>6}")
    for shape, decode in cases:
        for dtype in dtypes:
            for layout in ("half", "pairs"):
                t, first = row(shape, dtype, layout, decode, a.repeats)
                kind = "decode" if decode else "prefill"
                floor = t["copy"] / t["pos"] if "copy" in t else None
                engines = [k for k in t if k not in ("pos", "cos", "copy")] or ["-"]
                for e in engines:
                    et = t.get(e)
                    rp = et / t["pos"] if et else float("nan")
                    rc = et / t["cos"] if et else float("nan")
                    print(f"{kind + ' ' + str(shape):28} {dtype:8} {layout:6} "
                          f"{t['pos'] * 1e6:8.1f} {t['cos'] * 1e6:8.1f} "
                          f"{first['pos'] * 1e6:9.1f} {e:14} "
                          f"{(et or float('nan')) * 1e6:8.1f} {rp:6.2f} {rc:6.2f} "
                          f"{'' if floor is None else f'{floor:6.2f}'}")
                    if et and min(rp, rc) < 1.0:
                        misses.append(f"{kind} {shape} {dtype} {layout}: {e} "
                                      f"pos {rp:.2f}x, cos {rc:.2f}x")
                if floor is not None and floor < 0.85:
                    misses.append(f"{kind} {shape} {dtype} {layout}: {floor:.2f}x the copy floor")
    print(f"\nmisses ({len(misses)}):")
    for m in misses:
        print("  " + m)


if __name__ == "__main__":
    main()
