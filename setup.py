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


# the CPython / NumPy binding, then the pure-C core
SOURCES = ["src/binding/_sinpe.c", "src/binding/convert.c", "src/binding/errors.c",
           "src/binding/call.c", "src/binding/held.c", "src/binding/runtime.c"] + core_sources()
# every header: a changed header rebuilds the objects (setuptools otherwise reuses them)
HEADERS = sorted(os.path.relpath(os.path.join(d, n), HERE)
                 for d, _, names in os.walk(os.path.join(HERE, "src")) for n in names
                 if n.endswith(".h"))

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
            include_dirs=["src", "src/include", numpy.get_include()],
            depends=HEADERS,
            extra_compile_args=cflags,
            libraries=libs,
        )
    ]
)
