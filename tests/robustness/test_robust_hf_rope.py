"""sinpe.presets.hf_rope and sinpe.torch.apply_rotary_pos_emb on hostile input: every refusal a
TypeError/ValueError/OverflowError/MemoryError (or NotImplementedError where transformers'
result cannot be reproduced) naming the parameter, raised before the positions are read or
anything is allocated; and the edge cases where transformers returns a result (seq_len in
position_ids' own dtype, NaN positions, empty sequences) bit for bit with it."""
import time

import numpy as np
import pytest

import sinpe
from conftest import TORCH_FREE, same

if not TORCH_FREE:  # the torch-free passes deselect every test here (needs_torch)
    import torch
    import sinpe.torch as ST
    from sinpe.presets import hf_rope
    from sinpe._hf.rope import _memo as _freq_memo

pytestmark = [pytest.mark.needs_torch, pytest.mark.oracle_packages]


def llama(rp, mpe=4096):
    from transformers import LlamaConfig
    return LlamaConfig(hidden_size=256, num_attention_heads=4, max_position_embeddings=mpe,
                       rope_parameters=rp)


def hf_module(cfg, pos):
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    return LlamaRotaryEmbedding(cfg)(torch.zeros(1), torch.as_tensor(pos))


DYN = {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}
LONG = {"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": [1.5] * 32,
        "long_factor": [3.0] * 32, "original_max_position_embeddings": 1024}


@pytest.mark.parametrize("rp, mpe, pos", [
    # seq_len = max + 1 wraps in int32 (no regrowth), rounds in float16 (2048 + 1 -> 2048)
    (DYN, 4096, np.array([[0, 2**31 - 1]], np.int32)),
    (DYN, 2048, np.array([[0, 2048]], np.float16)),
    (LONG, 8192, np.array([[0, 2**31 - 1]], np.int32)),
    # a fractional position past the boundary switches (1023.5 + 1 > 1024)
    (LONG, 8192, np.array([[0, 1023.5]], np.float32)),
    (DYN, 4096, np.array([[0, 4095.5]], np.float32)),
    (DYN, 4096, np.array([[0, 5000.7]], np.float32)),
    # NaN positions: transformers' tables hold NaN; the switches compare False
    ({"rope_type": "default", "rope_theta": 1e4}, 4096, np.array([[np.nan, 1.0, np.inf]])),
    (DYN, 4096, np.array([[0.0, np.nan]])),
    (LONG, 8192, np.array([[0.0, np.nan]])),
])
def test_seq_len_in_position_ids_dtype(rp, mpe, pos):
    cfg = llama(rp, mpe)
    c, s = hf_module(cfg, pos)
    mc, ms = hf_rope(cfg, pos)
    assert same(mc, c), "cos"
    assert same(ms, s), "sin"


def test_float_positions_regrowth_refused():
    with pytest.raises(NotImplementedError, match="position_ids"):
        hf_rope(llama(DYN), np.array([[0.0, 5000.5]]))  # float64: the regrowth runs in float64
    with pytest.raises(ValueError, match="position_ids"):
        hf_rope(llama(DYN), np.array([[0.0, np.inf]], np.float32))


def test_huge_positions_refused_before_reading_them():
    cfg = llama({"rope_type": "dynamic", "rope_theta": 1e4, "factor": 2.0})
    t0 = time.perf_counter()
    for pos in (np.broadcast_to(np.int64(0), (2**20, 2**20)),  # max() would read 2^40 values
                np.broadcast_to(np.int64(0), (1, 2**31)), 2**40, np.int64(2**40)):
        with pytest.raises(MemoryError):
            hf_rope(cfg, pos)
    assert time.perf_counter() - t0 < 5


def test_int_positions():
    cfg = llama(DYN)
    c, s = hf_module(cfg, torch.arange(5000)[None])
    assert same(hf_rope(cfg, np.int64(5000))[0], c), "np.int64 n"
    assert same(hf_rope(cfg, 5000)[1], s), "int n"


def test_meta_tensors_named():
    cfg = llama({"rope_type": "default", "rope_theta": 1e4})
    with pytest.raises(ValueError, match="position_ids"):
        hf_rope(cfg, torch.arange(4, device="meta")[None])
    with pytest.raises(ValueError, match="inv_freq"):
        hf_rope(cfg, np.arange(4)[None], inv_freq=torch.ones(32, device="meta"))


