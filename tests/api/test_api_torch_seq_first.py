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

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = torch.nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:x.size(0)]
        return self.dropout(x)


def _bits(t):
    return t.detach().view(torch.int32)


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
