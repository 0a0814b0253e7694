"""The choice of backend, kernel and threads: per call, global, by environment; the automatic
choice (torch's own kernels, the mkl wheel's releases, chosen when a call needs it) and the
fallbacks when a library is missing or broken; the numerics report; the CPU probe; text
signatures.  The tests marked x86_64 need torch's oneMKL and the mkl wheel, which exist on
x86-64 only."""
import hashlib
import inspect
import os
import sys
import types

import numpy as np
import pytest

import sinpe
from conftest import (D_MODELS, MAX_LENS, assert_bits_equal, reference_table, run_python,
                      torch)


# ---- the numerics report, set_backend, SINPE_BACKEND ------------------------------------

def test_numerics_report():
    info = sinpe.numerics()
    assert info["backend"] in ("builtin", "mkl", "torch") or info["backend"].startswith("torch-aarch64-")
    assert info["default"] == "auto"
    assert info["reproduces"] == sinpe.reproduces(info["backend"])
    assert info["available"]["builtin"] is True
    # the measured divergences from torch are reported, not only documented
    assert [d.split(":")[0] for d in info["differs"]] == [
        "NaN inputs of float16 add_pe", "NaN float16 positions",
        "NaN inputs of apply_rope where both of a step's operands are NaN (q and cos, or both "
        "products)", "NaN results of bfloat16 rotations", "positions from 134,217,737 (2^27 + 9) on"]


def test_set_backend_global_and_per_call():
    old = sinpe.get_backend()
    try:
        sinpe.set_backend("builtin")
        assert sinpe.numerics()["backend"] == "builtin"
        a = sinpe.positional_encoding(300, 64)
        assert_bits_equal(a, sinpe.positional_encoding(300, 64, backend="builtin"), "global")
        if sinpe.backends()["mkl"]:
            b = sinpe.positional_encoding(300, 64, backend="mkl")
            assert (a.view(np.uint32) != b.view(np.uint32)).any()  # the two really differ
    finally:
        sinpe.set_backend(old)


def test_env_forces_builtin():
    r = run_python("import sinpe; print(sinpe.get_backend())", SINPE_BACKEND="builtin")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "builtin"


def test_unavailable_mkl_is_a_clear_error():
    code = ("import sinpe\n"
            "print(sinpe.backends()['mkl'])\n"
            "try:\n    sinpe.positional_encoding(4, 8, backend='mkl')\n"
            "except RuntimeError as e:\n    print('error:', e)\n")
    r = run_python(code, SINPE_MKL_LIBRARY="/nonexistent/libmkl_rt.so.2", SINPE_BACKEND="auto")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "False"
    assert "backend 'mkl' is not available" in lines[1] and "/nonexistent" in lines[1]
    r = run_python("import sinpe", SINPE_MKL_LIBRARY="/nonexistent/libmkl_rt.so.2", SINPE_BACKEND="mkl")
    assert r.returncode != 0 and "backend 'mkl' is not available" in r.stderr


def test_text_signatures():
    s = inspect.signature(sinpe.positional_encoding)
    assert list(s.parameters) == ["max_len", "d_model", "base", "positions", "offset", "dtype",
                                  "out", "backend", "torch_threads", "threads"]
    assert list(inspect.signature(sinpe.add_pe).parameters) == [
        "x", "base", "offset", "positions", "max_len", "backend", "torch_threads", "threads"]
    # every function of the binding carries a text signature ("name($module, ...)\n--\n\n")
    from sinpe import _sinpe
    names = [n for n in dir(_sinpe) if callable(getattr(_sinpe, n)) and not n.startswith("__")]
    assert set(names) == {"table", "add", "rope", "map", "freqs", "round", "admit", "check",
                          "registry", "load", "backend_info", "positive", "physical_memory",
                          "tensor_route", "add_held", "adopt_openmp", "openmp_adopted"}
    for name in names:
        f = getattr(_sinpe, name)
        assert f.__text_signature__ and f.__text_signature__.startswith("($module"), name
        inspect.signature(f)  # parses
    for f in (sinpe.elementwise, sinpe.set_backend, sinpe.set_threads, sinpe.set_kernel):
        assert f.__doc__ and inspect.signature(f).parameters


