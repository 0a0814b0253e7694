"""dtypes and arbitrary positions, bit for bit against torch."""
import ml_dtypes
import numpy as np
import pytest
import torch

import sinpe
from conftest import assert_bits_equal, reference_table, torch_formula
from reference import SinusoidalPositionalEncoding


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def assert_same(got, want, what):
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.dtype, want.dtype)
    bad = int((_bits(got) != _bits(want)).sum())
    assert bad == 0, f"{what}: {bad} of {got.size} values differ"


TORCH_OF = {np.dtype(np.float16): torch.float16, np.dtype(np.float64): torch.float64,
            np.dtype(ml_dtypes.bfloat16): torch.bfloat16}


def _to_numpy(t):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _from_numpy(a):
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64", np.float16, ml_dtypes.bfloat16])
def test_table_dtypes(dtype, parity_backend):
    L, d = 3000, 256
    ref = SinusoidalPositionalEncoding(d, L).pe[0]
    got = sinpe.positional_encoding(L, d, dtype=dtype, backend=parity_backend)
    dt = np.dtype(ml_dtypes.bfloat16) if str(dtype).endswith("bfloat16") or dtype is ml_dtypes.bfloat16 \
        else np.dtype(dtype)
    assert_same(got, _to_numpy(ref.to(TORCH_OF[dt])), f"table {dt}")
    out = np.zeros((L, d), dt)
    assert sinpe.positional_encoding(L, d, dtype=dt, out=out, backend=parity_backend) is out
    assert_same(out, got, "out=")


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16, np.float64])
def test_add_pe_dtypes_match_torch_add_(dt, parity_backend):
    B, L, d, off = 3, 200, 128, 40
    m = SinusoidalPositionalEncoding(d, off + L)
    xt = torch.randn(B, L, d, generator=torch.Generator().manual_seed(1)).to(TORCH_OF[np.dtype(dt)])
    x = _to_numpy(xt.clone()).copy()
    want = xt.clone()
    want.add_(m.pe[:, off:off + L])          # in place, mixed dtypes, as torch does it
    assert sinpe.add_pe(x, offset=off, backend=parity_backend) is x
    assert_same(x, _to_numpy(want), f"add_pe {np.dtype(dt)}")


def test_dtype_errors():
    with pytest.raises(TypeError, match="dtype must be float32, float16, bfloat16 or float64"):
        sinpe.positional_encoding(4, 8, dtype=np.int32)
    with pytest.raises(TypeError, match="dtype must be"):
        sinpe.positional_encoding(4, 8, dtype="float8")
    out = np.zeros((4, 8), np.float32)
    with pytest.raises(TypeError, match="out has dtype float32 but dtype=.* asks for float16"):
        sinpe.positional_encoding(4, 8, dtype=np.float16, out=out)


def test_positions_integer_equals_table_rows(parity_backend):
    table = reference_table(64, 5000)
    p = np.random.default_rng(0).integers(0, 5000, (7, 33))
    got = sinpe.positional_encoding(d_model=64, positions=p, backend=parity_backend)
    assert got.shape == (7, 33, 64)
    assert_bits_equal(got, table[p], "table[p]")


@pytest.mark.parametrize("p", [
    np.array([-3, -1, 0, 2, 70000]),
    np.array([0.5, -2.25, 1e-3, 12345.678, -1e6], np.float32),
    np.float32(3.5),
    np.arange(24, dtype=np.int32).reshape(2, 3, 4),
])
def test_positions_formula(p, parity_backend):
    got = sinpe.positional_encoding(d_model=100, positions=p, backend=parity_backend)
    want = torch_formula(p, 100)
    assert got.shape == np.shape(p) + (100,)
    assert_bits_equal(got, want, f"positions {p}")


def test_add_pe_packed_positions(parity_backend):
    # two packed sequences in one row of 10 tokens: positions restart at 0
    d = 32
    p = np.array([[0, 1, 2, 3, 0, 1, 2, 0, 1, 2]])
    x = np.random.default_rng(3).standard_normal((4, 10, d)).astype(np.float32)
    want = (torch.from_numpy(x) + torch.from_numpy(torch_formula(p, d))).numpy()
    sinpe.add_pe(x, positions=p, backend=parity_backend)
    assert_bits_equal(x, want, "packed")
    with pytest.raises(ValueError, match="do not broadcast"):
        sinpe.add_pe(x, positions=np.zeros((3, 10)))
    with pytest.raises(ValueError, match="exclude each other"):
        sinpe.add_pe(x, positions=p, offset=2)


def test_builtin_positions_match_builtin_table(kernel):
    p = np.arange(1000)[::-1]
    assert_bits_equal(sinpe.positional_encoding(d_model=48, positions=p, backend="builtin"),
                      sinpe.positional_encoding(1000, 48, backend="builtin")[p], "builtin positions")
