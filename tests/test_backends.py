"""The backend choice (issue 9): torch's own kernels, the mkl wheel's releases, the automatic
choice made when a call needs it, and the fallbacks when a library is missing or broken."""
import hashlib
import os
import sys
import types

import numpy as np
import pytest

import sinpe
from conftest import D_MODELS, MAX_LENS, reference_table, run_python, torch

pytestmark = pytest.mark.x86_64  # torch's oneMKL and the mkl wheel exist on x86-64 only


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


def test_no_torch_installed(monkeypatch):
    from sinpe import _torchlib
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(_torchlib.importlib.util, "find_spec", lambda name: None)
    monkeypatch.delenv("SINPE_TORCH_LIBRARY", raising=False)
    assert _torchlib.find_torch_library() == (None, "torch is not installed")


def test_find_mkl_takes_the_2026_library_name(monkeypatch, tmp_path):
    from sinpe import _mkl
    lib = tmp_path / "lib" / "libmkl_rt.so.3"
    lib.parent.mkdir()
    lib.write_bytes(b"")
    fake = types.SimpleNamespace(version="2026.2.1", files=["lib/libmkl_rt.so.3", "lib/x.so"],
                                 locate_file=lambda f: tmp_path / str(f))
    from importlib import metadata
    monkeypatch.setattr(metadata, "distribution", lambda name: fake)
    monkeypatch.delenv("SINPE_MKL_LIBRARY", raising=False)
    assert _mkl.find_mkl() == (os.path.realpath(lib), "")


@pytest.mark.parametrize("version,equal", [
    ("Version 2024.0-Product", True), ("Version 2024.1-Product", True),
    ("Version 2024.2-Product Build 20240605", True), ("Version 2024.2.1-Product", True),
    ("Version 2025.0.1-Product Build 20241031", True), ("Version 2025.1-Product", False),
    ("Version 2026.2-Product Build 20260915", False), ("Version 2023.2-Product", False),
    ("no version here", False)])
def test_mkl_release_table(version, equal):
    from sinpe import _mkl
    assert _mkl.release_matches(version) is equal


@pytest.mark.needs_torch
def test_pinned_backend_and_auto():
    old = sinpe._choice.get_default()
    try:
        sinpe.set_backend("builtin")
        assert sinpe.get_backend() == "builtin" and sinpe.numerics()["default"] == "builtin"
        sinpe.set_backend("auto")
        assert sinpe.get_backend() == "torch"  # torch is imported in this process
        with pytest.raises(ValueError, match="unknown backend 'tpu'"):
            sinpe.set_backend("tpu")
    finally:
        sinpe.set_backend(old)
    r = run_python("import sinpe, torch; print(sinpe.get_backend())", SINPE_BACKEND="builtin")
    assert r.stdout.strip() == "builtin", r.stderr


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


@pytest.mark.needs_torch
def test_torch_module_uses_torch_kernels_whatever_the_default():
    from reference import SinusoidalPositionalEncoding as Ref
    from sinpe.torch import SinusoidalPositionalEncoding
    old = sinpe._choice.get_default()
    sinpe.set_backend("builtin")
    try:
        m = SinusoidalPositionalEncoding(512, 2000)
    finally:
        sinpe.set_backend(old)
    assert torch.equal(m.pe.view(torch.int32), Ref(512, 2000).pe.view(torch.int32))
