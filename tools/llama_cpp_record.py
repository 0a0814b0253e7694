"""Records llama.cpp's rotation (ggml's CPU ggml_rope_ext) for the default suite
(tests/data/llama_cpp.npz, read by tests/numerics/test_numerics_llama_cpp.py), or checks the
record against ggml again.  ggml builds from source (tools/llama_cpp_build.sh, 2-3 minutes
for its three libraries), so CI reads the record and this tool re-checks it.

  python tools/llama_cpp_record.py --lib WORK/build/bin/libggml-cpu.so --out tests/data/llama_cpp.npz
  python tools/llama_cpp_record.py --lib WORK/build/bin/libggml-cpu.so --check tests/data/llama_cpp.npz

Layout of every case: x (n_tokens, n_head, head_dim) == ggml [ne0=head_dim, ne1=n_head,
ne2=n_tokens]; positions int32 (n_tokens,); y same shape/dtype as x.
Comparison is on unsigned-integer views (uint32 for f32, uint16 for f16), never a tolerance.
"""
import argparse
import json
import platform
import sys
import os

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # tools/ggml_rope.py

LLAMA_CPP_COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
LLAMA_CPP_PYTHON = "0.3.36"
GGML_VERSION = "0.25.3"


def _cases():
    """~20 deterministic cases (seeded)."""
    rng = np.random.default_rng(20240607)
    out = []

    def add(name, dt, mode, T, H, D, nd, pos=None, special=False, **kw):
        x = (rng.standard_normal((T, H, D)) * 3).astype(dt)
        if pos is None:
            pos = rng.integers(0, 131073, T)
        pos = np.asarray(pos, np.int32)
        if special:
            if dt == np.float32:
                sp = np.array([0x7FC00000, 0xFFC00000, 0x7FA12345, 0xFF812345, 0x7F800000,
                               0xFF800000, 0x80000000, 0x00000001, 0x7F7FFFFF],
                              np.uint32).view(np.float32)
            else:
                sp = np.array([0x7E00, 0xFE00, 0x7C01, 0xFD23, 0x7C00, 0xFC00, 0x8000, 0x0001,
                               0x7BFF], np.uint16).view(np.float16)
            m = rng.random(x.shape) < 0.08
            x[m] = rng.choice(sp, int(m.sum()))
        ff = kw.pop("freq_factors", None)
        out.append(dict(name=name, x=x, pos=pos, n_dims=nd, mode=mode, freq_factors=ff, **kw))

    llama3_ff = np.concatenate([np.ones(20), np.linspace(1, 8, 24), np.full(20, 8.0)]).astype(np.float32)
    for dt in (np.float32, np.float16):
        t = np.dtype(dt).name
        add(f"{t}_neox_base1e4_full", dt, 2, 48, 4, 128, 128, freq_base=10000.0)
        add(f"{t}_normal_base1e4_full", dt, 0, 48, 4, 128, 128, freq_base=10000.0)
        add(f"{t}_neox_base5e5_partial", dt, 2, 40, 3, 96, 64, freq_base=500000.0)
        add(f"{t}_normal_base1e6_partial_odd_pairs", dt, 0, 40, 3, 80, 46, freq_base=1e6)  # 23 pairs
        add(f"{t}_neox_yarn", dt, 2, 32, 4, 64, 64, freq_base=10000.0, freq_scale=0.25,
            ext_factor=1.0, attn_factor=1.0, beta_fast=32.0, beta_slow=1.0, n_ctx_orig=4096)
        add(f"{t}_normal_yarn_attn", dt, 0, 32, 2, 128, 128, freq_base=1e6, freq_scale=1 / 32,
            ext_factor=1.0, attn_factor=0.9, beta_fast=32.0, beta_slow=1.0, n_ctx_orig=8192)
        add(f"{t}_neox_llama3_ff", dt, 2, 32, 4, 128, 128, freq_base=500000.0,
            freq_factors=llama3_ff)
        add(f"{t}_normal_ff_partial", dt, 0, 24, 2, 128, 96, freq_base=10000.0,
            freq_factors=llama3_ff[:48].copy(), freq_scale=0.5)
        add(f"{t}_neox_bigpos", dt, 2, 16, 2, 64, 64, pos=[0, 1, 2, 4095, 4096, 8191, 32767, 65535,
            65536, 131071, 131072, 200000, 1 << 20, (1 << 24) + 1, 2**31 - 1, -5], freq_base=1e7)
        add(f"{t}_neox_special", dt, 2, 16, 2, 64, 32, pos=np.arange(16) * 997, special=True,
            freq_base=10000.0)
        add(f"{t}_normal_special", dt, 0, 16, 2, 64, 62, pos=np.arange(16) * 997, special=True,
            freq_base=10000.0)
    return out


