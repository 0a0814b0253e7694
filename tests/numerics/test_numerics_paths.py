"""Kernel paths and threads: every path and every thread count gives the same bits (the
choice of path and threads, the probe and the environment: api/test_api_choice.py)."""

import numpy as np
import pytest

import sinpe
from conftest import assert_bits_equal


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