H = {"hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 4}
POS = np.arange(8)[None]


@pytest.mark.parametrize("params, exc, name", [
    ({"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": float("nan")}, ValueError,
     "partial_rotary_factor"),
    ({"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": -0.5}, ValueError,
     "partial_rotary_factor"),
    ({"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 1e300}, OverflowError,
     "partial_rotary_factor"),
    ({"rope_type": "dynamic", "factor": float("nan")}, ValueError, "factor"),
    ({"rope_type": "dynamic", "factor": -2.0}, ValueError, "factor"),
    ({"rope_type": "dynamic", "factor": float("inf")}, ValueError, "factor"),
    ({"rope_type": "yarn", "factor": 4.0, "beta_fast": float("nan"),
      "original_max_position_embeddings": 4}, ValueError, "beta_fast"),
    ({"rope_type": "yarn", "factor": 4.0, "beta_slow": -1.0,
      "original_max_position_embeddings": 4}, ValueError, "beta_slow"),
    ({"rope_type": "yarn", "factor": 4.0, "beta_fast": "2",
      "original_max_position_embeddings": 4}, TypeError, "beta_fast"),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 0}, ValueError,
     "original_max_position_embeddings"),
    ({"rope_type": "yarn", "factor": 4.0, "attention_factor": "2",
      "original_max_position_embeddings": 4}, TypeError, "attention_factor"),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 0.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8}, ValueError, "low_freq_factor"),
    ({"rope_type": "longrope", "short_factor": [1.0] * 16, "long_factor": [1.0] * 16,
      "original_max_position_embeddings": 0}, ValueError, "original_max_position_embeddings"),
    ({"rope_type": "longrope", "short_factor": ["2"] * 16, "long_factor": [1.0] * 16,
      "original_max_position_embeddings": 16}, TypeError, "short_factor"),
])
def test_bad_rope_parameters_named(params, exc, name):
    with pytest.raises(exc, match=name):
        hf_rope(dict(H, rope_parameters=dict(params, rope_theta=10000.0)), POS)


def test_yarn_without_factor_or_max_position_embeddings():
    with pytest.raises(TypeError, match="max_position_embeddings"):
        hf_rope({"hidden_size": 64, "num_attention_heads": 2,
                 "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4,
                                     "original_max_position_embeddings": 4}}, POS)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_apply_rotary_pos_emb_empty_sequence(dtype):
    from transformers.models.cohere import modeling_cohere as MC
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as MD
    from transformers.models.glm import modeling_glm as MG
    from transformers.models.llama import modeling_llama as ML
    dt = getattr(torch, dtype)
    q, k = torch.zeros(2, 8, 0, 64, dtype=dt), torch.zeros(2, 2, 0, 64, dtype=dt)
    cos = sin = torch.zeros(2, 0, 64, dtype=dt)
    for mine, theirs in ((ST.apply_rotary_pos_emb, ML.apply_rotary_pos_emb),
                         (ST.apply_rotary_pos_emb_glm, MG.apply_rotary_pos_emb),
                         (ST.apply_rotary_pos_emb_cohere, MC.apply_rotary_pos_emb),
                         (ST.apply_rotary_pos_emb_interleave,
                          MD.apply_rotary_pos_emb_interleave)):
        for a, b in zip(mine(q, k, cos, sin), theirs(q, k, cos, sin)):
            assert a.shape == b.shape and a.dtype == b.dtype


# ---- issue 25: compute what transformers computes, or refuse with the true rule -------------

def _compare_or_both_raise(cfg, pos, exc=None):
    """hf_rope is transformers' module bit for bit, or (exc given) both raise it."""
    if exc is not None:
        with pytest.raises(exc):
            hf_module(cfg, pos)
        return
    c, s = hf_module(cfg, pos)
    mc, ms = hf_rope(cfg, pos)
    assert same(mc, c), "cos"
    assert same(ms, s), "sin"


LLAMA3 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 1024}
SCALED = {"default": {}, "linear": {"factor": 2.0}, "dynamic": {"factor": 2.0},
          "yarn": {"factor": 4.0, "original_max_position_embeddings": 1024},
          "longrope": {"short_factor": [1.5] * 32, "long_factor": [3.0] * 32,
                       "original_max_position_embeddings": 1024},
          "llama3": LLAMA3, "proportional": {"factor": 2.0, "partial_rotary_factor": 0.5}}


