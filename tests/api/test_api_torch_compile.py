"""sinpe.torch's entry points as torch custom operators (docs/torch_compile.md): each rotation
form, add_pe and hf_rope is one node under torch.compile(fullgraph=True), with no graph break,
and the compiled call gives the eager call's bits (graphs where sinpe's operators are the
whole computation, under inductor); autograd through the forms gives torch's eager formula's
gradients bit for bit; registration survives a second import, and a torch without custom
operators gets the plain functions.  Tensors out: to_torch and preset.  Compiles are few and
small (each costs seconds)."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import sinpe
import sinpe.torch as st
from sinpe._backends.policy import torch_kernels

pytestmark = pytest.mark.needs_torch


def _eq(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def _inputs(dtype, d=16, heads=4, seq=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, heads, seq, d, generator=g).to(dtype)
    k = torch.randn(2, 2, seq, d, generator=g).to(dtype)
    f = torch.randn(2, seq, d // 2, generator=g) * 30
    cos = torch.cat([f.cos(), f.cos()], -1).to(dtype)
    sin = torch.cat([f.sin(), f.sin()], -1).to(dtype)
    return q, k, cos, sin


PAIR_FORMS = ["apply_rotary_pos_emb", "apply_rotary_pos_emb_interleave",
              "apply_rotary_pos_emb_glm", "apply_rotary_pos_emb_cohere",
              "apply_rotary_pos_emb_olmo", "apply_rotary_pos_emb_float32",
              "apply_rotary_pos_emb_glm_float32"]


def test_operators_registered():
    assert st.OPERATORS
    for name in PAIR_FORMS + ["apply_rotary_pos_emb_half", "apply_rotary_pos_emb_single",
                              "add_pe", "hf_rope"]:
        assert hasattr(torch.ops.sinpe, name), name
    assert st.apply_rotary_pos_emb._sinpe_op is torch.ops.sinpe.apply_rotary_pos_emb.default \
        or st.apply_rotary_pos_emb._sinpe_op.__class__.__name__ == "CustomOpDef"


def test_opcheck():
    """torch.library.opcheck: schema, fake kernel, autograd registration, AOT dispatch with
    dynamic shapes, for a rotation (with grads), add_pe (mutating) and hf_rope."""
    from sinpe import _torch_ops
    q, k, cos, sin = _inputs(torch.float32)
    ops = torch.ops.sinpe
    torch.library.opcheck(ops.apply_rotary_pos_emb_olmo.default,
                          (q.requires_grad_(), k, cos, sin, 1))
    torch.library.opcheck(ops.add_pe.default, (torch.randn(3, 8), 10000.0, 2, None, None, None))
    cfg = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 128,
           "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
    _torch_ops._CONFIGS[id(cfg)] = cfg
    torch.library.opcheck(ops.hf_rope.default,
                          (torch.arange(5)[None], None, id(cfg), torch.float32, None, None))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", PAIR_FORMS)
def test_operator_equals_eager_form(name, dtype):
    """The public function (through the operator) against the eager form it wraps."""
    q, k, cos, sin = _inputs(dtype)
    q = q.transpose(1, 2).contiguous().transpose(1, 2)  # transformers' layout: kept
    fn = getattr(st, name)
    got, want = fn._sinpe_op(q, k, cos, sin, 1), fn._sinpe_eager(q, k, cos, sin)
    assert _eq(got[0], want[0]) and _eq(got[1], want[1])
    assert got[0].stride() == torch.empty_like(q).stride()
    pub = fn(q, k, cos, sin)  # eager, no autograd: the eager form itself
    assert _eq(pub[0], want[0]) and _eq(pub[1], want[1])
    x, c, s = q[..., :8], cos[..., :4], sin[..., :4]
    half = st.apply_rotary_pos_emb_half
    assert _eq(half._sinpe_op(x, x, c, s, 1)[0], half._sinpe_eager(x, x, c, s)[0])
    single = st.apply_rotary_pos_emb_single
    assert _eq(single._sinpe_op(q, cos, sin, 1), single._sinpe_eager(q, cos, sin))


def test_compiled_operators_bits_and_no_break():
    """One graph that is only sinpe's operators (add_pe in place, three rotations), under
    inductor with fullgraph=True: the same bits as the eager calls, no graph break."""
    q, k, cos, sin = _inputs(torch.bfloat16)
    x = torch.randn(2, 8, 16).to(torch.bfloat16)

    def f(x, q, k, cos, sin):
        st.add_pe(x, offset=3)
        a = st.apply_rotary_pos_emb(q, k, cos, sin)
        b = st.apply_rotary_pos_emb_cohere(q, k, cos, sin)
        c = st.apply_rotary_pos_emb_olmo(q, k, cos.float(), sin.float())
        return a + b + c

    torch._dynamo.reset()
    explained = torch._dynamo.explain(f)(x.clone(), q, k, cos, sin)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    torch._dynamo.reset()
    xe, xc = x.clone(), x.clone()
    want = f(xe, q, k, cos, sin)
    got = torch.compile(f, fullgraph=True)(xc, q, k, cos, sin)
    assert _eq(xe, xc)
    assert not _eq(xe, x)  # add_pe did write
    assert len(got) == len(want) == 6
    for g, w in zip(got, want):
        assert _eq(g, w)
    y = x.clone()
    sinpe.add_pe(y, offset=3, backend=torch_kernels())  # the operator's default backend
    assert _eq(y, xe)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_autograd_equals_transformers_formula(dtype):
    """Gradients through the operator equal eager autograd through transformers' own formula
    (x * cos + rotate_half(x) * sin), bit for bit; the backward is the inverse rotation."""
    q, k, cos, sin = _inputs(dtype)
    w = torch.randn(q.shape, generator=torch.Generator().manual_seed(5)).to(dtype)

    def hf(q, k, cos, sin):
        def rot(x):
            return torch.cat((-x[..., 8:], x[..., :8]), dim=-1)
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        return q * c + rot(q) * s, k * c + rot(k) * s

    grads = []
    for fn in (st.apply_rotary_pos_emb, hf):
        qq, kk = q.clone().requires_grad_(), k.clone().requires_grad_()
        a, b = fn(qq, kk, cos, sin)
        ((a * w).sum() + (b * b).sum()).backward()
        grads.append((qq.grad, kk.grad))
    assert _eq(grads[0][0], grads[1][0]) and _eq(grads[0][1], grads[1][1])
    # the inverse rotation: rotating the gradient back by -sin
    qq = q.clone().requires_grad_()
    st.apply_rotary_pos_emb(qq, qq, cos, sin)[0].backward(w)
    assert _eq(qq.grad, st.apply_rotary_pos_emb(w, w, cos, -sin)[0])


@pytest.mark.parametrize("name", ["apply_rotary_pos_emb_interleave", "apply_rotary_pos_emb_glm",
                                  "apply_rotary_pos_emb"])
def test_gradcheck_float64(name):
    """Against finite differences in float64 (the standard form with GPT-NeoX's partial
    rotary: tables narrower than q, whose halves differ).  Cohere's form computes in float32
    whatever q's dtype, so finite differences in float64 do not apply to it."""
    q, k, cos, sin = _inputs(torch.float64, d=8, heads=2, seq=3)
    fn = getattr(st, name)
    if name == "apply_rotary_pos_emb":
        cos, sin = cos[..., :4], sin[..., :4]
    assert torch.autograd.gradcheck(lambda a, b: fn(a, b, cos, sin),
                                    (q.requires_grad_(), k.requires_grad_()))