def test_binding_stubs_match_its_signatures_and_keywords_work():
    """sinpe/_sinpe.pyi says what the binding's text signatures say (names, order, which are
    positional only), and table/add/rope/freqs take every argument by keyword too."""
    import ast
    import inspect

    import numpy as np
    from sinpe import _sinpe
    with open(os.path.join(os.path.dirname(sinpe.__file__), "_sinpe.pyi")) as f:
        tree = ast.parse(f.read())
    stubs = {d.name: d.args for d in tree.body if isinstance(d, ast.FunctionDef)}
    names = {n for n in dir(_sinpe) if callable(getattr(_sinpe, n)) and not n.startswith("__")}
    assert set(stubs) == names
    for name, args in stubs.items():
        sig = inspect.signature(getattr(_sinpe, name))
        stub = [(a.arg, "POSITIONAL_ONLY") for a in args.posonlyargs] + \
            [(a.arg, "POSITIONAL_OR_KEYWORD") for a in args.args]
        assert stub == [(p.name, p.kind.name) for p in sig.parameters.values()], name
    for name in ("table", "add", "rope", "freqs"):
        kinds = {p.kind for p in inspect.signature(getattr(_sinpe, name)).parameters.values()}
        assert kinds == {inspect.Parameter.POSITIONAL_OR_KEYWORD}, name
    assert _sinpe.BACKENDS == tuple(b[0] for b in _sinpe.registry()["backends"])
    assert _sinpe.PATHS == tuple(p[0] for p in _sinpe.registry()["paths"])
    # the options' 7-tuple (convert.c): builtin backend, the scalar path, 1 thread, SLEEF u10,
    # 4 lanes, 1 torch thread, default pow lanes
    core = (_sinpe.BACKENDS.index("builtin"), _sinpe.PATHS.index("scalar"), 1, 0, 4, 1, 0)
    by_position = _sinpe.freqs(core, 0, 8, 0, 2, 1, -0.5, 1.0, 1.0, 10000.0, False, "base")
    by_keyword = _sinpe.freqs(base_name="base", recip=False, base=10000.0, m=1.0, b=1.0, a=-0.5,
                              group=1, step=2, start=0, n=8, kind=0, opts=core)
    assert by_position.view(np.uint32).tolist() == by_keyword.view(np.uint32).tolist()
    x = np.zeros((3, 8), np.float32)
    _sinpe.add(core, x, 10000.0, 0, None, 0, True, None)
    y = np.zeros((3, 8), np.float32)
    _sinpe.add(kept=None, grow=True, table_rows=0, positions=None, offset=0, base=10000.0, x=y,
               opts=core)
    assert x.any() and x.view(np.uint32).tolist() == y.view(np.uint32).tolist()
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        _sinpe.add(core, x, 10000.0, 0, None, 0, True, None, nope=1)
    with pytest.raises(TypeError, match="multiple values for argument 'x'"):
        _sinpe.add(core, x, 10000.0, 0, None, 0, True, None, x=x)
    with pytest.raises(TypeError, match="missing required argument 'kept'"):
        _sinpe.add(core, x, 10000.0, 0, None, 0, True)


@pytest.mark.needs_torch
@pytest.mark.x86_64
def test_numerics_with_another_onemkl_release(monkeypatch):
    real = sinpe._backends.records.library_info
    other = "Intel(R) oneAPI Math Kernel Library Version 2025.3-Product Build 20251007 for " \
            "Intel(R) 64 architecture applications"

    def info(lib):
        d = real(lib)
        return dict(d, version=other) if lib == "mkl" and d else d
    monkeypatch.setattr(sinpe._backends.records, "library_info", info)
    old = sinpe._policy.get_default()
    sinpe.set_backend("mkl")
    try:
        n = sinpe.numerics()
    finally:
        sinpe.set_backend(old)
    assert n["backend"] == "mkl" and n["mkl"]["matches_torch"] is False
    assert "2025.3" in n["reproduces"] and "not torch's bits" in n["reproduces"]
    assert "vmsExp differs" in n["reproduces"] and "vmsExp differs" in n["mkl"]["why_not_chosen"]
    assert "2024.2 VML" not in n["reproduces"]
    from sinpe._backends import policy
    monkeypatch.delitem(sys.modules, "torch")  # as if torch were not imported
    assert policy.auto() == "builtin"  # another release is never chosen automatically


