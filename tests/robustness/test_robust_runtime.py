"""Reliability at run time: interrupts (Ctrl-C within 0.25 s for any shape, backend and dtype),
threads, forks, DataLoader workers, module state, leaks, faults."""
import gc
import importlib.util
import os
import signal
import threading
import time

import numpy as np
import pytest

import sinpe
from conftest import TIME_SCALE, TORCH_BITS, assert_bits_equal, ctrl_c_latency, run_python

PE = sinpe.positional_encoding


# ---- interrupts ---------------------------------------------------------------

def _interrupt_after(seconds):
    t = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT))
    t.start()
    return t


@pytest.mark.parametrize("case", ["table", "add_pe", "row_2^27_builtin", "row_2^27_mkl",
                                  "row_2^26_float16", "add_row_2^26_float64", "positions_40M_int64"])
def test_ctrl_c_latency_any_shape(case):
    """Ctrl-C within 0.25 s for any shape, backend and dtype: calls that would take several
    seconds (scalar kernel, one thread)."""
    old = sinpe.get_kernel()
    sinpe.set_kernel("scalar")
    try:
        if case == "table":
            f = lambda: PE(400_000, 1024, backend="builtin", threads=1)  # noqa: E731
        elif case == "add_pe":
            x = np.zeros((1, 400_000, 1024), np.float32)
            f = lambda: sinpe.add_pe(x, backend="builtin", threads=1)  # noqa: E731
        elif case == "row_2^27_builtin":
            f = lambda: PE(1, 2**27, backend="builtin", threads=1)  # noqa: E731
        elif case == "row_2^27_mkl":
            f = lambda: [PE(1, 2**27, backend=TORCH_BITS, threads=1) for _ in range(3)]  # noqa: E731
        elif case == "row_2^26_float16":
            f = lambda: PE(1, 2**26, dtype="float16", backend="builtin", threads=1)  # noqa: E731
        elif case == "add_row_2^26_float64":
            x = np.zeros((1, 2**26), np.float64)
            f = lambda: sinpe.add_pe(x, backend="builtin", threads=1)  # noqa: E731
        else:
            p = np.arange(40_000_000, dtype=np.int64)
            f = lambda: PE(d_model=2, positions=p, backend="builtin", threads=1)  # noqa: E731
        latency = ctrl_c_latency(f)
    finally:
        sinpe.set_kernel(old)
    assert latency < 0.25 * TIME_SCALE, f"{case}: KeyboardInterrupt {latency:.3f} s after the signal"


def test_interrupted_out_is_partially_filled_in_row_order():
    out = np.full((400_000, 1024), np.nan, np.float32)
    old = sinpe.get_kernel()
    sinpe.set_kernel("scalar")
    # Python's own handler, whatever this process inherited (a background job of a
    # non-interactive shell starts with SIGINT ignored: the signal would be lost; seen in a
    # CI run started with `&`), as ctrl_c_latency does
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        timer = _interrupt_after(0.3)
        with pytest.raises(KeyboardInterrupt):
            sinpe.positional_encoding(400_000, 1024, out=out, backend="builtin", threads=1)
        timer.join()
    finally:
        signal.signal(signal.SIGINT, handler)
        sinpe.set_kernel(old)
    filled = ~np.isnan(out).all(axis=1)
    k = int(filled.sum())
    assert 0 < k < 400_000
    assert filled[:k].all() and not filled[k:].any()  # a prefix of whole rows
    assert_bits_equal(out[:k], sinpe.positional_encoding(k, 1024, backend="builtin"), "prefix")


# ---- threads --------------------------------------------------------------------

def test_eight_python_threads_at_once():
    cases = [(1000 + 37 * i, 64 * (1 + i % 4), 10000.0 if i % 2 else 500000.0, i % 3)
             for i in range(8)]
    backends = [b for b, ok in sinpe.backends().items() if ok]
    want = {}
    for i, (L, d, base, off) in enumerate(cases):
        be = backends[i % len(backends)]
        want[i] = (sinpe.positional_encoding(L, d, base, backend=be, threads=1),
                   sinpe.add_pe(np.ones((3, L, d), np.float32), base, offset=off, backend=be,
                                threads=1))
    got, errors = {}, []
    barrier = threading.Barrier(8)

    def work(i):
        try:
            L, d, base, off = cases[i]
            be = backends[i % len(backends)]
            barrier.wait()
            for _ in range(5):
                t = sinpe.positional_encoding(L, d, base, backend=be, threads=2)
                x = sinpe.add_pe(np.ones((3, L, d), np.float32), base, offset=off, backend=be,
                                 threads=2)
            got[i] = (t, x)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in ts), "deadlock: a thread did not finish"
    assert not errors, errors
    for i in range(8):
        assert_bits_equal(got[i][0], want[i][0], f"thread {i} table")
        assert_bits_equal(got[i][1], want[i][1], f"thread {i} add_pe")


