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
