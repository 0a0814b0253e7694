"""Every entry point keeps the core's rules (issue 17): presets, apply_rope, first-use
loading, the CLI plot.  One test per class of hostile input, each with its variants: a
documented exception naming the parameter with every input untouched, or the right result."""
import os
import subprocess
import sys

import numpy as np
import pytest

import sinpe
from conftest import BF16, TIME_SCALE, ctrl_c_latency, run_python, same
from sinpe import presets as P

RNG = np.random.default_rng(17)


# ---- 1. the first library load: once, and every caller waits for it ------------------------

RACE = r"""
import os, sys, threading, numpy as np
import sinpe
{imports}
barrier = threading.Barrier(4)
out, errors = [None] * 4, []
def work(i):
    barrier.wait()
    try:
        out[i] = {call}
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
[t.start() for t in threads]; [t.join() for t in threads]
assert not errors, errors
{check}
print("ok")
"""


@pytest.mark.needs_torch
@pytest.mark.x86_64
@pytest.mark.parametrize("run", range(3))
def test_first_library_load_race(run):
    """torch imported, no mkl wheel: four threads racing the first call all get torch's bits
    (the load of torch's library is once-only and the others wait for it); torch not
    imported and backend='torch': none sees 'not looked for' (tables and presets)."""
    no_mkl = {"SINPE_MKL_LIBRARY": "/nonexistent/libmkl_rt.so.2"}
    check = ("import torch, math\n"
             "d = torch.exp(torch.arange(0, 512, 2).float() * (-math.log(10000.0) / 512))\n"
             "a = torch.arange(5000).float()[:, None] * d\n"
             "pe = torch.empty(5000, 512); pe[:, 0::2] = torch.sin(a); pe[:, 1::2] = torch.cos(a)\n"
             "ref = pe.numpy().view(np.uint32)\n"
             "bad = [int((o.view(np.uint32) != ref).sum()) for o in out]\n"
             "assert bad == [0, 0, 0, 0], bad\n"
             "assert sinpe.get_backend() == 'torch'")
    r = run_python(RACE.format(imports="import torch", call="sinpe.positional_encoding(5000, 512)",
                               check=check), **no_mkl)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
    for call in ("sinpe.positional_encoding(64, 64, backend='torch')",
                 "sinpe.presets.llama_rope(64, 100, backend='torch')[0]"):
        r = run_python(RACE.format(imports="", call=call,
                                   check="assert 'torch' not in sys.modules\n"
                                         "assert all(np.array_equal(o, out[0]) for o in out)"),
                       **no_mkl)
        assert r.returncode == 0 and "ok" in r.stdout, call + r.stdout + r.stderr


# ---- 2. out= of every preset is the core's out= ----------------------------------------------

def _presets_with_out():
    return {
        "keras_hub": (lambda **k: P.keras_hub((2, 5, 8), **k), (2, 5, 8)),
        "keras_hub_batch1": (lambda **k: P.keras_hub((1, 5, 8), **k), (1, 5, 8)),
        "tatp22_1d": (lambda **k: P.tatp22_1d(8, (2, 5, 8), **k), (2, 5, 8)),
        "tatp22_2d": (lambda **k: P.tatp22_2d(8, (2, 3, 4, 8), **k), (2, 3, 4, 8)),
        "tatp22_3d": (lambda **k: P.tatp22_3d(8, (2, 3, 4, 2, 8), **k), (2, 3, 4, 2, 8)),
        "tensor2tensor": (lambda **k: P.tensor2tensor(5, 8, **k), (1, 5, 8)),
        "tensor2tensor_neg": (lambda **k: P.tensor2tensor(5, 8, start_index=-3, **k), (1, 5, 8)),
        "tf_tutorial_legacy": (lambda **k: P.tf_tutorial(5, 8, legacy=True, **k), (1, 5, 8)),
        "tf_tutorial": (lambda **k: P.tf_tutorial(5, 7, **k), (5, 8)),
        "xlm": (lambda **k: P.xlm(5, 7, **k), (5, 7)),
        "marian": (lambda **k: P.marian(5, 7, **k), (5, 7)),
        "flax_sinusoidal_init": (lambda **k: P.flax_sinusoidal_init(5, 9, **k), (1, 5, 9)),
        "fairseq": (lambda **k: P.fairseq(5, 8, **k), (5, 8)),
        "mae_2d": (lambda **k: P.mae_2d(8, 2, True, **k), (5, 8)),
        "timm_2d": (lambda **k: P.timm_2d((2, 3), 8, **k), (6, 8)),
        "rotary_embedding_torch": (lambda **k: P.rotary_embedding_torch(8, 5, **k), (5, 8)),
    }


