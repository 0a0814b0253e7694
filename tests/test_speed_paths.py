"""Kernel paths and threads: every path and every thread count gives the same bits."""

import numpy as np
import pytest

import sinpe
from conftest import assert_bits_equal, run_python


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def test_probe_finds_avx2_where_the_cpu_has_it():
    flags = _cpu_flags()
    if {"avx2", "fma"} <= flags:
        assert "avx2" in sinpe.kernels()
        assert sinpe.numerics()["kernel"] in sinpe.kernels()
    assert "scalar" in sinpe.kernels()


def test_probe_chooses_the_widest_verified_path():
    """AVX-512F where the CPU (and OS) has it: src/sinpe_verified.h records its exhaustive
    check, which is what lets the probe choose it; the fastest available path otherwise."""
    flags = _cpu_flags()
    if "avx512f" in flags:
        assert "avx512" in sinpe.kernels()
        want = "avx512"
    elif {"avx2", "fma"} <= flags:
        want = "avx2"
    else:
        want = sinpe.kernels()[-1]
    # CI runs this suite once per path with SINPE_KERNEL set: the probe's own choice is seen
    # only without it.
    r = run_python("import sinpe; print(sinpe.get_kernel())", SINPE_KERNEL=None)
    assert r.returncode == 0 and r.stdout.strip() == want, r.stdout + r.stderr
    for k in sinpe.kernels():  # each can be forced
        r = run_python("import sinpe; print(sinpe.get_kernel())", SINPE_KERNEL=k)
        assert r.stdout.strip() == k, r.stderr


def test_all_paths_same_bits():
    tables = {}
    old = sinpe.get_kernel()
    try:
        for k in sinpe.kernels():
            sinpe.set_kernel(k)
            tables[k] = sinpe.positional_encoding(3000, 1030, 777.0, backend="builtin")
    finally:
        sinpe.set_kernel(old)
    first = tables["scalar"]
    for k, t in tables.items():
        assert_bits_equal(t, first, f"kernel {k} vs scalar")


@pytest.mark.parametrize("backend", sorted(b for b, ok in sinpe.backends().items() if ok))
def test_thread_counts_same_bits(backend, kernel):
    want = sinpe.positional_encoding(2000, 512, backend=backend, threads=1)
    for t in (2, 3, 7, 64):
        assert_bits_equal(sinpe.positional_encoding(2000, 512, backend=backend, threads=t), want,
                          f"table threads={t}")
    x0 = np.random.default_rng(1).standard_normal((5, 700, 256)).astype(np.float32)
    ref = sinpe.add_pe(x0.copy(), backend=backend, offset=33, threads=1)
    for t in (2, 3, 7):
        assert_bits_equal(sinpe.add_pe(x0.copy(), backend=backend, offset=33, threads=t), ref,
                          f"add_pe threads={t}")


def test_threads_setting():
    old = sinpe.get_threads()
    try:
        sinpe.set_threads(3)
        assert sinpe.get_threads() == 3 and sinpe.numerics()["threads"] == 3
    finally:
        sinpe.set_threads(old)
    for bad in (0, -1, 257):
        with pytest.raises(ValueError, match=f"threads must be between 1 and 256, got {bad}"):
            sinpe.set_threads(bad)
        with pytest.raises(ValueError, match="threads"):
            sinpe.positional_encoding(4, 8, threads=bad)
    with pytest.raises(TypeError, match="threads must be an integer"):
        sinpe.add_pe(np.zeros((2, 4), np.float32), threads=1.5)


def test_default_threads_is_usable_cpus():
    r = run_python("import sinpe, os; print(sinpe.get_threads(), len(os.sched_getaffinity(0)))")
    assert r.returncode == 0, r.stderr
    got, want = r.stdout.split()
    assert got == want


def test_env_forces_each_path():
    for k in sinpe.kernels():
        r = run_python("import sinpe; print(sinpe.get_kernel())", SINPE_KERNEL=k)
        assert r.returncode == 0 and r.stdout.strip() == k, r.stderr
    r = run_python("import sinpe", SINPE_KERNEL="avx9000")
    assert r.returncode != 0 and "unknown kernel 'avx9000'" in r.stderr
    r = run_python("import sinpe; print(sinpe.get_threads())", SINPE_NUM_THREADS="3")
    assert r.stdout.strip() == "3", r.stderr


def test_set_kernel_errors():
    with pytest.raises(ValueError, match="unknown kernel 'neon9'"):
        sinpe.set_kernel("neon9")
    import platform
    if platform.machine().lower() in ("x86_64", "amd64"):
        with pytest.raises(RuntimeError, match="kernel 'neon' is not available"):
            sinpe.set_kernel("neon")
