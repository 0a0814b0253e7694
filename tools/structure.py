"""The shape of the code, measured: lines per layer, the longest files, includes that point
upward, calls from the binding into Python, and files citing the session notes folder.

    python tools/structure.py            # this working tree
    python tools/structure.py REV        # and the same figures for a git revision, beside it

For the layers see docs/layout.md; tests/build/test_build_inputs.py checks the rules (no C
file over 800 lines, includes only downward, no citations of the notes folder) on every
run of the suite.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from typing import Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = ["platform", "elem", "paths", "backends", "include", "engine", "binding"]


def files_at(rev: str) -> Dict[str, str]:
    """path -> text of the tracked source files at rev ('' = the working tree)."""
    if rev:
        names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.split()
    else:
        names = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                               cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    out = {}
    for n in names:
        if not (n.startswith(("src/", "sinpe/")) and n.endswith((".c", ".h", ".py", ".pyi"))):
            continue
        if rev:
            text = subprocess.run(["git", "show", f"{rev}:{n}"], cwd=ROOT, capture_output=True,
                                  text=True).stdout
        else:
            path = os.path.join(ROOT, n)
            if not os.path.exists(path):
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
        out[n] = text
    return out


#: The flat src/ of before the layers, file by file, for comparisons.
FLAT = {"cpu": "platform", "threads": "platform", "mem": "platform", "expf": "elem",
        "sincosf": "elem", "powf": "elem", "powf_cr": "elem", "sleef": "elem",
        "sleef_impl": "elem", "dd": "elem", "bits": "elem", "constants": "elem",
        "kernels": "elem", "scalar": "paths", "avx2": "paths", "avx512": "paths",
        "neon": "paths", "paths": "paths", "verified": "paths", "mkl": "backends",
        "core": "engine", "layout": "engine", "store": "engine", "spec": "engine",
        "freqs": "engine", "rope": "engine"}


def layer_of(path: str) -> str:
    if path.startswith("sinpe/"):
        return "package (sinpe/)"
    parts = path.split("/")
    if len(parts) == 2:  # the flat src/ of before
        base = parts[1].rsplit(".", 1)[0]
        return "binding" if base == "_sinpe" else FLAT.get(base.replace("sinpe_", ""), "src (flat)")
    return parts[1]


def measure(files: Dict[str, str]) -> Tuple[Dict[str, int], List[Tuple[int, str]], List[str], List[str]]:
    lines: Dict[str, int] = defaultdict(int)
    longest = []
    upward = []
    for path, text in files.items():
        n = text.count("\n")
        lines[layer_of(path)] += n
        if path.endswith((".c", ".h")):
            longest.append((n, path))
            layer = path.split("/")[1] if path.count("/") >= 2 else None
            for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
                target = m.group(1)
                tl = "include" if target == "sinpe.h" else target.split("/")[0]
                if layer in LAYERS and (tl not in LAYERS or LAYERS.index(tl) > LAYERS.index(layer)):
                    upward.append(f"{path} -> {target}")
    calls = []
    for path, text in files.items():
        if path.startswith("src/") and "binding" in path or path == "src/_sinpe.c":
            for word in ("PyObject_Call", "PyImport_ImportModule", "PyObject_Vectorcall"):
                calls += [f"{path}: {word}"] * text.count(word)
    return lines, sorted(longest, reverse=True)[:5], upward, calls


NOTES = "../" + "shared"  # spelled so that this file does not cite it


def shared_citations() -> List[str]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    bad = []
    for n in names:
        try:
            with open(os.path.join(ROOT, n), encoding="utf-8") as f:
                if NOTES in f.read() and n != "tests/build/test_build_inputs.py":
                    bad.append(n)
        except (UnicodeDecodeError, OSError):
            pass
    return bad


def report(title: str, files: Dict[str, str]) -> None:
    lines, longest, upward, calls = measure(files)
    print(f"== {title}: {len(files)} files")
    for layer in sorted(lines, key=lambda k: (LAYERS.index(k) if k in LAYERS else 99, k)):
        print(f"  {layer:20s} {lines[layer]:6d} lines")
    print("  longest C files: " + ", ".join(f"{p} ({n})" for n, p in longest))
    print(f"  includes pointing upward: {len(upward)}" + "".join(f"\n    {u}" for u in upward))
    print(f"  calls from the binding into Python: {len(calls)}" + "".join(f"\n    {c}" for c in calls))


def main() -> int:
    report("working tree", files_at(""))
    cites = shared_citations()
    print(f"  files citing {NOTES}: {len(cites)}" + "".join(f"\n    {c}" for c in cites))
    if len(sys.argv) > 1:
        report(sys.argv[1], files_at(sys.argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
