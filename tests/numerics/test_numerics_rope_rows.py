"""apply_rope's fast routes (issue 38): the rows kept by position, the kept plans, q and k in
one call, the pairs on the code paths and runs of rows per path call.  Every route is
compared bit for bit with a route it replaced: the cache off (the per-call tables), separate
calls, torch's own ops."""
import threading

import numpy as np
import pytest

import sinpe
from conftest import BF16, positions_written_by_a_thread, same

RNG = np.random.default_rng(38)


@pytest.fixture(autouse=True)
def _restore():
    from sinpe._backends import policy
    size, backend, kernel = sinpe.get_cache_size(), policy.get_default(), sinpe.get_kernel()
    yield
    sinpe.set_cache_size(size)
    sinpe.set_backend(backend)
    sinpe.set_kernel(kernel)


def _off(fn):
    sinpe.set_cache_size(0)
    try:
        return fn()
    finally:
        sinpe.set_cache_size(64 << 20)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
@pytest.mark.parametrize("layout", ["half", "pairs"])
def test_decode_steps_read_kept_rows_equal_to_the_per_call_tables(dtype, layout):
    """A decode loop (offset, one position, a batch of positions, a jump back, a prefill)
    reads rows kept by position: each step's bits are the cache-off call's."""
    q = RNG.standard_normal((3, 4, 1, 64)).astype(dtype)
    steps = [dict(offset=t) for t in range(0, 200, 7)] + \
        [dict(positions=np.array([t])) for t in (5, 64, 65, 300, 2)] + \
        [dict(positions=np.array([[9], [1000], [3]])), dict(offset=70000), dict(offset=3)]
    want = [_off(lambda: sinpe.apply_rope(q.copy(), layout=layout, **kw)) for kw in steps]
    sinpe.clear_cache()
    for kw, w in zip(steps, want):
        assert same(sinpe.apply_rope(q.copy(), layout=layout, **kw), w), kw
    info = sinpe.cache_info()
    assert info["entries"] >= 1 and info["hits"] > len(steps) // 2
    x = RNG.standard_normal((1, 4, 300, 64)).astype(dtype)  # a prefill after the steps
    got = sinpe.apply_rope(x.copy(), np.arange(10, 310), layout=layout)
    assert same(got, _off(lambda: sinpe.apply_rope(x.copy(), np.arange(10, 310),
                                                    layout=layout)))


def test_kept_rows_follow_the_backend_and_refuse_coupled_ones():
    """A kept plan and kept rows never outlive the default backend they were made with;
    backends whose rows couple (their bits depend on the tensor) are never kept by position."""
    sinpe.set_cache_size(64 << 20)
    q = RNG.standard_normal((1, 2, 1, 32)).astype(np.float32)
    for be in [b for b, ok in sinpe.backends().items() if ok]:
        sinpe.set_backend(be)
        for t in (0, 1, 2, 500):
            got = sinpe.apply_rope(q.copy(), offset=t)
            want = _off(lambda: sinpe.apply_rope(q.copy(), offset=t, backend=be))
            assert same(got, want), (be, t)
    from sinpe import _cache
    from sinpe._backends import policy, records
    for be in [b for b, ok in sinpe.backends().items() if ok]:
        core = policy.opts(be)
        key = _cache.rows_key(core, 32, 10000.0, "half")
        assert (key is None) == (not records.INDEPENDENT[core.backend]), be


def test_positions_written_by_another_thread_read_once():
    """Positions another thread writes while a call gathers them: every row is some
    position's row, never a row outside the window (a negative index would wrap)."""
    ref = _off(lambda: sinpe.apply_rope(np.ones((1, 1, 3000, 32), np.float32),
                                        np.arange(3000)))
    rows = {r.tobytes() for r in ref[0, 0]}
    sinpe.set_cache_size(64 << 20)
    sinpe.clear_cache()
    pos = np.zeros(64, np.int64)
    with positions_written_by_a_thread(pos, 3000):
        for _ in range(100):
            y = sinpe.apply_rope(np.ones((1, 1, 64, 32), np.float32), pos)
            assert all(r.tobytes() in rows for r in y[0, 0])


@pytest.mark.parametrize("dtype,producer", [
    (dt, p) for dt in (np.float32, np.float16, BF16) for p in (None, "inductor", "onnxruntime")
    if not (p == "onnxruntime" and dt is BF16)])  # its kernel runs float32 and float16
