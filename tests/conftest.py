"""Shared fixtures.  torch and oneMKL are required oracles: when one is
missing the tests that need it fail (import error / assertion), they are
never skipped.

The one exception is explicit: CI's passes on every Python from 3.9 to 3.13
install sinpe without torch (the test-core extra) and set SINPE_TORCH_FREE=1.
Then the modules in TORCH_MODULES are not collected and the tests marked
needs_torch are deselected; the report header names both, and so does
docs/testing.md.  Any other test that touched torch would fail there.

The tests live in one folder per subject (api/, numerics/, robustness/, build/, c/); this
file, the oracles (reference.py, crmath.py, preset_oracles.py) and the helpers below are
shared by all of them (pytest puts tests/ on sys.path when it loads this file)."""
import contextlib
import functools
import math
import os
import signal
import subprocess
import sys
import threading
import time

import ml_dtypes
import numpy as np
import pytest

import sinpe

#: This folder (tests/) and the project's root, whatever the depth of the test module.
TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)

TORCH_FREE = os.environ.get("SINPE_TORCH_FREE") == "1"
#: Modules about torch throughout (its module, its parity grid and dtypes, the other
#: libraries' own functions), relative to tests/: not collected in the torch-free passes.
TORCH_MODULES = ["api/test_api_torch_module.py", "numerics/test_numerics_torch.py",
                 "numerics/test_numerics_presets.py", "numerics/test_numerics_hf_rope.py",
                 "numerics/test_numerics_hf_coverage.py", "robustness/test_robust_hf_rope.py",
                 "numerics/test_numerics_hf_more.py", "numerics/test_numerics_hf_patch.py",
                 "api/test_api_torch_seq_first.py",
                 "api/test_api_torch_compile.py", "api/test_api_tensors.py",
                 "numerics/test_numerics_torch_grads.py", "robustness/test_robust_patch.py",
                 "robustness/test_robust_fuzz_torch.py"]

if TORCH_FREE:
    torch = None
    collect_ignore = list(TORCH_MODULES)
    DEFAULT_THREADS = os.cpu_count() or 1
else:
    import torch
    from reference import SinusoidalPositionalEncoding

    DEFAULT_THREADS = torch.get_num_threads()
    # Warm-up once, single-threaded, before torch is trusted as an oracle
    # (pytorch/pytorch issue 188792: a first-call race in oneMKL's dispatch).
    torch.set_num_threads(1)
    SinusoidalPositionalEncoding(64, 64)
    torch.exp(torch.ones(4096)); torch.sin(torch.ones(4096)); torch.cos(torch.ones(4096))
    torch.set_num_threads(DEFAULT_THREADS)


#: The parity grid (tests/numerics/test_numerics_torch.py, and the backends' own checks).
D_MODELS = [2, 4, 6, 10, 64, 100, 128, 510, 512, 768, 1024, 4096]
MAX_LENS = [0, 1, 2, 7, 17, 100, 5000, 20000]


def _needs_torch(item):
    """Marked needs_torch, or run with a fixture whose instance is torch itself."""
    if item.get_closest_marker("needs_torch"):
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "torch_threads" in params:
        return True
    return params.get("parity_backend") in ("torch", "sleef")  # 'sleef': torch's Arm profile


#: Fixtures that compile C with gcc (against the Python headers, or opening torch's library),
#: and modules that run gcc, valgrind and the sanitizers: all of it the base image's.
HOST_TOOL_FIXTURES = {"odd_buffers", "sleef_oracle"}
HOST_TOOL_MODULES = {"test_c_core.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _needs_torch(item) and not item.get_closest_marker("needs_torch"):
            item.add_marker(pytest.mark.needs_torch)
        if (HOST_TOOL_FIXTURES & set(getattr(item, "fixturenames", ()))
                or os.path.basename(str(item.fspath)) in HOST_TOOL_MODULES):
            item.add_marker(pytest.mark.host_tools)
    if TORCH_FREE:
        gone = [i for i in items if _needs_torch(i)]
        if gone:
            config.hook.pytest_deselected(items=gone)
            items[:] = [i for i in items if not _needs_torch(i)]


def pytest_report_header(config):
    if TORCH_FREE:
        return ["SINPE_TORCH_FREE=1: without torch; not collected: " + ", ".join(TORCH_MODULES)
                + "; tests marked needs_torch deselected (docs/testing.md)"]
    return []


#: Time limits scale with this (CI's sanitizer run, which is several times slower, sets it).
TIME_SCALE = float(os.environ.get("SINPE_TEST_TIME_SCALE", "1"))
BF16 = np.dtype(ml_dtypes.bfloat16)
#: The four dtypes sinpe writes.
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16, np.dtype(np.float64)]


