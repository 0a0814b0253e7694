"""Bit-for-bit parity with the reference torch module, on every backend that gives torch's
bits here (x86-64: torch's own oneMKL and the mkl wheel)."""
import numpy as np
import pytest
import torch

import sinpe
from conftest import D_MODELS, MAX_LENS, TORCH_BITS, assert_bits_equal, reference_table
from reference import SinusoidalPositionalEncoding

BASES = [10000.0, 10.0, 2.0, 1.0001, 500000.0, 1e6, 12345.678]


def test_torch_bits_backends_present_on_x86_64():
    import platform
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert sinpe.backends()["mkl"] and sinpe.backends()["torch"], sinpe.numerics()
        assert sinpe.get_backend() == "torch"  # torch is imported (conftest): its own kernels
        n = sinpe.numerics()
        assert "2024.2" in n["mkl"]["version"] and n["mkl"]["threading_layer"] == 1  # sequential
        assert n["torch"]["loaded"] and "2024.2" in n["torch"]["mkl_version"]
        assert n["torch"]["version"] == torch.__version__ and n["reproduces"].startswith("torch 2.")


@pytest.mark.parametrize("d_model", D_MODELS)
def test_table_grid(d_model, torch_threads, parity_backend, kernel):
    for max_len in MAX_LENS:
        want = reference_table(d_model, max_len)
        got = sinpe.positional_encoding(max_len, d_model, backend=parity_backend)
        assert got.flags.c_contiguous and got.dtype == np.float32
        assert_bits_equal(got, want, f"table({max_len}, {d_model})")


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("d_model,max_len", [(2, 17), (64, 5000), (510, 100), (1024, 2000), (6, 20000)])
def test_table_bases(base, d_model, max_len, torch_threads, parity_backend):
    want = reference_table(d_model, max_len, base)
    got = sinpe.positional_encoding(max_len, d_model, base, backend=parity_backend)
    assert_bits_equal(got, want, f"table({max_len}, {d_model}, base={base})")


def test_positions_past_65536(torch_threads, parity_backend):
    want = reference_table(64, 70000, 10000.0)
    assert_bits_equal(sinpe.positional_encoding(70000, 64, backend=parity_backend), want, "70000x64")


def _ref_module(d, max_len):
    m = SinusoidalPositionalEncoding(d, max_len)
    m.eval()
    return m


@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("offset", [0, 65000])
def test_add_pe_3d(batch, offset, torch_threads, parity_backend, kernel):
    L, d = 300, 512
    m = _ref_module(d, offset + L)
    x = torch.randn(batch, L, d, generator=torch.Generator().manual_seed(batch + offset))
    if offset == 0:
        with torch.no_grad():
            want = m(x).numpy()
    else:
        want = (x + m.pe[:, offset:offset + L]).numpy()
    xn = x.numpy().copy()
    out = sinpe.add_pe(xn, offset=offset, backend=parity_backend)
    assert out is xn
    assert_bits_equal(xn, want, f"add_pe batch={batch} offset={offset}")


@pytest.mark.parametrize("offset", [0, 70000])
def test_add_pe_2d(offset, torch_threads, parity_backend):
    L, d = 123, 100
    m = _ref_module(d, offset + L)
    x = torch.randn(L, d, generator=torch.Generator().manual_seed(3))
    want = (x + m.pe[0, offset:offset + L]).numpy()
    xn = x.numpy().copy()
    sinpe.add_pe(xn, offset=offset, backend=parity_backend)
    assert_bits_equal(xn, want, "add_pe 2-D")


def test_add_pe_4d_and_base(parity_backend):
    L, d, base = 50, 64, 500000.0
    m = SinusoidalPositionalEncoding(d, L, base=base)
    x = torch.randn(2, 3, L, d, generator=torch.Generator().manual_seed(4))
    want = (x + m.pe[0]).numpy()
    xn = x.numpy().copy()
    sinpe.add_pe(xn, base, backend=parity_backend)
    assert_bits_equal(xn, want, "add_pe 4-D")


