"""Build of the C extension only; metadata lives in pyproject.toml."""
import os
import sys

import numpy
from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def core_sources():
    """The core's sources, listed once in src/sources.txt (tools/Makefile and the tests read it)."""
    with open(os.path.join(HERE, "src", "sources.txt")) as f:
        names = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    return ["src/" + n for n in names]


SOURCES = ["src/_sinpe.c"] + core_sources()  # the CPython / NumPy binding, then the pure-C core
# every header: a changed header rebuilds the objects (setuptools otherwise reuses them)
HEADERS = sorted("src/" + n for n in os.listdir(os.path.join(HERE, "src")) if n.endswith(".h"))

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
            depends=HEADERS,
            extra_compile_args=cflags,
            libraries=libs,
        )
    ]
)
