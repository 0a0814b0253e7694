"""add_pe's held route (sinpe/_held.py, docs/speed.md "The held route"): after a plain call,
the cache's rows are added by x's own library (torch's add_, NumPy's add).  Its bits must be
the core's (the same call with the cache off, bit for bit, specials in x included), and it must
keep every rule of the core's call: each refusal gives the same exception, and a call the
route does not suit goes the core's way."""
import warnings

import numpy as np
import pytest

import sinpe
from conftest import BF16, TORCH_FREE, run_python, same
from sinpe import _held

if not TORCH_FREE:
    import torch

RNG = np.random.default_rng(23)
#: the default, and the backends with libraries of their own this machine has (mkl where the
#: mkl wheel installs: the test extra's)
ROUTE_BACKENDS = [None, "builtin"] + [b for b in ("mkl",) if sinpe.backends().get(b)]
SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-40, 3.4e38,
                     -3.4e38, 65504.0, 65520.0, 1e-7, 6e-8, 1.0, -1.0], np.float64)


@pytest.fixture(autouse=True)
def _fresh_views():
    size = sinpe.get_cache_size()
    sinpe.clear_cache()
    yield
    sinpe.set_cache_size(size)
    sinpe.clear_cache()


def _x(shape, dtype):
    v = RNG.standard_normal(shape) * RNG.choice([1e-3, 1.0, 1e3], size=shape)
    flat = v.reshape(-1)
    flat[:len(SPECIALS)] = SPECIALS[:flat.size]
    with np.errstate(over="ignore"):
        return v.astype(dtype)


def _uncached(x, **kw):
    size = sinpe.get_cache_size()
    sinpe.set_cache_size(0)
    try:
        return sinpe.add_pe(x, **kw)
    finally:
        sinpe.set_cache_size(size)


def _routed(x_of, backend=None):
    """add_pe twice on copies (the first holds the rows, the second takes the route), and
    the same with the cache off: (second result, uncached result, hits taken by the route)."""
    kw = {} if backend is None else {"backend": backend}
    sinpe.add_pe(x_of(), **kw)
    assert _held.held() >= 1
    hits = sinpe.cache_info()["hits"]
    got = sinpe.add_pe(x_of(), **kw)
    again = sinpe.add_pe(x_of(), **kw)  # a route serves any number of calls
    assert same(again, got)
    return got, _uncached(x_of(), **kw), (sinpe.cache_info()["hits"] - hits) // 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
@pytest.mark.parametrize("shape", [(8, 64), (1, 8, 64), (3, 130, 96), (2, 2, 16, 6)])
@pytest.mark.parametrize("backend", ROUTE_BACKENDS)
def test_numpy_route_bits_are_the_cores(dtype, shape, backend):
    x0 = _x(shape, dtype)
    got, want, hits = _routed(x0.copy, backend)
    assert hits == 1 and same(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
def test_numpy_past_the_limit_goes_the_cores_way(dtype):
    x0 = _x((2, 1024, 1026), dtype)  # 2,101,248 values: past the route's 2^21
    assert x0.size > _held._LIMITS[("numpy", np.dtype(dtype).name)]
    sinpe.add_pe(x0.copy())
    assert _held.held() == 0
    assert same(sinpe.add_pe(x0.copy()), _uncached(x0.copy()))


def _unaligned(x0):
    """x0's copy at an address one byte past an element's alignment."""
    buf = np.zeros(x0.nbytes + 1, np.uint8)
    x = np.frombuffer(buf.data, x0.dtype, x0.size, offset=1).reshape(x0.shape)
    x[...] = x0
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.float64])
def test_numpy_route_declines_what_the_held_add_does_not_take(dtype):
    """Unaligned, read-only, Fortran-ordered x of the held key's type, dtype and shape: the
    route writes nothing and the core's way gives its bits or its refusal."""
    x0 = _x((2, 8, 64), dtype)
    sinpe.add_pe(x0.copy())
    assert _held.held() == 1
    u = _unaligned(x0)
    assert u.ctypes.data % np.dtype(dtype).itemsize or np.dtype(dtype).itemsize == 1
    assert same(sinpe.add_pe(u), _uncached(_unaligned(x0)))
    f = np.asfortranarray(x0)
    assert same(sinpe.add_pe(f.copy(order="F")), _uncached(f.copy(order="F")))
    ro = x0.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="x"):
        sinpe.add_pe(ro)
    assert same(ro, x0)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("shape", [(8, 512, 512), (3, 700, 100), (2, 1, 1_100_000)])
