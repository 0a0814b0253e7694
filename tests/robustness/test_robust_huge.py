"""Huge tables (opt-in: pytest -m slow): more than 2^31 elements, 64-bit indexing."""
import numpy as np
import pytest

import sinpe
from conftest import assert_bits_equal


@pytest.mark.slow
def test_table_above_2_31_elements():
    L, d = 2**21 + 3, 1024                     # 2,147,486,720 floats (8 GiB)
    assert L * d > 2**31
    t = sinpe.positional_encoding(L, d)
    for rows in (np.arange(0, 3), np.arange(2**21 - 1, 2**21 + 3)):
        assert_bits_equal(t[rows], sinpe.positional_encoding(d_model=d, positions=rows), f"rows {rows}")
    x = np.zeros((1, 3, d), np.float32)
    sinpe.add_pe(x, offset=L - 3)
    assert_bits_equal(x[0], t[-3:], "add_pe at the end")