def test_compiled_backward_bits():
    q, k, cos, sin = _inputs(torch.float32)

    def f(q, k):
        a, b = st.apply_rotary_pos_emb(q, k, cos, sin)
        return (a * a).sum() + b.sum()

    torch._dynamo.reset()
    grads = []
    for fn in (f, torch.compile(f, fullgraph=True, backend="aot_eager")):
        qq, kk = q.clone().requires_grad_(), k.clone().requires_grad_()
        fn(qq, kk).backward()
        grads.append((qq.grad, kk.grad))
    assert _eq(grads[0][0], grads[1][0]) and _eq(grads[0][1], grads[1][1])


def test_hf_rope_compiles():
    cfg = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 128,
           "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
    pos = torch.arange(10)[None].repeat(2, 1)

    def f(pos):
        return st.hf_rope(cfg, pos, dtype=torch.bfloat16)

    torch._dynamo.reset()
    want = f(pos)
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(pos)
    assert want[0].dtype == torch.bfloat16 and want[0].shape == (2, 10, 16)
    assert _eq(got[0], want[0]) and _eq(got[1], want[1])


def test_second_import_and_torch_without_custom_op():
    """Importing sinpe.torch again (its modules dropped from sys.modules) reuses the
    registered operators; a torch without torch.library.custom_op gets plain functions."""
    code = r"""
import sys, torch
import sinpe.torch as st
q = torch.randn(1, 2, 4, 8); c = torch.randn(1, 4, 8)
a = st.apply_rotary_pos_emb(q, q, c, c)[0]
for m in [m for m in sys.modules if m.startswith('sinpe')]:
    del sys.modules[m]
import sinpe.torch as st2
assert st2 is not st and st2.OPERATORS
b = st2.apply_rotary_pos_emb(q, q, c, c)[0]
assert torch.equal(a.view(torch.int32), b.view(torch.int32))
for m in [m for m in sys.modules if m.startswith('sinpe')]:
    del sys.modules[m]
del torch.library.custom_op
import sinpe.torch as st3
assert not st3.OPERATORS and not hasattr(st3.apply_rotary_pos_emb, '_sinpe_op')
d = st3.apply_rotary_pos_emb(q, q, c, c)[0]
assert torch.equal(a.view(torch.int32), d.view(torch.int32))
x = torch.zeros(3, 8); st3.add_pe(x); assert x.abs().sum() > 0
print('ok')
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=os.path.dirname(__file__), timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


# ---- tensors out -----------------------------------------------------------------------------

def test_to_torch_bfloat16_shares_memory():
    a = sinpe.positional_encoding(6, 8, dtype="bfloat16")
    t = st.to_torch(a)
    assert t.dtype == torch.bfloat16 and t.shape == (6, 8)
    assert np.array_equal(t.view(torch.int16).numpy(), a.view(np.int16))
    assert t.data_ptr() == a.ctypes.data or not a.flags.writeable
    pair = st.to_torch((a, a.astype(np.float32)))
    assert isinstance(pair, tuple) and pair[1].dtype == torch.float32
    with pytest.raises(TypeError, match="a must be"):
        st.to_torch([1, 2])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_preset_tensors_out(dtype):
    from sinpe import presets
    name = str(dtype).replace("torch.", "")
    want = presets.whisper(12, 16, dtype=name)
    got = st.preset("whisper", 12, 16, dtype=dtype)
    assert isinstance(got, torch.Tensor) and got.dtype == dtype and got.shape == (12, 16)
    assert np.array_equal(got.view(torch.int16 if dtype != torch.float32 else torch.int32)
                          .numpy(), want.view(np.int16 if dtype != torch.float32 else np.int32))
    out = torch.empty(12, 16, dtype=dtype)
    assert st.preset("whisper", 12, 16, dtype=dtype, out=out) is out
    assert _eq(out, got)
    cos, sin = st.preset("llama_rope", 8, torch.arange(5)[None])
    assert isinstance(cos, torch.Tensor) and cos.shape[-2:] == (5, 8)
    with pytest.raises(ValueError, match="name must be"):
        st.preset("nope", 1)


def test_hf_rope_operator_refuses_an_unknown_config_id():
    """A direct call of the operator with an id that names no live object is refused, never
    read from that address (it crashed the process)."""
    obj = object()
    dead = id(obj)
    del obj
    for key in (12345, dead, 0, -1):
        with pytest.raises(ValueError, match="config id"):
            torch.ops.sinpe.hf_rope(torch.arange(4)[None], None, key, None, None, None)
