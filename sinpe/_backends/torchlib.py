"""Finding the installed torch's own library (libtorch_cpu) without importing torch.

Every x86-64 torch wheel from 1.13 to 2.15 exports oneMKL's vmsSin/vmsCos/vmsExp and
MKL_Get_Version_String from libtorch_cpu (docs/numerics.md, docs/backends.md), so sinpe can
compute with torch's own copy of its math.  When torch is imported its library is already in
the process and opening it again costs nothing; otherwise opening it takes about 0.2 s and
110 MiB, once per process, and only when the 'torch' backend is first needed."""
from __future__ import annotations

import importlib.util
import os
import sys
from typing import Optional, Tuple

_NAMES = {"linux": "libtorch_cpu.so", "darwin": "libtorch_cpu.dylib", "win32": "torch_cpu.dll"}


def torch_folder() -> Optional[str]:
    """The folder of the torch package: the imported one, else the one import would find."""
    mod = sys.modules.get("torch")
    file: Optional[str] = getattr(mod, "__file__", None) if mod is not None else None
    if file:
        return os.path.dirname(os.path.abspath(file))
    try:
        spec = importlib.util.find_spec("torch")  # finds, does not import
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def find_torch_library() -> Tuple[Optional[str], str]:
    """(path, reason): torch's libtorch_cpu, or None and why not.  SINPE_TORCH_LIBRARY names
    a file explicitly."""
    explicit = os.environ.get("SINPE_TORCH_LIBRARY")
    if explicit:
        return explicit, ""
    folder = torch_folder()
    if folder is None:
        return None, "torch is not installed"
    name = _NAMES.get("linux" if sys.platform.startswith("linux") else sys.platform,
                      "libtorch_cpu.so")
    path = os.path.join(folder, "lib", name)
    if not os.path.exists(path):
        return None, f"the torch package at {folder} has no lib/{name}"
    return os.path.realpath(path), ""


def torch_version() -> Optional[str]:
    """torch's version: the imported module's, else the installed distribution's."""
    mod = sys.modules.get("torch")
    if mod is not None and getattr(mod, "__version__", None):
        return str(mod.__version__)
    try:
        from importlib import metadata

        return metadata.version("torch")
    except Exception:
        return None