@pytest.mark.parametrize("name", sorted(_presets_with_out()))
def test_presets_out_follows_the_core_rule(name):
    f, shape = _presets_with_out()[name]
    want = f()
    assert want.shape == shape and want.flags.writeable and want.dtype == np.float32
    for bad in (np.zeros(shape, np.int32), np.zeros(shape, np.int64)):
        with pytest.raises(TypeError, match="out must have dtype float32, float16, bfloat16"):
            f(out=bad)
        assert not bad.any()
    with pytest.raises(TypeError, match="out has dtype float16 but dtype="):
        f(dtype="float32", out=np.zeros(shape, np.float16))
    with pytest.raises(TypeError, match="out must be a writable array"):
        f(out=np.zeros(shape).tolist())
    ro = np.zeros(shape, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        f(out=ro)
    with pytest.raises(ValueError, match="out has shape"):
        f(out=np.zeros(shape[:-1] + (shape[-1] + 2,), np.float32))
    buf = np.zeros(shape, np.float32)
    assert f(out=memoryview(buf)) is not None and same(buf, want)
    half = np.zeros(shape, np.float16)  # out's dtype is the result's: rounded as torch does
    f(out=half)
    assert same(half, f(dtype="float16"))


def test_results_are_writable_fresh_arrays():
    for r in (P.tatp22_1d(4, (1, 3, 4)), P.keras_hub((1, 3, 4)), P.keras_hub((3, 4)),
              P.tatp22_2d(4, (1, 2, 2, 4)), *P.llama_rope(8, 4), P.alibi_bias(None, 2, seq_length=3),
              P.xlm(3, 4), P.tf_tutorial(3, 4), P.flax_sinusoidal_init(3, 5), P.mae_2d(4, 2),
              P.keras_hub_rotary(np.ones((1, 3, 4)))):
        assert r.flags.writeable and r.flags.c_contiguous
    x16 = np.zeros((2, 3, 4), np.float16)  # tatp22: the tensor's dtype is the result's
    assert P.tatp22_1d(4, x16).dtype == np.float16
    assert same(P.tatp22_1d(4, x16), P.tatp22_1d(4, (2, 3, 4), dtype="float16"))


# ---- 3. positions at the end of int64 ----------------------------------------------------

def test_offsets_past_int64_refused():
    x = RNG.standard_normal((1, 2, 4, 8)).astype(np.float32)
    y = x.copy()
    with pytest.raises(OverflowError, match="does not fit in int64"):
        sinpe.apply_rope(y, offset=2**63 - 2)
    assert same(y, x)
    sinpe.apply_rope(y, offset=2**63 - 4)  # the last that fits
    with pytest.raises(OverflowError, match="does not fit in int64"):
        P.tensor2tensor(4, 8, start_index=2**63 - 2)
    # keras-hub adds start_index to an int32 arange: keras' torch backend wraps it there
    # (issue 35), its JAX and NumPy backends refuse a Python int past int32
    assert same(P.keras_hub((1, 4, 8), start_index=2**63 - 2),
                P.keras_hub((1, 4, 8), positions=[-2, -1, 0, 1]))
    for be in ("jax", "numpy"):
        with pytest.raises(OverflowError, match="start_index=9223372036854775806"):
            P.keras_hub((1, 4, 8), start_index=2**63 - 2, backend=be)
    with pytest.raises(OverflowError):
        P.fairseq2(8, 4, _legacy_pad_idx=2**63 - 4)


@pytest.mark.parametrize("d", [2, 64, 4098])
def test_offsets_at_the_end_of_int64_every_backend(d):
    """The fuzzer's UBSan finding: torch's tensor from row 0 to offset + rows has more than
    2^63 elements there, so its size overflowed int64 in the plan.  Such rows now count as
    their own tensor, on every backend, for tables and adds alike: the same bits as the
    same positions given as an array (and no undefined behaviour under the sanitizers)."""
    top = 2**63 - 1
    for backend in [b for b, ok in sinpe.backends().items() if ok]:
        for rows in (1, 2, 3):
            offset = top - rows + 1  # the last row is position 2^63 - 1
            pos = np.arange(rows, dtype=np.int64) + np.int64(offset)
            want = sinpe.positional_encoding(None, d, positions=pos, backend=backend)
            got = sinpe.positional_encoding(rows, d, offset=offset, backend=backend, threads=2)
            assert same(got, want), (backend, rows)
            x = np.zeros((2, rows, d), np.float32)
            sinpe.add_pe(x, offset=offset, backend=backend)
            assert same(x[1], want), (backend, rows)


def test_presets_with_no_angles():
    """The fuzzer's second UBSan finding: a preset whose width gives no frequencies
    (rotary-embedding-torch's dim=1: arange(0, 1, 2)[:0]) divided by its zero row length.
    torch gives an empty (seq_len, 0) table; so does sinpe, for any seq_len."""
    for n in (0, 1, 5):
        r = P.rotary_embedding_torch(1, n)
        assert r.shape == (n, 0) and r.dtype == np.float32
        r = P.rotary_embedding_torch(1, n, dtype="float16", threads=2)
        assert r.shape == (n, 0) and r.dtype == np.float16


@pytest.mark.parametrize("bad,exc", [(2.0, TypeError), (True, TypeError), ("2", TypeError),
                                     (0, ValueError), (5000, ValueError), (2**70, OverflowError)])
def test_options_refused_before_presets_allocate(bad, exc):
    """The fuzzer's third finding: a preset built its own inputs (rotary-embedding-torch's
    positions, 8 GiB for seq_len 2^31) before the core checked threads= at the end.  Options
    are now checked by the core's rule first, for every preset and apply_rope: the error
    names the parameter and nothing larger than a few KiB was allocated (tracemalloc sees
    NumPy's allocations)."""
    import tracemalloc
    x = np.zeros((1, 1, 4, 8), np.float32)
    calls = [lambda kw: P.rotary_embedding_torch(8, 2**31, **kw),
             lambda kw: P.rotary_embedding_torch(1, 2**31, **kw),
             lambda kw: P.llama_rope(64, 2**30, **kw),
             lambda kw: sinpe.apply_rope(x, **kw)]
    for name in ("threads", "torch_threads"):
        for call in calls:
            tracemalloc.start()
            try:
                with pytest.raises(exc, match=name):
                    call({name: bad})
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert peak < 1 << 20, (name, peak)
    assert same(x, np.zeros_like(x))


# ---- 4. bases and other powers: the core's rule, before anything is touched --------------

@pytest.mark.parametrize("bad,exc", [(0, ValueError), (-1, ValueError), (float("nan"), ValueError),
                                     (float("inf"), ValueError), ("1e4", TypeError),
                                     (True, TypeError), (1j, TypeError), (None, TypeError)])
def test_bases_refused_before_work(bad, exc):
    x = RNG.standard_normal((1, 2, 4, 8)).astype(np.float32)
    y = x.copy()
    with pytest.raises(exc, match="base must be"):
        sinpe.apply_rope(y, base=bad)
    assert same(y, x)
    for f, name in ((lambda: P.llama_rope(8, 4, rope_theta=bad), "rope_theta"),
                    (lambda: P.timm_2d((2, 2), 8, temperature=bad), "temperature"),
                    (lambda: P.keras_hub((2, 8), max_wavelength=bad), "max_wavelength"),
                    (lambda: P.tensor2tensor(4, 8, min_timescale=bad), "min_timescale"),
                    (lambda: P.tensor2tensor(4, 8, max_timescale=bad), "max_timescale"),
                    (lambda: P.diffusers_timestep([1, 2], 8, max_period=bad), "max_period"),
                    (lambda: P.whisper(4, 8, max_timescale=bad), "max_timescale"),
                    (lambda: P.rotary_embedding_torch(8, 4, theta=bad), "theta"),
                    (lambda: sinpe.shift_matrix(1, 8, bad), "base")):
        with pytest.raises(exc, match=f"{name} must be"):
            f()


# ---- 5. sizes: integers, not negative, not bool ------------------------------------------

def test_preset_sizes():
    for bad in ((-2, -3), (-1, 3), (3, -1)):
        with pytest.raises(ValueError, match="feat_shape must be >= 0"):
            P.timm_2d(bad, 8)
    for bad in ((2.5, 3), (True, 3), ("2", 3)):
        with pytest.raises(TypeError, match="feat_shape must be an integer"):
            P.timm_2d(bad, 8)
    with pytest.raises(TypeError, match="feat_shape must be a sequence"):
        P.timm_2d(6, 8)
    for f, name in ((lambda v: P.fairseq(v, 8), "num_embeddings"), (lambda v: P.fairseq(8, v), "embedding_dim"),
                    (lambda v: P.whisper(v, 8), "length"), (lambda v: P.mae_2d(8, v), "grid_size"),
                    (lambda v: P.llama_rope(v, 4), "head_dim"), (lambda v: P.alibi_slopes(v), "num_heads"),
                    (lambda v: P.keras_hub((v, 8)), "inputs' shape"),
                    (lambda v: P.tatp22_1d(v, (1, 2, 4)), "channels")):
        for bad in (True, np.True_, 2.5, "4"):
            with pytest.raises(TypeError, match=f"{name} must be an integer"):
                f(bad)
    c1, s1 = P.llama_rope(8, np.int64(6))  # a NumPy integer is a count, as an int
    c2, s2 = P.llama_rope(8, 6)
    assert c1.shape == (6, 8) and same(c1, c2) and same(s1, s2)
    assert same(P.llama_rope(8, np.array(3))[0], P.llama_rope(8, 3)[0])


# ---- 6. memory refused before allocating, with sinpe's figures ---------------------------

def test_huge_presets_refused_before_allocating():
    code = r"""
import time, numpy as np
import sinpe
from sinpe import presets as P
def hwm():  # this process's own peak RSS in KiB (ru_maxrss would start at pytest's)
    return int([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1])
rss0 = hwm()
cases = [lambda: P.timm_2d((2**13, 2**13), 4096), lambda: P.mae_2d(4096, 2**13),
         lambda: P.llama_rope(64, 2**29), lambda: P.keras_hub((2**29, 64)),
         lambda: P.fairseq2(64, 2**29), lambda: P.tensor2tensor(2**29, 64),
         lambda: P.tensor2tensor(2**29, 64, start_index=-5),
         lambda: P.llama_rope(64, np.zeros(2**29, np.int8)), lambda: P.tatp22_1d(64, (2**29, 1, 64)),
         lambda: P.rotary_embedding_torch(64, 2**31), lambda: P.alibi_bias(None, 64, seq_length=2**31),
         lambda: P.mae_2d(8, 2**32), lambda: P.timm_2d((2**40, 2**40), 8)]
for f in cases:
    t0 = time.perf_counter()
    try:
        f()
    except (MemoryError, OverflowError) as exc:
        msg = str(exc)
        assert "needs" in msg and "GiB" in msg or "larger than memory can address" in msg, msg
        assert "Unable to allocate" not in msg and "Maximum allowed size" not in msg, msg
    else:
        raise AssertionError("not refused")
    assert time.perf_counter() - t0 < 0.5, (time.perf_counter() - t0)
grown = hwm() - rss0
assert grown < 200_000, f"peak RSS grew by {grown} KiB"
print("ok")
"""
    r = run_python(code, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


# ---- 7. apply_rope stops on Ctrl-C --------------------------------------------------------

@pytest.mark.parametrize("dt,threads", [(np.float32, 1), (np.float16, 2)])
def test_apply_rope_ctrl_c(dt, threads):
    """On the scalar path one call takes about a second; calls repeat until the signal
    lands (the vector paths rotate this in a tenth of that)."""
    x = np.zeros((1, 16, 65536, 128), dt)
    old = sinpe.get_kernel()
    sinpe.set_kernel("scalar")
    try:
        latency = ctrl_c_latency(lambda: sinpe.apply_rope(x, backend="builtin", threads=threads),
                           after=0.5, repeat=True)
    finally:
        sinpe.set_kernel(old)
    assert latency < 0.25 * TIME_SCALE, f"KeyboardInterrupt {latency:.3f} s after the signal"


# ---- 8. dtype= of every preset: torch dtypes, bfloat16 without an earlier import --------------

@pytest.mark.needs_torch
def test_preset_dtypes_torch_and_bfloat16():
    import torch
    want16 = P.llama_rope(8, 5, dtype="float16")
    assert same(P.llama_rope(8, 5, dtype=torch.float16)[0], want16[0])
    assert same(P.alibi_bias(np.ones((2, 4)), 4, dtype=torch.bfloat16),
                P.alibi_bias(np.ones((2, 4)), 4, dtype="bfloat16"))
    r = run_python("import sys, numpy as np\nfrom sinpe import presets as P\n"
                   "assert 'ml_dtypes' not in sys.modules\n"
                   "c, s = P.llama_rope(8, 5, dtype='bfloat16')\n"
                   "b = P.alibi_bias(np.ones((1, 3)), 2, dtype='bfloat16')\n"
                   "print(c.dtype, b.dtype)")
    assert r.returncode == 0 and r.stdout.split() == ["bfloat16", "bfloat16"], r.stderr
    for bad in ("int32", np.int64, "float8"):
        with pytest.raises(TypeError, match="dtype must be float32, float16, bfloat16 or float64"):
            P.llama_rope(8, 5, dtype=bad)


# ---- 9. the CLI's plot in bounded memory ------------------------------------------------

def test_cli_plot_of_a_large_table_in_bounded_memory(tmp_path):
    code = ("import sys, runpy\n"
            "sys.argv = ['sinpe', '--max-len', '100000', '--d-model', '512', '-o', 'pe.npy',"
            " '--plot', 'pe.png']\n"
            "try:\n    runpy.run_module('sinpe', run_name='__main__')\n"
            "except SystemExit as e:\n    assert e.code in (0, None), e.code\n"
            # VmHWM: this process's own peak (ru_maxrss would start at the forking pytest's)
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
            "print('peak', hwm.split()[1])\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    peak_kib = int(r.stdout.split("peak")[-1])
    assert peak_kib < 1_000_000, f"peak RSS {peak_kib} KiB for a 195 MiB table"
    assert (tmp_path / "pe.png").stat().st_size > 1000


# ---- 11. messages and empty inputs --------------------------------------------------------

def test_preset_messages_and_empty_inputs():
    assert same(P.keras_hub((5, 6)), P.keras_hub((1, 5, 6))[0])
    for r, shape in ((P.keras_hub((0, 5, 6)), (0, 5, 6)), (P.keras_hub((2, 0, 6)), (2, 0, 6)),
                     (P.tatp22_1d(4, (1, 0, 4)), (1, 0, 4)), (P.fairseq(0, 8), (0, 8)),
                     (P.timm_2d((0, 3), 8), (0, 8)), (P.llama_rope(8, 0)[0], (0, 8)),
                     (P.whisper(0, 8), (0, 8)), (P.tatp22_2d(4, (1, 2, 2, 0)), (1, 2, 2, 0))):
        assert r.shape == shape
    # zero-width tables (no columns) on every backend: the size check once divided by d = 0
    # (UBSan in CI's fuzz run, tools/fuzz/corpus/table_zero_width_division.bin)
    for be in [b for b, ok in sinpe.backends().items() if ok]:
        cases = ((P.tatp22_1d(9, (8, 9, 0), backend=be, dtype="float"), (8, 9, 0)),
                 (P.tatp22_3d(4, (1, 2, 2, 2, 0), backend=be), (1, 2, 2, 2, 0)),
                 (P.tatp22_1d(4, (3, 2**40, 0), backend=be)[:, :2], (3, 2, 0)),
                 # an empty result computes no axis, however long (they took 16 GiB)
                 (P.tatp22_1d(4, (0, 2**40, 4), backend=be), (0, 2**40, 4)),
                 (P.tatp22_2d(4, (1, 2**31, 0, 4), backend=be), (1, 2**31, 0, 4)),
                 (P.tatp22_3d(4, (1, 2**31, 0, 1, 4), backend=be), (1, 2**31, 0, 1, 4)))
        for r, shape in cases:
            assert r.shape == shape, (be, r.shape)
        # apply_rope on an empty x computes no table however long its seq (it built 256 MiB
        # for (0, 1, 2**23, 8) and refused (0, 1, 2**40, 8) for memory); x's checks still run
        for shape in ((0, 1, 2**40, 8), (2, 0, 2**40, 8), (2, 3, 0, 8)):
            e = np.zeros(shape, np.float32)
            assert sinpe.apply_rope(e, backend=be) is e
        with pytest.raises(TypeError, match="x must have dtype"):
            sinpe.apply_rope(np.zeros((0, 1, 5, 8), np.int32), backend=be)
        with pytest.raises(ValueError, match="base must be finite"):
            sinpe.apply_rope(np.zeros((0, 1, 5, 8), np.float32), base=0, backend=be)
        e = P.keras_hub((2, 3, 0), backend=be)  # keras-hub's empty last axis (issue 35)
        assert e.shape == (2, 3, 0) and e.dtype == np.float32
        with pytest.raises(ValueError, match="d_model must be an even integer >= 2, got 0"):
            sinpe.positional_encoding(5, 0, backend=be)
        with pytest.raises(ValueError, match=r"got 0 \(x.shape\[-1\]\)"):
            sinpe.add_pe(np.zeros((2, 3, 0), np.float32), backend=be)
    x = np.zeros((1, 2, 4, 8), np.float32)
    for bad in (1.0, "1", None, True):
        with pytest.raises(TypeError, match="seq_dim must be an integer"):
            sinpe.apply_rope(x, seq_dim=bad)
    with pytest.raises(ValueError, match="needs attention_mask or seq_length"):
        P.alibi_bias(None, 4, method="paper")
    with pytest.raises(ValueError, match="seq_length=5 disagrees"):
        P.alibi_bias(np.ones((2, 3)), 4, seq_length=5)
    for method in ("bloom", "paper"):
        with pytest.raises(ValueError, match="unknown backend 'bogus'"):
            P.alibi_bias(None, 4, seq_length=3, method=method, backend="bogus")
    with pytest.raises(ValueError, match="method must be 'bloom' or 'paper'"):
        P.alibi_slopes(4, method="nope")
    from sinpe.widget import explore
    with pytest.raises(ValueError, match="max_len must be >= 1"):
        explore(0, 8)
    with pytest.raises(ValueError, match="d_model must be an even integer"):
        explore(4, 7)
    assert "out=" not in P.alibi_bias.__doc__ and "threads=" in P.__doc__