# ---- the automatic choice and the fallbacks (x86-64: torch's oneMKL, the mkl wheel) ------

@pytest.mark.x86_64
@pytest.mark.needs_torch
def test_auto_follows_torch_imported_later():
    code = ("import sys, sinpe\n"
            "print(sinpe.get_backend(), 'torch' in sys.modules)\n"
            "a = sinpe.positional_encoding(300, 64)\n"
            "import torch\n"
            "print(sinpe.get_backend(), sinpe.numerics()['reproduces'][:9])\n"
            "b = sinpe.positional_encoding(300, 64)\n"
            "c = sinpe.positional_encoding(300, 64, backend='torch')\n"
            "print((b.view('u4') == c.view('u4')).all())\n")
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    first, second, same = r.stdout.splitlines()
    assert first == "mkl False"  # the mkl wheel (a release equal to torch's), no torch yet
    assert second.startswith("torch torch 2.")  # from then on: torch's own kernels
    assert same == "True"


_GRID = """
import hashlib, json, sys, sinpe
sinpe.set_backend('torch')
out = {}
for d in %r:
    for L in %r:
        out[f"{L}x{d}"] = hashlib.sha256(sinpe.positional_encoding(L, d).tobytes()).hexdigest()
x = sinpe.add_pe(__import__('numpy').zeros((3, 300, 512), 'float32'), offset=65000)
out["add"] = hashlib.sha256(x.tobytes()).hexdigest()
print(json.dumps({"torch imported": 'torch' in sys.modules, "digests": out}))
"""


@pytest.mark.x86_64
def test_torch_backend_without_importing_torch_on_the_grid(torch_threads):
    """The 'torch' backend opens the installed torch's library without importing torch
    (another process) and equals the reference on the whole parity grid."""
    import json
    r = run_python(_GRID % (D_MODELS, MAX_LENS), timeout=600)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["torch imported"] is False
    for d in D_MODELS:
        for L in MAX_LENS:
            want = hashlib.sha256(reference_table(d, L).tobytes()).hexdigest()
            assert got["digests"][f"{L}x{d}"] == want, f"{L}x{d}"
    rows = reference_table(512, 65300)[65000:]
    want = hashlib.sha256(np.broadcast_to(rows, (3, 300, 512)).copy().tobytes()).hexdigest()
    assert got["digests"]["add"] == want


@pytest.mark.x86_64
@pytest.mark.needs_torch
def test_torch_library_that_cannot_be_loaded_falls_back(tmp_path):
    bogus = tmp_path / "libtorch_cpu.so"
    bogus.write_bytes(b"not a library")
    code = ("import sinpe, torch\n"
            "print(sinpe.get_backend())\n"
            "print(sinpe.numerics()['torch']['reason'])\n"
            "try:\n    sinpe.positional_encoding(4, 8, backend='torch')\n"
            "except RuntimeError as e:\n    print('error:', e)\n")
    r = run_python(code, SINPE_TORCH_LIBRARY=str(bogus))
    assert r.returncode == 0, r.stderr
    backend, reason, error = r.stdout.splitlines()
    assert backend == "mkl"  # torch is imported, its library is not usable: the next choice
    assert str(bogus) in reason and "cannot load" in reason
    assert "backend 'torch' is not available" in error and str(bogus) in error


@pytest.mark.x86_64
def test_torch_package_without_its_library(tmp_path):
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('a fake torch for the test')\n")
    code = ("import sinpe\n"
            "print(sinpe.backends()['torch'])\n"
            "try:\n    sinpe.set_backend('torch')\n"
            "except RuntimeError as e:\n    print(e)\n"
            "print(sinpe.get_backend())\n")
    r = run_python(code, PYTHONPATH=str(tmp_path))
    assert r.returncode == 0, r.stderr
    available, error, backend = r.stdout.splitlines()
    assert available == "False" and "has no lib/libtorch_cpu.so" in error and backend == "mkl"


