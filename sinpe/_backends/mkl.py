"""Finding the oneMKL runtime library of the optional ``mkl`` package, and which of its
releases give torch's bits."""
from __future__ import annotations

import os
import re
import sys
from typing import Optional, Tuple

_NAMES = {
    # the 2026 wheels ship libmkl_rt.so.3, earlier ones libmkl_rt.so.2
    "linux": ("libmkl_rt.so.2", "libmkl_rt.so.3", "libmkl_rt.so"),
    "win32": ("mkl_rt.2.dll", "mkl_rt.3.dll", "mkl_rt.dll"),
    "darwin": ("libmkl_rt.2.dylib", "libmkl_rt.3.dylib", "libmkl_rt.dylib"),
}

#: The oneMKL release inside torch's x86-64 wheels 2.5.0 to 2.15.0 (torch.__config__.show();
#: earlier wheels bundle 2022.2 and 2020.0, which give the same bits:
#: docs/numerics.md).
TORCH_MKL_RELEASE = "2024.2"

#: mkl wheel releases (year, minor) whose vmsExp/vmsSin/vmsCos give the bits of the oneMKL
#: copy inside torch's x86-64 wheels, each with its evidence.  The automatic choice takes the
#: mkl wheel only for these; other releases are loaded on request (set_backend('mkl')).
EQUAL_TO_TORCH = {
    (2024, 0): "mkl 2024.0.0: 0 differences from torch's copy (8192x1024 div_term and angles, "
               "2M sin/cos in [0,200), [0,1e5), [0,2^24), 2M exp in [-14,0); docs/backends.md)",
    (2024, 1): "mkl 2024.1.0: 0 differences from torch's copy (same inputs; docs/backends.md)",
    (2024, 2): "mkl 2024.2.0, .1, .2: 0 differences from torch's copy (same inputs; "
               "docs/backends.md) and from torch 2.13 in the parity grid (docs/numerics.md)",
    (2025, 0): "mkl 2025.0.0 and 2025.0.1: 0 differences from torch's copy (same inputs; "
               "docs/backends.md)",
}

#: What changes in the other releases (mkl 2025.1.0 to 2026.2.1, equal to each other).
DIFFERENT = ("on an Intel Xeon with AVX-512 its vmsExp differs from the copy in torch (61,556 of "
             "2M exp inputs in [-14,0); 13 of the 512 div_term values of d_model=1024, changing "
             "86,698 sin and 81,986 cos entries of the 8192x1024 table; sin/cos differ for "
             "x >= 10000; docs/backends.md), although on an AMD EPYC (Zen 5) mkl 2026.2.1 gave 0 "
             "differences (oneMKL runs another code path there: docs/backends.md)")


def release(version: str) -> Optional[Tuple[int, int]]:
    """(year, minor) of a MKL_Get_Version_String() text, None if it has none."""
    m = re.search(r"Version (\d{4})\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def release_matches(version: str) -> bool:
    """Whether a MKL_Get_Version_String() text is a release measured equal to torch's copy."""
    return release(version) in EQUAL_TO_TORCH


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
