"""sinpe.torch.SinusoidalPositionalEncoding is a drop-in for the reference module: buffers,
state_dict, forward, dtype conversions, jit.script and torch.compile, under other default
dtypes and on the meta device."""
import subprocess
import sys
import os

import pytest
import torch

from reference import SinusoidalPositionalEncoding as Ref


def _mod(*a, **k):
    from sinpe.torch import SinusoidalPositionalEncoding
    return SinusoidalPositionalEncoding(*a, **k)


def _eq(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def test_buffer_and_state_dict_both_ways(parity_backend):
    ref, m = Ref(512, 5000), _mod(512, 5000)
    assert list(dict(m.named_buffers())) == ["pe"] and m.pe.shape == (1, 5000, 512)
    assert _eq(m.pe, ref.pe)
    assert list(m.state_dict()) == list(ref.state_dict()) == ["pe"]
    ref2, m2 = Ref(512, 5000), _mod(512, 5000)
    with torch.no_grad():
        ref2.pe.zero_(); m2.pe.zero_()
    ref2.load_state_dict(m.state_dict()); m2.load_state_dict(ref.state_dict())
    assert _eq(ref2.pe, ref.pe) and _eq(m2.pe, ref.pe)


def test_forward_eval_and_train_same_seed(parity_backend):
    ref, m = Ref(256, 1000, dropout=0.3), _mod(256, 1000, dropout=0.3)
    x = torch.randn(4, 77, 256, generator=torch.Generator().manual_seed(0))
    ref.eval(); m.eval()
    assert _eq(m(x), ref(x))
    ref.train(); m.train()
    torch.manual_seed(123); a = ref(x)
    torch.manual_seed(123); b = m(x)
    assert _eq(a, b)
    assert not _eq(a, ref.eval()(x))  # dropout really ran


def test_dtype_conversions(parity_backend):
    ref, m = Ref(128, 300), _mod(128, 300)
    assert _eq(m.half().pe, ref.half().pe)
    ref, m = Ref(128, 300), _mod(128, 300)
    assert _eq(m.to(torch.bfloat16).pe, ref.to(torch.bfloat16).pe)
    ref, m = Ref(128, 300), _mod(128, 300)
    assert _eq(m.double().pe, ref.double().pe)
    x = torch.randn(2, 50, 128).half()
    assert _eq(m.half().eval()(x), Ref(128, 300).half().eval()(x))


def test_jit_script(parity_backend):
    m = _mod(64, 100).eval()
    s = torch.jit.script(m)
    x = torch.randn(3, 20, 64)
    assert _eq(s(x), Ref(64, 100).eval()(x))


def test_torch_compile(parity_backend):
    m = _mod(64, 100).eval()
    c = torch.compile(m, fullgraph=True)  # plain torch ops: no graph break, same bits
    x = torch.randn(3, 20, 64)
    assert _eq(c(x), Ref(64, 100).eval()(x))


def test_base_argument(parity_backend):
    assert _eq(_mod(32, 50, base=500000.0).pe, Ref(32, 50, base=500000.0).pe)


def test_sinpe_does_not_import_torch():
    r = subprocess.run([sys.executable, "-c", "import sys, sinpe; sinpe.positional_encoding(4, 8); "
                        "print('torch' in sys.modules)"], capture_output=True, text=True,
                       cwd=os.path.dirname(__file__), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
    r = subprocess.run([sys.executable, "-c", "import sinpe; print(sinpe.torch.__name__)"],
                       capture_output=True, text=True, cwd=os.path.dirname(__file__), timeout=120)
    assert r.stdout.strip() == "sinpe.torch", r.stderr


# ---- under other default dtypes, on the meta device, resized -------------------------------

@pytest.mark.needs_torch
@pytest.mark.parametrize("default", ["float64", "float16", "bfloat16"])
def test_torch_module_follows_default_dtype(default, parity_backend):
    from reference import SinusoidalPositionalEncoding as Ref
    default = getattr(torch, default)
    old = torch.get_default_dtype()
    torch.set_default_dtype(default)
    try:
        ref, m = Ref(64, 50), _mod(64, 50)
    finally:
        torch.set_default_dtype(old)
    assert m.pe.dtype == ref.pe.dtype == default
    assert torch.equal(m.pe.view(torch.uint8), ref.pe.view(torch.uint8))
    assert list(m.state_dict()) == ["pe"]
    x = torch.randn(2, 30, 64)
    ref.eval(), m.eval()
    a, b = ref(x), m(x)
    assert a.dtype == b.dtype and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


@pytest.mark.needs_torch
def test_torch_module_meta_and_resize():
    from reference import SinusoidalPositionalEncoding as Ref
    with torch.device("meta"):
        ref, m = Ref(32, 10), _mod(32, 10)
    assert m.pe.device.type == ref.pe.device.type == "meta" and m.pe.shape == ref.pe.shape
    m = _mod(32, 10)
    m.pe.resize_(1, 20, 32)  # the storage is torch's own
    assert m.pe.shape == (1, 20, 32)