# ---- whose threads: sinpe's pool or torch's OpenMP runtime ---------------------------

_RUNTIME_CODE = """
import os, threading, numpy as np, sinpe
assert sinpe.get_thread_runtime() == 'sinpe', 'before torch'
u = lambda a: np.asarray(a).view(np.uint16 if np.asarray(a).itemsize == 2 else np.uint32)
table = lambda: sinpe.positional_encoding(3000, 512, threads=2)
addx = lambda: sinpe.add_pe(np.ones((4, 3000, 512), np.float32), threads=2)
import torch
import sinpe.torch as st
torch.manual_seed(0)
qs = {dt: (torch.randn(8, 8, 128, 64, dtype=dt), torch.randn(8, 2, 128, 64, dtype=dt))
      for dt in (torch.float32, torch.float16, torch.bfloat16)}
ang = torch.arange(128.0)[:, None] * torch.exp(torch.arange(64.0) * -0.14)
cs = {dt: [t.to(dt)[None].expand(8, 128, 64).contiguous() for t in (ang.cos(), ang.sin())]
      for dt in qs}  # (made here: torch's own parallel ops hang in a forked child, libgomp's)
def rot(dt):
    q, k = qs[dt]
    a, b = st.apply_rotary_pos_emb(q, k, *cs[dt])
    return u(a.view(torch.int16 if dt != torch.float32 else torch.int32).numpy()).tobytes() + \
        u(b.view(torch.int16 if dt != torch.float32 else torch.int32).numpy()).tobytes()
def run_all():
    return [u(table()).tobytes(), u(addx()).tobytes()] + [rot(dt) for dt in qs]
sinpe.set_thread_runtime('sinpe')
torch.set_num_threads(1)
one = run_all()                      # rotations on one thread (torch's count), sinpe's pool
torch.set_num_threads(2)
own = run_all()
assert sinpe.get_thread_runtime() == 'sinpe'
sinpe.set_thread_runtime('auto')
omp = run_all()
assert sinpe.get_thread_runtime() == 'openmp', 'after torch'
rep = sinpe.numerics()['thread_runtime']
assert rep['runs'] == 'openmp' and 'libgomp' in os.path.basename(rep['library'])
assert rep['library'].startswith(os.path.dirname(os.path.dirname(torch.__file__)))
torch.set_num_threads(1)             # torch's team of one: sinpe's call grows it to 2
small = run_all()
torch.set_num_threads(2)
print('same', one == own == omp == small)
got, errors = {}, []
bar = threading.Barrier(6)
def work(i):
    try:
        bar.wait()
        got[i] = run_all()
    except Exception as e:
        errors.append(repr(e))
ts = [threading.Thread(target=work, args=(i,)) for i in range(6)]
for t in ts: t.start()
for t in ts: t.join(timeout=300)
print('threads', not errors and all(got[i] == omp for i in range(6)), errors)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    ok = sinpe.get_thread_runtime() == 'sinpe' and run_all() == omp
    sinpe.set_thread_runtime('auto')   # never adopted again in a child
    ok = ok and sinpe.get_thread_runtime() == 'sinpe' and run_all() == omp
    os.write(w, b'1' if ok else b'0')
    os._exit(0)
os.close(w)
print('child', os.read(r, 1) == b'1', os.waitpid(pid, 0)[1] == 0)
print('parent', sinpe.get_thread_runtime())
"""


@pytest.mark.needs_torch
def test_thread_runtime_torch_openmp_same_bits():
    """With torch imported, the core's parallel work runs on torch's OpenMP workers (its
    libgomp, named by numerics()); tables, adds and rotations have the same bits there as on
    sinpe's pool and on one thread, with torch's team of one, from six Python threads at
    once, and in a forked child, which is back on sinpe's threads (never adopting again)."""
    r = run_python(_RUNTIME_CODE, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:4] == ["same True", "threads True []", "child True True",
                                        "parent openmp"], r.stdout


