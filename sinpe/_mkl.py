"""Finding the oneMKL runtime library of the optional ``mkl`` package."""
from __future__ import annotations

import os
import sys
from typing import Optional, Tuple

_NAMES = {
    "linux": ("libmkl_rt.so.2", "libmkl_rt.so"),
    "win32": ("mkl_rt.2.dll", "mkl_rt.dll"),
    "darwin": ("libmkl_rt.2.dylib", "libmkl_rt.dylib"),
}


#: The oneMKL release that torch 2.13.0's x86-64 wheel bundles (torch.__config__.show();
#: measured: README, Numerics).  Another release computes other bits.
TORCH_MKL_RELEASE = "2024.2"


def release_matches(version: str) -> bool:
    """Whether a MKL_Get_Version_String() text is the release torch bundles."""
    return f"Version {TORCH_MKL_RELEASE}-" in version or f"Version {TORCH_MKL_RELEASE} " in version


def find_mkl() -> Tuple[Optional[str], str]:
    """(path, reason): the library path, or None and why it is not there.

    SINPE_MKL_LIBRARY names a library file explicitly; otherwise the files of
    the installed ``mkl`` distribution are searched.
    """
    explicit = os.environ.get("SINPE_MKL_LIBRARY")
    if explicit:
        return explicit, ""
    names = _NAMES.get("linux" if sys.platform.startswith("linux") else sys.platform, ())
    try:
        from importlib import metadata

        dist = metadata.distribution("mkl")
    except Exception:
        return None, ("the 'mkl' package is not installed "
                      "(pip install 'sinpe[mkl]' on x86-64)")
    files = [f for f in (dist.files or ()) if os.path.basename(str(f)) in names]
    files.sort(key=lambda f: names.index(os.path.basename(str(f))))
    for f in files:
        path = str(dist.locate_file(f))
        if os.path.exists(path):
            return os.path.realpath(path), ""
    return None, f"mkl {dist.version} is installed but has no {' or '.join(names)}"