@pytest.mark.parametrize("layout", ["half", "pairs"])
def test_q_and_k_in_one_call_equal_two_calls(dtype, layout, producer):
    """apply_rope_qk(q, k): the bits of apply_rope(q) and apply_rope(k), k with fewer heads
    (grouped-query attention), positions per batch, both layouts."""
    q = RNG.standard_normal((2, 8, 5, 64)).astype(dtype)
    k = RNG.standard_normal((2, 2, 5, 64)).astype(dtype)
    pos = np.array([[0, 1, 2, 3, 4], [7, 9, 11, 13, 15]])
    q1, k1 = q.copy(), k.copy()
    for _ in range(2):  # the second call by the kept plan
        rq, rk = sinpe.apply_rope_qk(q1, k1, pos, layout=layout, producer=producer)
        assert rq is q1 and rk is k1
    q2, k2 = q.copy(), k.copy()
    for _ in range(2):
        sinpe.apply_rope(q2, pos, layout=layout, producer=producer)
        sinpe.apply_rope(k2, pos, layout=layout, producer=producer)
    assert same(q1, q2) and same(k1, k2)


def test_q_and_k_refused_naming_k():
    q = np.zeros((1, 2, 3, 8), np.float32)
    with pytest.raises(ValueError, match="q and k"):
        sinpe.apply_rope_qk(q, np.zeros((1, 2, 3, 8), np.float16))
    with pytest.raises(ValueError, match="q and k"):
        sinpe.apply_rope_qk(q, np.zeros((1, 2, 3, 6), np.float32))
    with pytest.raises(ValueError, match="k"):
        sinpe.apply_rope_qk(q, np.zeros((1, 2, 4, 8), np.float32))
    shared = np.lib.stride_tricks.as_strided(np.zeros(8, np.float32), (1, 2, 3, 8),
                                             (0, 0, 0, 4), writeable=True)
    with pytest.raises(ValueError, match="^k has elements that share memory"):
        sinpe.apply_rope_qk(q, shared)  # the core's refusal, naming k (the second array)
    ro = np.zeros((1, 2, 3, 8), np.float32)
    ro.flags.writeable = False
    with pytest.raises((ValueError, TypeError), match="k"):
        sinpe.apply_rope_qk(q, ro)
    assert not q.any()  # nothing written by a refused call


def _nanny(shape, rng):
    a = rng.standard_normal(shape).astype(np.float32)
    m = rng.random(shape) < 0.3
    bits = (0x7f800000 | rng.integers(1, 1 << 23, shape)
            | (rng.integers(0, 2, shape) << 31)).astype(np.uint32)
    a[m] = bits[m].view(np.float32)
    return a


@pytest.mark.needs_torch
@pytest.mark.parametrize("kernel", sinpe.kernels())
def test_pairs_follow_torchs_nan_rule_on_every_path(kernel):
    """The pairs (rotary-embedding-torch: x * cos + rotate_half(x) * sin in float32, rounded
    once) on NaN-heavy x and tables: torch's ops' bits, NaN payloads included, on every code
    path, contiguous or strided x, float32 or x's own tables (tensors of 2 * 3 * 4 * D
    elements, D a multiple of 32: whole vectors of torch's loops, whose scalar tails keep
    other NaNs)."""
    import torch
    sinpe.set_kernel(kernel)
    rng = np.random.default_rng(7)

    def rot(t):
        x1, x2 = t.reshape(*t.shape[:-1], -1, 2).unbind(-1)
        return torch.stack((-x2, x1), -1).flatten(-2)
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        for D in (64, 128, 1088):
            for tdt in (torch.float32, dt):
                x = torch.from_numpy(_nanny((2, 3, 4, D), rng)).to(dt)
                c = torch.from_numpy(_nanny((4, D), rng)).to(tdt)
                s = torch.from_numpy(_nanny((4, D), rng)).to(tdt)
                want = (x.float() * c.float() + rot(x.float()) * s.float()).to(dt)
                iv = torch.int32 if dt == torch.float32 else torch.int16
                for strided in (False, True):
                    y = torch.zeros(2, 3, 4, 2 * D, dtype=dt)[..., ::2] if strided else x.clone()
                    y.copy_(x)
                    sinpe.apply_rope(y, cos=c, sin=s, layout="pairs")
                    assert torch.equal(y.contiguous().view(iv), want.view(iv)), \
                        (kernel, dt, tdt, D, strided)


