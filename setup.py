"""Build of the C extension only; metadata lives in pyproject.toml."""
import sys

import numpy
from setuptools import Extension, setup

SOURCES = [
    "src/_sinpe.c",          # CPython / NumPy binding (thin)
    "src/sinpe_core.c",      # core entry point: tables, add
    "src/sinpe_expf.c",      # correctly rounded expf
    "src/sinpe_sincosf.c",   # correctly rounded sinf / cosf
    "src/sinpe_mkl.c",       # oneMKL backend, loaded at run time
    "src/sinpe_avx2.c",      # AVX2 + FMA path of sin/cos (target attributes)
    "src/sinpe_neon.c",      # AArch64 NEON path of sin/cos (empty elsewhere)
    "src/sinpe_cpu.c",       # CPU feature probe
    "src/sinpe_threads.c",   # parallel-for on POSIX / Win32 threads
]

if sys.platform == "win32":
    cflags = ["/O2", "/fp:precise"]
    libs = []
else:
    # No FMA contraction and no fast-math: every operation is the one written.
    cflags = ["-O2", "-ffp-contract=off", "-fno-fast-math", "-Wall", "-Wextra"]
    libs = ["m"] + (["dl", "pthread"] if sys.platform.startswith("linux") else [])

setup(
    ext_modules=[
        Extension(
            "sinpe._sinpe",
            sources=SOURCES,
            include_dirs=["src", numpy.get_include()],
            extra_compile_args=cflags,
            libraries=libs,
        )
    ]
)
