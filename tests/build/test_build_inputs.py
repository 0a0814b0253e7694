"""The build's inputs stay consistent: the generated constants header is what
tools/gen_constants.py writes today, and src/sources.txt (read by setup.py,
tools/Makefile and the C-level tests) lists every C file of the core."""
import glob
import os
import subprocess
import sys

from conftest import ROOT


def test_constants_header_is_regenerated_identically():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen_constants.py")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(ROOT, "src", "elem", "constants.h")) as f:
        committed = f.read()
    assert r.stdout == committed, "src/elem/constants.h differs from tools/gen_constants.py's output"


def _core_files():
    return sorted(os.path.relpath(p, os.path.join(ROOT, "src"))
                  for p in glob.glob(os.path.join(ROOT, "src", "**", "*.[ch]"), recursive=True))


def test_sources_listed_once_and_completely():
    with open(os.path.join(ROOT, "src", "sources.txt")) as f:
        listed = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    assert len(listed) == len(set(listed))
    present = {p for p in _core_files() if p.endswith(".c") and not p.startswith("binding/")}
    assert set(listed) == present
    with open(os.path.join(ROOT, "setup.py")) as f:
        setup = f.read()
    assert "sources.txt" in setup and "engine/plan.c" not in setup
    with open(os.path.join(ROOT, "tools", "Makefile")) as f:
        assert "sources.txt" in f.read()


#: The layers of src/, lowest first: a file includes only headers of its own layer or lower
#: ones (include/ is the engine's public face: the engine and the binding include it).
LAYERS = ["platform", "elem", "paths", "backends", "include", "engine", "binding"]