@pytest.mark.parametrize("seq_dim", [-2, -3])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
def test_runs_of_rows_equal_one_row_at_a_time(seq_dim, dtype):
    """One path call per run of rows (the heads of a position, a head's positions): the
    bits of the scalar path, which the registry's every path is checked against, for shapes
    whose runs end inside a thread's block (256 vectors) and tables per batch."""
    for shape in ((2, 300, 3, 64), (1, 7, 129, 32), (3, 2, 2, 256)):
        x = RNG.standard_normal(shape).astype(dtype)
        seq = shape[seq_dim]
        pos = RNG.integers(0, 5000, (shape[0], seq))
        for layout in ("half", "pairs"):
            got = {}
            for kern in sinpe.kernels():
                sinpe.set_kernel(kern)
                got[kern] = sinpe.apply_rope(x.copy(), pos, layout=layout, seq_dim=seq_dim,
                                             threads=2)
            for kern, y in got.items():
                assert same(y, got["scalar"]), (shape, layout, kern)


def test_a_forked_child_fills_rows_while_a_parent_thread_was_filling():
    """A fork while another thread fills rows: the child's first miss does not wait for a
    filler that is not in it (the fill lock is made afresh)."""
    import os
    import time
    sinpe.set_cache_size(64 << 20)
    stop = threading.Event()

    def decode_far():
        x, off = np.ones((1, 1, 1, 128), np.float32), 0
        while not stop.is_set():
            off = (off + 100003) % (1 << 23)
            sinpe.apply_rope(x, offset=off)
    t = threading.Thread(target=decode_far, daemon=True)
    t.start()
    time.sleep(0.1)
    try:
        for _ in range(5):
            pid = os.fork()
            if pid == 0:  # the child: a miss, then out (a hang is killed by the alarm)
                import signal
                signal.alarm(20)
                y = sinpe.apply_rope(np.ones((1, 1, 1, 128), np.float32), offset=12345)
                os._exit(0 if np.isfinite(y).all() else 3)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
    finally:
        stop.set()
        t.join()


def test_given_tables_the_core_cannot_read_as_they_are_are_copied_every_call():
    """Big-endian or unaligned NumPy tables: the kept plan's second call copies them as the
    first did (the same bits; never handed to the core, which refuses the one and would read
    the other through misaligned pointers)."""
    def unaligned(a):
        b = bytearray(a.nbytes + 1)
        u = np.frombuffer(b, a.dtype, offset=1, count=a.size).reshape(a.shape)
        u[...] = a
        return u
    c0 = RNG.standard_normal((4, 8)).astype(np.float32)
    s0 = RNG.standard_normal((4, 8)).astype(np.float32)
    for c, s in ((c0.astype(">f4"), s0.astype(">f4")), (unaligned(c0), unaligned(s0)),
                 (unaligned(c0.astype(np.float16)), unaligned(s0.astype(np.float16)))):
        x = RNG.standard_normal((1, 2, 4, 8)).astype(np.float16)
        want = sinpe.apply_rope(x.copy(), cos=np.array(c, c.dtype.newbyteorder("=")),
                                sin=np.array(s, s.dtype.newbyteorder("=")))
        for _ in range(3):
            assert same(sinpe.apply_rope(x.copy(), cos=c, sin=s), want)


def test_q_and_k_named_through_the_kept_plan():
    q = np.ones((1, 4, 2, 8), np.float32)
    for _ in range(2):
        sinpe.apply_rope_qk(q.copy(), np.ones((1, 2, 2, 8), np.float32))
    k = np.ones((1, 2, 2, 8), np.float32)
    k.flags.writeable = False
    with pytest.raises(ValueError, match="^k is read-only"):
        sinpe.apply_rope_qk(q, k)
    with pytest.raises(ValueError, match="k must have q's batch"):
        sinpe.apply_rope_qk(np.ones((2, 4, 2, 8), np.float32), np.ones((1, 2, 2, 8), np.float32),
                            np.array([[1, 2], [3, 4]]))
    assert (q == 1).all()


def test_q_and_k_views_of_one_fused_buffer():
    """q and k as views of one qkv buffer (a fused projection): rotated one after the other,
    the bits of two apply_rope calls; the rest of the buffer untouched."""
    for dtype in (np.float32, np.float16):
        qkv = RNG.standard_normal((2, 5, 3 * 4 * 16)).astype(dtype)
        want = qkv.copy()
        wq = want[..., :64].reshape(2, 5, 4, 16)
        wk = want[..., 64:128].reshape(2, 5, 4, 16)
        sinpe.apply_rope(wq, seq_dim=1, offset=3)
        sinpe.apply_rope(wk, seq_dim=1, offset=3)
        got = qkv.copy()
        q = got[..., :64].reshape(2, 5, 4, 16)
        k = got[..., 64:128].reshape(2, 5, 4, 16)
        assert not np.shares_memory(q, k) and np.may_share_memory(q, k)
        sinpe.apply_rope_qk(q, k, seq_dim=1, offset=3)
        assert same(got, want)
