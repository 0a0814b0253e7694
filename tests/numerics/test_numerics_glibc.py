"""The glibc float port (src/elem/glibcf.c: sinf, cosf, expf; src/elem/powf.c: powf) against
this process's own C library, bit for bit (issue 26).

The port is what NumPy's fallback lanes, TensorFlow's and ONNX Runtime's scalar tails and JAX's
sin/cos/pow run; its oracle is glibc itself, so the test runs where the C library is glibc
2.28 or later on x86-64 (glibc picks its FMA variants on CPUs with FMA and AVX2, and the port
follows the same choice).  The element files are built into a small ctypes library with gcc,
as tests/c builds the C driver.  The exhaustive and every-64th runs against the frameworks are
tools/fwcheck.py's (docs/testing.md)."""
import ctypes
import os
import platform
import subprocess

import numpy as np
import pytest

from conftest import ROOT, sanitizer_free_env

_LIBC = platform.libc_ver()
_GLIBC = _LIBC[0] == "glibc" and tuple(int(v) for v in _LIBC[1].split(".")[:2]) >= (2, 28)
pytestmark = pytest.mark.skipif(not (_GLIBC and platform.machine() in ("x86_64", "AMD64")),
                                reason="the oracle is glibc >= 2.28 on x86-64")

SHIM = r"""
#include <math.h>
#include <stdint.h>
#include "elem/glibcf.h"
#include "elem/powf.h"
#include <xmmintrin.h>
/* fn 0..3: the port's sin, cos, exp, pow; 4..7: the C library's; 8: the port's pow under
 * FTZ/DAZ, 9: the C library's with MXCSR's FTZ and DAZ set (as XLA's threads run) */
void run(int fn, int fused, const float *x, const float *y, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        switch (fn) {
        case 0: out[i] = sinpe_glibc_sinf(x[i], fused); break;
        case 1: out[i] = sinpe_glibc_cosf(x[i], fused); break;
        case 2: out[i] = sinpe_glibc_expf(x[i], fused); break;
        case 3: out[i] = sinpe_powf_glibc(x[i], y[i], fused); break;
        case 8: out[i] = sinpe_powf_glibc_ftz(x[i], y[i], fused); break;
        case 9: {
            unsigned csr = _mm_getcsr();
            _mm_setcsr(csr | 0x8040u); /* FTZ, DAZ */
            out[i] = powf(x[i], y[i]);
            _mm_setcsr(csr);
            break;
        }
        case 4: out[i] = sinf(x[i]); break;
        case 5: out[i] = cosf(x[i]); break;
        case 6: out[i] = expf(x[i]); break;
        default: out[i] = powf(x[i], y[i]); break;
        }
    }
}
int fused(void) { return sinpe_glibc_powf_fused(); }
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("glibcf")
    (d / "shim.c").write_text(SHIM)
    src = os.path.join(ROOT, "src")
    files = [os.path.join(src, "elem", f) for f in ("glibcf.c", "powf.c", "sleef.c")]
    files.append(os.path.join(src, "platform", "cpu.c"))
    so = str(d / "libglibcf.so")
    cmd = ["gcc", "-O2", "-shared", "-fPIC", "-fno-builtin", "-ffp-contract=off", "-Wall",
           "-Wextra", "-Werror", "-I" + src, "-I" + os.path.join(src, "include"),
           str(d / "shim.c"), *files, "-lm", "-ldl", "-lpthread", "-o", so]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=sanitizer_free_env())
    assert r.returncode == 0, r.stderr
    h = ctypes.CDLL(so)
    h.run.argtypes = [ctypes.c_int, ctypes.c_int] + [ctypes.c_void_p] * 3 + [ctypes.c_int64]
    return h


def _run(lib, fn, x, y=None):
    x = np.ascontiguousarray(x, np.float32)
    y = x if y is None else np.ascontiguousarray(y, np.float32)
    out = np.empty_like(x)
    lib.run(fn, lib.fused(), x.ctypes.data, y.ctypes.data, out.ctypes.data, x.size)
    return out.view(np.uint32)


def _sample():
    """Every 2039th bit pattern (2.1M values: every binade, both signs, NaNs with payloads),
    specials, subnormals, the ranges' edges and their neighbours, and dense values where the
    tables are built (angles up to 10^5, exponents in [-20, 1])."""
    u = np.arange(0, 1 << 32, 2039, dtype=np.uint64).astype(np.uint32)
    sp = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
                   0x7FA00000, 0x7FC12345, 0xFFFFFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x00800000,
                   0x007FFFFF, 1, 0x80000001], np.uint32)
    edges = np.float32([0.78539816, 120, 2.0 ** -12, 88, 88.72283, 88.72284, -103.28, -103.97,
                        -103.9721, 2.0 ** -126, 1e4, 1e30])
    eb = np.concatenate([edges, -edges]).view(np.uint32).astype(np.int64)
    near = (np.concatenate([eb + k for k in range(-300, 301)]) & 0xFFFFFFFF).astype(np.uint32)
    rng = np.random.default_rng(2026)
    dense = np.concatenate([rng.uniform(-1e5, 1e5, 300_000), rng.uniform(-20, 1, 300_000)])
    return np.concatenate([u, sp, near, dense.astype(np.float32).view(np.uint32)]).view(np.float32)


@pytest.mark.parametrize("fn,name", [(0, "sinf"), (1, "cosf"), (2, "expf")])
def test_glibc_port_equals_the_c_library(lib, fn, name):
    x = _sample()
    with np.errstate(all="ignore"):
        port, libm = _run(lib, fn, x), _run(lib, fn + 4, x)
    bad = np.nonzero(port != libm)[0]
    assert bad.size == 0, (name, [(hex(x.view(np.uint32)[i]), hex(libm[i]), hex(port[i]))
                                  for i in bad[:5]])


def test_glibc_powf_port_equals_the_c_library(lib):
    rng = np.random.default_rng(26)
    n = 500_000
    def bits(k):
        return rng.integers(0, 1 << 32, k, dtype=np.uint64).astype(np.uint32).view(np.float32)
    base = np.concatenate([np.full(1024, 10000, np.float32),
                           rng.uniform(0, 1e5, n).astype(np.float32), bits(n)])
    expo = np.concatenate([-np.arange(1024, dtype=np.float32) / 1024,
                           rng.uniform(-30, 30, n).astype(np.float32), bits(n)])
    with np.errstate(all="ignore"):
        port, libm = _run(lib, 3, base, expo), _run(lib, 7, base, expo)
    bad = np.nonzero(port != libm)[0]
    assert bad.size == 0, (bad.size, [(float(base[i]), float(expo[i]), hex(libm[i]), hex(port[i]))
                                      for i in bad[:5]])


def test_glibc_powf_under_ftz_daz_equals_the_c_library_so_run(lib):
    """JAX's pow: glibc's powf with MXCSR's FTZ and DAZ set; subnormal bases, exponents and
    results are where it differs from the plain function."""
    rng = np.random.default_rng(27)
    n = 400_000

    def bits(lo, hi, k):
        return rng.integers(lo, hi, k, dtype=np.uint64).astype(np.uint32).view(np.float32)
    base = np.concatenate([bits(0, 1 << 32, n), bits(1, 0x800000, n // 4),
                           bits(0x80000001, 0x80800000, n // 8),
                           rng.uniform(0, 100, n).astype(np.float32)])
    expo = np.concatenate([bits(0, 1 << 32, n), rng.uniform(-3, 3, n // 4).astype(np.float32),
                           rng.integers(-5, 6, n // 8).astype(np.float32),
                           rng.uniform(-40, 40, n).astype(np.float32)])
    with np.errstate(all="ignore"):
        port, libm = _run(lib, 8, base, expo), _run(lib, 9, base, expo)
        plain = _run(lib, 3, base, expo)
    bad = np.nonzero(port != libm)[0]
    assert bad.size == 0, (bad.size, [(hex(base.view(np.uint32)[i]), float(expo[i]),
                                       hex(libm[i]), hex(port[i])) for i in bad[:5]])
    assert (plain != libm).sum() > 1000  # the flags matter on this sample


def test_the_comparison_can_fail(lib):
    """The oracle tells functions apart: sin is not cos on the sample."""
    x = _sample()
    with np.errstate(all="ignore"):
        assert (_run(lib, 0, x) != _run(lib, 5, x)).sum() > 1_000_000
