"""The stubs and annotations, checked by mypy --strict: good calls pass, bad ones fail."""
import os
import re
import subprocess
import sys

from conftest import TESTS

HERE = os.path.join(TESTS, "typing")


def _mypy(name):
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                           "--cache-dir", os.devnull, os.path.join(HERE, name)],
                          capture_output=True, text=True, timeout=600, cwd=HERE)


def test_good_calls_pass():
    r = _mypy("good.py")
    assert r.returncode == 0, r.stdout + r.stderr


def test_bad_calls_rejected():
    r = _mypy("bad.py")
    assert r.returncode == 1, r.stdout + r.stderr
    flagged = {int(m.group(1)) for m in re.finditer(r"bad\.py:(\d+): error", r.stdout)}
    with open(os.path.join(HERE, "bad.py")) as f:
        expected = {i for i, line in enumerate(f, 1) if "# E:" in line}
    assert expected <= flagged, f"not rejected: lines {sorted(expected - flagged)}\n{r.stdout}"