@pytest.mark.parametrize("rope_type", sorted(SCALED))
@pytest.mark.parametrize("theta", [1e39, 3.4028235e38, 3.4028236e38, float("inf")])
def test_rope_theta_past_float32_is_transformers_tables(rope_type, theta):
    """rope_theta finite as a Python float but inf in float32 (torch's pow rounds it): inv_freq
    1, 0, 0, ... and finite tables in transformers: the same bits, inside and past the
    trained length."""
    rp = dict(SCALED[rope_type], rope_type=rope_type, rope_theta=theta)
    for pos in (np.array([[0, 1, 5, 100]]), np.array([[0, 5000]])):
        _compare_or_both_raise(llama(rp, 8192 if rope_type != "dynamic" else 4096), pos)


@pytest.mark.parametrize("factor", [1e15, 1e16, 1e20, 1e30])
def test_dynamic_huge_factor_past_max_position_embeddings(factor):
    """The init-time base (0 for factor >= 1e16 in Python floats) is replaced by the regrowth,
    whose float32 base is finite: transformers' tables are finite, and so are hf_rope's."""
    _compare_or_both_raise(llama(dict(DYN, factor=factor)), np.array([[0, 5000]]))


@pytest.mark.parametrize("factor, pos", [(1e16, [[0, 50]]), (1e40, [[0, 5000]])])
def test_dynamic_factor_with_nan_tables_refused_by_its_rule(factor, pos):
    c, _ = hf_module(llama(dict(DYN, factor=factor)), np.array(pos))
    assert torch.isnan(c).any()  # transformers' tables hold NaN there
    with pytest.raises(ValueError, match=r"factor.*not > 0 in float32.*NaN"):
        hf_rope(llama(dict(DYN, factor=factor)), np.array(pos))


@pytest.mark.parametrize("rope_type", sorted(SCALED))
def test_rotary_dim_zero(rope_type):
    """partial_rotary_factor 0 (a rotary dim of 0): transformers' tables (empty where the
    init honours the factor), or its own failure."""
    rp = dict(SCALED[rope_type], rope_type=rope_type, rope_theta=1e4, partial_rotary_factor=0.0)
    rp.pop("short_factor", None), rp.pop("long_factor", None)
    if rope_type == "longrope":
        rp.update(short_factor=[], long_factor=[])
    for pos in (np.array([[0, 1, 5]]), np.array([[0, 5000]])):
        try:
            c, s = hf_module(llama(rp, 8192), pos)
        except Exception as e:  # transformers fails: hf_rope refuses
            with pytest.raises((TypeError, ValueError, OverflowError, NotImplementedError)):
                hf_rope(llama(rp, 8192), pos)
            print(rope_type, "transformers raised", type(e).__name__)
            continue
        mc, ms = hf_rope(llama(rp, 8192), pos)
        assert same(mc, c), "cos"
        assert same(ms, s), "sin"


@pytest.mark.parametrize("key, pos", [("short_factor", [[0, 5]]), ("long_factor", [[0, 5000]])])
def test_none_in_longrope_factors_refused(key, pos):
    rp = dict(LONG)
    rp[key] = [1.5] * 31 + [None]
    cfg = llama(rp, 8192)
    with pytest.raises(TypeError):  # torch.tensor([..., None])
        hf_module(cfg, np.array(pos))
    with pytest.raises(TypeError, match=rf"{key}.*None at index 31"):
        hf_rope(cfg, np.array(pos))


def test_long_factor_read_inside_the_trained_length_too():
    """transformers' first forward makes the long inv_freq whatever seq_len (then picks)."""
    cfg = llama(dict(LONG, long_factor=[None] * 32), 8192)
    _compare_or_both_raise(cfg, np.array([[0, 5]]), TypeError)
    with pytest.raises(TypeError, match="long_factor"):
        hf_rope(cfg, np.array([[0, 5]]))


def test_rope_theta_too_large_for_a_float_named():
    cfg = llama({"rope_type": "default", "rope_theta": 10**400})
    with pytest.raises(OverflowError):
        hf_module(cfg, np.array([[0, 1]]))
    with pytest.raises(OverflowError, match=r"rope_theta.*does not fit in a float"):
        hf_rope(cfg, np.array([[0, 1]]))


@pytest.mark.parametrize("theta, rule", [(0.0, "> 0"), (-1.0, "> 0"), (float("nan"), "NaN"),
                                         (1e-50, "rounds to 0 in float32")])