def test_held_add_threads_same_bits(dtype, shape):
    """The held add on several threads (segments of rows: whole, with a tail, one row longer
    than a segment) has the bits of one thread, on this process's thread runtime and on
    sinpe's own pool."""
    from sinpe import _sinpe
    from sinpe._backends import runtime
    path = sinpe._policy._STATE["path"]
    rows = sinpe.positional_encoding(shape[1], shape[2])
    x0 = np.random.default_rng(5).standard_normal(shape).astype({"bfloat16": BF16}.get(dtype, dtype))
    one = x0.copy()
    assert _sinpe.add_held(path, 1, rows, one) is True
    for name in ("auto", "sinpe"):
        runtime.set_thread_runtime(name)
        try:
            for threads in (2, 3):
                got = x0.copy()
                assert _sinpe.add_held(path, threads, rows, got) is True
                assert same(got, one), (name, threads)
        finally:
            runtime.set_thread_runtime("auto")


def test_held_add_refusals_write_nothing():
    """The core's held add itself (the C entry the route calls): False and nothing written
    for each layout it does not take; True and the core's sum otherwise."""
    from sinpe import _sinpe
    path = _held._STATE["path"]
    rows = sinpe.positional_encoding(8, 64)
    x0 = _x((3, 8, 64), np.float32)
    x = x0.copy()
    assert _sinpe.add_held(path, 1, rows, x) is True
    with np.errstate(all="ignore"):
        assert same(x, x0 + rows)
    cases = {
        "no array": [[[1.0] * 64] * 8] * 3,
        "read-only": np.frombuffer(x0.tobytes(), np.float32).reshape(x0.shape),
        "rows' shape": x0.copy()[:, :4],
        "one axis": x0.copy().reshape(-1),
        "transposed": x0.copy().transpose(0, 2, 1).copy().transpose(0, 2, 1),
        "unaligned": _unaligned(x0),
        "int32": np.arange(x0.size, dtype=np.int32).reshape(x0.shape),
        "complex": x0.astype(np.complex64),
        "big-endian": x0.astype(">f4"),
        "empty": np.zeros((0, 8, 64), np.float32),
    }
    for what, y in cases.items():
        before = np.array(y, copy=True)
        assert _sinpe.add_held(path, 1, rows, y) is False, what
        after = np.ascontiguousarray(np.asarray(y)).view(np.uint8)
        assert np.array_equal(after, np.ascontiguousarray(before).view(np.uint8)), what
    # x sharing memory with the rows (x is the rows, or overlaps them): refused
    big = sinpe.positional_encoding(16, 64)
    keep = big.copy()
    for y in (big[:8], big[4:12], big[7:15]):
        assert _sinpe.add_held(path, 1, big[:8], y.reshape(1, 8, 64)) is False
        assert same(big, keep)
    assert _sinpe.add_held(path, 1, big[:8], big[8:].reshape(1, 8, 64)) is True  # disjoint
    with np.errstate(all="ignore"):
        assert same(big[8:], keep[8:] + keep[:8])
    if not TORCH_FREE:  # a tensor on the rows' memory (by DLPack): refused, untouched
        keep = big.copy()
        t = torch.from_numpy(big)[:8].reshape(1, 8, 64)
        assert _sinpe.add_held(path, 1, big[:8], t) is False
        assert _sinpe.add_held(path, 1, big[:8], t.to(torch.bfloat16).requires_grad_()) is False
        assert same(big, keep)
    with pytest.raises(TypeError, match="4 arguments"):
        _sinpe.add_held(path, 1, rows)
    for threads in (0, 257, -1):  # out of range: refused, nothing written
        y = x0.copy()
        assert _sinpe.add_held(path, threads, rows, y) is False
        assert same(y, x0)
    with pytest.raises(TypeError, match="path"):
        _sinpe.add_held("avx2", 1, rows, x0.copy())


