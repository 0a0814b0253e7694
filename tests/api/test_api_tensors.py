"""torch tensors and other DLPack exporters in place (issue 18): add_pe, apply_rope and out=
take CPU tensors directly, zero-copy, bfloat16 included, with the bits of the NumPy route;
other devices, read-only or copied exports, tensors that require grad and other dtypes are
refused before anything is written; a written tensor's version counter moves."""
import ctypes

import numpy as np
import pytest

import sinpe
from conftest import BF16, same, torch

pytestmark = pytest.mark.needs_torch

TORCH_DTYPES = {"float32": np.float32, "float16": np.float16, "float64": np.float64,
                "bfloat16": BF16}


def as_numpy(t):
    """A tensor's NumPy view (bfloat16 through int16), sharing memory."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(BF16)
    return t.numpy()


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_add_pe_on_tensors_equals_numpy(name):
    dt = getattr(torch, name)
    for make in (lambda: torch.randn(3, 40, 64).to(dt),
                 lambda: torch.randn(64, 40, 3).to(dt).permute(2, 1, 0),  # strided
                 lambda: torch.randn(5, 3, 40, 64).to(dt)[1:4, ::2]):      # a view
        t = make()
        want = np.array(as_numpy(t), copy=True)
        sinpe.add_pe(want)
        r = sinpe.add_pe(t)
        assert r is t
        assert same(as_numpy(t), want)


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_out_tensors(name):
    dt = getattr(torch, name)
    out = torch.empty(50, 32, dtype=dt)
    r = sinpe.positional_encoding(50, 32, out=out)
    assert r is out
    assert same(as_numpy(out), sinpe.positional_encoding(50, 32, dtype=TORCH_DTYPES[name]))
    buf = torch.empty(1, 50, 32, dtype=dt)  # a module's (1, max_len, d_model) buffer
    sinpe.positional_encoding(50, 32, out=buf)
    assert same(as_numpy(buf)[0], as_numpy(out))


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_apply_rope_on_tensors(name):
    dt = getattr(torch, name)
    q = torch.randn(2, 4, 33, 64).to(dt)
    want = np.array(as_numpy(q), copy=True)
    sinpe.apply_rope(want, np.arange(33))
    assert sinpe.apply_rope(q, np.arange(33)) is q
    assert same(as_numpy(q), want)


def test_refusals_name_x_and_write_nothing():
    g = torch.zeros(2, 8, requires_grad=True)
    with pytest.raises(ValueError, match="x .*cannot be written in place.*require gradient"):
        sinpe.add_pe(g)
    with torch.no_grad():  # torch refuses to export it either way: .detach() shares memory
        with pytest.raises(ValueError, match="require gradient"):
            sinpe.add_pe(g)
    d = g.detach()
    sinpe.add_pe(d)
    assert not torch.equal(g.detach(), torch.zeros(2, 8))  # detach() shares the memory
    for t, msg in [(torch.zeros(2, 8, dtype=torch.int32), "got int32"),
                   (torch.zeros(2, 8, dtype=torch.complex64), "got complex64"),
                   (torch.zeros(2, 8, dtype=torch.bool), "got bool8")]:
        with pytest.raises(TypeError, match="x must have dtype float32.*" + msg):
            sinpe.add_pe(t)
        assert not t.any()
    m = torch.zeros(2, 8, device="meta")
    with pytest.raises((ValueError, TypeError), match="x"):
        sinpe.add_pe(m)
    with pytest.raises(ValueError, match="out .*cannot be written in place"):
        sinpe.positional_encoding(2, 8, out=torch.zeros(2, 8, requires_grad=True))


class Exporter:
    """Only DLPack (no buffer protocol, no __array__), as JAX's or CuPy's arrays."""

    def __init__(self, a, copy=False):
        self.a, self.copy = a, copy

    def __dlpack__(self, **kw):
        if self.copy:  # a copy marked as one (NumPy 1.x has no copy=; torch does not mark it)
            return self._copied_capsule()
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()

    @property
    def shape(self):
        return self.a.shape

    def _copied_capsule(self):
        class Tensor(ctypes.Structure):
            _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                        ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                        ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                        ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                        ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]

        class Managed(ctypes.Structure):  # DLManagedTensorVersioned, dlpack.h v1.0
            _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                        ("ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                        ("flags", ctypes.c_uint64), ("t", Tensor)]

        self._shape = (ctypes.c_int64 * self.a.ndim)(*self.a.shape)
        self._m = Managed(1, 0, None, None, 2, Tensor(  # flags: DLPACK_FLAG_BITMASK_IS_COPIED
            self.a.ctypes.data, 1, 0, self.a.ndim, 2, 32, 1, self._shape, None, 0))
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                       ctypes.c_void_p]
        return new(ctypes.addressof(self._m), b"dltensor_versioned", None)


def test_any_dlpack_exporter():
    a = np.zeros((3, 16, 8), np.float32)
    sinpe.add_pe(Exporter(a))
    assert same(a[2], sinpe.positional_encoding(16, 8))
    ro = np.zeros((3, 16, 8), np.float32)
    ro.flags.writeable = False
    # NumPy 2 exports it marked read-only; NumPy 1.x refuses to export it ("readonly")
    with pytest.raises(ValueError, match="read-?only"):
        sinpe.add_pe(Exporter(ro))
    assert not ro.any()
    c = np.zeros((3, 16, 8), np.float32)
    with pytest.raises(ValueError, match="is a copy"):
        sinpe.add_pe(Exporter(c, copy=True))
    assert not c.any()


def test_version_counter_moves():
    x = torch.zeros(2, 6, 8)
    v = x._version
    sinpe.add_pe(x)
    assert x._version > v
    q = torch.zeros(1, 2, 6, 8)
    v = q._version
    sinpe.apply_rope(q)
    assert q._version > v
    # a graph that saved x refuses to backpropagate after x changed, as with x.add_()
    w = torch.ones(2, 6, 8, requires_grad=True)
    y = (w * x).sum()
    sinpe.add_pe(x)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_empty_tensors_exported_without_data():
    """torch exports an empty tensor with a NULL data pointer; nothing is offset from it (UBSan:
    'applying zero offset to null pointer', found by the fuzzer) and nothing is written."""
    for shape in [(2, 0, 8), (0, 8), (0, 5, 8)]:
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            t = torch.zeros(shape, dtype=dt)
            assert sinpe.add_pe(t) is t and t.shape == shape
            assert sinpe.add_pe(Exporter(np.zeros(shape, np.float32))) is not None
    q = torch.zeros(1, 2, 0, 8)
    assert sinpe.apply_rope(q) is q
    out = torch.zeros(0, 8)
    assert sinpe.positional_encoding(0, 8, out=out) is not None


def test_negative_views_refused_untouched():
    """A tensor with torch's neg bit (torch._neg_view, complex .conj().imag) exports its memory,
    which holds the values negated: add_pe wrote -pe into such an x and out= held -pe (a hostile
    probe).  Refused, naming the argument, with the memory untouched, at every entry point."""
    from sinpe import presets as P
    calls = {"x": [lambda t: sinpe.add_pe(t), lambda t: sinpe.apply_rope(t.view(1, 1, 3, 8)),
                   lambda t: sinpe.add_pe(t.view(1, 3, 8), offset=4)],
             "out": [lambda t: sinpe.positional_encoding(3, 8, out=t),
                     lambda t: P.fairseq(3, 8, out=t)]}
    for what, fs in calls.items():
        for f in fs:
            for make in (lambda: torch._neg_view(torch.ones(3, 8)),
                         lambda: (torch.ones(3, 8, dtype=torch.complex64) * 1j).conj().imag):
                t = make()
                assert t.is_neg()
                with pytest.raises(ValueError, match=f"{what} is a negative view"):
                    f(t)
                assert torch.equal(t.resolve_neg(), -torch.ones(3, 8))  # values as they were


# ---- issue 25: overlap, float64 tables, subclasses, one conversion, named refusals ----------

def _hf_rope(x, cos, sin):
    """transformers' apply_rotary_pos_emb on one tensor (cos/sin broadcast), in torch."""
    h = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., h:], x[..., :h]), dim=-1) * sin