@pytest.mark.x86_64
def test_no_torch_installed(monkeypatch):
    from sinpe._backends import torchlib as _torchlib
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(_torchlib.importlib.util, "find_spec", lambda name: None)
    monkeypatch.delenv("SINPE_TORCH_LIBRARY", raising=False)
    assert _torchlib.find_torch_library() == (None, "torch is not installed")


@pytest.mark.x86_64
def test_find_mkl_takes_the_2026_library_name(monkeypatch, tmp_path):
    from sinpe._backends import mkl as _mkl
    lib = tmp_path / "lib" / "libmkl_rt.so.3"
    lib.parent.mkdir()
    lib.write_bytes(b"")
    fake = types.SimpleNamespace(version="2026.2.1", files=["lib/libmkl_rt.so.3", "lib/x.so"],
                                 locate_file=lambda f: tmp_path / str(f))
    from importlib import metadata
    monkeypatch.setattr(metadata, "distribution", lambda name: fake)
    monkeypatch.delenv("SINPE_MKL_LIBRARY", raising=False)
    assert _mkl.find_mkl() == (os.path.realpath(lib), "")


@pytest.mark.x86_64
@pytest.mark.parametrize("version,equal", [
    ("Version 2024.0-Product", True), ("Version 2024.1-Product", True),
    ("Version 2024.2-Product Build 20240605", True), ("Version 2024.2.1-Product", True),
    ("Version 2025.0.1-Product Build 20241031", True), ("Version 2025.1-Product", False),
    ("Version 2026.2-Product Build 20260915", False), ("Version 2023.2-Product", False),
    ("no version here", False)])
def test_mkl_release_table(version, equal):
    from sinpe._backends import mkl as _mkl
    assert _mkl.release_matches(version) is equal


@pytest.mark.x86_64
@pytest.mark.needs_torch
def test_pinned_backend_and_auto():
    old = sinpe._policy.get_default()
    try:
        sinpe.set_backend("builtin")
        assert sinpe.get_backend() == "builtin" and sinpe.numerics()["default"] == "builtin"
        sinpe.set_backend("auto")
        assert sinpe.get_backend() == "torch"  # torch is imported in this process
        # an unknown name: api/test_api_inputs.py::test_backend_unknown
    finally:
        sinpe.set_backend(old)
    r = run_python("import sinpe, torch; print(sinpe.get_backend())", SINPE_BACKEND="builtin")
    assert r.stdout.strip() == "builtin", r.stderr


@pytest.mark.x86_64
@pytest.mark.needs_torch
def test_torch_backend_in_a_forked_child_after_parallel_torch_work():
    """torch's oneMKL threads its VML calls with OpenMP; sinpe runs them on one MKL thread,
    so a forked child of a process whose OpenMP pool ran does not hang."""
    torch.set_num_threads(2)
    torch.sin(torch.rand(1 << 22))  # the parent's OpenMP pool runs
    want = sinpe.positional_encoding(500, 128, backend="torch")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            got = sinpe.positional_encoding(500, 128, backend="torch")
            os.write(w, b"1" if (got.view(np.uint32) == want.view(np.uint32)).all() else b"0")
        finally:
            os._exit(0)
    os.close(w)
    assert os.read(r, 1) == b"1"
    os.waitpid(pid, 0)


@pytest.mark.x86_64
@pytest.mark.needs_torch
def test_torch_module_uses_torch_kernels_whatever_the_default():
    from reference import SinusoidalPositionalEncoding as Ref
    from sinpe.torch import SinusoidalPositionalEncoding
    old = sinpe._policy.get_default()
    sinpe.set_backend("builtin")
    try:
        m = SinusoidalPositionalEncoding(512, 2000)
    finally:
        sinpe.set_backend(old)
    assert torch.equal(m.pe.view(torch.int32), Ref(512, 2000).pe.view(torch.int32))


# ---- kernels and threads: the CPU probe, set_kernel, set_threads, the environment --------

def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def test_probe_finds_avx2_where_the_cpu_has_it():
    flags = _cpu_flags()
    if {"avx2", "fma"} <= flags:
        assert "avx2" in sinpe.kernels()
        assert sinpe.numerics()["kernel"] in sinpe.kernels()
    assert "scalar" in sinpe.kernels()


