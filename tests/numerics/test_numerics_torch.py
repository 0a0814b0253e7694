"""Bit for bit against torch: parity with the reference torch module on every backend that
gives torch's bits here (x86-64: torch's own oneMKL and the mkl wheel; 64-bit Arm: the sleef
profile), float16/bfloat16/float64 tables and in-place adds, arbitrary and packed positions
against the reference formula in torch, and the rounding to the narrower dtypes (NaN bits
included) against torch's own conversions."""
import ml_dtypes
import numpy as np
import pytest
import torch

import sinpe
from conftest import (D_MODELS, MAX_LENS, TORCH_BITS, X86_64, assert_bits_equal, reference_table,
                      torch_formula)
from reference import SinusoidalPositionalEncoding
from sinpe._jobs import _round  # the rounding the tables use, private to sinpe

PE = sinpe.positional_encoding

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


# ---- dtypes and arbitrary positions ------------------------------------------------------

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


# ---- rounding to float16, bfloat16 and float64; NaN bits --------------------------------

@pytest.mark.needs_torch
def test_rounding_matches_torch_on_every_kind_of_value():
    rng = np.random.default_rng(5)
    u = np.concatenate([rng.integers(0, 2**32, 200_000, dtype=np.uint64),
                        np.arange(0x7f7fff00, 0x7f800200, dtype=np.uint64),       # to inf, NaN
                        np.arange(0x33000000 - 300, 0x33000000 + 300, dtype=np.uint64),  # f16 tiny
                        np.arange(0x477fe000, 0x47800100, dtype=np.uint64),        # f16 max
                        np.arange(0x387fff00, 0x38800100, dtype=np.uint64)]).astype(np.uint32)
    u = np.concatenate([u, u | 0x80000000])
    x = u.view(np.float32)
    t = torch.from_numpy(x)
    assert np.array_equal(_round(x, "float16").view(np.uint16),
                          t.half().view(torch.int16).numpy().view(np.uint16))
    assert np.array_equal(_round(x, "bfloat16").view(np.uint16),
                          t.bfloat16().view(torch.int16).numpy().view(np.uint16))
    assert np.array_equal(_round(x, "float64").view(np.uint64),
                          t.double().numpy().view(np.uint64))


@pytest.mark.needs_torch
def test_float16_add_nan_payloads():
    """Measured torch 2.13 rule, pinned: float16 x.add_(pe) keeps a NaN's payload (made
    quiet, as F16C does) in its vector loop, but its scalar tail (the last n % 8 elements
    of an inner loop, at every CPU capability) gives 0x7fff.  sinpe keeps the payload
    everywhere; NaN stays NaN either way (README, Numerics)."""
    h = np.full(9, 0x7d00, np.uint16)  # a signalling NaN with a payload
    t = torch.from_numpy(h.view(np.int16).copy()).view(torch.float16)
    t.add_(torch.from_numpy(PE(9, 2)[:, 0].copy()))
    torch_bits = t.view(torch.int16).numpy().view(np.uint16)
    x = h.view(np.float16).reshape(9, 1).repeat(2, axis=1)
    sinpe.add_pe(x)
    if X86_64:
        assert (torch_bits[:8] == 0x7f00).all() and torch_bits[8] == 0x7fff
        assert (x.view(np.uint16) == 0x7f00).all()
    else:  # torch on 64-bit Arm: 0x7fff for every NaN sum, and sinpe there too
        assert (torch_bits == 0x7fff).all()
        assert (x.view(np.uint16) == 0x7fff).all()


@pytest.mark.needs_torch
def test_float16_nan_positions_keep_payload():
    """Measured torch 2.13 rule, pinned (the fuzzer found it): `pos.float()` of float16
    positions keeps a NaN's sign and payload in its vector loop but gives 0x7fffffff in the
    scalar tail (here the 9th of 9 elements), so a reference table's NaN rows depend on where
    the NaN sits.  sinpe widens every NaN the same way (payload kept, made quiet); NaN stays
    NaN either way, and every non-NaN row equals torch's bits (README, Numerics)."""
    h = np.array([0x4000] * 4 + [0xfd01] + [0x3c00] * 3 + [0x7e00], np.uint16)  # 2, -NaN, 1, NaN
    pos = h.view(np.float16)
    wide = torch.from_numpy(h.view(np.int16).copy()).view(torch.float16).float()
    bits = wide.view(torch.int32).numpy().view(np.uint32)
    if X86_64:
        assert bits[4] == 0xffe02000 and bits[8] == 0x7fffffff  # vector lane, scalar tail
    got = PE(d_model=4, positions=pos, backend=TORCH_BITS)
    want = PE(d_model=4, positions=wide.numpy(), backend=TORCH_BITS)
    ok = ~np.isnan(pos)
    assert np.array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))
    assert np.isnan(got[~ok]).all()
    assert (got[4].view(np.uint32) == 0xffe02000).all() and (got[8].view(np.uint32) == 0x7fc00000).all()


@pytest.mark.needs_torch
def test_bfloat16_nan_bits_equal_torch():
    p = np.array([0.0, np.inf, -np.inf, np.nan, 5.0], np.float32)
    f32 = PE(d_model=8, positions=p, backend=TORCH_BITS)
    want = torch.from_numpy(f32).bfloat16().view(torch.int16).numpy().view(np.uint16)
    got = PE(d_model=8, positions=p, dtype="bfloat16", backend=TORCH_BITS).view(np.uint16)
    assert np.array_equal(got, want)
    assert (got[1:4] == (0xffff if X86_64 else 0x7fc0)).all()  # torch's NaN on each platform
    want16 = torch.from_numpy(f32).half().view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(PE(d_model=8, positions=p, dtype="float16", backend=TORCH_BITS).view(np.uint16),
                          want16)


@pytest.mark.needs_torch
def test_bfloat16_rotation_nan_in_torch_scalar_tail():
    """Measured torch 2.13 rule, pinned (a hostile probe found it): a bfloat16 rotation whose
    float32 result is NaN (one NaN operand) rounds it to 0xffff in torch's vector loops on
    x86-64 and to 0x7fc0 in their scalar tail (an inner loop shorter than the vector width:
    head_dim 2 or 8, the last 2 of 34).  sinpe gives 0xffff everywhere, the vector loops'
    rule (numerics()["differs"]); every other element has torch's bits."""
    import sinpe.torch as st

    def rotate_half(x):
        h = x.shape[-1] // 2
        return torch.cat((-x[..., h:], x[..., :h]), dim=-1)

    for D, tail in ((2, True), (8, True), (32, False), (34, True)):
        q = torch.ones(1, 1, 1, D, dtype=torch.bfloat16)
        cos = torch.ones(1, 1, D, dtype=torch.bfloat16)
        cos[..., -1] = float("nan")
        sin = torch.zeros(1, 1, D, dtype=torch.bfloat16)
        want = q * cos.unsqueeze(1) + rotate_half(q) * sin.unsqueeze(1)
        got = st.apply_rotary_pos_emb(q, q, cos, sin)[0]
        w = want.view(torch.int16).numpy().view(np.uint16).ravel()
        g = got.view(torch.int16).numpy().view(np.uint16).ravel()
        assert np.array_equal(g[:-1], w[:-1]), D
        if X86_64:
            assert g[-1] == 0xffff, D
            assert w[-1] == (0x7fc0 if tail else 0xffff), D