@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_apply_rope_cos_sin_sharing_memory_with_x(dt):
    """Issue 25, 5: cos/sin that are views of x were read while x was written (96 of 144
    values differed from transformers'): they are copied first."""
    torch.manual_seed(0)
    for make in (lambda b: (b[0, 0], b[0, 1]), lambda b: (b[0, 0].numpy(), b[0, 1].numpy())
                 if b.dtype not in (torch.bfloat16,) else (b[0, 0], b[0, 1])):
        base = (torch.rand(1, 3, 6, 8) * 2 - 1).to(dt)
        cos, sin = make(base)
        want = _hf_rope(base.clone(), torch.as_tensor(cos).clone(), torch.as_tensor(sin).clone())
        got = sinpe.apply_rope(base, cos=cos, sin=sin)
        assert got is base and same(as_numpy(base), as_numpy(want))


def test_apply_rope_float64_tables():
    """Issue 25, 6: float64 x with float64 cos/sin was rotated with float32 tables (240 of
    240 values differed): float64 tables of float32 values give torch's bits, others are
    refused naming cos; a float32 x takes any float64 table (rounded as .to(x.dtype))."""
    torch.manual_seed(1)
    x = torch.randn(2, 4, 5, 12, dtype=torch.float64)
    cos, sin = torch.rand(5, 12, dtype=torch.float64), torch.rand(5, 12, dtype=torch.float64)
    for xd in (torch.float64, torch.float16, torch.bfloat16):
        with pytest.raises(ValueError, match="cos holds float64 values that are not float32"):
            sinpe.apply_rope(x.to(xd), cos=cos, sin=sin)
    c32, s32 = cos.float().double(), sin.float().double()
    want = _hf_rope(x, c32, s32)
    got = sinpe.apply_rope(x.clone(), cos=c32, sin=s32)
    assert same(got.numpy(), want.numpy())
    x32 = x.float()
    want = _hf_rope(x32, cos.float(), sin.float())
    assert same(sinpe.apply_rope(x32.clone(), cos=cos, sin=sin).numpy(), want.numpy())
    with pytest.raises(ValueError, match="sin holds float64"):
        sinpe.apply_rope(np.zeros((1, 5, 12)), cos=c32.numpy(), sin=sin.numpy())