def test_includes_point_only_downward():
    import re
    bad = []
    for rel in _core_files():
        layer = rel.split("/")[0]
        with open(os.path.join(ROOT, "src", rel)) as f:
            for n, line in enumerate(f, 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                target = m.group(1)
                tlayer = "include" if target == "sinpe.h" else target.split("/")[0]
                if tlayer not in LAYERS or LAYERS.index(tlayer) > LAYERS.index(layer):
                    bad.append(f"src/{rel}:{n} includes {target}")
                if layer == "include" and target != "sinpe.h":
                    bad.append(f"src/{rel}:{n}: the public header includes {target}")
    assert not bad, "\n".join(bad)


def test_no_c_file_is_too_long():
    long = []
    for rel in _core_files():
        with open(os.path.join(ROOT, "src", rel)) as f:
            text = f.read()
        if text.count("\n") > 800:
            long.append(f"{rel}: {text.count(chr(10))} lines")
    assert not long, long


def _functions(text):
    """(name, first line, lines) of each function defined at the left margin of a C file."""
    import re
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        if line == "{" and i > 0:
            head = next(lines[k] for k in range(i - 1, -1, -1) if "(" in lines[k])
            m = re.search(r"(\w+)\s*\(", head)
            end = lines.index("}", i)
            out.append((m.group(1) if m else "?", i, end - i + 1))
    return out


#: Calls from the binding into Python, each allowed in one function only: the caller's own
#: array's DLPack protocol (__dlpack__), torch's negative-view bit (is_neg), torch's C-level
#: export of a tensor (the route the package hands the binding), and the kept buffer's maker
#: the caller passes (kept=(reserve, make): called once the job is checked, so that a cache
#: allocates nothing for a call its rules refuse; issue 25), and torch's C-level version bump
#: of a tensor the held add just wrote (handed with the route).
_PY_CALLS = ("PyObject_Call", "PyImport_", "PyEval_", "Vectorcall", "PyRun_")
_PY_CALLS_ALLOWED = {"dlpack_capsule", "negated_view", "route_capsule", "make_kept", "bumped",
                     "call_long", "storage_holds"}  # (a tensor's own storage size, offset)


def test_the_binding_calls_no_python_of_the_package():
    """Every binding file: no import, no evaluation, and calls into Python objects only
    where an argument's own protocol is asked (never a module of the package)."""
    import re
    bad = []
    for rel in _core_files():
        if not rel.startswith("binding/"):
            continue
        with open(os.path.join(ROOT, "src", rel)) as f:
            text = f.read()
        lines = text.split("\n")
        spans = _functions(text)
        for n, line in enumerate(lines):
            if not any(c in line for c in _PY_CALLS):
                continue
            owner = [name for name, first, count in spans if first <= n < first + count]
            if not owner or owner[0] not in _PY_CALLS_ALLOWED:
                bad.append(f"src/{rel}:{n + 1}: {line.strip()}")
        assert not re.search(r"[\"']sinpe\.(?!h\")", text), rel  # no module of the package
    assert not bad, "\n".join(bad)


def _in_circles(edges, nodes):
    """The nodes that reach themselves through edges (a dict: node -> the nodes it points to)."""
    def reach(a, seen):
        for b in edges.get(a, ()):
            if b not in seen:
                seen.add(b)
                reach(b, seen)
        return seen
    return [n for n in nodes if n in reach(n, set())]


def test_binding_files_use_each_other_one_way():
    """No circle among the binding's files: who defines what (external functions and data)
    and who uses it form a graph without a cycle; call.c uses no other binding file."""
    import re
    files = [r for r in _core_files() if r.startswith("binding/") and r.endswith(".c")]
    texts = {}
    for r in files:
        with open(os.path.join(ROOT, "src", r)) as f:
            texts[r] = f.read()
    defines = {}
    for r, t in texts.items():
        for m in re.finditer(r"^(?!static|typedef|extern)[A-Za-z][\w\s\*]*?\b(\w+)\s*(?:\(|\[)", t, re.M):
            defines.setdefault(m.group(1), r)
    uses = {r: {defines[n] for n in set(re.findall(r"\b(\w+)\b", t))
                if n in defines and defines[n] != r} for r, t in texts.items()}
    assert uses["binding/call.c"] == set(), uses

    assert not _in_circles(uses, files), uses


def test_core_files_call_each_other_one_way(tmp_path):
    """No circle among the core's files (docs/layout.md): each file of src/sources.txt,
    compiled alone, calls (nm -u) only functions and data defined (nm --defined-only) by
    files listed before it, so that no file calls one that calls it back; in the engine
    every job kind's code is reached through engine/kinds.c only."""
    from conftest import sanitizer_free_env
    with open(os.path.join(ROOT, "src", "sources.txt")) as f:
        files = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    defined, wanted = {}, {}
    for n, rel in enumerate(files):
        obj = str(tmp_path / f"{n}.o")
        r = subprocess.run(["gcc", "-O0", "-c", "-I" + os.path.join(ROOT, "src"),
                            "-I" + os.path.join(ROOT, "src", "include"),
                            os.path.join(ROOT, "src", rel), "-o", obj],
                           capture_output=True, text=True, timeout=300, env=sanitizer_free_env())
        assert r.returncode == 0, r.stderr
        for line in subprocess.run(["nm", "--defined-only", obj], capture_output=True,
                                   text=True, check=True).stdout.splitlines():
            f3 = line.split()
            if len(f3) == 3 and f3[1] in "TDRBC":
                assert f3[2] not in defined, f"{f3[2]} defined in {defined.get(f3[2])} and {rel}"
                defined[f3[2]] = rel
        wanted[rel] = [line.split()[-1] for line in subprocess.run(
            ["nm", "-u", obj], capture_output=True, text=True, check=True).stdout.splitlines()]
    upward = [f"{rel} calls {s} of {defined[s]}" for rel in files for s in wanted[rel]
              if s in defined and files.index(defined[s]) > files.index(rel)]
    assert not upward, "\n".join(upward)
    kinds = ("engine/table.c", "engine/rope.c", "engine/map.c", "engine/freqs.c")
    callers = sorted({rel for rel in files for s in wanted[rel] if defined.get(s) in kinds})
    assert callers == ["engine/kinds.c"], callers


def test_headers_include_each_other_without_a_circle():
    """The core's headers (#include "...") form no circle."""
    import re
    heads = [r for r in _core_files() if r.endswith(".h")]
    edges = {}
    for rel in heads:
        with open(os.path.join(ROOT, "src", rel)) as f:
            targets = re.findall(r'^\s*#\s*include\s+"([^"]+)"', f.read(), re.M)
        edges[rel] = {"include/sinpe.h" if t == "sinpe.h" else t for t in targets}

    assert not _in_circles(edges, heads), edges


def test_no_c_function_is_longer_than_100_lines():
    """Small functions (docs/layout.md); generated headers hold data, not functions."""
    long = []
    for rel in _core_files():
        with open(os.path.join(ROOT, "src", rel)) as f:
            text = f.read()
        long += [f"src/{rel}: {name} ({n} lines)" for name, _, n in _functions(text) if n > 100]
    assert not long, long


def test_nothing_cites_files_users_do_not_have():
    """No file of the project points into ../shared (the notes are in docs/, in the
    project's own words)."""
    import subprocess
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           timeout=60).stdout.split()
    if not files:  # not a git checkout (an sdist): every file below the root
        files = [os.path.relpath(os.path.join(d, n), ROOT) for d, _, ns in os.walk(ROOT)
                 for n in ns]
    bad = []
    for rel in files:
        try:
            with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        if "../shared" in text and rel != "tests/build/test_build_inputs.py":
            bad.append(rel)
    assert not bad, bad