def bits(a):
    """The bits of an array of any of the four dtypes, as unsigned integers of its width."""
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def to_np(a):
    """A torch tensor as a NumPy array of its dtype and bits (bfloat16 as ml_dtypes'
    bfloat16, through an int16 view); anything else through np.asarray."""
    if hasattr(a, "detach"):
        a = a.detach()
        if a.dtype == torch.bfloat16:
            return a.view(torch.int16).numpy().view(BF16)
        return a.numpy()
    return np.asarray(a)


@contextlib.contextmanager
def positions_written_by_a_thread(pos, top):
    """A thread writing pos[k % len(pos)] = (k * 37) % top, k = 0, 1, ..., until the block
    ends: calls inside it race the writes (the cache's tests: whatever values a call reads,
    its rows are some position's)."""
    stop = threading.Event()

    def writer():
        k = 0
        while not stop.is_set():
            pos[k % len(pos)] = (k * 37) % top
            k += 1
    t = threading.Thread(target=writer)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


def same(a, b):
    """Same shape, same dtype, same bits (torch tensors compared as to_np gives them).  Two
    tuples or lists (a (cos, sin) pair, say) are the same when they hold as many arrays,
    each the same: a short result fails (no zip stops at the shorter)."""
    seqs = isinstance(a, (tuple, list)), isinstance(b, (tuple, list))
    if any(seqs):
        return all(seqs) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    a, b = to_np(a), to_np(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(bits(a), bits(b))


@functools.lru_cache(maxsize=None)
def _tool(name):
    """tools/<name>.py loaded as a module, once per session (name may hold a folder:
    'fuzz/fuzz_torch')."""
    import importlib.util
    path = os.path.join(ROOT, "tools", f"{name}.py")
    spec = importlib.util.spec_from_file_location(os.path.basename(name), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def hf_coverage_harness():
    """tools/hf_rope_coverage.py (the HF rope tests run its configs, positions and
    comparisons in-process)."""
    return _tool("hf_rope_coverage")


def hf_patch_harness():
    """tools/hf_patch_coverage.py, quiet (the patch tests build its tiny models and compare
    their outputs in-process)."""
    mod = _tool("hf_patch_coverage")
    mod.quiet()
    return mod


def fuzz_harness(name):
    """tools/fuzz/<name>.py, the harness whose invariant the corpus replays go through."""
    return _tool(f"fuzz/{name}")


@pytest.fixture
def torch_two_threads():
    """torch at 2 threads for the test (the tiny models' outputs are compared at a thread
    count of their own), restored after."""
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(n)


def tiny_causal_lm(mt="llama", **kw):
    """A tiny random-weight causal LM of a model type (hf_patch_coverage's sizes), eager
    attention, eval mode, seeded; kw set on its config first."""
    import torch
    from transformers import AutoModelForCausalLM
    cfg = hf_patch_harness().tiny_config(mt)
    for k, v in kw.items():
        setattr(cfg, k, v)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()


def ctrl_c_latency(f, after=0.3, repeat=False):
    """Seconds from a SIGINT sent `after` seconds into f() to its KeyboardInterrupt (repeat:
    f is called again until one comes, so that a call faster than `after` cannot let the
    signal land in the test's own code)."""
    # Python's own handler, whatever this process inherited: a shell starts background jobs
    # with SIGINT ignored, and then no KeyboardInterrupt could come (seen running the suite
    # with nohup ... &)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    sent = []

    def send():  # the time the signal is sent, not the time it was due: on a loaded machine
        sent.append(time.perf_counter())  # the timer's thread itself may run late (a CI run
        os.kill(os.getpid(), signal.SIGINT)  # beside other work: 0.46 s seen, sinpe not slower)

    timer = threading.Timer(after, send)
    t0 = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            f()
            while repeat and time.perf_counter() - t0 < after + 60:
                f()
        done = time.perf_counter()
    finally:
        timer.cancel()
        timer.join()
        signal.signal(signal.SIGINT, old)
    assert sent, "the KeyboardInterrupt came before the signal was sent"
    return done - sent[0]


def added(x, offset=0, base=10000.0):
    """What add_pe must give: torch's x.add_(pe) on a contiguous copy."""
    pe = sinpe.positional_encoding(x.shape[-2], x.shape[-1], base, offset=offset)
    return torch_add(np.ascontiguousarray(x), pe)


def physical_memory():
    """This machine's physical memory in bytes, found as the C core finds it
    (src/platform/memory.c): sysconf on POSIX, GlobalMemoryStatusEx on Windows."""
    if hasattr(os, "sysconf"):
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    import ctypes

    class MEMORYSTATUSEX(ctypes.Structure):
        _fields_ = [("dwLength", ctypes.c_ulong), ("dwMemoryLoad", ctypes.c_ulong),
                    ("ullTotalPhys", ctypes.c_ulonglong), ("ullAvailPhys", ctypes.c_ulonglong),
                    ("ullTotalPageFile", ctypes.c_ulonglong),
                    ("ullAvailPageFile", ctypes.c_ulonglong),
                    ("ullTotalVirtual", ctypes.c_ulonglong),
                    ("ullAvailVirtual", ctypes.c_ulonglong),
                    ("ullAvailExtendedVirtual", ctypes.c_ulonglong)]
    m = MEMORYSTATUSEX()
    m.dwLength = ctypes.sizeof(m)
    assert ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(m)), "GlobalMemoryStatusEx"
    return int(m.ullTotalPhys)


def assert_bits_equal(got, want, what=""):
    """Bit-for-bit comparison through uint32 views; reports count and first mismatches."""
    got = np.ascontiguousarray(got)
    want = np.ascontiguousarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == np.float32 and want.dtype == np.float32
    g, w = got.view(np.uint32), want.view(np.uint32)
    bad = np.argwhere(g != w)
    if bad.size:
        lines = [f"{what}: {len(bad)} of {got.size} values differ; first:"]
        for idx in bad[:8]:
            t = tuple(int(i) for i in idx)
            lines.append(f"  at {t}: got {got[t]!r} (0x{int(g[t]):08x}) want {want[t]!r} (0x{int(w[t]):08x})")
        pytest.fail("\n".join(lines))


@pytest.fixture(params=[1, DEFAULT_THREADS], ids=lambda n: f"torch_threads={n}")
def torch_threads(request):
    old = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(old)


def reference_table(d_model, max_len, base=10000.0):
    from reference import SinusoidalPositionalEncoding
    return SinusoidalPositionalEncoding(d_model, max_len, base=base).pe[0].numpy()


import platform  # noqa: E402

X86_64 = platform.machine().lower() in ("x86_64", "amd64")
#: The backends that give torch's bits on this platform: on x86-64 the installed torch's own
#: oneMKL ('torch') and the mkl wheel measured equal to it ('mkl'); on 64-bit Arm the SLEEF
#: profile of the torch in this process ('sleef', at torch's current thread count).
PARITY_BACKENDS = ["torch", "mkl"] if X86_64 else ["sleef"]
#: One backend with torch's bits, for tests about something else.
TORCH_BITS = "mkl" if X86_64 else "sleef"


@pytest.fixture(params=PARITY_BACKENDS)
def parity_backend(request):
    """Runs a test once per backend that must give torch's bits here; a backend that is not
    available fails the test (torch and the mkl wheel are required test oracles)."""
    name = request.param
    assert sinpe.backends()[name], f"the {name} backend is not available: {sinpe.numerics()}"
    sinpe.positional_encoding(1, 2, backend=name)  # loads it, or raises with the reason
    return name


@pytest.fixture(params=sinpe.kernels(), ids=lambda k: f"kernel={k}")
def kernel(request):
    """Runs a test once per built-in code path this CPU supports."""
    old = sinpe.get_kernel()
    sinpe.set_kernel(request.param)
    yield request.param
    sinpe.set_kernel(old)


def run_python(code, timeout=120, **env):
    """Runs code in a fresh interpreter outside the source tree (so that the installed
    sinpe is imported), with extra environment variables (None removes one that is
    inherited)."""
    e = dict(os.environ)
    for k, v in env.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e,
                          timeout=timeout, cwd=TESTS)


