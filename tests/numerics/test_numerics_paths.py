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


@pytest.mark.parametrize("head_dim", [2, 6, 34, 66, 130])
def test_preset_angles_same_bits_on_every_path(head_dim):
    """A preset's float32 angles (position x frequency, one product per value) are the code
    path's vector products: every path gives the scalar path's bits, tails included (head
    dims whose angle counts are not multiples of any vector width)."""
    from sinpe.presets import hf_rope
    cfg = {"model_type": "llama", "hidden_size": head_dim * 3, "num_attention_heads": 3,
           "max_position_embeddings": 1 << 20, "rope_theta": 500000.0}
    pos = np.random.default_rng(head_dim).integers(0, 1 << 20, (2, 37))
    tables = {}
    old = sinpe.get_kernel()
    try:
        for k in sinpe.kernels():
            sinpe.set_kernel(k)
            tables[k] = hf_rope(cfg, pos, backend="builtin")
    finally:
        sinpe.set_kernel(old)
    for k, (c, s) in tables.items():
        assert_bits_equal(c, tables["scalar"][0], f"cos, kernel {k} vs scalar")
        assert_bits_equal(s, tables["scalar"][1], f"sin, kernel {k} vs scalar")


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


def _half_values(rng, shape, dtype):
    """Random float16/bfloat16 bit patterns of every class: normals of all exponents,
    subnormals, zeros, infinities and NaNs with payloads (quiet and signalling)."""
    import ml_dtypes
    bits = rng.integers(0, 1 << 16, shape, dtype=np.uint32).astype(np.uint16)
    return bits.view(np.float16 if dtype == "float16" else ml_dtypes.bfloat16)


@pytest.mark.needs_torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("head_dim", [2, 6, 16, 32, 34, 40, 64, 66, 130, 256])
def test_rope_tables_of_xs_type_read_as_they_are(dtype, head_dim):
    """cos/sin tables of q's own half type are read by the code path as they are (no copy,
    no second rounding: paths/path.h rope_half's tkind); every path gives the bits of the
    same tables widened to float32 first (then rounded to the type, the identity), tails
    included, for every class of value in q and in the tables."""
    import torch
    import sinpe.torch as st
    rng = np.random.default_rng(head_dim)
    tdt = getattr(torch, dtype)

    def tensor(shape):
        a = _half_values(rng, shape, dtype)
        return torch.from_numpy(a.view(np.int16)).view(tdt)
    q, k = tensor((2, 3, 40, head_dim)), tensor((2, 1, 40, head_dim))
    cos, sin = tensor((2, 40, head_dim)), tensor((2, 40, head_dim))
    old, old_backend = sinpe.get_kernel(), sinpe.get_backend()
    got = {}
    try:
        # the built-in backend runs on the asked path (the others store through the best
        # path whatever the kernel: the loop would compare one path with itself)
        sinpe.set_backend("builtin")
        for kern in sinpe.kernels():
            sinpe.set_kernel(kern)
            got[kern] = st.apply_rotary_pos_emb(q, k, cos, sin)
            # the same rotation with the tables widened to float32 first (sinpe.apply_rope
            # always widens them; the path then rounds them to the type: the identity)
            wide = (sinpe.apply_rope(q.clone(), cos=cos, sin=sin),
                    sinpe.apply_rope(k.clone(), cos=cos, sin=sin))
            for g, w in zip(got[kern], wide):
                assert g.dtype == w.dtype == tdt
                assert torch.equal(g.view(torch.int16), w.view(torch.int16)), kern
    finally:
        sinpe.set_kernel(old)
        sinpe.set_backend(old_backend)
    for kern, pair in got.items():
        for g, w in zip(pair, got["scalar"]):
            assert torch.equal(g.view(torch.int16), w.view(torch.int16)), f"{kern} vs scalar"
