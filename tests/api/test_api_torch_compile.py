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
from sinpe._torch.forms import FORMS

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
    op = FORMS["apply_rotary_pos_emb"].op
    assert op is torch.ops.sinpe.apply_rotary_pos_emb.default \
        or op.__class__.__name__ == "CustomOpDef"


def test_opcheck():
    """torch.library.opcheck: schema, fake kernel, autograd registration, AOT dispatch with
    dynamic shapes, for a rotation (with grads), add_pe (mutating) and hf_rope."""
    from sinpe._hf.config import config_text
    q, k, cos, sin = _inputs(torch.float32)
    ops = torch.ops.sinpe
    torch.library.opcheck(ops.apply_rotary_pos_emb_olmo.default,
                          (q.requires_grad_(), k, cos, sin, 1))
    torch.library.opcheck(ops.add_pe.default, (torch.randn(3, 8), 10000.0, 2, None, None, None))
    cfg = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 128,
           "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
    text = config_text(cfg)
    torch.library.opcheck(ops.hf_rope.default,
                          (torch.arange(5)[None], None, text, torch.float32, None, None, None))
    inv = 1.0 / 10000.0 ** (torch.arange(0, 16, 2).float() / 16)
    torch.library.opcheck(ops.hf_rope.default, (torch.arange(12).view(2, 6), inv, text,
                                                torch.bfloat16, None, None, 1.25))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", PAIR_FORMS)
def test_operator_equals_eager_form(name, dtype):
    """The public function (through the operator) against the eager form it wraps."""
    q, k, cos, sin = _inputs(dtype)
    q = q.transpose(1, 2).contiguous().transpose(1, 2)  # transformers' layout: kept
    fn = getattr(st, name)
    got, want = FORMS[name].op(q, k, cos, sin, 1), FORMS[name].kernel(q, k, cos, sin,
                                                                      unsqueeze_dim=1)
    assert _eq(got[0], want[0]) and _eq(got[1], want[1])
    assert got[0].stride() == torch.empty_like(q).stride()
    pub = fn(q, k, cos, sin)  # eager, no autograd: the eager form itself
    assert _eq(pub[0], want[0]) and _eq(pub[1], want[1])
    x, c, s = q[..., :8], cos[..., :4], sin[..., :4]
    half = FORMS["apply_rotary_pos_emb_half"]
    assert _eq(half.op(x, x, c, s, 1)[0], half.kernel(x, x, c, s, unsqueeze_dim=1)[0])
    single = FORMS["apply_rotary_pos_emb_single"]
    assert _eq(single.op(q, cos, sin, 1), single.kernel(q, cos, sin, unsqueeze_dim=1))


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
from sinpe._torch.forms import FORMS as F3
assert not st3.OPERATORS and all(f.op is None for f in F3.values())
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


def test_hf_rope_operator_takes_the_configs_text():
    """The operator's config is the config's text (no object id: nothing to look up, nothing
    kept alive); what is not such a text is refused, naming config."""
    from sinpe._hf.config import config_text
    cfg = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 128,
           "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
    pos = torch.arange(6)[None]
    got = torch.ops.sinpe.hf_rope(pos, None, config_text(cfg), None, None, None, None)
    want = st.hf_rope(cfg, pos)
    assert _eq(got[0], want[0]) and _eq(got[1], want[1])
    for bad in ("{not json", "[1, 2]"):
        with pytest.raises(ValueError, match="config is not a config's text"):
            torch.ops.sinpe.hf_rope(pos, None, bad, None, None, None, None)
    with pytest.raises(RuntimeError):  # the schema: a string, not an id
        torch.ops.sinpe.hf_rope(pos, None, id(cfg), None, None, None, None)
    assert not hasattr(sys.modules["sinpe._torch.hf_rope"], "_CONFIGS")


# ---- hf_rope and add_pe under torch.compile and torch.export, without object ids -----------------

def _counted(backend="aot_eager"):
    from torch._dynamo.testing import CompileCounterWithBackend
    return CompileCounterWithBackend(backend)