def test_add_pe_strided_views(parity_backend):
    L, d, B = 40, 32, 3
    table = reference_table(d, 2 * L)
    rng = np.random.default_rng(5)
    # every other row: x[:, ::2] of a (B, 2L, d) array
    big = rng.standard_normal((B, 2 * L, d)).astype(np.float32)
    view = big[:, ::2]
    want_view = view + table[:L]
    untouched = big[:, 1::2].copy()
    sinpe.add_pe(view, backend=parity_backend)
    assert_bits_equal(view, want_view, "row-strided view")
    assert_bits_equal(big[:, 1::2], untouched, "rows between the view's rows")
    # sequence-first storage (L, B, d) seen as (B, L, d)
    seq_first = rng.standard_normal((L, B, d)).astype(np.float32)
    x = seq_first.transpose(1, 0, 2)
    want = x + table[:L]
    sinpe.add_pe(x, backend=parity_backend)
    assert_bits_equal(x, want, "transposed batch/sequence")
    # reversed rows
    r = rng.standard_normal((L, d)).astype(np.float32)
    rv = r[::-1]
    want = rv + table[:L]
    sinpe.add_pe(rv, backend=parity_backend)
    assert_bits_equal(rv, want, "reversed rows")


def test_out_numpy_and_memoryview(parity_backend):
    L, d = 100, 64
    want = reference_table(d, L)
    out = np.full((L, d), np.nan, np.float32)
    assert sinpe.positional_encoding(L, d, out=out, backend=parity_backend) is out
    assert_bits_equal(out, want, "out ndarray")
    out3 = np.full((1, L, d), np.nan, np.float32)
    sinpe.positional_encoding(L, d, out=out3, backend=parity_backend)
    assert_bits_equal(out3[0], want, "out (1, L, d)")
    mv = memoryview(np.zeros((L, d), np.float32))
    assert sinpe.positional_encoding(L, d, out=mv, backend=parity_backend) is mv
    assert_bits_equal(np.asarray(mv), want, "out memoryview")


def test_out_torch_buffer(torch_threads, parity_backend):
    L, d = 5000, 512
    fresh = SinusoidalPositionalEncoding(d, L)
    m = SinusoidalPositionalEncoding(d, L)
    with torch.no_grad():
        m.pe.fill_(7.0)
    sinpe.positional_encoding(L, d, out=m.pe.numpy()[0], backend=parity_backend)
    assert torch.equal(m.pe.view(torch.int32), fresh.pe.view(torch.int32))
    with torch.no_grad():
        m.pe.zero_()
    sinpe.positional_encoding(L, d, out=m.pe.numpy(), backend=parity_backend)  # (1, L, d)
    assert torch.equal(m.pe.view(torch.int32), fresh.pe.view(torch.int32))
    # copy_ from a fresh table, then the module's forward is unchanged
    m.pe.copy_(torch.from_numpy(sinpe.positional_encoding(L, d, backend=parity_backend))[None])
    m.eval(); fresh.eval()
    x = torch.randn(2, 77, d, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        assert torch.equal(m(x).view(torch.int32), fresh(x).view(torch.int32))


def test_mkl_elementwise_matches_torch(torch_threads, parity_backend):
    rng = np.random.default_rng(11)
    a = rng.uniform(0, 1e5, 300_000).astype(np.float32)
    e = rng.uniform(-20, 0, 300_000).astype(np.float32)
    t = torch.from_numpy(a)
    assert_bits_equal(sinpe.elementwise("sin", a, backend=TORCH_BITS), torch.sin(t).numpy(), "sin")
    assert_bits_equal(sinpe.elementwise("cos", a, backend=TORCH_BITS), torch.cos(t).numpy(), "cos")
    assert_bits_equal(sinpe.elementwise("exp", e, backend=TORCH_BITS), torch.exp(torch.from_numpy(e)).numpy(), "exp")