def test_rope_theta_refusals_say_the_rule(theta, rule):
    with pytest.raises(ValueError, match=rf"rope_theta.*{rule}"):
        hf_rope(llama({"rope_type": "default", "rope_theta": theta}), np.array([[0, 1]]))


def test_mapping_config_is_read_as_a_dict():
    """A UserDict (or any Mapping) of the config is read as its to_dict() dict."""
    from collections import UserDict
    from types import MappingProxyType
    cfg = llama({"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0,
                 "original_max_position_embeddings": 1024})
    want = hf_rope(cfg.to_dict(), POS)
    for m in (UserDict(cfg.to_dict()), MappingProxyType(cfg.to_dict())):
        got = hf_rope(m, POS)
        assert len(got) == 2 and same(got, want)
    with pytest.raises(TypeError, match="config must be a transformers config or a Mapping"):
        hf_rope(42, POS)


# ---- at most two calls into the core per call ------------------------------------------------

def _count_core_calls(monkeypatch):
    """The calls into the core from here on, the kept frequencies forgotten first (the calls
    counted are a fresh computation's; the memo's tests below count hits)."""
    from sinpe import _sinpe
    hf_rope(llama({"rope_type": "default", "rope_theta": 1e4}), POS)  # first use's calls
    _freq_memo.clear()                                                # (backend_info) done
    calls = []
    for name in dir(_sinpe):
        f = getattr(_sinpe, name)
        if callable(f) and not isinstance(f, type) and not name.startswith("__"):
            def wrap(*a, _f=f, _n=name, **k):
                calls.append(_n)
                return _f(*a, **k)
            monkeypatch.setattr(_sinpe, name, wrap)
    return calls


CALL_CASES = {
    **{rt: (llama(dict(rp, rope_type=rt, rope_theta=1e4), 8192), np.array([[0, 5, 9000]]))
       for rt, rp in SCALED.items()},
    "dynamic inside": (llama(DYN), np.array([[0, 5, 9]])),
    "longrope inside": (llama(LONG, 8192), np.array([[0, 5, 9]])),
    "int positions": (llama(DYN), 5000),
    "theta past float32": (llama({"rope_type": "default", "rope_theta": 1e39}), POS),
}


@pytest.mark.parametrize("case", sorted(CALL_CASES))
@pytest.mark.parametrize("dtype", [None, "bfloat16"])
def test_at_most_two_calls_into_the_core(monkeypatch, case, dtype):
    """One pow job for inv_freq and one table job for cos and sin (the options and the
    result's memory checked there, once), also where transformers multiplies the float32
    tables by attention_scaling before casting them (yarn, longrope in a low-precision dtype:
    the table job scales each float32 value before its rounding)."""
    cfg, pos = CALL_CASES[case]
    want = hf_rope(cfg, pos, dtype=dtype)
    calls = _count_core_calls(monkeypatch)
    got = hf_rope(cfg, pos, dtype=dtype)
    assert calls.count("table") == 1, calls
    assert calls.count("freqs") == (0 if "past float32" in case else 1), calls
    assert len(calls) == calls.count("freqs") + 1, calls
    assert len(got) == 2 and same(got, want)


def test_call_count_is_seen(monkeypatch):
    """The counter sees calls (a wrapper that saw none would pass the test above)."""
    hf_rope(llama({"rope_type": "default", "rope_theta": 1e4}), POS)  # warm
    calls = _count_core_calls(monkeypatch)
    hf_rope(llama({"rope_type": "default", "rope_theta": 1e4}), POS)
    assert calls == ["freqs", "table"]


def _qwen2_vl():
    from transformers import Qwen2VLTextConfig
    return Qwen2VLTextConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                             rope_parameters={"rope_type": "default", "rope_theta": 1e4,
                                              "mrope_section": [2, 3, 3]})


