"""The build's inputs stay consistent: the generated constants header is what
tools/gen_constants.py writes today, and src/sources.txt (read by setup.py,
tools/Makefile and the C-level tests) lists every C file of the core."""
import glob
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_constants_header_is_regenerated_identically():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen_constants.py")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(ROOT, "src", "sinpe_constants.h")) as f:
        committed = f.read()
    assert r.stdout == committed, "src/sinpe_constants.h differs from tools/gen_constants.py's output"


def test_sources_listed_once_and_completely():
    with open(os.path.join(ROOT, "src", "sources.txt")) as f:
        listed = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    assert len(listed) == len(set(listed))
    present = {os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "src", "*.c"))}
    assert set(listed) == present - {"_sinpe.c"}
    with open(os.path.join(ROOT, "setup.py")) as f:
        setup = f.read()
    assert "sources.txt" in setup and "sinpe_core.c" not in setup
    with open(os.path.join(ROOT, "tools", "Makefile")) as f:
        assert "sources.txt" in f.read()