class MyTensor(torch.Tensor):
    pass


SUBCLASSES = [lambda t: torch.nn.Parameter(t, requires_grad=False),
              lambda t: t.as_subclass(MyTensor),
              lambda t: torch.nn.Buffer(t) if hasattr(torch.nn, "Buffer") else t.as_subclass(MyTensor)]


@pytest.mark.parametrize("sub", range(len(SUBCLASSES)))
@pytest.mark.parametrize("call", ["add_pe", "apply_rope", "out", "preset_out"])
def test_subclasses_written_in_place_bump_their_version(sub, call):
    """Issue 25, 7: an nn.Parameter (requires_grad=False) or any torch.Tensor subclass
    written in place kept its version counter: a graph that saved it backpropagated
    silently wrong gradients, where torch's own add_ makes backward raise."""
    t = SUBCLASSES[sub](torch.zeros(2, 6, 8))
    w = torch.ones(2, 6, 8, requires_grad=True)
    y = (w * t).sum()  # saves t for backward
    v = t._version
    if call == "add_pe":
        sinpe.add_pe(t)
    elif call == "apply_rope":
        sinpe.apply_rope(t)
    elif call == "out":
        sinpe.positional_encoding(positions=np.zeros((2, 6)), d_model=8, out=t)
    else:
        sinpe.presets.keras_hub((2, 6, 8), out=t)
    assert t._version > v
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_inference_tensors_outside_inference_mode_refused():
    """Inference tensors: torch's add_ refuses to write one outside inference mode, and so
    does sinpe, naming x (or out) before anything is written; inside it, they are written."""
    with torch.inference_mode():
        t = torch.zeros(4, 8)
    for f, name in [(lambda: sinpe.add_pe(t), "x"), (lambda: sinpe.apply_rope(t[None]), "x"),
                    (lambda: sinpe.positional_encoding(4, 8, out=t), "out"),
                    (lambda: sinpe.presets.keras_hub((4, 8), out=t), "out")]:
        with pytest.raises(ValueError, match=f"{name} is an inference tensor"):
            f()
        assert not t.any()
    with torch.inference_mode():
        sinpe.add_pe(t)
        assert same(t.numpy(), sinpe.positional_encoding(4, 8))