def test_hf_rope_compiles_a_config_built_per_call_and_sees_edits():
    """fullgraph=True with a config dict built inside the compiled function (its id is a fake
    under tracing); an object config and a dict config edited in place between compiled
    calls give the eager result each time (the values hf_rope reads are guarded: an edit
    compiles again); a module's state (inv_freq, attention_scaling) through the operator."""
    from transformers import LlamaConfig
    pos = torch.arange(10)[None].repeat(2, 1) + 5

    def per_call(pos):
        cfg = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 128,
               "rope_parameters": {"rope_type": "yarn", "rope_theta": 500.0, "factor": 4.0,
                                   "original_max_position_embeddings": 64}}
        return st.hf_rope(cfg, pos, dtype=torch.bfloat16)

    torch._dynamo.reset()
    want, got = per_call(pos), torch.compile(per_call, fullgraph=True, backend="aot_eager")(pos)
    assert _eq(got[0], want[0]) and _eq(got[1], want[1])

    def f(pos, cfg, inv=None, scaling=None):
        return st.hf_rope(cfg, pos, inv_freq=inv, attention_scaling=scaling)

    cnt = _counted()
    cf = torch.compile(f, fullgraph=True, backend=cnt)
    obj = LlamaConfig(hidden_size=64, num_attention_heads=4, max_position_embeddings=128)
    as_dict = obj.to_dict()
    edits = [lambda c: None, lambda c: c["rope_parameters"].update(rope_theta=77.0),
             lambda c: c.__setitem__("head_dim", 8)]
    for cfg, get in ((obj, lambda c: vars(c)), (as_dict, lambda c: c)):
        for edit in edits:
            edit(get(cfg))
            want, got = f(pos, cfg), cf(pos, cfg)
            assert _eq(got[0], want[0]) and _eq(got[1], want[1]), (type(cfg), edit)
    assert cnt.frame_count >= 2 * len(edits)  # each edit compiled again (no stale text)
    inv = 1.0 / 10000.0 ** (torch.arange(0, 16, 2).float() / 16)
    want, got = f(pos, as_dict, inv, 1.25), cf(pos, as_dict, inv, 1.25)
    assert _eq(got[0], want[0]) and _eq(got[1], want[1])