@pytest.mark.parametrize("positions", ["int", "2d", "3d"])
def test_mrope_two_calls_and_transformers_bits(monkeypatch, positions):
    """Multimodal rope: an int n (arange(n) in each of the t, h, w rows, a grid the core
    walks: no array made), (batch, seq) and (3, batch, seq) positions, each in two calls."""
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding
    cfg = _qwen2_vl()
    thw = np.stack([np.arange(7), np.arange(7) // 2, np.arange(7) % 3])[:, None]
    arg = {"int": 7, "2d": np.arange(7)[None], "3d": thw}[positions]
    want_pos = thw if positions == "3d" else np.broadcast_to(np.arange(7), (3, 1, 7))
    c, s = Qwen2VLRotaryEmbedding(cfg)(torch.zeros(1, dtype=torch.bfloat16),
                                       torch.as_tensor(np.ascontiguousarray(want_pos)))
    hf_rope(cfg, arg, dtype="bfloat16")  # warm: the backend policy resolves once per process
    calls = _count_core_calls(monkeypatch)
    mc, ms = hf_rope(cfg, arg, dtype="bfloat16")
    assert calls == ["freqs", "table"]
    assert same(mc, c), "cos"
    assert same(ms, s), "sin"


def test_axial_two_calls(monkeypatch):
    from transformers import Qwen2VLConfig
    vision = Qwen2VLConfig().vision_config
    hw = np.stack([np.arange(6) // 3, np.arange(6) % 3], axis=-1)
    want = hf_rope(vision, hw, dtype="bfloat16")
    calls = _count_core_calls(monkeypatch)
    got = hf_rope(vision, hw, dtype="bfloat16")
    assert calls == ["freqs", "table"]
    assert same(got, want)


COMPLEX_INIT = dict(DYN, factor=6.991419697707491e16)  # (f * 3000 / 3000) - (f - 1) < 0


@pytest.mark.filterwarnings("ignore:Casting complex values to real")  # transformers' own
def test_dynamic_complex_init_base():
    """A factor whose init-time base is complex in Python floats: past max_position_embeddings
    the regrowth replaces it (transformers' bits); inside, transformers keeps the real part of
    a complex inv_freq, which hf_rope refuses to guess, saying so."""
    cfg = llama(COMPLEX_INIT, 3000)
    _compare_or_both_raise(cfg, np.array([[0, 5000]]))
    hf_module(cfg, np.array([[0, 50]]))  # transformers returns tables there
    with pytest.raises(NotImplementedError, match=r"factor.*complex"):
        hf_rope(cfg, np.array([[0, 50]]))


# ---- the frequencies kept between calls (a decode step computes one row of cos/sin) ----------

def test_memo_hit_makes_no_frequency_job(monkeypatch):
    """The same config content again: no pow job, the tables equal the first call's."""
    cfg = llama({"rope_type": "default", "rope_theta": 1e4})
    calls = _count_core_calls(monkeypatch)
    want = hf_rope(cfg, POS)
    got = hf_rope(llama({"rope_type": "default", "rope_theta": 1e4}), POS)  # another object
    assert calls == ["freqs", "table", "table"]
    assert same(got, want)


@pytest.mark.parametrize("change", ["rope_theta", "head_dim", "factor_type"])
def test_memo_misses_on_a_config_changed_in_place(monkeypatch, change):
    """A config changed in place after a call is read again: the frequencies are made anew
    and equal transformers' module built from the changed config."""
    rp = {"rope_type": "linear", "rope_theta": 1e4, "factor": 2.0}
    cfg = llama(dict(rp))
    calls = _count_core_calls(monkeypatch)
    hf_rope(cfg, POS)
    if change == "rope_theta":
        cfg.rope_parameters["rope_theta"] = 5e5
    elif change == "head_dim":
        cfg.head_dim = 32
    else:  # 2 -> 2.5: a value of another float32 step
        cfg.rope_parameters["factor"] = 2.5
    got = hf_rope(cfg, POS)
    assert calls == ["freqs", "table", "freqs", "table"], calls
    assert same(got, tuple(t.numpy() for t in hf_module(cfg, POS)))


def test_config_read_once_per_content():
    """A config's reading is kept while its attributes compare equal to a deep copy: a dict
    config edited in place (a nested value too) is read again; a config holding a value that
    does not compare (an array) is read every call, with the same results."""
    from sinpe._hf import config as hfc
    d = llama({"rope_type": "default", "rope_theta": 1e4}).to_dict()
    first = hf_rope(d, POS)
    assert hf_rope(d, POS) is not None and len(hfc._READS) >= 1
    d["rope_parameters"]["rope_theta"] = 5e5
    assert same(hf_rope(d, POS), hf_rope(llama({"rope_type": "default",
                                                "rope_theta": 5e5}).to_dict(), POS))
    assert not same(hf_rope(d, POS), first)
    cfg = llama({"rope_type": "default", "rope_theta": 1e4})
    cfg.some_array = np.arange(3)
    hfc.forget()
    assert same(hf_rope(cfg, POS), first) and same(hf_rope(cfg, POS), first)
    assert not hfc._READS


def test_config_with_types_swapped_between_keys_is_read_again(monkeypatch):
    """Equal values with the same sequence of types but keys in another order (two attributes
    deleted and set again, a float and an int trading places) are another content: the kept
    reading is not reused (its check compares the keys' order as well as the types)."""
    from sinpe._hf import config as hfc
    reads = []

    class Counted(hfc.Cfg):
        def __init__(self, *a):
            reads.append(1)
            super().__init__(*a)

    monkeypatch.setattr(hfc, "Cfg", Counted)
    hfc.forget()
    d = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2,
         "max_position_embeddings": 64, "rope_theta": 10000.0, "x_a": 2.0, "x_b": 2}
    hf_rope(d, POS)
    hf_rope(d, POS)
    assert len(reads) == 1, "an unchanged dict config is read once"
    del d["x_a"], d["x_b"]
    d["x_b"], d["x_a"] = 2.0, 2  # equal (2 == 2.0), types in the same order, keys swapped
    hf_rope(d, POS)
    assert len(reads) == 2, "keys in another order: read again"
    hfc.forget()


class _DictProxy:
    """A Mapping that says it is a dict and keeps its data in a wrapped dict."""

    def __init__(self, d):
        self._d = d

    @property
    def __class__(self):
        return dict

    def get(self, k, default=None):
        return self._d.get(k, default)

    def __contains__(self, k):
        return k in self._d

    def __getitem__(self, k):
        return self._d[k]

    def __iter__(self):
        return iter(self._d)

    def __len__(self):
        return len(self._d)

    def keys(self):
        return self._d.keys()

    def values(self):
        return self._d.values()

    def items(self):
        return self._d.items()


def test_config_reading_follows_proxies_and_nested_key_order():
    """The kept reading watches what the reading read: a proxy reporting dict as its class is
    compared as the Mapping it presents (its wrapped dict edited: read again), and keys of
    rope_parameters trading places with equal values and the same type sequence are another
    content (review of 2026-12-04: both were kept stale)."""
    from sinpe._hf import config as hfc
    hfc.forget()
    d = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2,
         "max_position_embeddings": 64, "rope_theta": 10000.0, "head_dim": 32}
    p = _DictProxy(d)
    hf_rope(p, POS, backend="builtin")
    d["head_dim"] = 32.0  # equal, another type: transformers' init would take a float
    with pytest.raises(TypeError, match="head_dim"):
        hf_rope(p, POS, backend="builtin")
    rp = {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 32, "low_freq_factor": 1.0, "x_flag": True}
    cfg = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2,
           "max_position_embeddings": 64, "rope_parameters": rp}
    hf_rope(cfg, POS, backend="builtin")
    del rp["low_freq_factor"], rp["x_flag"]  # equal values, the same type sequence:
    rp["x_flag"], rp["low_freq_factor"] = 1.0, True  # only the keys' order tells
    with pytest.raises(TypeError, match="low_freq_factor"):
        hf_rope(cfg, POS, backend="builtin")
    hfc.forget()


@pytest.mark.parametrize("edit", ["head_dim float", "heads bool", "theta subclass"])
def test_config_edited_in_place_to_an_equal_refused_value_is_refused(edit):
    """The kept reading compares types too: 64 -> 64.0, 4 -> True and a float subclass are
    equal values that a fresh reading refuses, and so does the next call."""
    d = llama({"rope_type": "default", "rope_theta": 1e4}).to_dict()
    d["head_dim"], d["num_attention_heads"] = 16, 4
    hf_rope(d, POS)

    class F(float):
        def __float__(self):
            return 2.0
    if edit == "head_dim float":
        d["head_dim"] = 16.0
    elif edit == "heads bool":
        d["head_dim"], d["num_attention_heads"] = None, True
        d["hidden_size"] = 16
        hf_rope(dict(d, num_attention_heads=1), POS)  # the same values, read fresh: fine
    else:
        d["rope_parameters"]["rope_theta"] = F(1e4)
    with pytest.raises(TypeError):
        hf_rope(d, POS)


def test_float_position_ids_that_require_grad_are_read_detached():
    cfg = llama({"rope_type": "default", "rope_theta": 1e4})
    p = torch.tensor([[0.0, 3.0, 7.0]], requires_grad=True)
    assert same(hf_rope(cfg, p), hf_rope(cfg, p.detach()))


def test_memo_misses_on_an_inv_freq_changed_in_place(monkeypatch):
    """The module's own buffer, changed in place (its version counter moves), is read anew;
    another tensor of the same values hits nothing stale either."""
    cfg = llama({"rope_type": "default", "rope_theta": 1e4})
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    m = LlamaRotaryEmbedding(cfg)
    _freq_memo.clear()
    first = hf_rope(cfg, POS, inv_freq=m.inv_freq)
    again = hf_rope(cfg, POS, inv_freq=m.inv_freq)
    assert same(first, again)
    m.inv_freq.mul_(0.5)
    got = hf_rope(cfg, POS, inv_freq=m.inv_freq)
    ref = m(torch.zeros(1), torch.as_tensor(POS))
    assert same(got, tuple(t.numpy() for t in ref))
    assert not np.array_equal(got[0], first[0])
    arr = m.inv_freq.numpy().copy()  # a NumPy buffer: keyed by its content
    a = hf_rope(cfg, POS, inv_freq=arr)
    arr[:] = arr * 2
    b = hf_rope(cfg, POS, inv_freq=arr)
    assert same(a, got) and not np.array_equal(a[0], b[0])


@pytest.mark.parametrize("write", ["data", "numpy"])
def test_memo_misses_on_an_inv_freq_written_without_a_version_bump(write):
    """A hostile probe: writes through .data or a NumPy view move no version counter, and a
    memo keyed by identity and version served the old tables.  Keyed by content, the call
    after the write follows the module; sinpe.clear_cache() forgets the memo too."""
    cfg = llama({"rope_type": "default", "rope_theta": 1e4})
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    m = LlamaRotaryEmbedding(cfg)
    _freq_memo.clear()
    first = hf_rope(cfg, POS, inv_freq=m.inv_freq)
    assert len(_freq_memo) == 1  # a tensor inv_freq is kept (a size check once keyed none)
    v = m.inv_freq._version
    if write == "data":
        m.inv_freq.data.mul_(2)
    else:
        m.inv_freq.numpy()[:] *= 2
    assert m.inv_freq._version == v  # no bump: the case the memo must not trust
    got = hf_rope(cfg, POS, inv_freq=m.inv_freq)
    ref = m(torch.zeros(1), torch.as_tensor(POS))
    assert same(got, tuple(t.numpy() for t in ref))
    assert not np.array_equal(got[0], first[0])
    hf_rope(cfg, POS)
    assert len(_freq_memo) > 0
    sinpe.clear_cache()
    assert len(_freq_memo) == 0


def test_inv_freq_made_in_inference_mode():
    """A hostile probe: an inv_freq made under torch.inference_mode() has no version counter
    (reading it raised RuntimeError); it is read by content, inside the mode and outside."""
    cfg = llama({"rope_type": "default", "rope_theta": 1e4})
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    with torch.inference_mode():
        m = LlamaRotaryEmbedding(cfg)
        ref = m(torch.zeros(1), torch.as_tensor(POS))
        inside = hf_rope(cfg, POS, inv_freq=m.inv_freq)
    assert m.inv_freq.is_inference()
    outside = hf_rope(cfg, POS, inv_freq=m.inv_freq)
    want = tuple(t.numpy() for t in ref)
    assert same(inside, want) and same(outside, want)


def test_memo_is_bounded_and_thread_safe():
    import threading
    _freq_memo.clear()
    errors = []

    def work(i):
        try:
            for t in range(8):
                cfg = llama({"rope_type": "default", "rope_theta": 1e4 + 100 * (i * 8 + t)})
                got = hf_rope(cfg, POS)
                assert same(got, tuple(x.numpy() for x in hf_module(cfg, POS)))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert 0 < len(_freq_memo) <= _freq_memo.bound


# ---- cos/sin given as bf16/f16 broadcast views: read as they are, bits equal transformers' --

@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(1, 32, 1, 128), (4, 32, 1, 128), (2, 4, 7, 64), (2, 4, 40, 64)])
def test_tables_as_broadcast_views(dtype, shape):
    from transformers.models.llama import modeling_llama as ml
    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(5)
    B, H, S, D = shape
    q = torch.randn(shape, generator=g).to(dt)
    k = torch.randn(B, 2, S, D, generator=g).to(dt)
    base = torch.randn(1, S, D, generator=g).to(dt)
    views = {
        "expanded": (base.expand(B, S, D), base.mul(0.5).expand(B, S, D)),
        "strided": (torch.randn(B, S, 2 * D, generator=g).to(dt)[..., ::2],
                    torch.randn(B, S, 2 * D, generator=g).to(dt)[..., 1::2]),
        "transposed": (torch.randn(S, B, D, generator=g).to(dt).transpose(0, 1),
                       torch.randn(S, B, D, generator=g).to(dt).transpose(0, 1)),
    }
    for name, (c, s) in views.items():
        want = ml.apply_rotary_pos_emb(q, k, c, s)
        got = ST.apply_rotary_pos_emb(q, k, c, s)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.shape == b.shape, name
            assert torch.equal(a.view(torch.int16 if dt != torch.float32 else torch.int32),
                               b.view(torch.int16 if dt != torch.float32 else torch.int32)), name
    # seq-second q (unsqueeze_dim=2) with a broadcast table
    c, s = views["expanded"]
    qt, kt = q.transpose(1, 2), k.transpose(1, 2)
    want = ml.apply_rotary_pos_emb(qt, kt, c, s, unsqueeze_dim=2)
    got = ST.apply_rotary_pos_emb(qt, kt, c, s, unsqueeze_dim=2)
    for a, b in zip(got, want):
        assert torch.equal(a.view(torch.int16 if dt != torch.float32 else torch.int32),
                           b.view(torch.int16 if dt != torch.float32 else torch.int32))