@pytest.mark.needs_torch
def test_thread_runtime_setting():
    code = ("import sinpe, torch\n"
            "sinpe.positional_encoding(4, 8)\n"
            "print(sinpe.get_thread_runtime(), sinpe.numerics()['thread_runtime'])\n"
            "for bad in (1, None, 'openmp', 'Auto'):\n"
            "    try:\n        sinpe.set_thread_runtime(bad)\n"
            "    except (TypeError, ValueError) as e:\n        print(type(e).__name__, e)\n")
    r = run_python(code, SINPE_THREAD_RUNTIME="sinpe")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "sinpe {'default': 'sinpe', 'runs': 'sinpe', 'library': None}"
    assert lines[1] == ("TypeError thread runtime must be 'auto' or 'sinpe' (str), got 1 (int)")
    assert lines[2].startswith("TypeError") and lines[3].startswith("ValueError unknown thread "
                                                                   "runtime 'openmp'")
    assert lines[4].startswith("ValueError unknown thread runtime 'Auto'")
    r = run_python("import sinpe", SINPE_THREAD_RUNTIME="pool")
    assert r.returncode != 0 and "SINPE_THREAD_RUNTIME='pool' is not valid" in r.stderr


_LATE_IMPORT_CODE = r"""
import os, sys, time, torch
torch.sin(torch.randn(1024, 1024))  # torch's OpenMP team now exists in this process
want = {mode!r}
def child():
    import sinpe  # first import here: sinpe's own fork handler never ran
    t = sinpe.positional_encoding(20000, 256, threads=2)
    return sinpe.get_thread_runtime(), t.shape
if want == "fork":
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(w, repr(child()).encode())
        finally:
            os._exit(0)
    os.close(w)
    deadline = time.time() + 60
    while os.waitpid(pid, os.WNOHANG)[0] == 0:
        if time.time() > deadline:
            os.kill(pid, 9)
            sys.exit("the child hangs")
        time.sleep(0.05)
    print(os.read(r, 200).decode())
else:
    import multiprocessing as mp
    def job(_):
        return child()
    if __name__ == "__main__":
        with mp.get_context(want).Pool(1) as p:
            print(p.map_async(job, [0]).get(60)[0])
"""