def torch_add(x, pe):
    """torch's in-place x.add_(pe) on a copy of x (any of the four dtypes; bfloat16 as
    ml_dtypes arrays) with a float32 pe: the oracle of add_pe for every dtype."""
    import ml_dtypes
    if x.dtype == ml_dtypes.bfloat16:
        t = torch.from_numpy(np.ascontiguousarray(x).view(np.int16).copy()).view(torch.bfloat16)
        t.add_(torch.from_numpy(pe))
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    t = torch.from_numpy(np.ascontiguousarray(x).copy())
    t.add_(torch.from_numpy(pe))
    return t.numpy()


def torch_formula(pos, d, base=10000.0):
    """The reference formula in torch on p.float()[..., None] * div_term, any positions."""
    div = torch.exp(torch.arange(0, d, 2).float() * (-math.log(base) / d))
    ang = torch.as_tensor(np.asarray(pos)).float()[..., None] * div
    pe = torch.empty(ang.shape[:-1] + (d,))
    pe[..., 0::2] = torch.sin(ang)
    pe[..., 1::2] = torch.cos(ang)
    return pe.numpy()


def sanitizer_free_env(**extra):
    """The environment without a sanitizer runtime preloaded (CI's sanitizer run of the
    suite sets LD_PRELOAD; programs the tests build bring their own runtime or none)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def odd_buffers(tmp_path_factory):
    """tests/c/odd_buffers.c built as an extension: exporters with NULL strides, NULL
    shape, or suboffsets (gcc and the Python headers are required, as for sinpe)."""
    import importlib.util
    import sysconfig
    out = tmp_path_factory.mktemp("odd") / ("odd_buffers" + sysconfig.get_config_var("EXT_SUFFIX"))
    src = os.path.join(TESTS, "c", "odd_buffers.c")
    r = subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wall", "-I" + sysconfig.get_paths()["include"],
                        src, "-o", str(out)], capture_output=True, text=True, timeout=120,
                       env=sanitizer_free_env())
    assert r.returncode == 0, r.stderr
    spec = importlib.util.spec_from_file_location("odd_buffers", out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def sleef_oracle(tmp_path_factory):
    """SLEEF itself, as the installed torch exports it from libtorch_cpu (tests/c/sleef_oracle.c,
    built with gcc and opened with dlopen: nothing beyond what the README's test command
    installs and the base image's gcc).  oracle(func, u35, lanes, threads, x, width=8) is
    torch-on-aarch64's sin/cos/exp of x (func: 'exp', 'sin', 'cos') with torch's grouping,
    computed by SLEEF's 8-lane AVX2 + FMA functions (width=8) or its 16-lane AVX-512F ones
    (width=16); oracle.widths lists the widths this CPU and torch offer (8 always: a missing
    export or a CPU without AVX2 + FMA fails the tests that need the oracle)."""
    import ctypes
    from sinpe._backends.torchlib import find_torch_library
    cpu = sinpe._policy.cpu_features()
    assert cpu["avx2"] and cpu["fma"], "the SLEEF oracle needs a CPU with AVX2 and FMA"
    path, why = find_torch_library()
    assert path, "the SLEEF oracle is torch's libtorch_cpu: " + why
    out = tmp_path_factory.mktemp("sleef") / "sleef_oracle.so"
    src = os.path.join(TESTS, "c", "sleef_oracle.c")
    r = subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-mavx2", "-mfma", "-Wall", "-Wextra",
                        "-Werror", src, "-ldl", "-o", str(out)], capture_output=True, text=True,
                       timeout=120, env=sanitizer_free_env())
    assert r.returncode == 0, r.stderr
    lib = ctypes.CDLL(str(out))
    lib.oracle_open.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
    msg = ctypes.create_string_buffer(256)
    have = lib.oracle_open(os.fsencode(path), msg, 256)
    assert have & 1, f"{path}: {msg.value.decode()}"
    lib.oracle_map.argtypes = [ctypes.c_int] * 5 + [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]

    def oracle(func, u35, lanes, threads, x, width=8):
        assert width in oracle.widths, width
        x = np.ascontiguousarray(x, np.float32)
        y = np.empty_like(x)
        st = lib.oracle_map({"exp": 0, "sin": 1, "cos": 2}[func], int(u35), lanes, threads, width,
                            x.ctypes.data, y.ctypes.data, x.size)
        assert st == 0, st
        return y
    oracle.widths = [8] + ([16] if have & 2 and cpu["avx512f"] else [])
    oracle.library = path
    return oracle