NAMED = {
    "bfloat16": lambda: torch.arange(6).bfloat16(),
    "requires_grad": lambda: torch.arange(6.).requires_grad_(),
    "neg_bit": lambda: torch.arange(6.)._neg_view(),
    "float16": lambda: torch.arange(6).half(),
    "int32": lambda: torch.arange(6, dtype=torch.int32),
    "strided": lambda: torch.arange(12)[::2],
}


@pytest.mark.parametrize("kind", NAMED)
def test_tensors_as_array_like_parameters(kind):
    """Issue 25, 8: torch tensors of any dtype and kind as positions=, timesteps, t,
    attention_mask, position_ids: converted once, with the values' bits (bfloat16 widened
    exactly, the neg bit resolved) as the NumPy array of the same values."""
    t = NAMED[kind]()
    v = t.detach().resolve_neg().float().numpy()
    P = sinpe.presets
    pairs = [
        (lambda p: sinpe.positional_encoding(d_model=8, positions=p), None),
        (lambda p: sinpe.add_pe(np.zeros((6, 8), np.float32), positions=p), None),
        (lambda p: sinpe.apply_rope(np.ones((1, 2, 6, 8), np.float32), positions=p), None),
        (lambda p: P.diffusers_timestep(p, 8), None),
        (lambda p: P.rotary_embedding_torch(8, t=p), None),
        (lambda p: P.keras_hub((6, 8), positions=p), None),
        (lambda p: P.llama_rope(8, p[None]), None),
    ]
    for f, _ in pairs:
        got, want = f(t), f(v)
        for g, w_ in zip(got if isinstance(got, tuple) else (got,),
                         want if isinstance(want, tuple) else (want,)):
            assert same(np.asarray(g), np.asarray(w_))
    m = (t.detach().resolve_neg().float() >= 0).to(t.dtype)[None]
    assert same(P.alibi_bias(m, num_heads=2), P.alibi_bias(m.float().numpy(), num_heads=2))


def test_complex_and_bool_tensors_refused_naming_the_parameter():
    with pytest.raises(TypeError, match="positions"):
        sinpe.add_pe(np.zeros((3, 8), np.float32), positions=torch.zeros(3, dtype=torch.cfloat))
    with pytest.raises(TypeError, match="positions"):
        sinpe.positional_encoding(d_model=8, positions=torch.ones(3, dtype=torch.bool))
    with pytest.raises(TypeError, match="timesteps"):
        sinpe.presets.diffusers_timestep(torch.zeros(3, dtype=torch.cfloat), 8)


class DLPackOnly:
    def __init__(self, t):
        self.t = t

    def __dlpack__(self, **kw):
        return self.t.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_presets_take_the_out_positional_encoding_takes(dt):
    """Issue 25, 8: keras_hub and tatp22_* refused a torch bfloat16 out= and a DLPack-only
    exporter that positional_encoding fills; now every out= is written alike."""
    P = sinpe.presets
    name = str(dt).replace("torch.", "")
    for f, shape in [(lambda o: P.keras_hub((2, 5, 8), dtype=name, out=o), (2, 5, 8)),
                     (lambda o: P.tatp22_1d(8, (2, 5, 8), dtype=name, out=o), (2, 5, 8)),
                     (lambda o: P.tatp22_2d(8, (2, 3, 4, 8), dtype=name, out=o), (2, 3, 4, 8)),
                     (lambda o: P.tatp22_3d(12, (1, 2, 3, 4, 12), dtype=name, out=o),
                      (1, 2, 3, 4, 12))]:
        want = f(None)
        for wrap in (lambda t: t, DLPackOnly):
            o = torch.zeros(shape, dtype=dt)
            r = f(wrap(o))
            assert isinstance(r, (torch.Tensor, DLPackOnly))
            assert same(as_numpy(o), want)


