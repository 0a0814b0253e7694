"""SinusoidalPositionalEncoding(batch_first=False): the PyTorch nn.Transformer tutorial's
seq-first module (buffer (max_len, 1, d_model), ``x + pe[:x.size(0)]``), its state_dict
both ways, bit for bit; apply_rope(layout='pairs', cos=, sin=) with rotary-embedding-torch's
own tables."""
import math

import pytest

pytestmark = pytest.mark.needs_torch

import torch  # noqa: E402  (a TORCH_MODULES module: not collected without torch)


class Tutorial(torch.nn.Module):
    """The tutorial's PositionalEncoding, as published (seq-first)."""

    def __init__(self, d_model, dropout=0.1, max_len=5000, base=10000.0):
        super().__init__()  # (base in place of the literal 10000.0: the only change)
        self.dropout = torch.nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(base) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:x.size(0)]
        return self.dropout(x)


def _bits(t):
    t = t.detach()
    return t.view({8: torch.int64, 4: torch.int32, 2: torch.int16}[t.element_size()])


def _both(make_ref, make_ours):
    """Each made under the same default dtype: the two modules, or the two exceptions."""
    got = []
    for make in (make_ref, make_ours):
        try:
            got.append(make())
        except Exception as e:  # noqa: BLE001 (the exception itself is compared)
            got.append(e)
    return got


@pytest.fixture
def default_dtype(request):
    old = torch.get_default_dtype()
    torch.set_default_dtype(request.param)
    yield request.param
    torch.set_default_dtype(old)


def test_seq_first_state_dict_and_forward():
    from sinpe.torch import SinusoidalPositionalEncoding
    ref = Tutorial(64, dropout=0.0, max_len=300).eval()
    ours = SinusoidalPositionalEncoding(64, max_len=300, dropout=0.0, batch_first=False).eval()
    assert ours.pe.shape == ref.pe.shape == (300, 1, 64)
    assert ours.pe.is_contiguous()
    assert torch.equal(_bits(ours.pe), _bits(ref.pe))
    ours.load_state_dict(ref.state_dict())  # both ways, strict
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(37, 3, 64)  # (seq, batch, d_model): positions along axis 0
    assert torch.equal(_bits(ours(x)), _bits(ref(x)))
    batch_first = SinusoidalPositionalEncoding(64, max_len=300, dropout=0.0)
    assert batch_first.pe.shape == (1, 300, 64)
    with pytest.raises(RuntimeError):  # a batch-first buffer does not load a seq-first one
        batch_first.load_state_dict(ref.state_dict())


@pytest.mark.parametrize("default_dtype", [torch.float32, torch.float64, torch.float16,
                                           torch.bfloat16], indirect=True, ids=str)
@pytest.mark.parametrize("d,L,base", [(64, 300, 10000.0), (512, 5000, 10000.0),
                                      (100, 77, 500000.0), (6, 40, 2.0), (2, 1, 10.0),
                                      (10, 0, 10000.0), (1, 9, 10000.0), (1, 0, 10000.0)])
def test_seq_first_under_every_default_dtype(default_dtype, d, L, base):
    """Under a default dtype other than float32 the tutorial's arithmetic (int64 aranges times
    a Python float, exp, sin, cos) runs in that dtype: torch's float64 / float16 / bfloat16
    kernels, whose bits sinpe's core does not compute; the buffer is torch's ops' then, and
    float32's is the core's.  Buffer, state_dict and forward, bit for bit (issue 35: float64
    differed in nearly every element)."""
    from sinpe.torch import SinusoidalPositionalEncoding
    ref, ours = _both(lambda: Tutorial(d, 0.0, L, base),
                      lambda: SinusoidalPositionalEncoding(d, L, 0.0, base, batch_first=False))
    assert ours.pe.dtype == ref.pe.dtype == default_dtype
    assert ours.pe.shape == ref.pe.shape == (L, 1, d) and ours.pe.is_contiguous()
    assert torch.equal(_bits(ours.pe), _bits(ref.pe)), int((_bits(ours.pe) != _bits(ref.pe)).sum())
    ours.load_state_dict(ref.state_dict())
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(min(L, 37), 3, d)
    assert torch.equal(_bits(ours.eval()(x)), _bits(ref.eval()(x)))
    with torch.device("meta"):  # no data there, in any dtype
        m = SinusoidalPositionalEncoding(d, L, 0.0, base, batch_first=False)
    assert m.pe.device.type == "meta" and m.pe.shape == (L, 1, d) and m.pe.dtype == default_dtype


