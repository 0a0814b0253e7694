"""The cache of computed rows (sinpe/_cache.py, docs/speed.md): the bits never depend on it.

Every call is compared with the same call and the cache off, bit for bit, across backends
(with and without coupled lanes), offsets, growth in both directions, eviction under small
budgets, positions, dtypes and apply_rope's tables; then the settings, the report, threads
racing one key and a forked child."""
import os
import random
import threading

import numpy as np
import pytest

import sinpe
from conftest import BF16, positions_written_by_a_thread, same

RNG = np.random.default_rng(18)
BACKENDS = [b for b, ok in sinpe.backends().items() if ok]


@pytest.fixture(autouse=True)
def _restore_cache():
    size = sinpe.get_cache_size()
    yield
    sinpe.set_cache_size(size)


def _call(kind, be, d, L, off, pos, x0):
    if kind == "table":
        return sinpe.positional_encoding(L, d, offset=off, backend=be)
    if kind == "table16":
        return sinpe.positional_encoding(L, d, offset=off, backend=be, dtype="float16")
    if kind == "table64":
        return sinpe.positional_encoding(L, d, offset=off, backend=be, dtype="float64")
    if kind == "tablepos":
        return sinpe.positional_encoding(d_model=d, positions=pos, backend=be)
    x = x0.copy() if kind != "addbf" else x0.astype(BF16)
    if kind == "add16":
        x = x0.astype(np.float16)
    if kind == "addpos":
        sinpe.add_pe(x, positions=pos, backend=be)
    elif kind == "addml":
        sinpe.add_pe(x, offset=off, max_len=off + L + 5, backend=be)
    else:
        sinpe.add_pe(x, offset=off, backend=be)
    return x


def _sequence(seed, n):
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        be = rnd.choice(BACKENDS)
        d, L = rnd.choice([4, 64, 130]), rnd.choice([1, 2, 7, 64, 300])
        off = rnd.choice([0, 0, 0, 1, 63, 64, 299, 4990, 4999, 70000, 2**40])
        kind = rnd.choice(["table", "table16", "table64", "tablepos", "add", "add16", "addbf",
                           "addpos", "addml"])
        pos = RNG.integers(0, rnd.choice([50, 2000]), size=(2, L))
        out.append((kind, be, d, L, off, pos, RNG.standard_normal((2, L, d)).astype(np.float32)))
    return out


@pytest.mark.parametrize("budget", [64 << 20, 300_000, 40_000])
def test_bits_do_not_depend_on_the_cache(budget):
    """A random sequence of calls (the cache grows, serves sub-ranges, evicts) against the
    same calls with the cache off."""
    calls = _sequence(budget, 300)
    sinpe.set_cache_size(0)
    want = [_call(*c) for c in calls]
    sinpe.set_cache_size(budget)
    sinpe.clear_cache()
    for c, w in zip(calls, want):
        got = _call(*c)
        assert same(got, w), c[:5]
    info = sinpe.cache_info()
    assert info["hits"] > 0 and info["used"] <= budget


def test_growth_both_ways_and_streaming():
    """Rows asked one at a time (decoding), then before the first ones, then far away."""
    sinpe.set_cache_size(0)
    want = sinpe.positional_encoding(400, 64, offset=100)
    sinpe.set_cache_size(64 << 20)
    sinpe.clear_cache()
    for k in range(200, 260):  # one row per call, as a decoder asks for them
        x = np.zeros((1, 1, 64), np.float32)
        sinpe.add_pe(x, offset=k)
        assert same(x[0], want[k - 100:k - 99])
    assert same(sinpe.positional_encoding(150, 64, offset=100), want[:150])  # grows down
    assert same(sinpe.positional_encoding(5, 64, offset=495), want[395:])
    assert sinpe.cache_info()["entries"] >= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_hits_and_misses_alike(backend):
    sinpe.set_cache_size(0)
    x0 = RNG.standard_normal((3, 128, 96)).astype(np.float32)
    want = x0.copy()
    sinpe.add_pe(want, backend=backend)
    sinpe.set_cache_size(64 << 20)
    sinpe.clear_cache()
    for _ in range(3):  # a miss, then hits
        x = x0.copy()
        sinpe.add_pe(x, backend=backend)
        assert same(x, want)
    assert sinpe.cache_info()["hits"] >= 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(0, 2, 4), (3, 0, 7, 64), (0, 5000, 512)])