def test_number_subclasses_in_configs_refused():
    """A second probe: a float subclass rope_theta whose __float__ disagrees with its value
    gave other bits than transformers (which reads both) and was served another instance's
    memo.  Config numbers must be plain (int, float, bool, NumPy scalars)."""
    class F(float):
        def __float__(self):
            return 500000.0

    cfg = llama({"rope_type": "default", "rope_theta": F(10000.0)})
    with pytest.raises(TypeError, match=r"rope_theta.*plain number"):
        hf_rope(cfg, POS)
    cfg = llama({"rope_type": "default", "rope_theta": np.float64(10000.0)})
    hf_rope(cfg, POS)  # a NumPy scalar is plain


def test_huge_inv_freq_refused_before_any_copy():
    """A second probe: the memo key widened a broadcast inv_freq (2^27 values: 2 GiB) before
    the shape check refused it."""
    cfg = llama({"rope_type": "default", "rope_theta": 1e4})
    with pytest.raises(ValueError, match="inv_freq must have shape"):
        hf_rope(cfg, POS, inv_freq=torch.zeros(1).expand(1 << 40))
    with pytest.raises(ValueError, match="inv_freq must have shape"):
        hf_rope(cfg, POS, inv_freq=np.broadcast_to(np.float32(1), (1 << 40,)))


