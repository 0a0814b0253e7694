"""The Python package stays in layers as src/ does (docs/layout.md): every module listed in
docs/layout.md, no import circle among the package's modules (at module level or inside
functions), and no function too long to read in one screen.  Read from the source tree."""
import ast
import os

from conftest import ROOT

PACKAGE = os.path.join(ROOT, "sinpe")
#: A function's lines of code (no blank lines, comments or docstring) at most.
MAX_LINES = 80


def _modules():
    """{dotted name: path} of every .py file of the package."""
    out = {}
    for folder, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), ROOT)[:-3].replace(os.sep, ".")
                out[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = \
                    os.path.join(folder, f)
    return out


def _imports(name, path, modules):
    """The package's modules that module `name` imports, anywhere in it (a package's
    __init__ counts as the package's name; importing a submodule is not counted as importing
    its parent package, which Python also runs, since the parent of every module here is
    sinpe, whose __init__ imports the public modules)."""
    is_pkg = path.endswith("__init__.py")
    here = name.split(".") if is_pkg else name.split(".")[:-1]
    found = set()
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here[:len(here) - node.level + 1] if node.level else []
            mod = ".".join(base + (node.module.split(".") if node.module else []))
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
        else:
            continue
        # an ancestor package named in `from .. import x` is the parent: not counted
        found.update(t for t in targets
                     if t in modules and t != name and not name.startswith(t + "."))
    return found


def _cycles(graph):
    """Every import circle, each as the list of its modules (one per strongly connected
    part of more than one module)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_package_has_no_import_circle():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert graph["sinpe.presets"] and graph["sinpe._api"], "the imports were not read"
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]  # the finder finds
    assert _cycles(graph) == []


def test_only_jobs_calls_the_core():
    """sinpe._jobs is the package's one caller of the C core: no other module imports
    sinpe._sinpe (the package's __init__ imports _jobs, which imports it)."""
    callers = set()
    for name, path in _modules().items():
        with open(path) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                words = [w for a in node.names for w in a.name.split(".")]
                if isinstance(node, ast.ImportFrom):
                    words += (node.module or "").split(".")
                if "_sinpe" in words:
                    callers.add(name)
    assert callers == {"sinpe._jobs"}, callers


def test_module_caches_are_memos():
    """Every module-level cache of the package is a Memo (sinpe/_memo.py: bounded, emptied
    by sinpe.clear_cache()), but for the ones with rules of their own, named here: no module
    keeps a dict that a name ending in a cache's words (..._PLANS, _CAPTURES, ...) fills."""
    own_rules = {"_ENTRIES",      # the rows' cache: a budget in bytes (sinpe/_cache.py)
                 "_VIEWS",        # the held views (sinpe/_held.py), emptied with the rows
                 "_LIB",          # the loaded libraries (loaded once per process)
                 "_FORMS", "_LAZY"}  # the torch custom operators' registrations
    found = []
    for name, path in _modules().items():
        with open(path) as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            target, value = None, None
            if isinstance(node, ast.AnnAssign):
                target, value = node.target, node.value
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            if not isinstance(target, ast.Name) or value is None:
                continue
            empty = (isinstance(value, ast.Dict) and not value.keys) or (
                isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                and value.func.id in ("dict", "OrderedDict") and not value.args)
            if empty and target.id not in own_rules:
                found.append(f"{name}.{target.id}")
    assert not found, found


def test_docs_layout_names_every_package_module():
    with open(os.path.join(ROOT, "docs", "layout.md")) as f:
        layout = f.read()
    files = [os.path.relpath(p, ROOT).replace(os.sep, "/") for p in _modules().values()]
    files += ["sinpe/_sinpe.pyi", "sinpe/py.typed"]
    missing = [rel for rel in files if f"`{rel}`" not in layout]
    assert not missing, f"docs/layout.md's package table lacks {missing}"


def _code_lines(node, lines):
    body = node.body
    first = body[0]
    doc = (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
           and isinstance(first.value.value, str))
    start = first.end_lineno + 1 if doc else first.lineno
    return sum(1 for line in lines[start - 1:node.end_lineno]
               if line.strip() and not line.strip().startswith("#"))


def test_no_function_of_the_package_is_too_long():
    long = []
    for path in _modules().values():
        rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
        with open(path) as f:
            src = f.read()
        lines = src.splitlines()
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = _code_lines(node, lines)
                if n > MAX_LINES:
                    long.append(f"{rel}: {node.name}, {n} lines")
    assert not long, long


def test_the_tests_share_one_helper_set():
    """bits and same are defined once (tests/conftest.py), and no test module imports
    another test module (shared helpers live in conftest.py or a helper module)."""
    tests = os.path.join(ROOT, "tests")
    bad = []
    for folder, _, files in os.walk(tests):
        for f in files:
            rel = os.path.relpath(os.path.join(folder, f), tests).replace(os.sep, "/")
            if not f.endswith(".py"):
                continue
            with open(os.path.join(folder, f)) as fh:
                tree = ast.parse(fh.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and node.name in ("bits", "same") \
                        and rel != "conftest.py" and node.col_offset == 0:
                    bad.append(f"{rel}: defines {node.name}")
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                bad += [f"{rel}: imports {n}" for n in names if n.split(".")[-1].startswith("test_")]
    assert not bad, bad