_QWEN = {"model_type": "qwen2_vl_text", "hidden_size": 64, "num_attention_heads": 4,
         "max_position_embeddings": 128,
         "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                             "mrope_section": [2, 3, 3]}}
_VISION = {"model_type": "qwen2_5_vl_vision", "hidden_size": 64, "num_attention_heads": 4,
           "rope_parameters": {"rope_type": "axial", "rope_theta": 10000.0}}
_GEMMA4_VISION = {"model_type": "gemma4_vision", "hidden_size": 64, "num_attention_heads": 4,
                  "rope_parameters": {"rope_type": "axial", "rope_theta": 100.0}}
_LLAMA = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 128,
          "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}


def _hw(S):
    return torch.stack([torch.arange(S) // 3, torch.arange(S) % 3], -1)


DYNAMIC = {
    "mrope (3, B, S)": (_QWEN, lambda S: torch.stack(
        [torch.arange(S)[None].repeat(2, 1) + 5 * i for i in range(3)])),
    "mrope (B, S)": (_QWEN, lambda S: torch.arange(S)[None].repeat(2, 1)),
    "axial (N, 2)": (_VISION, _hw),
    "axial (B, N, 2)": (_GEMMA4_VISION, lambda S: _hw(S)[None].repeat(2, 1, 1) + 1),
    "standard (B, S)": (_LLAMA, lambda S: torch.arange(S)[None].repeat(3, 1) * 7),
}


@pytest.mark.parametrize("case", list(DYNAMIC))
def test_hf_rope_dynamic_shapes(case):
    """torch.compile(dynamic=True): every size of position_ids symbolic (mrope's 3 rows too,
    which the fake kernel fixes at 3); the compiled tables are the eager ones, bit for bit,
    and a second and third sequence length run the same graph (no recompile)."""
    cfg, make = DYNAMIC[case]

    def f(pos):
        return st.hf_rope(cfg, pos, dtype=torch.bfloat16)

    torch._dynamo.reset()
    cnt = _counted()
    cf = torch.compile(f, fullgraph=True, dynamic=True, backend=cnt)
    compiled = []
    for S in (7, 11, 13):
        pos = make(S)
        want, got = f(pos), cf(pos)
        assert _eq(got[0], want[0]) and _eq(got[1], want[1]), (case, S)
        compiled.append(cnt.frame_count)
    # (the first call may trace twice: Dynamo restarts once it finds a config's float
    # specialised, which the text needs as a constant)
    assert compiled[0] >= 1 and compiled[1:] == compiled[:1] * 2, (case, compiled)


class _Rotary(torch.nn.Module):
    """A config dict, a module state (buffer and scaling), and a rotation: what a patched
    model's graph holds."""

    def __init__(self):
        super().__init__()
        inv = 1.0 / 10000.0 ** (torch.arange(0, 16, 2).float() / 16)
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, q, k, pos):
        cfg = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 128,
               "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                   "original_max_position_embeddings": 64}}
        cos, sin = st.hf_rope(cfg, pos, inv_freq=self.inv_freq, attention_scaling=1.25,
                              dtype=q.dtype)
        c2, _ = st.hf_rope(cfg, pos, dtype=q.dtype)
        q2, k2 = st.apply_rotary_pos_emb(q, k, cos, sin)
        return q2 + c2.unsqueeze(1), k2


@pytest.mark.parametrize("strict", [False, True])
def test_exported_program_loads_and_runs_in_a_fresh_process(strict, tmp_path):
    """torch.export (non-strict, torch's default, whose tracing runs the module's Python on
    fake tensors, and strict), torch.export.save, then torch.export.load in a fresh
    process that imports sinpe.torch (which registers the operators): the same bits as
    eager here.  The graph holds the config's text, not an id."""
    m = _Rotary()
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 4, 5, 16, generator=g), torch.randn(2, 2, 5, 16, generator=g)
    pos = torch.arange(5)[None].repeat(2, 1) + 3
    want = m(q, k, pos)
    ep = torch.export.export(m, (q, k, pos), strict=strict)
    hf = [n for n in ep.graph.nodes if n.target is torch.ops.sinpe.hf_rope.default]
    assert len(hf) == 2 and all(isinstance(n.args[2], str) for n in hf)
    got = ep.module()(q, k, pos)
    assert all(_eq(a, b) for a, b in zip(got, want))
    torch.export.save(ep, str(tmp_path / "ep.pt2"))
    torch.save((q, k, pos, want), str(tmp_path / "io.pt"))
    from conftest import run_python
    r = run_python(f"""
import torch
import sinpe.torch
q, k, pos, want = torch.load({str(tmp_path / 'io.pt')!r})
got = torch.export.load({str(tmp_path / 'ep.pt2')!r}).module()(q, k, pos)
same = [a.dtype == b.dtype and a.shape == b.shape
        and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))
        for a, b in zip(got, want)]
print(same)
""", timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "[True, True]", r.stderr[-3000:]


def test_meta_tensors_get_meta_results():
    """hf_rope on meta position_ids (or with a meta inv_freq) gives meta tables of the
    module's shape and dtype, and add_pe returns a meta x as it is: the fake kernels' logic,
    nothing handed to the core (a meta tensor has no data)."""
    cfg = dict(_LLAMA, rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0,
                                        "factor": 4.0, "original_max_position_embeddings": 64})
    c, s = st.hf_rope(cfg, torch.zeros(2, 5, dtype=torch.long, device="meta"),
                      dtype=torch.bfloat16)
    assert c.is_meta and s.is_meta and c.shape == (2, 5, 16) and c.dtype == torch.bfloat16
    inv = torch.empty(6, device="meta")
    c, s = st.hf_rope(cfg, torch.arange(5)[None], inv_freq=inv, attention_scaling=1.5)
    assert c.is_meta and c.shape == (1, 5, 12) and c.dtype == torch.float32
    c, s = st.hf_rope(_QWEN, torch.zeros(3, 2, 7, dtype=torch.long, device="meta"))
    assert c.is_meta and c.shape == (2, 7, 16)
    x = torch.empty(2, 3, 8, device="meta")
    assert st.add_pe(x) is x and x.is_meta


_ADD_PE_COMPILED = r"""
import sys, torch
import sinpe
{imports}
def f(x):
    return sinpe.add_pe(x.clone()) * 2
cf = torch.compile(f, fullgraph=True)
x = torch.randn(2, 64, 32, generator=torch.Generator().manual_seed(0)) * 0.01
def bits(t):
    return t.view(torch.int32)
got = cf(x)  # the first call of sinpe.add_pe on a tensor, inside the trace
assert ("sinpe.torch" in sys.modules) == {with_torch}, "sinpe.torch imported"
torch_bits = torch.equal(bits(got), bits(f(x)))
sinpe.set_backend("builtin")
got_b = cf(x)  # the default changed: compiled again, with the built-in backend
print(torch_bits, torch.equal(bits(got_b), bits(f(x))), torch.equal(bits(got_b), bits(got)))
"""


@pytest.mark.parametrize("with_torch", [False, True])
def test_sinpe_add_pe_on_a_tensor_compiles(with_torch):
    """sinpe.add_pe (the NumPy-level function) on a torch tensor inside
    torch.compile(fullgraph=True) (inductor), in a fresh process where sinpe.torch was never
    imported (the operator is registered during the trace) and in one where it was: the
    compiled result is the eager one, bit for bit, with the default backend and after
    sinpe.set_backend('builtin') (whose bits differ here)."""
    from conftest import run_python
    code = _ADD_PE_COMPILED.format(imports="import sinpe.torch" if with_torch else "",
                                   with_torch=with_torch)
    r = run_python(code, timeout=300)
    assert r.returncode == 0 and r.stdout.split()[-3:] == ["True", "True", "False"], \
        (r.stdout, r.stderr[-3000:])
