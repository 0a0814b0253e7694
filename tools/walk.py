"""What one call runs, counted: Python events per package module, Python -> C calls into
sinpe._sinpe, and (under gdb) every C function of the extension hit, the C files visited,
the file-to-file transitions and how often each check runs.

    python tools/walk.py              # both calls, Python and C (needs gdb and a C compiler)
    python tools/walk.py --python     # Python events only (no gdb, the installed extension)
    python tools/walk.py --json F     # also write the figures to F

The two calls: one warm-cache `sinpe.add_pe` on a torch float32 tensor (2, 256, 768) with
backend 'torch' (the same call once before fills the cache), and one
`sinpe.presets.hf_rope(config, position_ids)` of a tiny LlamaConfig over 300 positions (after
one call alike).  Python events are counted with sys.setprofile around the call: 'call'
events per module of the package, C calls into sinpe._sinpe, and module changes (consecutive
events of the package in two different modules).  For C, the tool builds its own copy of
the extension from this tree at -O0 -fno-inline -g (so that every function, static ones
included, has its own entry), loads it as sinpe._sinpe, and runs the calls under
`gdb -batch` with a breakpoint (that never stops) on the entry of every function of the
copy; the call is bracketed by two SIGUSR1 that the script sends itself.  The installed
package's Python modules are the ones measured (import from outside the source tree).
Needs torch and transformers (the oracles of the suite); run it from anywhere.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from collections import Counter
from typing import Any, Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKS = ["check", "sinpe_job_checked", "sinpe_job_check", "sinpe_job_prepare", "sinpe_opts_check",
          "table_geometry", "job_rows", "sinpe_admit", "sinpe_overlap_check",
          "sinpe_preset_compile", "sinpe_cpu", "sinpe_plan_new"]


# ---- the copy of the extension ------------------------------------------------------------

def sources() -> List[str]:
    with open(os.path.join(ROOT, "src", "sources.txt")) as f:
        core = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    binding = sorted(n for n in os.listdir(os.path.join(ROOT, "src", "binding")) if n.endswith(".c"))
    return [os.path.join(ROOT, "src", "binding", n) for n in binding] + \
        [os.path.join(ROOT, "src", n) for n in core]


def build() -> str:
    """The extension built from this tree at -O0 -fno-inline -g, in a cache folder."""
    import numpy
    srcs = sources()
    h = hashlib.sha256()
    for d, _, names in sorted(os.walk(os.path.join(ROOT, "src"))):
        for n in sorted(names):
            with open(os.path.join(d, n), "rb") as f:
                h.update(n.encode() + f.read())
    out_dir = os.path.join(tempfile.gettempdir(), "sinpe-walk-" + h.hexdigest()[:16])
    so = os.path.join(out_dir, "_sinpe" + sysconfig.get_config_var("EXT_SUFFIX"))
    if os.path.exists(so):
        return so
    os.makedirs(out_dir, exist_ok=True)
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    cmd = cc + ["-shared", "-fPIC", "-O0", "-g", "-fno-inline", "-ffp-contract=off",
                "-fno-fast-math", "-I" + os.path.join(ROOT, "src"),
                "-I" + os.path.join(ROOT, "src", "include"),
                "-I" + sysconfig.get_paths()["include"], "-I" + numpy.get_include(),
                "-o", so + ".tmp"] + srcs + ["-lm", "-ldl", "-lpthread"]
    subprocess.run(cmd, check=True)
    os.replace(so + ".tmp", so)
    return so


# ---- the calls (run in the measured process) ------------------------------------------------

def load_copy(so: str) -> None:
    import importlib.util
    spec = importlib.util.spec_from_file_location("sinpe._sinpe", so)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sinpe._sinpe"] = mod
    spec.loader.exec_module(mod)


def scenarios() -> Dict[str, Any]:
    import numpy as np
    import torch
    from transformers import LlamaConfig

    import sinpe
    import sinpe.presets
    x = torch.zeros(2, 256, 768, dtype=torch.float32)
    config = LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=4,
                         intermediate_size=128, num_hidden_layers=1, vocab_size=32)
    ids = np.arange(300)[None, :]
    return {
        "add_pe": lambda: sinpe.add_pe(x, backend="torch"),
        "hf_rope": lambda: sinpe.presets.hf_rope(config, ids),
    }


def profiled(fn: Any) -> Dict[str, Any]:
    import sinpe
    pkg = os.path.dirname(os.path.abspath(sinpe.__file__))
    calls: Counter = Counter()
    events: Counter = Counter()
    c_calls: Counter = Counter()
    trail: List[str] = []

    def module_of(frame: Any) -> str:
        f = os.path.abspath(frame.f_code.co_filename)
        if not f.startswith(pkg + os.sep):
            return ""
        return "sinpe." + os.path.relpath(f, pkg)[:-3].replace(os.sep, ".")

    def prof(frame: Any, event: str, arg: Any) -> None:
        m = module_of(frame)
        if event == "c_call" and getattr(arg, "__module__", None) == "sinpe._sinpe":
            c_calls[arg.__name__] += 1
        if not m:
            return
        events[m] += 1
        if event == "call":
            calls[m] += 1
        if not trail or trail[-1] != m:
            trail.append(m)

    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return {"python_events": dict(events), "python_calls": dict(calls),
            "python_events_total": sum(events.values()), "modules": len(events),
            "module_changes": max(len(trail) - 1, 0), "c_calls": dict(c_calls),
            "c_calls_total": sum(c_calls.values())}


def target(so: str) -> None:
    """The measured process: each call once to warm up, then once between two SIGUSR1."""
    import signal
    if so:
        load_copy(so)
    signal.signal(signal.SIGUSR1, lambda *a: None)
    out = {}
    for name, fn in scenarios().items():
        fn()
        os.kill(os.getpid(), signal.SIGUSR1)
        out[name] = profiled(fn)
        os.kill(os.getpid(), signal.SIGUSR1)
    print("WALK-PYTHON " + json.dumps(out), flush=True)


# ---- gdb ------------------------------------------------------------------------------------

GDB_SCRIPT = r'''
import gdb, json, os, re
SO = os.environ["WALK_SO"]
FUNCS = json.loads(os.environ["WALK_FUNCS"])  # [[name, offset], ...]
for c in ("set pagination off", "set confirm off", "set auto-solib-add off",
          "handle SIGUSR1 stop print nopass", "set print thread-events off"):
    gdb.execute(c)
hits = []
state = {"on": False}

class Entry(gdb.Breakpoint):
    def __init__(self, addr, name, file):
        super().__init__("*0x%x" % addr, internal=True)
        self.fname, self.file = name, file
    def stop(self):
        if state["on"]:
            hits.append((self.fname, self.file))
        return False

def base_of(pid):
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and os.path.realpath(parts[5]) == os.path.realpath(SO) \
                    and int(parts[2], 16) == 0:
                return int(parts[0].split("-")[0], 16)
    raise SystemExit("walk: the extension is not mapped")

gdb.execute("run", to_string=True)
gdb.execute("sharedlibrary " + re.escape(os.path.basename(SO)), to_string=True)
base = base_of(gdb.selected_inferior().pid)
bps = []
for name, off in FUNCS:
    sal = gdb.find_pc_line(base + off)
    f = sal.symtab.filename if sal.symtab else "?"
    if "/src/" not in f:
        continue  # CPython's and NumPy's inline helpers: not the project's
    f = f.split("/src/", 1)[-1]
    bps.append(Entry(base + off, name, f))
result = {}
for scenario in ("add_pe", "hf_rope"):
    if scenario != "add_pe":
        gdb.execute("continue", to_string=True)   # to the next start marker
    hits.clear()
    state["on"] = True
    gdb.execute("continue", to_string=True)       # to the end marker
    state["on"] = False
    result[scenario] = list(hits)
print("WALK-C " + json.dumps(result), flush=True)
for b in bps:
    b.enabled = False
gdb.execute("continue", to_string=True)           # to the end: the script prints its part
'''


def functions(so: str) -> List[List[Any]]:
    out = subprocess.run(["nm", "--defined-only", so], capture_output=True, text=True,
                         check=True).stdout
    funcs = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tT" and not parts[2].startswith(("_init", "_fini",
                                                                             "frame_dummy",
                                                                             "register_tm",
                                                                             "deregister_tm",
                                                                             "__do_global")):
            funcs.append([parts[2], int(parts[0], 16)])
    return funcs


def c_figures(hits: List[List[str]]) -> Dict[str, Any]:
    names = Counter(h[0] for h in hits)
    files = Counter(h[1] for h in hits)
    transitions = sum(1 for a, b in zip(hits, hits[1:]) if a[1] != b[1])
    return {"c_hits": len(hits), "c_functions": len(names), "c_files": len(files),
            "c_files_list": sorted(files), "c_transitions": transitions,
            "checks": {k: names.get(k, 0) for k in CHECKS},
            "c_function_counts": dict(sorted(names.items()))}


def run_gdb(so: str) -> Dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(GDB_SCRIPT)
        script = f.name
    env = dict(os.environ, WALK_SO=so, WALK_FUNCS=json.dumps(functions(so)))
    try:
        p = subprocess.run(["gdb", "-batch", "-nx", "-iex", "set auto-load python-scripts off", "-x", script, "--args", sys.executable,
                            os.path.abspath(__file__), "--target", so],
                           capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    finally:
        os.unlink(script)
    py = c = None
    for line in p.stdout.splitlines():
        if line.startswith("WALK-PYTHON "):
            py = json.loads(line[len("WALK-PYTHON "):])
        elif line.startswith("WALK-C "):
            c = json.loads(line[len("WALK-C "):])
    if py is None or c is None:
        sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
        raise SystemExit("walk: gdb run failed")
    return {k: dict(py[k], **c_figures(c[k])) for k in py}


def python_only() -> Dict[str, Any]:
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--target", ""],
                       capture_output=True, text=True, cwd=tempfile.gettempdir(), check=True)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("WALK-PYTHON ")][0]
    return json.loads(line[len("WALK-PYTHON "):])


def show(figs: Dict[str, Any]) -> None:
    for name, f in figs.items():
        print(f"== {name}")
        print(f"  Python: {f['python_events_total']} events in {f['modules']} package modules, "
              f"{f['module_changes']} module changes; calls per module {f['python_calls']}")
        print(f"  Python -> C: {f['c_calls_total']} {f['c_calls']}")
        if "c_hits" in f:
            print(f"  C: {f['c_hits']} function entries, {f['c_functions']} functions, "
                  f"{f['c_files']} files, {f['c_transitions']} file-to-file transitions")
            print(f"  C files: {' '.join(f['c_files_list'])}")
            print("  checks: " + ", ".join(f"{k} {v}" for k, v in f["checks"].items()))


def main(argv: List[str]) -> None:
    if argv[:1] == ["--target"]:
        target(argv[1])
        return
    figs = python_only() if "--python" in argv else run_gdb(build())
    show(figs)
    if "--json" in argv:
        with open(argv[argv.index("--json") + 1], "w") as f:
            json.dump(figs, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