def test_position_ids_and_inv_freq_of_every_tensor_kind():
    """A second probe: hf_rope read position_ids and inv_freq without the package's tensor
    rule: neg-bit and conjugate views, requires-grad subclasses, sparse, float8 and vmapped
    tensors got torch's own errors naming nothing (a valid neg-bit position_ids was refused).
    Read tensors are resolved as torch reads them; the others are refused by name."""
    cfg = llama({"rope_type": "default", "rope_theta": 1e4})
    pos = torch.as_tensor(POS)
    want = hf_rope(cfg, POS)
    neg = torch._neg_view(-pos)
    assert neg.is_neg()
    assert same(hf_rope(cfg, neg), want)
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    inv = LlamaRotaryEmbedding(cfg).inv_freq
    assert same(hf_rope(cfg, POS, inv_freq=torch._neg_view(-inv)), want)
    with pytest.raises(TypeError, match="position_ids must be a strided tensor"):
        hf_rope(cfg, pos.to_sparse())
    with pytest.raises(TypeError, match="position_ids: a tensor of dtype torch.float8"):
        hf_rope(cfg, pos.to(torch.float8_e4m3fn))
    with pytest.raises(TypeError, match="position_ids is a tensor inside a torch function"):
        torch.vmap(lambda p: torch.as_tensor(hf_rope(cfg, p[None])[0]))(pos)