def test_docs_layout_names_every_source_file():
    """docs/layout.md's table covers every file of src/ (and the README links to it)."""
    with open(os.path.join(ROOT, "docs", "layout.md")) as f:
        layout = f.read()
    missing = [rel for rel in _core_files() + ["sources.txt"] if f"`{rel}`" not in layout]
    assert not missing, missing
    with open(os.path.join(ROOT, "README.md")) as f:
        assert "docs/layout.md" in f.read()


def test_docs_name_every_test_the_torch_free_runs_leave_out():
    """docs/testing.md lists TORCH_MODULES and every function marked needs_torch outside
    them, as folder/module::test (CI's SINPE_TORCH_FREE=1 passes deselect exactly those).
    Read from the sources, so that it runs with and without torch."""
    import re
    from conftest import TORCH_MODULES
    names = set()
    for path in glob.glob(os.path.join(ROOT, "tests", "*", "test_*.py")):
        mod = os.path.relpath(path, os.path.join(ROOT, "tests")).replace(os.sep, "/")
        if mod in TORCH_MODULES:
            continue
        with open(path) as f:
            src = f.read()
        for m in re.finditer(r"^@pytest\.mark\.needs_torch\n(?:@.*\n|[ )\]].*\n)*def (test_\w+)", src, re.M):
            names.add(f"{mod}::{m.group(1)}")
    assert len(names) > 10
    assert not glob.glob(os.path.join(ROOT, "tests", "test_*.py")), "test modules live in subfolders"
    with open(os.path.join(ROOT, "docs", "testing.md")) as f:
        doc = f.read()
    missing = sorted(n for n in names if f"`{n}`" not in doc)
    assert not missing, f"docs/testing.md's torch-free list lacks: {missing}"
    assert all(f"`{m}`" in doc for m in TORCH_MODULES)
    listed = set(re.findall(r"`(\w+/test_\w+\.py::test_\w+)`", doc.split("**Without torch")[1].split("Tests that depend")[0]))
    assert listed - names <= {"api/test_api_choice.py::test_torch_backend_without_importing_torch_on_the_grid"}, listed - names


def test_the_suite_reaches_for_no_host_package_beyond_the_base_image():
    """The default suite runs with what the README's test command installs plus the base
    image (gcc, valgrind, Python): no test builds against SLEEF's or MPFR's headers, links
    libsleef or libmpfr, or runs qemu or a cross compiler.  Those belong to tools/ and to the
    opt-in dist tests (tests/build/test_build_dist.py, marked dist), which CI runs after it
    installs Debian packages.  A test that needs a host package fails rather than skips, so
    this static check names the reach before a fresh machine does."""
    import re
    reach = re.compile(r"qemu-|-lsleef|sleef\.h|-lmpfr|mpfr\.h|aarch64-linux-gnu|apt-get|"
                       r"libsleef\.so|libmpfr")
    tests = os.path.join(ROOT, "tests")
    paths = sorted(glob.glob(os.path.join(tests, "**", "*.py"), recursive=True)
                   + glob.glob(os.path.join(tests, "c", "*.c")))
    assert os.path.join(tests, "api", "test_api_inputs.py") in paths  # the subfolders are walked
    found = []
    for path in paths:
        rel = os.path.relpath(path, tests).replace(os.sep, "/")
        if rel in ("build/test_build_dist.py", "build/test_build_inputs.py"):
            continue
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if reach.search(line):
                    found.append(f"{os.path.relpath(path, ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
    with open(os.path.join(tests, "build", "test_build_dist.py")) as f:
        assert "pytestmark = pytest.mark.dist" in f.read()