def test_numpy_refusals_and_layouts_unchanged():
    x0 = _x((2, 8, 64), np.float32)
    sinpe.add_pe(x0.copy())
    ro = x0.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="x"):
        sinpe.add_pe(ro)
    assert same(ro, x0)
    # the same shape and dtype, not C-contiguous: the core's way, the core's bits
    f = np.asfortranarray(x0)
    assert same(sinpe.add_pe(f.copy(order="F")), _uncached(f.copy(order="F")))
    # elements sharing memory: refused by the core, untouched (rows held again: _uncached
    # turned the cache off, which dropped them)
    sinpe.add_pe(x0.copy())
    assert _held.held() == 1
    shared = np.lib.stride_tricks.as_strided(np.zeros(64, np.float32), (2, 8, 64), (0, 0, 4),
                                             writeable=True)
    with pytest.raises(ValueError):
        sinpe.add_pe(shared)


def test_route_follows_the_backend_and_base():
    x0 = _x((1, 16, 64), np.float32)
    for be in ("builtin", "mkl"):
        sinpe.add_pe(x0.copy(), backend=be)
    sinpe.set_backend("builtin")
    try:
        assert same(sinpe.add_pe(x0.copy()), _uncached(x0.copy(), backend="builtin"))
    finally:
        sinpe.set_backend("auto")
    assert same(sinpe.add_pe(x0.copy(), 500.0), _uncached(x0.copy(), base=500.0))

    class Odd(float):  # equal to 10000.0, read by the core as its own value: never the key's
        pass
    sinpe.add_pe(x0.copy())
    assert same(sinpe.add_pe(x0.copy(), Odd(10000.0)), _uncached(x0.copy(), base=Odd(10000.0)))


@pytest.mark.needs_torch
def test_route_follows_auto_when_torch_is_imported_later():
    r = run_python(
        "import numpy as np, sinpe\n"
        "x = np.zeros((1, 8, 64), np.float32)\n"
        "sinpe.add_pe(x.copy()); sinpe.add_pe(x.copy())\n"
        "a = sinpe.cache_info()\n"
        "import torch\n"
        "sinpe.add_pe(x.copy())\n"
        "b = sinpe.cache_info()\n"
        "print(a['hits'], a['misses'], b['hits'], b['misses'], sinpe.get_backend())\n")
    assert r.returncode == 0, r.stderr
    hits0, misses0, hits1, misses1, backend = r.stdout.split()
    # before torch: one miss, then the route's hit; after: torch's rows, a miss, not the route
    assert (hits0, misses0, backend) == ("1", "1", "torch")
    assert (hits1, misses1) == ("1", "2")


def test_views_go_when_the_cache_forgets():
    x = _x((1, 8, 64), np.float32)
    sinpe.add_pe(x.copy())
    assert _held.held() == 1
    sinpe.clear_cache()
    assert _held.held() == 0
    sinpe.add_pe(x.copy())
    sinpe.set_cache_size(0)
    assert _held.held() == 0
    sinpe.add_pe(x.copy())  # the cache off: nothing held
    assert _held.held() == 0
    sinpe.set_cache_size(1 << 20)
    sinpe.add_pe(x.copy())
    assert _held.held() == 1
    sinpe.add_pe(np.zeros((1, 4096, 64), np.float32))  # 1 MiB of rows evicts the first
    assert sinpe.cache_info()["entries"] == 1 and _held.held() <= 1


