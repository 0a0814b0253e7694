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


def test_readme_names_every_test_the_torch_free_runs_leave_out():
    """The README's Tests section lists TORCH_MODULES and every function marked needs_torch
    outside them (CI's SINPE_TORCH_FREE=1 passes deselect exactly those).  Read from the
    sources, so that it runs with and without torch."""
    import re
    from conftest import TORCH_MODULES
    names = set()
    for path in glob.glob(os.path.join(ROOT, "tests", "test_*.py")):
        mod = os.path.basename(path)
        if mod in TORCH_MODULES:
            continue
        with open(path) as f:
            src = f.read()
        for m in re.finditer(r"^@pytest\.mark\.needs_torch\n(?:@.*\n|[ )\]].*\n)*def (test_\w+)", src, re.M):
            names.add(f"{mod}::{m.group(1)}")
    assert len(names) > 10
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    missing = sorted(n for n in names if f"`{n}`" not in readme)
    assert not missing, f"README's torch-free list lacks: {missing}"
    assert all(f"`{m}`" in readme for m in TORCH_MODULES)
    listed = set(re.findall(r"`(test_\w+\.py::test_\w+)`", readme.split("**Without torch")[1].split("Tests that depend")[0]))
    assert listed - names <= {"test_backends.py::test_torch_backend_without_importing_torch_on_the_grid"}, listed - names


def test_the_suite_reaches_for_no_host_package_beyond_the_base_image():
    """The default suite runs with what the README's test command installs plus the base
    image (gcc, valgrind, Python): no test builds against SLEEF's or MPFR's headers, links
    libsleef or libmpfr, or runs qemu or a cross compiler.  Those belong to tools/ and to the
    opt-in dist tests (tests/test_dist.py, marked dist), which CI runs after it installs
    Debian packages.  A test that needs a host package fails rather than skips, so this
    static check names the reach before a fresh machine does."""
    import re
    reach = re.compile(r"qemu-|-lsleef|sleef\.h|-lmpfr|mpfr\.h|aarch64-linux-gnu|apt-get|"
                       r"libsleef\.so|libmpfr")
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "*.py"))
                       + glob.glob(os.path.join(ROOT, "tests", "c", "*.c"))):
        if os.path.basename(path) in ("test_dist.py", "test_build.py"):
            continue
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if reach.search(line):
                    found.append(f"{os.path.relpath(path, ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
    with open(os.path.join(ROOT, "tests", "test_dist.py")) as f:
        assert "pytestmark = pytest.mark.dist" in f.read()