def test_nested_vmap_and_function_transforms_named():
    """Issue 25, 11: a nested-tensor x said 'Internal error', a call inside torch.vmap a
    storage RuntimeError: both name x and the rule."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nt = torch.nested.nested_tensor([torch.zeros(2, 3, 8), torch.zeros(2, 5, 8)])
    for f in (sinpe.apply_rope, sinpe.add_pe):
        with pytest.raises(TypeError, match="x is a nested tensor"):
            f(nt)
    with pytest.raises(TypeError, match="positions is a nested tensor"):
        sinpe.add_pe(np.zeros((3, 8), np.float32),
                     positions=torch.nested.nested_tensor([torch.zeros(3), torch.zeros(2)]))
    for f in (lambda a: sinpe.apply_rope(a), lambda a: sinpe.add_pe(a)):
        with pytest.raises(TypeError, match="x is a tensor inside a torch function transform"):
            torch.vmap(f)(torch.zeros(2, 4, 3, 8))
    with pytest.raises(TypeError, match="positions is a tensor inside"):
        torch.vmap(lambda p: sinpe.positional_encoding(d_model=8, positions=p))(torch.zeros(2, 3))


def test_keras_hub_string_positions_named():
    with pytest.raises(TypeError, match="positions must be integers or real numbers"):
        sinpe.presets.keras_hub((2, 3, 8), positions=np.array(["a", "b", "c"]))


def test_tensor_resized_between_calls_is_written_where_it_lives():
    """A tensor resized between calls (its storage's memory swapped) is written at its new
    memory: no call, and not the cache, keeps a pointer into a caller's tensor (resizing
    during a call is a race in the caller's program, as with torch's add_: docs/api.md)."""
    x = torch.zeros(4, 8)
    sinpe.add_pe(x)
    p = x.data_ptr()
    x.resize_(50000, 8)
    assert x.data_ptr() != p
    x.zero_()
    sinpe.add_pe(x)
    assert same(x.numpy(), sinpe.positional_encoding(50000, 8))
    q = torch.zeros(1, 2, 4, 8)
    sinpe.apply_rope(q)
    q.resize_(1, 2, 3000, 8)
    q.fill_(1.0)
    want = sinpe.apply_rope(np.ones((1, 2, 3000, 8), np.float32))
    assert same(sinpe.apply_rope(q).numpy(), want)


def test_rotary_functions_under_vmap_and_nested_fall_back_to_torch():
    """Issue 25, 11 (a sibling): sinpe.torch's transformers functions inside torch.vmap
    took the core's route and failed on the batched tensors' storage; they now run
    transformers' own ops there, with its bits."""
    from sinpe.torch import apply_rotary_pos_emb

    def hf(q, k, cos, sin):
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        return _hf_rope(q, c, s), _hf_rope(k, c, s)
    torch.manual_seed(3)
    q, k = torch.randn(3, 2, 4, 5, 8), torch.randn(3, 2, 4, 5, 8)
    c, s = torch.randn(3, 2, 5, 8), torch.randn(3, 2, 5, 8)
    got, want = torch.vmap(apply_rotary_pos_emb)(q, k, c, s), torch.vmap(hf)(q, k, c, s)
    assert all(torch.equal(a, b) for a, b in zip(got, want))


def test_positions_converted_before_x_is_exported():
    """A hostile probe: add_pe exported x before converting positions, so a positions
    __array__ that freed x's storage left the core writing freed memory (a crash).  positions
    are converted first: the core then sees x without memory and refuses it by name."""
    x = torch.zeros(4096, 1024)  # 16 MiB: its own mapping, unmapped when freed

    class Pos:
        def __array__(self, dtype=None, copy=None):
            x.untyped_storage().resize_(0)
            return np.arange(4096)

    with pytest.raises(ValueError, match="x: the buffer has no memory"):
        sinpe.add_pe(x, positions=Pos())


