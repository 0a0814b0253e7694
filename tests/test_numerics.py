"""Backend choice: per call, global, by environment; the numerics report; the CLI."""
import inspect
import subprocess
import sys

import numpy as np

import sinpe
from conftest import assert_bits_equal, run_python


def test_numerics_report():
    info = sinpe.numerics()
    assert info["backend"] in ("builtin", "mkl", "torch") or info["backend"].startswith("torch-aarch64-")
    assert info["default"] == "auto"
    assert info["reproduces"] == sinpe.reproduces(info["backend"])
    assert info["available"]["builtin"] is True


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
                          "registry", "load", "backend_info"}
    for name in names:
        f = getattr(_sinpe, name)
        assert f.__text_signature__ and f.__text_signature__.startswith("($module"), name
        inspect.signature(f)  # parses
    for f in (sinpe.elementwise, sinpe.set_backend, sinpe.set_threads, sinpe.set_kernel):
        assert f.__doc__ and inspect.signature(f).parameters


def test_cli(tmp_path):
    out = tmp_path / "pe.npy"
    r = subprocess.run([sys.executable, "-m", "sinpe", "--max-len", "100", "--d-model", "16",
                        "-o", str(out)], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "numerics: backend" in r.stdout
    # the CLI runs without torch imported: 'auto' may choose another backend than this
    # process (on 64-bit Arm the built-in), so compare with the one it names
    used = r.stdout.split("numerics: backend '", 1)[1].split("'", 1)[0]
    assert_bits_equal(np.load(out), sinpe.positional_encoding(100, 16, backend=used), "CLI table")
    r = subprocess.run([sys.executable, "-m", "sinpe", "--max-len", "10", "--d-model", "7",
                        "-o", str(out)], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 2 and "d_model must be an even integer" in r.stderr