@pytest.mark.parametrize("default_dtype", [torch.float32, torch.float64], indirect=True, ids=str)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("d,L", [(0, 5), (0, 0), (3, 4), (3, 0), (7, 1), (1, 5), (1, 1), (1, 0),
                                 (-2, 3), (4, -1)])
def test_widths_as_the_references_take_them(default_dtype, batch_first, d, L):
    """d_model 0: both references divide by it (ZeroDivisionError); an odd d_model >= 3: their
    cosine columns cannot take ceil(d/2) angles (RuntimeError, at any max_len); d_model 1: a
    sine column alone, computed; negative sizes: torch's RuntimeError.  sinpe raised
    ValueError for odd widths and built empty d_model 0 tables before issue 35."""
    from reference import SinusoidalPositionalEncoding as Reference
    from sinpe.torch import SinusoidalPositionalEncoding
    if batch_first:
        ref, ours = _both(lambda: Reference(d, L, 0.0), lambda: SinusoidalPositionalEncoding(d, L, 0.0))
    else:
        ref, ours = _both(lambda: Tutorial(d, 0.0, L),
                          lambda: SinusoidalPositionalEncoding(d, L, 0.0, batch_first=False))
    if isinstance(ref, Exception):
        assert type(ours) is type(ref), (ref, ours)
        return
    assert not isinstance(ours, Exception), ours
    assert ours.pe.shape == ref.pe.shape and torch.equal(_bits(ours.pe), _bits(ref.pe))


def test_seq_first_scripts_and_rejects():
    from sinpe.torch import SinusoidalPositionalEncoding
    m = SinusoidalPositionalEncoding(16, max_len=20, dropout=0.0, batch_first=False).eval()
    s = torch.jit.script(m)
    x = torch.randn(5, 2, 16)
    assert torch.equal(_bits(s(x)), _bits(m(x)))
    with pytest.raises(TypeError, match="batch_first"):
        SinusoidalPositionalEncoding(16, batch_first=1)


@pytest.mark.oracle_packages
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rot", [16, 8])
def test_apply_rope_pairs_given_tables(dtype, rot):
    import sinpe
    from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb
    freqs = RotaryEmbedding(rot)(torch.arange(12).float())  # (seq, rot) repeated pairs
    x = torch.randn(2, 3, 12, 16).to(dtype)
    want = apply_rotary_emb(freqs, x)
    got = sinpe.apply_rope(x.clone(), layout="pairs", cos=freqs.cos(), sin=freqs.sin())
    assert got.dtype == dtype
    assert torch.equal(got.view(torch.int16 if dtype != torch.float32 else torch.int32),
                       want.view(torch.int16 if dtype != torch.float32 else torch.int32))


@pytest.mark.parametrize("batch_first", [True, False])
def test_a_base_below_zero_is_refused_at_any_size_and_device(batch_first):
    """The references take math.log(base) first: a base <= 0 raises its ValueError even for an
    empty table, an odd width or a module on meta (sinpe built a module there)."""
    from sinpe.torch import SinusoidalPositionalEncoding
    for kw in (dict(d_model=64, max_len=0, base=-1.0), dict(d_model=65, max_len=4, base=0.0)):
        with pytest.raises(ValueError, match="math domain error"):
            SinusoidalPositionalEncoding(**kw, batch_first=batch_first)
    with torch.device("meta"), pytest.raises(ValueError, match="math domain error"):
        SinusoidalPositionalEncoding(64, 50, base=-1.0, batch_first=batch_first)