@pytest.mark.parametrize("which", ["q", "k"])
def test_rope_sources_without_memory_named(which):
    """A hostile probe: a q or k whose storage was freed (FSDP leaves such views) exports a
    NULL data pointer, which the core read as "no source": it rotated the uninitialised
    result.  sinpe.torch names the tensor; the core refuses such a source on its own too."""
    import sinpe.torch as st
    from sinpe._torch.rotate import core_opts
    q, k = torch.randn(1, 2, 64, 32), torch.randn(1, 2, 64, 32)
    ang = torch.randn(1, 64, 32)
    (q if which == "q" else k).untyped_storage().resize_(0)
    with pytest.raises(ValueError, match=f"^{which}: the tensor has no memory"):
        st.apply_rotary_pos_emb(q, k, ang.cos(), ang.sin())
    x = torch.zeros(1, 2, 8, 32)
    src = torch.zeros(1, 2, 8, 32)
    src.untyped_storage().resize_(0)
    c = np.ones((1, 8, 32), np.float32)
    with pytest.raises(ValueError, match="no memory"):  # the core's own rule
        sinpe._jobs.rope_job(core_opts(), x, c, c, 2, -1, False, src)


def test_tensors_past_their_resized_storage_are_refused():
    """A hostile probe: a tensor whose storage was resized smaller after the view was made
    (untyped_storage().resize_) still exports its old shape; the core read (and wrote) past
    the storage's end, where torch's own ops raise.  Every tensor entry point refuses it by
    name, before anything is written."""
    import sinpe.torch as st

    def shrunk(*shape, keep=8, view=lambda t: t):
        t = view(torch.randn(*shape))
        t.untyped_storage().resize_(keep)
        return t
    msg = "(holds 8 bytes|8 bytes from there) .the storage was resized under the tensor"
    x = shrunk(2, 16, 32)
    with pytest.raises(ValueError, match=f"^x's elements reach byte .*{msg}"):
        sinpe.add_pe(x)
    with pytest.raises(ValueError, match=f"^x's elements reach byte .*{msg}"):
        sinpe.apply_rope(x)
    with pytest.raises(ValueError, match=f"^out's elements reach byte .*{msg}"):
        sinpe.positional_encoding(16, 32, out=shrunk(16, 32))
    q, k = torch.randn(1, 4, 5, 8), torch.randn(1, 2, 5, 8)
    c, s = torch.randn(1, 5, 8), torch.randn(1, 5, 8)
    for name in ("q", "k", "cos", "sin"):
        args = dict(q=q, k=k, cos=c, sin=s)
        # an expanded view reaches less: its own extent is what counts
        args[name] = shrunk(*args[name].shape) if name != "sin" else \
            shrunk(1, 1, 8, view=lambda t: t.expand(1, 5, 8))
        before = [t.clone() for t in (q, k, c, s) if t is not args[name]]
        with pytest.raises(ValueError, match=f"^{name}'s elements reach byte .*{msg}"):
            st.apply_rotary_pos_emb(args["q"], args["k"], args["cos"], args["sin"])
        assert all(torch.equal(a, b) for a, b in zip(before, [t for t in (q, k, c, s)
                                                            if t is not args[name]]))
    # what still fits is read: a view inside what the storage holds
    t = torch.randn(4, 8)
    v = t[:1]
    t.untyped_storage().resize_(32)
    assert sinpe.add_pe(v[None]) is not None


def test_half_tables_past_their_resized_storage_are_refused_before_widening():
    """A review probe: half-type tables that a rotation widens first (torch's .float(), a
    copy that reads past a resized storage's end without a word) were read out of bounds
    and never refused; they are checked before the copy."""
    import sinpe.torch as st
    q, k = torch.randn(1, 2, 40, 8), torch.randn(1, 2, 40, 8)

    def tables():
        c, s = torch.randn(1, 40, 8).bfloat16(), torch.randn(1, 40, 8).bfloat16()
        c.untyped_storage().resize_(64)
        return c, s
    for fn in (st.apply_rotary_pos_emb_cohere, st.apply_rotary_pos_emb_float32,
               st.apply_rotary_pos_emb_glm_float32):
        with pytest.raises(ValueError, match="^cos's elements reach byte"):
            fn(q, k, *tables())
    x = torch.randn(1, 2, 40, 8).bfloat16()
    x0 = x.clone()
    with pytest.raises(ValueError, match="^cos's elements reach byte"):
        sinpe.apply_rope(x, cos=tables()[0], sin=tables()[1])
    assert torch.equal(x.view(torch.int16), x0.view(torch.int16))


