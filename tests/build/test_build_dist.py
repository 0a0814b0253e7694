"""The distributions (opt-in: pytest -m dist; CI runs it once): the sdist holds what building
and testing need and nothing stray, and builds and runs in a fresh virtual environment; the
wheel, repaired by auditwheel to a manylinux tag, installs and runs in a fresh venv whose PATH
has no compiler, and on a CPU without AVX (qemu-x86_64 -cpu SandyBridge) the probe picks the
scalar kernel and the bits stay the same.  Each builds from this source tree; each takes
about half a minute to a minute."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest

from conftest import ROOT, X86_64

pytestmark = pytest.mark.dist

SMOKE = os.path.join(ROOT, "tools", "smoke.py")


def run(cmd, timeout=900, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """python -m build: the sdist, then the wheel built from it (as build does by default)."""
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), ROOT], cwd=str(out))
    sdist, = glob.glob(str(out / "*.tar.gz"))
    wheel, = glob.glob(str(out / "*.whl"))
    return out, sdist, wheel


def fresh_venv(path):
    run([sys.executable, "-m", "venv", str(path)])
    py = str(path / "bin" / "python")
    run([py, "-m", "pip", "install", "-q", "--upgrade", "pip"])
    return py


def smoke(py, env=None, prefix=()):
    r = run(list(prefix) + [py, SMOKE], cwd="/", env=env)
    return json.loads(r.stdout.strip().splitlines()[-1])


def tree_files():
    """What the sdist must hold: the build's inputs, the package, the tests and their data,
    the tools the tests and gen_constants need, the notebook the tests run."""
    want = {"README.md", "LICENSE", "pyproject.toml", "setup.py", "MANIFEST.in",
            "src/sources.txt", "tools/gen_constants.py", "tools/Makefile", "tools/smoke.py",
            "examples/quickstart.ipynb"}
    for pat in ["src/*/*.c", "src/*/*.h", "sinpe/*.py", "sinpe/*/*.py", "sinpe/*.pyi",
                "sinpe/py.typed",
                "tests/*.py", "tests/*/*.py", "tests/*.txt", "tests/c/*.c", "tests/data/*",
                "tools/*.c", "tools/*.py", "tools/*.sh"]:
        want |= {os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pat))}
    return {w for w in want if "__pycache__" not in w}


def test_sdist_holds_what_building_and_testing_need_and_nothing_stray(dists):
    _, sdist, _ = dists
    with tarfile.open(sdist) as t:
        names = [m.name.split("/", 1)[1] for m in t.getmembers() if m.isfile()]
    missing = tree_files() - set(names)
    assert not missing, f"missing from the sdist: {sorted(missing)}"
    allowed_extra = {"PKG-INFO", "setup.cfg"}
    stray = [n for n in names if n not in tree_files() and n not in allowed_extra
             and not n.startswith("sinpe.egg-info/")]
    assert not stray, f"stray files in the sdist: {stray}"
    assert not any(n.endswith((".so", ".o", ".pyc", ".pyd")) for n in names)


def test_sdist_builds_and_runs_in_a_fresh_venv(dists, tmp_path):
    _, sdist, _ = dists
    py = fresh_venv(tmp_path / "venv")
    run([py, "-m", "pip", "install", "-q", sdist])  # an isolated build, from the sdist alone
    got = smoke(py)
    assert got["differences"] == 0 and got["add_pe"] and got["float16"], got


def test_repaired_wheel_runs_without_a_compiler_and_on_an_old_cpu(dists, tmp_path):
    out, _, wheel = dists
    run([sys.executable, "-m", "auditwheel", "repair", "-w", str(out / "repaired"), wheel])
    repaired, = glob.glob(str(out / "repaired" / "*.whl"))
    assert "-manylinux_" in os.path.basename(repaired), repaired
    py = fresh_venv(tmp_path / "venv")
    bindir = os.path.dirname(py)
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "CXX", "LDSHARED")}
    env.update(PATH=bindir, CC="/nonexistent-cc")  # no gcc, cc or ld on this PATH
    assert all(shutil.which(c, path=bindir) is None for c in ("gcc", "cc", "clang", "ld"))
    run([py, "-m", "pip", "install", "-q", "--only-binary", ":all:", repaired], env=env)
    native = smoke(py, env=env)
    assert native["differences"] == 0 and native["add_pe"] and native["float16"], native
    if X86_64:  # no AVX at all: the probe must choose the scalar kernel, same bits
        qemu = shutil.which("qemu-x86_64")
        assert qemu, "qemu-x86_64 (Debian's qemu-user) is required for the old-CPU check"
        old = smoke(py, env=env, prefix=(qemu, "-cpu", "SandyBridge"))
        assert old["kernel"] == "scalar" and old["kernels"] == ["scalar"], old
        assert old["sha256"] == native["sha256"] and old["differences"] == 0, old


def test_cibuildwheel_plan_covers_every_platform_and_python():
    want = {"linux": ["manylinux_x86_64", "manylinux_aarch64"],
            "macos": ["macosx_x86_64", "macosx_arm64"], "windows": ["win_amd64"]}
    for platform, tags in want.items():
        r = run([sys.executable, "-m", "cibuildwheel", "--print-build-identifiers",
                 "--platform", platform, ROOT], cwd=ROOT)
        ids = set(r.stdout.split())
        assert ids == {f"cp3{m}-{t}" for m in range(9, 14) for t in tags}, (platform, ids)