def test_offsets_and_other_arguments_are_not_held():
    x = _x((1, 8, 64), np.float32)
    for kw in ({"offset": 3}, {"max_len": 100}, {"threads": 1},
               {"positions": np.arange(8)}):
        sinpe.add_pe(x.copy(), **kw)
    assert _held.held() == 0


# ---- torch ---------------------------------------------------------------------------------

TORCH_DTYPES = ["float32", "float64", "float16", "bfloat16"]


@pytest.mark.needs_torch
@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("shape", [(8, 64), (1, 8, 64), (3, 130, 96), (2, 2, 16, 6)])
def test_torch_route_bits_are_the_cores(dtype, shape):
    x0 = torch.from_numpy(_x(shape, np.float64)).to(getattr(torch, dtype))
    got, want, hits = _routed(x0.clone)
    assert hits == 1 and same(got, want)
    # and torch's own add of the reference table gives the same bits
    pe = torch.from_numpy(sinpe.positional_encoding(shape[-2], shape[-1]))
    assert same(got, x0.clone().add_(pe))


@pytest.mark.needs_torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_torch_half_types_past_the_limit_go_the_cores_way(dtype):
    x0 = torch.zeros((2, 1024, 1026), dtype=getattr(torch, dtype))  # past 2^21 elements
    assert x0.numel() > _held._LIMITS[("torch", str(x0.dtype))]
    sinpe.add_pe(x0.clone())
    assert _held.held() == 0


@pytest.mark.needs_torch
@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_refusals_unchanged_on_the_route(dtype):
    """float32/float64 take torch's add_, float16/bfloat16 the core's held add through
    DLPack: each refusal of the core's way, unchanged, with rows held."""
    x0 = torch.from_numpy(_x((2, 8, 64), np.float64)).to(getattr(torch, dtype))
    sinpe.add_pe(x0.clone())
    assert _held.held() == 1

    def refused(x, exc=(ValueError, TypeError)):
        before = x.detach().resolve_neg().clone()
        with pytest.raises(exc, match="x"):
            sinpe.add_pe(x)
        assert same(x.detach().resolve_neg(), before)

    refused(x0.clone().requires_grad_())
    refused(x0.clone().requires_grad_() * 1)
    refused(torch._neg_view(x0.clone()))
    with torch.inference_mode():
        inf = x0.clone()
    refused(inf)
    sinpe.add_pe(x0[0].clone())  # rows held for the shape vmap's function sees
    with pytest.raises(TypeError, match="x"):
        torch.vmap(lambda t: sinpe.add_pe(t))(x0.clone())
    # written in place: the version counter moves, as the core's way moves it
    x = x0.clone()
    v = x._version
    sinpe.add_pe(x)
    assert x._version > v
    # a transposed view of the same shape: the core's way, the core's bits
    t = x0.clone().transpose(1, 2).contiguous().transpose(1, 2)
    assert same(sinpe.add_pe(t.clone()), _uncached(t.clone()))
    # a sparse tensor of the held shape and dtype: the core's refusal
    with pytest.raises(TypeError, match="x must be a strided tensor"):
        sinpe.add_pe(x0.clone().to_sparse())
    # another device's tensor is never taken by the route (meta: no memory)
    with pytest.raises(ValueError, match="x"):
        sinpe.add_pe(torch.empty((2, 8, 64), device="meta", dtype=x0.dtype))
    # elements sharing memory (a stride-0 expand made contiguous-looking is refused)
    e = torch.zeros(1, 8, 64, dtype=x0.dtype).expand(2, 8, 64)
    with pytest.raises(ValueError, match="x"):
        sinpe.add_pe(e)
    # a storage freed under the tensor: no write, the core names it
    f = x0.clone()
    f.untyped_storage().resize_(0)
    with pytest.raises((ValueError, RuntimeError)):
        sinpe.add_pe(f)