def test_a_tensors_own_storage_errors_propagate():
    """A review probe: a tensor subclass whose untyped_storage() raises had its error
    replaced (a second call made with it pending) or turned into a false refusal."""
    class Raising(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if getattr(func, "__name__", "") == "untyped_storage":
                raise RuntimeError("no storage here")
            return super().__torch_function__(func, types, args, kwargs or {})
    import sinpe.torch as st  # (the binding checks tensors from then on)
    q = torch.randn(2, 8, 16, 64).as_subclass(Raising)
    k, cos, sin = torch.randn(2, 8, 16, 64), torch.randn(2, 16, 64), torch.randn(2, 16, 64)
    with pytest.raises(RuntimeError, match="no storage here"):
        st.apply_rotary_pos_emb(q, k, cos, sin)


def test_rotary_forms_read_neg_bit_tensors():
    """A hostile probe: a q, k, cos or sin carrying torch's neg bit (z.conj().imag) was
    refused as "src is a negative view"; read tensors are resolved as torch's ops read them,
    and the rotation equals the torch formula's bits."""
    import sinpe.torch as st

    def rotate_half(t):
        h = t.shape[-1] // 2
        return torch.cat((-t[..., h:], t[..., :h]), dim=-1)

    z = torch.randn(1, 2, 3, 8, dtype=torch.complex64)
    qn = z.conj().imag
    cn = torch.randn(1, 3, 8, dtype=torch.complex64).conj().imag
    sin = torch.randn(1, 3, 8)
    assert qn.is_neg() and cn.is_neg()
    for q, k, cos in ((qn, qn.resolve_neg(), cn.resolve_neg()), (qn.resolve_neg(), qn, cn)):
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        want_q = q * c + rotate_half(q) * s
        want_k = k * c + rotate_half(k) * s
        got_q, got_k = st.apply_rotary_pos_emb(q, k, cos, sin)
        assert torch.equal(got_q, want_q) and torch.equal(got_k, want_k)


@pytest.mark.parametrize("ud", [-5, -99, -(2 ** 40)])
def test_unsqueeze_dim_below_range_raises_as_torch(ud):
    """A hostile probe: unsqueeze_dim below -(cos.dim() + 1) was taken as 0; torch's
    unsqueeze (and so transformers) raises IndexError."""
    import sinpe.torch as st
    q, cos = torch.randn(1, 2, 3, 8), torch.randn(1, 3, 8)
    with pytest.raises(IndexError):
        q.unsqueeze(0) * cos.unsqueeze(ud)
    for f in (lambda: st.apply_rotary_pos_emb(q, q, cos, cos, ud),
              lambda: st.apply_rotary_pos_emb_single(q, cos, cos, ud)):
        with pytest.raises(IndexError):
            f()


def test_presets_name_nested_and_vmapped_tensors():
    """A second probe: under torch.vmap, keras_hub's and tatp22's out= reached the core's
    export first ("Cannot access data pointer"); a nested tensor as their inputs/tensor
    failed in torch ("NestedTensorImpl doesn't support sizes").  Each is named."""
    import warnings
    P = sinpe.presets
    with pytest.raises(TypeError, match="out is a tensor inside a torch function transform"):
        torch.vmap(lambda t: P.keras_hub((1, 3, 8), out=t))(torch.zeros(2, 1, 3, 8))
    with pytest.raises(TypeError, match="out is a tensor inside a torch function transform"):
        torch.vmap(lambda t: P.tatp22_1d(8, (1, 3, 8), out=t))(torch.zeros(2, 1, 3, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nt = torch.nested.nested_tensor([torch.zeros(3, 8), torch.zeros(5, 8)])
    with pytest.raises(TypeError, match="inputs is a nested tensor"):
        P.keras_hub(nt)
    with pytest.raises(TypeError, match="tensor is a nested tensor"):
        P.tatp22_1d(8, nt)
    # a tensor whose shape only is read: its shape, under vmap too
    got = torch.vmap(lambda t: torch.from_numpy(P.tatp22_1d(8, t)))(torch.zeros(2, 1, 3, 8))
    assert got.shape == (2, 1, 3, 8)