def test_probe_chooses_the_widest_verified_path():
    """AVX-512F where the CPU (and OS) has it: src/sinpe_verified.h records its exhaustive
    check, which is what lets the probe choose it; the fastest available path otherwise."""
    flags = _cpu_flags()
    if "avx512f" in flags:
        assert "avx512" in sinpe.kernels()
        want = "avx512"
    elif {"avx2", "fma"} <= flags:
        want = "avx2"
    else:
        want = sinpe.kernels()[-1]
    # CI runs this suite once per path with SINPE_KERNEL set: the probe's own choice is seen
    # only without it.
    r = run_python("import sinpe; print(sinpe.get_kernel())", SINPE_KERNEL=None)
    assert r.returncode == 0 and r.stdout.strip() == want, r.stdout + r.stderr
    # each can be forced: test_env_forces_each_path


def test_threads_setting():
    old = sinpe.get_threads()
    try:
        sinpe.set_threads(3)
        assert sinpe.get_threads() == 3 and sinpe.numerics()["threads"] == 3
    finally:
        sinpe.set_threads(old)
    for bad in (0, -1, 257):
        with pytest.raises(ValueError, match=f"threads must be between 1 and 256, got {bad}"):
            sinpe.set_threads(bad)
        with pytest.raises(ValueError, match="threads"):
            sinpe.positional_encoding(4, 8, threads=bad)
    with pytest.raises(TypeError, match="threads must be an integer"):
        sinpe.add_pe(np.zeros((2, 4), np.float32), threads=1.5)


def test_default_threads_is_usable_cpus():
    r = run_python("import sinpe, os; print(sinpe.get_threads(), len(os.sched_getaffinity(0)))")
    assert r.returncode == 0, r.stderr
    got, want = r.stdout.split()
    assert got == want


def test_env_forces_each_path():
    for k in sinpe.kernels():
        r = run_python("import sinpe; print(sinpe.get_kernel())", SINPE_KERNEL=k)
        assert r.returncode == 0 and r.stdout.strip() == k, r.stderr
    # an unknown one: api/test_api_inputs.py::test_bad_environment_variables_are_named
    r = run_python("import sinpe; print(sinpe.get_threads())", SINPE_NUM_THREADS="3")
    assert r.stdout.strip() == "3", r.stderr


def test_set_kernel_errors():
    with pytest.raises(ValueError, match="unknown kernel 'neon9'"):
        sinpe.set_kernel("neon9")
    import platform
    if platform.machine().lower() in ("x86_64", "amd64"):
        with pytest.raises(RuntimeError, match="kernel 'neon' is not available"):
            sinpe.set_kernel("neon")


# ---- the backends as data ---------------------------------------------------------------

def test_every_backend_the_core_registers_has_one_record_and_backends_is_derived():
    from sinpe._backends import records
    core = sinpe._sinpe.registry()["backends"]  # (name, has a library, independent)
    assert sorted(r.name for r in records.BACKENDS) == sorted(sinpe._sinpe.BACKENDS)
    assert len(records.BY_NAME) == len(records.BACKENDS)  # one record per name
    for name, library, independent in core:
        rec = records.BY_NAME[name]
        assert (rec.finder is not None) == bool(library), name  # a loader iff a library
        assert records.INDEPENDENT[records.BACKEND_INDEX[name]] == bool(independent)
        assert isinstance(rec.sentence(name, None), str) and rec.sentence(name, None)
    assert records.BACKENDS[-1].name == "builtin" and records.BACKENDS[-1].auto()  # the fallback
    names = set(records.BY_NAME) | set(records.BY_PROFILE)
    assert set(sinpe.backends()) == names == set(records.NAMES)
    for name in names:  # every name a call may pass resolves, or says why not
        try:
            sinpe._policy.resolve(name)
        except RuntimeError as exc:
            assert name in str(exc) and not sinpe.backends()[name]


def test_the_typing_literals_name_what_the_records_and_the_core_register():
    import typing

    from sinpe import _types
    from sinpe._backends import records
    assert set(typing.get_args(_types.Name)) == {"auto"} | set(records.NAMES)
    assert list(typing.get_args(_types.Kernel)) == records.PATH_NAMES
