"""The C core without Python: the driver tests/c/test_core.c (good calls, every error
path, oneMKL load failures) under valgrind and under AddressSanitizer + UBSan.
gcc and valgrind are required (they are on this project's machines); the whole
Python suite under the sanitizers is a separate CI step (.ci/run)."""
import os
import subprocess

import pytest

from conftest import ROOT, sanitizer_free_env

with open(os.path.join(ROOT, "src", "sources.txt")) as _f:  # the core's sources, listed once
    SOURCES = [os.path.join(ROOT, "src", line.strip()) for line in _f
               if line.strip() and not line.startswith("#")]


def _build(tmp_path, name, extra):
    exe = str(tmp_path / name)
    cmd = ["gcc", "-O1", "-g", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror",
           "-I" + os.path.join(ROOT, "src"), "-I" + os.path.join(ROOT, "src", "include"),
           os.path.join(ROOT, "tests", "c", "test_core.c"),
           *SOURCES, "-lm", "-ldl", "-lpthread", "-o", exe, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=sanitizer_free_env())
    assert r.returncode == 0, r.stderr
    return exe


def test_core_driver_under_valgrind(tmp_path):
    exe = _build(tmp_path, "test_core", [])
    r = subprocess.run(["valgrind", "--error-exitcode=3", "--leak-check=full",
                        "--errors-for-leak-kinds=definite,indirect", "-q", exe],
                       capture_output=True, text=True, timeout=600, env=sanitizer_free_env())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failed" in r.stdout


@pytest.mark.parametrize("san", ["address,undefined"])
def test_core_driver_under_sanitizers(tmp_path, san):
    exe = _build(tmp_path, "test_core_san", [f"-fsanitize={san}", "-fno-sanitize-recover=all",
                                             "-fno-omit-frame-pointer"])
    r = subprocess.run([exe], capture_output=True, text=True, timeout=600,
                       env=sanitizer_free_env(ASAN_OPTIONS="detect_leaks=1"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failed" in r.stdout and "runtime error" not in r.stderr