def test_empty_batch_computes_nothing_and_keeps_nothing(backend, shape):
    """An x with an empty leading axis (a batch of none) once reached the core's cache fill
    with no scratch: oneMKL refused a NULL output, then a segfault (the CI fuzzer's finding,
    tools/fuzz/corpus/add_empty_batch.bin).  It is left as it is, and later calls keep their
    bits."""
    sinpe.set_cache_size(0)
    x0 = RNG.standard_normal((2,) + shape[-2:]).astype(np.float32)
    want = x0.copy()
    sinpe.add_pe(want, backend=backend)
    sinpe.set_cache_size(64 << 20)
    sinpe.clear_cache()
    for dt in (np.float32, np.float16, BF16, np.float64):
        e = np.zeros(shape, dt)
        assert sinpe.add_pe(e, backend=backend) is e and e.shape == shape
    assert sinpe.cache_info()["entries"] == 0
    x = x0.copy()
    sinpe.add_pe(x, backend=backend)
    assert same(x, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("offset,d,kept", [(2**61 - 2, 8, False), (2**62 - 1, 4, False),
                                            (2**62, 4, False), (2**59 - 8, 8, True)])
def test_rows_far_out_bits_do_not_depend_on_the_cache(backend, offset, d, kept):
    """Rows whose elements from row 0 pass int64 (torch's tensor would be the rows
    themselves): the cache once leased them and the core's fill indexed them from row 0, a
    signed overflow (UBSan; SLEEF's lane grouping too).  Such rows are not kept."""
    sinpe.set_cache_size(0)
    want = sinpe.positional_encoding(3, d, offset=offset, backend=backend)
    x0 = RNG.standard_normal((2, 3, d)).astype(np.float32)
    want_x = x0.copy()
    sinpe.add_pe(want_x, offset=offset, backend=backend)
    sinpe.set_cache_size(64 << 20)
    sinpe.clear_cache()
    for _ in range(2):
        assert same(sinpe.positional_encoding(3, d, offset=offset, backend=backend), want)
        x = x0.copy()
        sinpe.add_pe(x, offset=offset, backend=backend)
        assert same(x, want_x)
    assert (sinpe.cache_info()["entries"] > 0) == kept  # just below the limit: kept, and filled


def test_apply_rope_tables_kept():
    q0 = RNG.standard_normal((2, 4, 33, 64)).astype(np.float32)
    pos = np.arange(33)[None].repeat(2, 0)
    sinpe.set_cache_size(0)
    want = [sinpe.apply_rope(q0.copy(), **kw) for kw in
            ({}, {"offset": 7}, {"positions": pos}, {"layout": "pairs"}, {"rot_dim": 32})]
    sinpe.set_cache_size(64 << 20)
    sinpe.clear_cache()
    for _ in range(2):
        got = [sinpe.apply_rope(q0.copy(), **kw) for kw in
               ({}, {"offset": 7}, {"positions": pos}, {"layout": "pairs"}, {"rot_dim": 32})]
        assert all(same(g, w) for g, w in zip(got, want))
    assert sinpe.cache_info()["hits"] >= 5


def test_kernel_change_is_a_new_key():
    sinpe.clear_cache()
    old = sinpe.get_kernel()
    try:
        for k in sinpe.kernels():
            sinpe.set_kernel(k)
            assert same(sinpe.positional_encoding(50, 32, backend="builtin"),
                        sinpe.positional_encoding(50, 32, backend="builtin"))
    finally:
        sinpe.set_kernel(old)
    assert sinpe.cache_info()["entries"] >= len(sinpe.kernels())


def test_settings_and_report():
    sinpe.set_cache_size(1 << 20)
    assert sinpe.get_cache_size() == 1 << 20
    assert sinpe.numerics()["cache"]["size"] == 1 << 20
    for bad, exc in [(-1, ValueError), (1.5, TypeError), (True, TypeError), ("1", TypeError)]:
        with pytest.raises(exc, match="nbytes"):
            sinpe.set_cache_size(bad)
    sinpe.positional_encoding(2000, 256)  # 2 MB: more than the budget, not kept
    assert sinpe.cache_info()["used"] <= 1 << 20
    sinpe.set_cache_size(0)
    assert sinpe.cache_info()["used"] == 0 and sinpe.cache_info()["entries"] == 0


def test_environment_variable():
    from conftest import run_python
    r = run_python("import sinpe; print(sinpe.get_cache_size())", SINPE_CACHE_MB="3")
    assert r.stdout.strip() == str(3 << 20), r.stderr
    r = run_python("import sinpe; print(sinpe.get_cache_size())", SINPE_CACHE_MB="0")
    assert r.stdout.strip() == "0", r.stderr
    r = run_python("import sinpe", SINPE_CACHE_MB="lots")
    assert r.returncode != 0 and "SINPE_CACHE_MB='lots' is not valid" in r.stderr


def test_threads_racing_one_key():
    """Eight threads ask for the same and for growing rows at once: every result has the
    bits of the cache-off call, and the cache stays consistent."""
    sinpe.set_cache_size(0)
    want = sinpe.positional_encoding(3000, 128)
    sinpe.set_cache_size(64 << 20)
    sinpe.clear_cache()
    errors = []
    barrier = threading.Barrier(8)

    def work(i):
        barrier.wait()
        try:
            for k in range(30):
                n = 100 * ((i + k) % 30 + 1)
                x = np.zeros((2, n, 128), np.float32)
                sinpe.add_pe(x, threads=1)
                if not (same(x[0], want[:n]) and same(x[1], want[:n])):
                    errors.append((i, k, n))
        except Exception as exc:  # noqa: BLE001 - any exception is a failure
            errors.append(repr(exc))
    ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert not errors


def test_forked_child_keeps_valid_rows():
    sinpe.clear_cache()
    want = sinpe.positional_encoding(500, 64)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a lock taken by no thread, the parent's rows still right
        ok = same(sinpe.positional_encoding(500, 64), want) and sinpe.cache_info()["entries"] >= 1
        x = np.zeros((1, 600, 64), np.float32)
        sinpe.add_pe(x)
        ok = ok and same(x[0, :500], want)
        os.write(w, b"1" if ok else b"0")
        os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.waitpid(pid, 0)
    assert got == b"1"


def test_rows_and_rope_tables_share_the_budget():
    """Kept rows and kept rope tables evict each other under a small budget (least recently
    used first), and every result keeps the cache-off bits."""
    calls = [("rope", L) if i % 2 else ("add", L) for i, L in enumerate([17, 40, 17, 90, 40, 200] * 3)]
    q0 = RNG.standard_normal((1, 2, 200, 32)).astype(np.float32)
    x0 = RNG.standard_normal((2, 200, 32)).astype(np.float32)

    def run(kind, L):
        if kind == "rope":
            return sinpe.apply_rope(q0[:, :, :L].copy())
        x = x0[:, :L].copy()
        sinpe.add_pe(x)
        return x
    sinpe.set_cache_size(0)
    want = [run(*c) for c in calls]
    sinpe.set_cache_size(60_000)
    sinpe.clear_cache()
    for c, w in zip(calls, want):
        assert same(run(*c), w), c
    assert sinpe.cache_info()["used"] <= 60_000


# ---- issue 25: leases released, filled rows only, O(1) eviction, the memory rule -----------

FAILING = [
    lambda: sinpe.positional_encoding(180, 64, dtype="int8"),
    lambda: sinpe.positional_encoding(180, 64, out=np.zeros((3, 3), np.float32)),
    lambda: sinpe.positional_encoding(180, 64, threads=0),
    lambda: sinpe.add_pe(np.zeros((2, 180, 64), np.float32)[:, ::1, ::2].reshape(2, 180, 32)
                         [:, :, :31]),
    lambda: sinpe.add_pe(np.zeros((180, 64), np.float32), threads=-1),
    lambda: sinpe.add_pe(np.zeros((180, 64), np.float32), positions=np.arange(180) * 1.0,
                         max_len="x"),
]


@pytest.mark.parametrize("fail", range(len(FAILING)))
def test_a_failing_call_releases_its_lease(fail):
    """Issue 25, 1: an error between the lease and the call (here the dtype, out=, threads,
    an odd d_model) left the entry 'filling' for good: the table never grew again and
    set_cache_size(0) left bytes used."""
    sinpe.set_cache_size(64 << 20)
    sinpe.clear_cache()
    sinpe.positional_encoding(100, 64)
    sinpe.positional_encoding(150, 64)
    with pytest.raises((TypeError, ValueError, OverflowError)):
        FAILING[fail]()
    hits = sinpe.cache_info()["hits"]
    want = sinpe.positional_encoding(200, 64)  # grows past 150 again
    assert sinpe.cache_info()["hits"] == hits
    assert same(sinpe.positional_encoding(200, 64), want)
    assert sinpe.cache_info()["hits"] == hits + 1
    sinpe.set_cache_size(0)
    assert sinpe.cache_info()["used"] == 0 and sinpe.cache_info()["entries"] == 0


def test_interrupted_lease_is_released(monkeypatch):
    """Any exception after the lease (KeyboardInterrupt from the fresh buffer's making too)
    releases it."""
    from sinpe import _cache
    sinpe.set_cache_size(64 << 20)
    sinpe.clear_cache()
    sinpe.positional_encoding(100, 64)

    def boom(rows, d):
        raise KeyboardInterrupt
    monkeypatch.setattr(_cache, "_fresh", boom)
    with pytest.raises(KeyboardInterrupt):
        sinpe.positional_encoding(1000, 64)
    monkeypatch.undo()
    want = sinpe.positional_encoding(1000, 64)
    assert same(sinpe.positional_encoding(1000, 64), want)
    assert sinpe.cache_info()["entries"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_masked_positions_never_read_unfilled_rows(backend):
    """Issue 25, 2: a masked array's max() ignores the masked 180, the core reads the data:
    the rows the cache never filled (zeros, or anything) are never served."""
    sinpe.set_cache_size(0)
    pos = np.ma.array([1, 2, 180], mask=[0, 0, 1])
    want = np.zeros((3, 64), np.float32)
    sinpe.add_pe(want, positions=np.asarray(pos), backend=backend)
    want_t = sinpe.positional_encoding(d_model=64, positions=np.asarray(pos), backend=backend)
    sinpe.set_cache_size(64 << 20)
    for _ in range(2):
        sinpe.clear_cache()
        sinpe.positional_encoding(100, 64, backend=backend)
        sinpe.positional_encoding(150, 64, backend=backend)
        x = np.zeros((3, 64), np.float32)
        sinpe.add_pe(x, positions=pos, backend=backend)
        assert same(x, want)
        assert same(sinpe.positional_encoding(d_model=64, positions=pos, backend=backend), want_t)


def test_positions_changed_by_another_thread():
    """Issue 25, 2: positions written by another thread between the lease and the call:
    whatever the core reads, its rows are the cache-off call's."""
    sinpe.set_cache_size(0)
    table = sinpe.positional_encoding(4096, 32)
    sinpe.set_cache_size(64 << 20)
    sinpe.clear_cache()
    pos = np.zeros(64, np.int64)
    with positions_written_by_a_thread(pos, 4096):
        for i in range(300):
            sinpe.positional_encoding(i % 50 + 1, 32)
            r = sinpe.positional_encoding(d_model=32, positions=pos)
            got = np.asarray(r)
            # every row is some position's row (whichever value the core read)
            for row in got:
                hits = np.nonzero((table.view(np.uint32) == row.view(np.uint32)).all(1))[0]
                assert hits.size > 0


def test_eviction_is_least_recently_used_and_constant_time():
    """Issue 25, 3: entries in use order (a hit moves its entry last); eviction pops the
    oldest without scanning.  Issue 38: apply_rope's decode steps keep one window of rows by
    position, filled ROPE_STEP rows at a time."""
    from sinpe import _cache
    sinpe.set_cache_size(64 << 20)
    sinpe.clear_cache()
    q = RNG.standard_normal((1, 8, 1, 128)).astype(np.float32)
    before = sinpe.cache_info()  # hits and misses count from import
    for t in range(300):
        sinpe.apply_rope(q, offset=t)
    info = sinpe.cache_info()
    hits, misses = info["hits"] - before["hits"], info["misses"] - before["misses"]
    assert info["entries"] == 1 and hits >= 300 - 300 // _cache.ROPE_STEP - 1
    assert misses <= 300 // _cache.ROPE_STEP + 1
    q = RNG.standard_normal((1, 2, 64, 64)).astype(np.float32)
    one = 2 * 64 * 64 * 4
    sinpe.set_cache_size(3 * one)
    sinpe.clear_cache()

    def at(t):  # float positions: the tables are kept whole, by the positions' bytes
        return np.arange(t, t + 64, dtype=np.float32)
    for t in (0, 1, 2):
        sinpe.apply_rope(q.copy(), at(t))
    sinpe.apply_rope(q.copy(), at(0))  # a hit: 0 is now the most recent
    sinpe.apply_rope(q.copy(), at(3))  # evicts 1, the least recently used
    firsts = [int(np.frombuffer(k.where[2], np.float32)[0]) for k in _cache._ENTRIES]
    assert firsts == [2, 0, 3]


def test_a_bad_out_allocates_no_kept_buffer(monkeypatch):
    """Issue 25, 4: the kept buffer is made by the call after its own checks (a bad out=
    made a 2 GiB buffer before its ValueError)."""
    from sinpe import _cache
    made = []
    real = _cache._fresh
    monkeypatch.setattr(_cache, "_fresh", lambda r, d: made.append((r, d)) or real(r, d))
    sinpe.set_cache_size(64 << 20)
    sinpe.clear_cache()
    for bad in (np.zeros((3, 3), np.float32), np.zeros((1000, 64), np.int32),
                np.zeros((1000, 64), np.float32)[:, ::2]):
        with pytest.raises((TypeError, ValueError)):
            sinpe.positional_encoding(1000, 64, out=bad)
    shared = np.lib.stride_tricks.as_strided(np.zeros(64, np.float32), (1000, 64), (0, 4))
    with pytest.raises(ValueError):  # rows that share memory
        sinpe.add_pe(shared)
    assert made == [] and sinpe.cache_info()["entries"] == 0
    sinpe.positional_encoding(1000, 64)
    assert made == [(1000, 64)]


def test_kept_buffer_that_cannot_be_had_leaves_the_call_uncached(monkeypatch):
    """Issue 25, 4: the kept buffer is admitted with the result by the memory rule, and a
    buffer the allocator refuses (an address-space limit) leaves the call computing as
    without a cache, never failing it."""
    from sinpe import _cache

    def refuse(r, d):
        raise MemoryError("Unable to allocate")
    monkeypatch.setattr(_cache, "_fresh", refuse)
    sinpe.set_cache_size(64 << 20)
    sinpe.clear_cache()
    want = sinpe.positional_encoding(300, 64, backend="builtin")
    x = np.zeros((2, 300, 64), np.float32)
    sinpe.add_pe(x, backend="builtin")
    assert same(x[1], want) and sinpe.cache_info()["entries"] == 0


def test_set_cache_size_refuses_more_than_physical_memory():
    from sinpe import _cache
    phys = _cache._physical()
    assert phys > 0
    for bad in (2**60, phys + 1, np.int64(2**62)):
        with pytest.raises(ValueError, match="nbytes must be at most this machine's physical"):
            sinpe.set_cache_size(bad)
    sinpe.set_cache_size(phys)
    assert sinpe.get_cache_size() == phys


def test_environment_variable_past_physical_memory():
    from conftest import run_python
    r = run_python("import sinpe", SINPE_CACHE_MB=str(1 << 39))
    assert r.returncode != 0 and "SINPE_CACHE_MB=" in r.stderr and "physical" in r.stderr


def test_keys_only_from_the_values_the_core_reads():
    """A hostile probe: the key took float(base) (a subclass's __float__) where the core reads
    a float's own value, and int(offset) where the core reads __index__: one call stored rows
    under another call's key, and later plain calls got wrong bits (or a RuntimeError).
    Such values are never keys; the plain calls after them equal the cache off."""
    class Base(np.float64):
        def __float__(self):
            return 500.0

    class Off(np.int64):
        def __int__(self):
            return 0

        def __index__(self):
            return 5

    sinpe.clear_cache()
    sinpe.positional_encoding(64, 32, base=Base(10000.0))
    sinpe.add_pe(np.zeros((64, 32), np.float32), base=Base(10000.0))
    later = sinpe.positional_encoding(64, 32, base=500.0)
    x = sinpe.add_pe(np.zeros((8, 32), np.float32), offset=Off(5))
    zero = sinpe.positional_encoding(8, 32)
    sinpe.clear_cache()
    assert same(later, sinpe.positional_encoding(64, 32, base=500.0))
    assert same(x, sinpe.positional_encoding(8, 32, offset=5))
    assert same(zero, sinpe.positional_encoding(8, 32))


def test_a_growing_entry_is_copied_once_not_every_step():
    """A second probe: once doubling an entry passed the budget, every step of a decoder's
    add_pe(x, offset=t) made a new buffer and copied the whole entry (8-19 ms a step against
    0.01 ms with the cache off).  The entry now grows to the largest buffer the budget allows,
    then in place; past it a new entry starts and doubles; the bits are the cache-off bits."""
    from sinpe import _cache
    saved = sinpe.get_cache_size()
    try:
        sinpe.set_cache_size(1 << 20)  # 4096 rows of d_model 64
        sinpe.clear_cache()
        d = 64
        sinpe.add_pe(np.zeros((1500, d), np.float32))  # a prompt: 1500 rows kept
        buffers, got = set(), []
        for t in range(1500, 4600):
            got.append(sinpe.add_pe(np.zeros((1, d), np.float32), offset=t)[0])
            for e in list(_cache._ENTRIES.values()):
                buffers.add(id(e.rows))
        # the prompt's, the doubled one, the largest the budget allows, then a new entry past
        # it that doubles again: O(log n) buffers (before: a new buffer every step, ~1,100)
        assert len(buffers) <= 16, len(buffers)
        sinpe.set_cache_size(0)
        want = sinpe.positional_encoding(3100, d, offset=1500)
        assert same(np.stack(got), want)
    finally:
        sinpe.set_cache_size(saved)


def test_one_far_position_is_not_kept():
    """A second probe: positions=[t] leased rows 0 .. t (80-330 ms for t about 250,000 against
    0.02 ms with the cache off): a lease whose rows far outnumber the call's positions is not
    kept; the bits are the same."""
    sinpe.clear_cache()
    before = sinpe.cache_info()["entries"]
    a = sinpe.positional_encoding(d_model=64, positions=np.array([250_000]))
    assert sinpe.cache_info()["entries"] == before
    saved = sinpe.get_cache_size()
    sinpe.set_cache_size(0)
    try:
        assert same(a, sinpe.positional_encoding(d_model=64, positions=np.array([250_000])))
    finally:
        sinpe.set_cache_size(saved)


@pytest.mark.needs_torch
def test_clear_cache_empties_the_torch_wings_memos():
    """The torch wing's caches (rotation plans, recognised functions, ...) are Memos:
    sinpe.clear_cache() empties them with the rows, and the next rotation gives the same
    bits (a plan made again)."""
    import torch
    import sinpe.torch as st
    from sinpe._torch import rotate
    q = torch.randn(1, 4, 3, 8)
    cos, sin = torch.randn(1, 3, 8), torch.randn(1, 3, 8)
    first = st.apply_rotary_pos_emb(q, q.clone(), cos, sin)
    assert len(rotate._PLANS) > 0
    sinpe.clear_cache()
    assert len(rotate._PLANS) == 0
    again = st.apply_rotary_pos_emb(q, q.clone(), cos, sin)
    assert len(rotate._PLANS) > 0
    for a, b in zip(first, again):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))