@pytest.mark.needs_torch
def test_torch_route_inside_inference_mode_and_subclasses():
    x0 = torch.from_numpy(_x((1, 8, 64), np.float32))
    with torch.inference_mode():
        sinpe.add_pe(x0.clone())
        x = x0.clone()
        sinpe.add_pe(x)
    assert same(x, _uncached(x0.clone()))
    p = torch.nn.Parameter(x0.clone(), requires_grad=False)
    sinpe.add_pe(p)
    assert same(p.detach(), _uncached(x0.clone()))


# ---- positional_encoding's small tables: copies of held rows -------------------------------

@pytest.mark.parametrize("backend", ROUTE_BACKENDS)
@pytest.mark.parametrize("L, d", [(1, 2), (8, 64), (300, 130), (2048, 512)])
def test_table_copies_of_held_rows_are_the_cores(backend, L, d):
    kw = {} if backend is None else {"backend": backend}
    first = sinpe.positional_encoding(L, d, **kw)
    assert _held.held() == 1
    hits = sinpe.cache_info()["hits"]
    got = sinpe.positional_encoding(L, d, **kw)
    assert sinpe.cache_info()["hits"] == hits + 1
    size = sinpe.get_cache_size()
    sinpe.set_cache_size(0)
    try:
        want = sinpe.positional_encoding(L, d, **kw)
    finally:
        sinpe.set_cache_size(size)
    assert same(got, want) and same(first, want)
    # a fresh array each call, as the core's way returns: writing it changes no later result
    assert got.flags.c_contiguous and got.flags.writeable and got.flags.owndata
    got[...] = 7
    assert same(sinpe.positional_encoding(L, d, **kw), want)


def test_table_route_only_for_plain_calls():
    sinpe.positional_encoding(8, 64)
    assert _held.held() == 1
    sinpe.clear_cache()
    for kw in ({"offset": 2}, {"dtype": "float16"}, {"threads": 1},
               {"out": np.empty((8, 64), np.float32)}):
        sinpe.positional_encoding(8, 64, **kw)
    sinpe.positional_encoding(4096, 512)  # past TABLE_LIMIT
    assert _held.held() == 0
    with pytest.raises(ValueError):
        sinpe.positional_encoding(8, 63)

    class Odd(int):
        pass
    sinpe.positional_encoding(8, 64)
    assert same(sinpe.positional_encoding(Odd(8), 64), sinpe.positional_encoding(8, 64))


# ---- the review's cases: each refusal, state and race the route must keep -----------------

@pytest.mark.needs_torch
def test_torch_route_refuses_a_freed_storage_and_runs_under_no_mode():
    sinpe.add_pe(torch.zeros(2, 8, 64))
    x = torch.zeros(2, 8, 64)
    x.untyped_storage().resize_(0)  # as FSDP frees a parameter's storage
    with pytest.raises(ValueError, match="x"):
        sinpe.add_pe(x)
    seen = []

    class Spy(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))
    x0 = torch.from_numpy(_x((2, 8, 64), np.float32))
    with Spy():
        got = sinpe.add_pe(x0.clone())
    assert "add_" not in seen and same(got, _uncached(x0.clone()))
    from torch._subclasses.fake_tensor import FakeTensorMode
    sinpe.clear_cache()
    with FakeTensorMode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's about a fake tensor's data pointer
        try:
            sinpe.add_pe(torch.zeros(2, 8, 64))
        except ValueError:  # fake tensors have no memory: the core names x
            pass
    assert _held.held() == 0  # nothing held under a mode
    assert same(sinpe.add_pe(x0.clone()), _uncached(x0.clone()))


def test_route_held_only_for_the_state_the_call_ran_in():
    """A set_backend between the key and the call (another thread's): the rows are not held
    under the key of the other state."""
    from sinpe._backends import policy
    x = _x((1, 8, 64), np.float32)
    sinpe.set_backend("mkl")
    try:
        key = _held.add(x.copy(), 10000.0, 0, None)
        sinpe.add_pe(x.copy(), backend="builtin")  # builtin's rows in the cache
        _held.forget()  # (that call held its own, under its own key)
        _held.keep(policy.opts("builtin"), x.copy(), key, 0)
        assert _held.held() == 0
        _held.keep(policy.opts(None), x.copy(), key, 0)  # mkl's rows are not kept yet
        assert _held.held() == 0
    finally:
        sinpe.set_backend("auto")