def _run_ggml(lib, c):
    import ggml_rope as ggml_live
    return ggml_live.run_rope(lib, c["x"], c["pos"], c["n_dims"], c["mode"], **_kw(c))


PARAMS = ("freq_base", "freq_scale", "ext_factor", "attn_factor", "beta_fast", "beta_slow",
          "n_ctx_orig")


def _kw(c):
    kw = {k: c[k] for k in PARAMS if k in c and c[k] is not None}
    if c.get("freq_factors") is not None:
        kw["freq_factors"] = c["freq_factors"]
    return kw


def record(lib, out):
    cases = _cases()
    arrays, meta = {}, []
    for i, c in enumerate(cases):
        y1 = _run_ggml(lib, c)
        import ggml_rope as ggml_live
        y2 = ggml_live.run_rope(lib, c["x"], c["pos"], c["n_dims"], c["mode"], n_threads=2, **_kw(c))
        assert _ndiff(y1, y2) == 0, "1 vs 2 threads differ"
        p = f"c{i:02d}_"
        arrays[p + "x"] = c["x"]
        arrays[p + "pos"] = c["pos"]
        arrays[p + "y"] = y1
        if c.get("freq_factors") is not None:
            arrays[p + "ff"] = c["freq_factors"]
        m = {k: c[k] for k in ("name", "n_dims", "mode") + PARAMS if k in c}
        meta.append(m)
    info = dict(llama_cpp_commit=LLAMA_CPP_COMMIT, llama_cpp_python=LLAMA_CPP_PYTHON,
                ggml_version=GGML_VERSION, machine=platform.machine(), cpu=_cpu_name(),
                layout="x,y: (n_tokens, n_head, head_dim) == ggml [ne0=head_dim, ne1=n_head, ne2=n_tokens]",
                function="ggml_rope_ext (GGML_ROPE_TYPE_NORMAL=0, GGML_ROPE_TYPE_NEOX=2), ggml-cpu, 1 thread",
                cases=meta)
    arrays["meta_json"] = np.frombuffer(json.dumps(info).encode(), dtype=np.uint8)
    np.savez_compressed(out, **arrays)
    print(f"recorded {len(meta)} cases to {out}")


def load(path):
    z = np.load(path)
    info = json.loads(bytes(z["meta_json"]).decode())
    cases = []
    for i, m in enumerate(info["cases"]):
        p = f"c{i:02d}_"
        c = dict(m)
        c["x"], c["pos"], c["y"] = z[p + "x"], z[p + "pos"], z[p + "y"]
        c["freq_factors"] = z[p + "ff"] if (p + "ff") in z.files else None
        cases.append(c)
    return info, cases


def _ndiff(a, b):
    vt = np.uint32 if a.dtype == np.float32 else np.uint16
    return int((a.view(vt) != b.view(vt)).sum())


def check(path, lib):
    info, cases = load(path)
    tv = td = 0
    for c in cases:
        y = _run_ggml(lib, c)
        d = _ndiff(c["y"], y)
        tv += y.size
        td += d
        print(f"{c['name']:40s} {str(c['x'].shape):16s} values {y.size:7d} differing {d}")
    print(f"ggml vs record: {len(cases)} cases, {tv} values, {td} differing")
    return td == 0


def _cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", help="path to libggml-cpu.so (libggml-base.so beside it)")
    ap.add_argument("--out", help="write a record .npz")
    ap.add_argument("--check", metavar="FILE", help="re-run and compare with a record")
    a = ap.parse_args()
    if a.out:
        if not a.lib:
            ap.error("--out needs --lib")
        record(a.lib, a.out)
    if a.check:
        if not a.lib:
            ap.error("--check needs --lib")
        ok = check(a.check, a.lib)
        sys.exit(0 if ok else 1)
    if not (a.out or a.check):
        ap.print_help()
