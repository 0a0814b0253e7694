"""sinpe.torch.patch as a hostile user meets it: a patched model is the model whatever is done
with it afterwards.  Configs edited after the model was built and rotary subclasses with
forwards of their own (the proof on the instance), copies, pickles, torch.save and nested
patches undone in any order (state that is plain data), names replaced in the modeling module
after patching (live globals), the meta device, training (backward through the patched model
bit for bit) and the messages of bad arguments."""
import copy
import io
import pickle
import subprocess
import sys

import pytest

from conftest import hf_patch_harness, tiny_causal_lm

pytestmark = [pytest.mark.oracle_packages, pytest.mark.needs_torch,
              pytest.mark.usefixtures("torch_two_threads")]

import torch  # noqa: E402  (a TORCH_MODULES module: not collected without torch)
import transformers  # noqa: E402,F401

import sinpe.torch as st  # noqa: E402


H = hf_patch_harness()


_tiny = tiny_causal_lm


def _out(model, ids=None):
    ids = H.inputs(model) if ids is None else ids
    with torch.no_grad():
        return H.output(model, ids)


def _rotary(model):
    return next(m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding"))


def _no_patch_left(model):
    from sinpe._torch.state import Patched
    assert st.patched(model) == []
    for m in model.modules():
        assert not any(isinstance(v, Patched) for v in m.__dict__.values())
        assert "forward" not in m.__dict__


# ---- the proof on the instance: values the module fixed at init, subclasses ----------------

@pytest.mark.parametrize("mt,rope,edit", [
    ("llama", {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0,
               "original_max_position_embeddings": 32},
     {"factor": 8.0, "attention_factor": 3.0}),
    ("qwen2", {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0},
     {"factor": 5.0, "rope_theta": 500.0}),
    ("phi3", {"rope_type": "longrope", "rope_theta": 10000.0, "factor": 4.0,
              "original_max_position_embeddings": 32,
              "short_factor": [1.0] * 8, "long_factor": [2.0] * 8},
     {"attention_factor": 0.5, "short_factor": [3.0] * 8}),
])
def test_config_edited_after_build_changes_nothing(mt, rope, edit):
    """A config edited after the model was built (before or after patching) leaves the
    unpatched model's tables unchanged (its module fixed inv_freq and attention_scaling at
    init): the patched model's too (3,900 of 4,000 logits changed when patch read the live
    config)."""
    model = _tiny(mt, rope_parameters=dict(rope), max_position_embeddings=64)
    want = _out(model)
    cfg = model.config
    cfg.rope_parameters = dict(cfg.rope_parameters, **edit)
    assert H.ndiff(want, _out(model)) == 0  # transformers ignores the edit
    before = st.patch(copy.deepcopy(model))
    assert H.ndiff(want, _out(before)) == 0
    after = st.patch(copy.deepcopy(model))
    after.config.rope_parameters = dict(after.config.rope_parameters, factor=16.0)
    assert H.ndiff(want, _out(after)) == 0
    assert any(r["kind"] == "rotary" and not r["form"].startswith("kept")
               for r in st.patched(after))


def _subclassed(model, forward):
    rot = _rotary(model)
    cls = type(rot)
    sub = type("Interpolated" + cls.__name__, (cls,), {"forward": forward})
    rot.__class__ = sub
    return model


@pytest.mark.parametrize("how", ["interpolate", "clamp past 5000", "pass-through"])
def test_rotary_subclass_with_its_own_forward_is_kept(how):
    """A rotary subclass whose forward is code of its own keeps that forward, and patched()
    says why (it was replaced silently: position interpolation changed every logit; a clamp
    past position 5,000, which no probe below it sees, changed 5,888 of 6,144 logits at
    position 6,000); the logits stay the model's at any position."""
    def interpolate(self, x, position_ids):
        return type(self).__mro__[1].forward(self, x, position_ids // 2)

    def clamp(self, x, position_ids):
        return type(self).__mro__[1].forward(self, x, position_ids.clamp(max=5000))

    def passthrough(self, x, position_ids):
        return type(self).__mro__[1].forward(self, x, position_ids)

    fwd = {"interpolate": interpolate, "clamp past 5000": clamp, "pass-through": passthrough}
    model = _subclassed(_tiny(max_position_embeddings=8192), fwd[how])
    ids = H.inputs(model)
    far = torch.arange(6000, 6000 + ids.shape[1])[None].expand(ids.shape[0], -1)
    with torch.no_grad():
        want = (model(ids).logits, model(ids, position_ids=far).logits)
    st.patch(model)
    rec = [r for r in st.patched(model) if r["kind"] == "rotary"]
    assert len(rec) == 1 and "code of its own" in rec[0]["form"], rec
    with torch.no_grad():
        got = (model(ids).logits, model(ids, position_ids=far).logits)
    assert H.ndiff(want[0], got[0]) == 0 and H.ndiff(want[1], got[1]) == 0
    # the rotations are still routed (they take any tables)
    assert any(r["kind"] == "rotation" for r in st.patched(model))


def test_rotary_subclass_of_transformers_code_is_patched():
    """A subclass that only adds state (its own __init__), and one whose forward is a copy of
    transformers' code (remote code copies Llama's), are proven and patched."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding as L

    def init(self, config, device=None):
        L.__init__(self, config)
        self.tag = "mine"

    copied = {"forward": L.forward}  # the same function: its code is transformers'
    for attrs in ({"__init__": init}, copied):
        model = _tiny()
        rot = _rotary(model)
        rot.__class__ = type("MineRotaryEmbedding", (L,), attrs)
        want = _out(model)
        st.patch(model)
        rec = [r for r in st.patched(model) if r["kind"] == "rotary"]
        assert rec and not rec[0]["form"].startswith("kept"), rec
        assert H.ndiff(want, _out(model)) == 0


def test_proof_keeps_a_module_whose_config_no_longer_describes_it():
    """Cohere's rotary interleaves its tables; a config whose model_type was edited to
    Llama's would have sinpe lay them out in halves: the proof on the instance sees the
    difference and the module keeps its own forward, said why."""
    model = _tiny("cohere")
    want = _out(model)
    rot = _rotary(model)
    rot.config.model_type = "llama"
    st.patch(model)
    rec = [r for r in st.patched(model) if r["kind"] == "rotary"]
    assert rec and rec[0]["form"].startswith("kept (its own forward and sinpe's differ"), rec
    assert H.ndiff(want, _out(model)) == 0


def test_instance_hooks_are_kept():
    """An instance attribute standing in for a method (accelerate's hooks set one) is left as
    it is: the patched model calls the hook, as the unpatched model does (6,144 of 6,144
    logits changed when patch replaced it)."""
    import functools
    base = _tiny()
    for where in ("attention", "rotary"):
        model = copy.deepcopy(base)
        mod = model.model.layers[0].self_attn if where == "attention" else _rotary(model)
        orig = mod.forward

        def hooked(*a, _o=orig, **kw):
            out = _o(*a, **kw)
            return (out[0] * 2,) + tuple(out[1:])
        mod.forward = functools.update_wrapper(functools.partial(hooked), orig)
        want = _out(model)
        st.patch(model)
        assert H.ndiff(want, _out(model)) == 0, where
        assert mod.__dict__["forward"].func is hooked
        st.unpatch(model)
        assert mod.__dict__["forward"].func is hooked


def test_a_rotation_replaced_after_patching_is_called():
    """A rotation replaced in the modeling module after patching (a kernel library's
    replacement) is what the patched model and its copies call, as the unpatched model:
    they computed different bits (2,585 of 6,144 logits) before."""
    from transformers.models.llama import modeling_llama as ml
    model = st.patch(_tiny().to(torch.bfloat16))
    twin = _tiny().to(torch.bfloat16)
    orig = ml.apply_rotary_pos_emb

    def mine(q, k, cos, sin, unsqueeze_dim=1):
        a, b = orig(q.float(), k.float(), cos.float(), sin.float(), unsqueeze_dim)
        return a.to(q.dtype), b.to(k.dtype)
    try:
        ml.apply_rotary_pos_emb = mine
        want = _out(twin)
        assert H.ndiff(want, _out(model)) == 0
        assert H.ndiff(want, _out(copy.deepcopy(model))) == 0
    finally:
        ml.apply_rotary_pos_emb = orig
    assert H.ndiff(_out(twin), _out(model)) == 0


def test_proof_leaves_dynamic_state_and_random_state():
    """Proving a dynamic rope that has grown does not reset it, and draws nothing from torch's
    generator."""
    model = _tiny(max_position_embeddings=16,
                  rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0})
    ids = torch.randint(3, 128, (1, 40), generator=torch.Generator().manual_seed(2))
    _out(model, ids)
    rot = _rotary(model)
    grown = (rot.max_seq_len_cached, rot.inv_freq.clone())
    torch.manual_seed(11)
    a = torch.rand(3)
    torch.manual_seed(11)
    st.patch(model)
    b = torch.rand(3)
    assert torch.equal(a, b)
    assert rot.max_seq_len_cached == grown[0] and torch.equal(rot.inv_freq, grown[1])


# ---- state that is plain data ----------------------------------------------------------------

@pytest.mark.parametrize("mt", ["llama", "gemma3_text", "olmo"])
def test_copies_and_pickles_stay_patched(mt):
    """deepcopy, pickle and torch.save/torch.load of a patched model: patched as the original,
    the same logits; unpatch of a copy gives a callable model (it installed the copied
    sentinel as the forward); Gemma 3's per-layer-type forward pickles (it could not)."""
    model = st.patch(_tiny(mt))
    want = _out(model)
    recs = st.patched(model)
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    copies = [copy.deepcopy(model), pickle.loads(pickle.dumps(model)),
              torch.load(buf, weights_only=False)]
    for c in copies:
        assert st.patched(c) == recs
        assert H.ndiff(want, _out(c)) == 0
        st.unpatch(c)
        _no_patch_left(c)
        assert H.ndiff(want, _out(c)) == 0
    assert st.patched(model) == recs  # the original is untouched by its copies' unpatch


def test_pickle_loads_patched_in_a_fresh_process(tmp_path):
    """torch.save in this process, torch.load in another: patched there, the same bits."""
    model = st.patch(_tiny())
    want = _out(model)
    path = tmp_path / "m.pt"
    torch.save(model, path)
    torch.save(want, tmp_path / "want.pt")
    ids = H.inputs(model)
    torch.save(ids, tmp_path / "ids.pt")
    code = f"""
import torch, sinpe.torch as st
m = torch.load({str(path)!r}, weights_only=False)
ids = torch.load({str(tmp_path / 'ids.pt')!r})
want = torch.load({str(tmp_path / 'want.pt')!r})
assert any(r["kind"] == "rotary" for r in st.patched(m)), st.patched(m)
with torch.no_grad():
    got = m(ids).logits
assert torch.equal(got.view(torch.int32), want.view(torch.int32))
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, cwd=str(tmp_path))
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


def test_nested_patches_undone_in_any_order():
    """patch(model.model) then patch(model), undone in either order: every module the class's
    own again, no stale forward."""
    for order in ("outer first", "inner first"):
        model = _tiny()
        want = _out(model)
        st.patch(model.model)
        st.patch(model, backend="builtin")
        assert H.ndiff(want, _out(model)) > 0  # the outer patch (builtin tables) is in force
        if order == "outer first":
            st.unpatch(model)
            st.unpatch(model.model)
        else:
            st.unpatch(model.model)
            st.unpatch(model)
        _no_patch_left(model)
        assert H.ndiff(want, _out(model)) == 0


def test_save_pretrained_round_trip(tmp_path):
    """save_pretrained saves weights and config: the model loaded back is unpatched (the
    documented rule), with the same logits; the patched original still patched."""
    from transformers import AutoModelForCausalLM
    model = st.patch(_tiny())
    want = _out(model)
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    assert st.patched(loaded) == []
    assert H.ndiff(want, _out(loaded)) == 0
    assert st.patched(model) != []


# ---- live globals ----------------------------------------------------------------------------

def test_names_replaced_in_the_module_after_patching_are_called(monkeypatch):
    """A name the patched methods read (the attention kernel) replaced in the modeling module
    after patching is what the patched model calls, as the unpatched model calls it."""
    from transformers.models.llama import modeling_llama as ml
    model = st.patch(_tiny())
    want = _out(model)
    calls = []
    orig = ml.eager_attention_forward

    def spy(*a, **kw):
        calls.append(1)
        return orig(*a, **kw)

    monkeypatch.setattr(ml, "eager_attention_forward", spy)
    assert H.ndiff(want, _out(model)) == 0
    assert calls, "the patched model did not call the replaced eager_attention_forward"
    # and a replacement that changes the result changes the patched model's as the unpatched
    monkeypatch.setattr(ml, "repeat_kv", lambda h, n: ml.torch.repeat_interleave(h, n, 1) * 2)
    ref = _tiny()
    assert H.ndiff(_out(ref), _out(model)) == 0
    assert H.ndiff(want, _out(model)) > 0


# ---- training ------------------------------------------------------------------------------

@pytest.mark.parametrize("mt,dtype", [("olmo", torch.bfloat16), ("llama", torch.bfloat16),
                                      ("modernbert", torch.float16)])
def test_backward_through_the_patched_model(mt, dtype):
    """Every parameter's gradient of a training step through the patched model, bit for bit
    with the unpatched model's (OLMo in bfloat16: 10 of 16 parameter gradients differed)."""
    if mt == "modernbert":
        from transformers import AutoModelForMaskedLM
        torch.manual_seed(0)
        model = AutoModelForMaskedLM.from_config(H.tiny_config(mt),
                                                 attn_implementation="eager").to(dtype)
    else:
        model = _tiny(mt).to(dtype)
    model.train()
    patched = st.patch(copy.deepcopy(model))
    ids = H.inputs(model)
    grads = []
    for m in (model, patched):
        torch.manual_seed(0)
        out = H.output(m, ids)
        out.float().square().mean().backward()
        grads.append([p.grad for p in m.parameters()])
    bad = [i for i, (a, b) in enumerate(zip(*grads))
           if (a is None) != (b is None) or a is not None and not torch.equal(
               a.view(torch.int16), b.view(torch.int16))]
    assert not bad, f"{len(bad)} of {len(grads[0])} parameter gradients differ"


# ---- the meta device -------------------------------------------------------------------------

def test_meta_device_models():
    """A model built under torch.device('meta') patches (proven on a CPU twin) and returns
    meta logits of the unpatched model's shape; a patched model moved to meta likewise."""
    cfg = H.tiny_config("llama")
    from transformers import AutoModelForCausalLM
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    ids = torch.randint(3, 100, (1, 8), device="meta")
    want = model(ids).logits
    st.patch(model)
    assert any(r["kind"] == "rotary" and not r["form"].startswith("kept")
               for r in st.patched(model))
    got = model(ids).logits
    assert got.is_meta and got.shape == want.shape and got.dtype == want.dtype
    real = st.patch(_tiny())
    real.to("meta")
    got = real(ids).logits
    assert got.is_meta and got.shape == want.shape


# ---- messages ----------------------------------------------------------------------------------

def test_bad_arguments_named():
    for f in (st.patch, st.unpatch, st.patched):
        for bad in (7, None, "model"):
            with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
                f(bad)
    model = _tiny()
    for bad in ("nope", "torch-aarch64-1.0"):
        with pytest.raises(ValueError, match=f"backend={bad!r}"):
            st.patch(model, backend=bad)
    _no_patch_left(model)


def test_rotary_without_config_names_the_family():
    """A *RotaryEmbedding with no config (remote code): NotImplementedError naming the family
    and the class, the model left as it was."""
    model = _tiny()
    rot = _rotary(model)
    del rot.config
    before = {id(m): dict(m.__dict__) for m in model.modules()}
    with pytest.raises(NotImplementedError, match="llama: LlamaRotaryEmbedding has no config"):
        st.patch(model)
    for m in model.modules():
        assert set(m.__dict__) == set(before[id(m)])


# ---- what a model is put through after patching: transforms, compile, export, checkpointing

def test_torch_func_transforms_of_a_patched_model():
    """torch.func.grad, jvp and vmap (positions batched too) over a patched model, as over the
    unpatched one, bit for bit (the rotary forward handed transformed tensors to the core:
    TypeError "position_ids is a tensor inside a torch function transform")."""
    from torch.func import functional_call, grad, jvp, vmap
    for mt in ("llama", "cohere2"):
        twin = _tiny(mt)
        model = st.patch(copy.deepcopy(twin))
        ids = H.inputs(twin)[:1]
        pos = torch.arange(ids.shape[1])[None]
        res = []
        for m in (twin, model):
            params = {k: v.detach() for k, v in m.named_parameters()}

            def loss(p, m=m):
                return functional_call(m, p, (), {"input_ids": ids}).logits.float().square().sum()
            g = grad(loss)(params)
            emb = m.get_input_embeddings()(ids).detach()
            tang = torch.ones_like(emb)
            _, t = jvp(lambda e, m=m: m(inputs_embeds=e).logits, (emb,), (tang,))
            v = vmap(lambda i, p, m=m: m(input_ids=i[None], position_ids=p[None]).logits)(
                ids.expand(2, -1), torch.cat([pos, pos + 5]))
            res.append([g[k] for k in sorted(g)] + [t, v])
        for a, b in zip(*res):
            assert H.ndiff(a, b) == 0, mt


def test_forward_mode_ad_through_a_rotation():
    """Forward-mode AD (dual tensors) through a rotation gives transformers' tangents (the
    core computed the primal only: 5,888 of 6,144 logit tangents of a patched Llama were
    dropped)."""
    import torch.autograd.forward_ad as fwAD
    twin = _tiny()
    model = st.patch(copy.deepcopy(twin))
    ids = H.inputs(twin)
    res = []
    for m in (twin, model):
        emb = m.get_input_embeddings()(ids).detach()
        with torch.no_grad(), fwAD.dual_level():
            out = m(inputs_embeds=fwAD.make_dual(emb, torch.ones_like(emb))).logits
            p, t = fwAD.unpack_dual(out)
            res.append((p.clone(), t.clone()))
    assert H.ndiff(res[0][0], res[1][0]) == 0 and H.ndiff(res[0][1], res[1][1]) == 0


@pytest.mark.parametrize("dynamic", [False, True])
def test_cold_compile_of_a_patched_model(dynamic):
    """torch.compile(fullgraph=True) of a patched model whose first call is the compiled one
    (a routed function was probed on random tensors at its first call: a torch.Generator in
    the middle of the trace), at two lengths, bit for bit with the eager model."""
    twin = _tiny()
    model = st.patch(copy.deepcopy(twin))
    torch._dynamo.reset()
    f = torch.compile(lambda i: model(i).logits, fullgraph=True, backend="eager",
                      dynamic=dynamic)
    for n in (8, 13):
        ids = H.inputs(twin)[:, :n]
        with torch.no_grad():
            assert H.ndiff(_out(twin, ids), f(ids)) == 0, n


@pytest.mark.parametrize("strict", [False, True])
def test_cold_export_with_a_dynamic_length(strict, tmp_path):
    """torch.export of a patched model as its first call, the sequence length a Dim (it
    raised: unhashable SymInt, a data-dependent aten.equal), saved and run at another length
    with the unpatched model's bits."""
    from torch.export import Dim, export
    twin = _tiny()
    model = st.patch(copy.deepcopy(twin))

    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids):
            return self.m(ids).logits

    ids = H.inputs(twin)
    ep = export(Logits(model), (ids,), dynamic_shapes={"ids": {1: Dim("S", min=2, max=64)}},
                strict=strict)
    short = ids[:, :11]
    with torch.no_grad():
        assert H.ndiff(_out(twin, short), ep.module()(short)) == 0


def test_activation_checkpointing_at_training_sizes(monkeypatch):
    """transformers' gradient checkpointing (non-reentrant, its default) through the training
    way (a call of 1 M values and more: here every size) trains as the unpatched model: the
    first step raised CheckpointError (the backward's capture saved tensors during the
    forward)."""
    from sinpe._torch import forms, training
    monkeypatch.setattr(forms, "_TRAIN_MIN", 0)
    monkeypatch.setattr(training, "_CAPTURES", type(training._CAPTURES)(training._CAPTURES.bound))
    twin = _tiny().to(torch.bfloat16)
    model = st.patch(copy.deepcopy(twin))
    grads = []
    for m in (twin, model):
        m.train()
        m.gradient_checkpointing_enable()
        ids = H.inputs(m)
        for _ in range(2):
            m.zero_grad(set_to_none=True)
            m(ids).logits.float().square().mean().backward()
        grads.append([p.grad for p in m.parameters()])
    assert all(H.ndiff(a, b) == 0 for a, b in zip(*grads))


def test_a_decorator_of_the_users_own_keeps_the_forward():
    """A forward whose body copies transformers' but is wrapped by a decorator of the user's own
    (clamping positions past every probe) keeps its forward (unwrapping the decorator made it
    look like transformers' code: 2,944 of 3,072 logits differed at position 6,000); a
    forward that is not a function (a partialmethod) is kept too, not a refusal of the
    model."""
    import functools
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding as L

    def clamp(fn):
        @functools.wraps(fn)
        def w(self, x, position_ids):
            return fn(self, x, position_ids.clamp(max=5000))
        return w

    def pm(self, x, position_ids, shift=0):
        return L.forward(self, x, position_ids + shift)
    for forward in (clamp(L.forward.__wrapped__), functools.partialmethod(pm, shift=0)):
        model = _tiny(max_position_embeddings=8192)
        rot = _rotary(model)
        rot.__class__ = type("ClampedRotaryEmbedding", (L,), {"forward": forward})
        ids = H.inputs(model)
        far = torch.arange(6000, 6000 + ids.shape[1])[None].expand(ids.shape[0], -1)
        with torch.no_grad():
            want = model(ids, position_ids=far).logits
        st.patch(model)
        rec = [r for r in st.patched(model) if r["kind"] == "rotary"]
        assert rec and "code of its own" in rec[0]["form"], rec
        with torch.no_grad():
            assert H.ndiff(want, model(ids, position_ids=far).logits) == 0


def test_a_helper_of_the_rotation_replaced_after_patching_is_called():
    """rotate_half replaced in the modeling module after patching changes what the model's own
    rotation computes: the patched model (and its copies) call the rotation, as the unpatched
    model does (1,408 logits differed), and the form again once it is restored."""
    from transformers.models.qwen2 import modeling_qwen2 as M
    twin = _tiny("qwen2")
    model = st.patch(copy.deepcopy(twin))
    orig = M.rotate_half

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((x2, -x1), -1)
    try:
        M.rotate_half = rotate_half
        want = _out(twin)
        assert H.ndiff(want, _out(model)) == 0
        assert H.ndiff(want, _out(copy.deepcopy(model))) == 0
    finally:
        M.rotate_half = orig
    assert H.ndiff(_out(twin), _out(model)) == 0