@pytest.mark.needs_torch
@pytest.mark.parametrize("mode", ["fork", "multiprocessing-fork"])
def test_a_child_that_imports_sinpe_after_the_fork_does_not_hang(mode):
    """Review of 2026-12-05: a child forked after torch ran its OpenMP work, importing sinpe
    only then (a worker's lazy import), adopted libgomp, whose team names the parent's
    workers: its first parallel region waited for them for ever.  sinpe now sees such a
    process (a multiprocessing child, or a main thread whose native id is the parent's) and
    keeps its own threads there."""
    code = _LATE_IMPORT_CODE.replace("{mode!r}", repr(mode.split("-")[-1]))
    if mode != "fork":  # a Pool's function must be importable: a file, not -c
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"sinpe_late_{os.getpid()}.py")
        with open(path, "w") as f:
            f.write(code)
        code = f"import runpy; runpy.run_path({path!r}, run_name='__main__')"
    try:
        r = run_python(code, timeout=180)
    finally:
        if mode != "fork":
            os.unlink(path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "('sinpe', (20000, 256))", r.stdout


@pytest.mark.needs_torch
def test_thread_runtime_choice_races():
    """Review of 2026-12-05: set_thread_runtime('sinpe') while another thread was choosing
    (between its check of the setting and its adoption) was undone for good; a call made
    while another thread was still importing torch turned adoption off for the process."""
    code = r"""
import threading, time, types, sinpe
from sinpe._backends import runtime
slow = runtime.torch_openmp
runtime.torch_openmp = lambda t: (slow(t), time.sleep(0.3))[0]  # a wide window
import torch
t = threading.Thread(target=lambda: sinpe.positional_encoding(64, 16))
t.start()
time.sleep(0.1)
sinpe.set_thread_runtime("sinpe")
t.join()
sinpe.positional_encoding(64, 16)
print(sinpe.get_thread_runtime(), runtime._RT["want"])
runtime.torch_openmp = slow
sinpe.set_thread_runtime("auto")
half = types.ModuleType("torch")  # a torch module still being imported: no torch._C yet
runtime._choose(half)
print(runtime._RT["torch"] is half)
sinpe.positional_encoding(64, 16)
print(sinpe.get_thread_runtime(), runtime.forked_before_import())
"""
    r = run_python(code, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["sinpe", "sinpe", "False", "openmp", "False"], r.stdout


# ---- forks, workers, interpreters -------------------------------------------------

def test_after_os_fork():
    want = sinpe.positional_encoding(500, 128)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            got = sinpe.positional_encoding(500, 128, threads=2)
            ok = bool((got.view(np.uint32) == want.view(np.uint32)).all())
            os.write(w, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(w)
    data = os.read(r, 1)
    os.waitpid(pid, 0)
    assert data == b"1"


class _PEDataset:
    def __init__(self, n, L, d):
        self.n, self.L, self.d = n, L, d

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x = np.full((self.L, self.d), float(i), np.float32)
        return sinpe.add_pe(x, offset=i, threads=1)


@pytest.mark.needs_torch
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_torch_dataloader_workers(method):
    import torch
    ds = _PEDataset(12, 50, 64)
    dl = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2,
                                     multiprocessing_context=method)
    got = torch.cat(list(dl)).numpy()
    want = np.stack([ds[i] for i in range(12)])
    assert_bits_equal(got, want, f"DataLoader {method}")


def test_second_module_instance_keeps_no_state():
    """The binding holds no state (the package owns the defaults): a second instance of the
    extension module computes the same bits from the same options, and using it changes
    nothing the package decides."""
    spec = importlib.util.find_spec("sinpe._sinpe")
    other = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(other)
    assert other is not sinpe._sinpe
    before = (sinpe.get_threads(), sinpe.get_kernel(), sinpe._policy.get_default())
    o = sinpe._policy.opts("builtin", 5, None)
    got = other.table(o, None, 100, 32, 10000.0, 0, None, None, np.dtype(np.float32), None, 0,
                      None, ("out", "max_len", "d_model"), False, True, 0, None)
    assert_bits_equal(got, sinpe.positional_encoding(100, 32, backend="builtin"), "second instance")
    assert (sinpe.get_threads(), sinpe.get_kernel(), sinpe._policy.get_default()) == before
    assert not [n for n in dir(other) if n.startswith(("set_", "get_"))]


# ---- leaks --------------------------------------------------------------------------

def _rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def test_no_leaks_over_100000_calls():
    x = np.zeros((2, 3, 8), np.float32)
    bad_out = np.zeros((3, 8), np.float64)
    calls = [
        lambda: sinpe.positional_encoding(3, 8),
        lambda: sinpe.positional_encoding(d_model=8, positions=[1, 2]),
        lambda: sinpe.add_pe(x),
        lambda: sinpe.elementwise("sin", x[0, 0]),
    ]
    bad = [
        lambda: sinpe.positional_encoding(3, 7),
        lambda: sinpe.positional_encoding(3, 8, out=bad_out),
        lambda: sinpe.add_pe(x, offset=-1),
        lambda: sinpe.positional_encoding(3, 8, backend="nope"),
    ]

    def loop(n):
        for _ in range(n):
            for f in calls:
                f()
            for f in bad:
                try:
                    f()
                except (ValueError, TypeError):
                    pass

    loop(2000)
    gc.collect()
    before = _rss_kib()
    loop(100_000)
    gc.collect()
    grown = _rss_kib() - before
    assert grown < 4096, f"RSS grew by {grown} KiB over 800,000 calls"


# ---- faults -------------------------------------------------------------------------

@pytest.mark.x86_64  # elsewhere the fallback is the platform's SLEEF profile
def test_mkl_path_not_a_library_falls_back_with_reason(tmp_path):
    bogus = tmp_path / "libmkl_rt.so.2"
    bogus.write_bytes(b"not an ELF file")
    r = run_python("import sinpe, json; n = sinpe.numerics(); print(n['backend']); print(n['mkl']['reason'])",
             SINPE_MKL_LIBRARY=str(bogus), SINPE_BACKEND="auto")
    assert r.returncode == 0, r.stderr
    backend, reason = r.stdout.splitlines()[:2]
    assert backend == "builtin" and "cannot load oneMKL" in reason and str(bogus) in reason


def test_mkl_path_wrong_library_is_refused():
    import ctypes.util
    libm = ctypes.util.find_library("m") or "libm.so.6"
    r = run_python("import sinpe; print(sinpe.numerics()['mkl']['reason'])", SINPE_MKL_LIBRARY=libm)
    assert r.returncode == 0, r.stderr
    assert "symbol not found" in r.stdout or "not a oneMKL" in r.stdout


def test_mkl_other_release_is_not_chosen_automatically():
    from sinpe._backends import mkl as _mkl
    assert _mkl.release_matches("Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605")
    assert not _mkl.release_matches("Intel(R) oneAPI Math Kernel Library Version 2025.3-Product Build 1")