def test_no_view_outlives_a_cache_turned_off():
    sinpe.add_pe(_x((1, 8, 64), np.float32))
    sinpe.set_cache_size(0)
    _held._VIEWS[("raced",)] = object()  # a view stored by a call that raced the first
    sinpe.set_cache_size(0)
    assert _held.held() == 0


def test_numpy_route_quiets_a_signalling_nan_as_the_core_does():
    x0 = np.zeros((1, 8, 64), np.float32)
    x0.view(np.uint32)[0, 0, :4] = [0x7F800001, 0xFF800001, 0x7FA00000, 0x7FC00001]
    sinpe.add_pe(x0.copy())
    with np.errstate(invalid="raise"):
        got = sinpe.add_pe(x0.copy())
    assert same(got, _uncached(x0.copy()))


def test_dtype_spellings_kept_by_value_only():
    from sinpe import _dtypes
    meta = np.dtype(np.float32, metadata={"unit": "rad"})
    assert _dtypes.resolve(meta).metadata == {"unit": "rad"}
    assert _dtypes.resolve(np.dtype(np.float32)).metadata is None


@pytest.mark.needs_torch
@pytest.mark.parametrize("way", ["route", "core"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_an_interrupt_after_the_write_leaves_the_version_moved(way, dtype):
    """A signal's handler runs at the interpreter's first check after a GIL-free write returns
    (a KeyboardInterrupt raised there, as a profile hook can): x written must have its version
    moved already, so a graph that saved x refuses to backpropagate (a hostile probe found
    1,662 of 1,944 real SIGINTs leaving x written and its version unmoved)."""
    import sys
    S = (1, 8, 64)
    if way == "core":
        sinpe.set_cache_size(0)
    sinpe.add_pe(torch.zeros(S, dtype=getattr(torch, dtype)))  # rows held (way "route")
    from sinpe import _sinpe
    writer = _sinpe.add_held if way == "route" else _sinpe.add  # (float32 too: the core's)
    x = torch.zeros(S, dtype=getattr(torch, dtype))
    w = torch.ones(S, dtype=x.dtype, requires_grad=True)
    y = (x * w).sum()  # the graph saves x
    v0 = x._version

    def hook(frame, event, arg):
        if event == "c_return" and arg is writer:
            sys.setprofile(None)
            raise KeyboardInterrupt
    try:
        sys.setprofile(hook)
        with pytest.raises(KeyboardInterrupt):
            sinpe.add_pe(x)
    finally:
        sys.setprofile(None)
    assert bool(x.any()) and x._version != v0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


@pytest.mark.needs_torch
@pytest.mark.parametrize("way", ["route", "core"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "bfloat16"])
def test_a_storage_resized_under_x_is_refused(way, dtype):
    """A tensor whose storage was shrunk under it (not to zero) reaches past the storage's
    end: refused by name, nothing written past it (a hostile probe's case crashed the
    allocator: malloc(): corrupted), on the route and on the core's way alike; apply_rope and
    an out= table too."""
    S = (1, 8, 64)
    if way == "core":
        sinpe.set_cache_size(0)
    td = getattr(torch, dtype)
    sinpe.add_pe(torch.zeros(S, dtype=td))
    x = torch.ones(S, dtype=td)
    x.untyped_storage().resize_(16)
    with pytest.raises(ValueError, match="storage"):
        sinpe.add_pe(x)
    with pytest.raises(ValueError, match="storage"):
        sinpe.apply_rope(x)
    with pytest.raises(ValueError, match="storage"):
        sinpe.positional_encoding(8, 64, out=x)
    ok = torch.ones(S, dtype=td)[..., :32]  # a view inside its storage: fine (the core's way)
    sinpe.add_pe(ok)
