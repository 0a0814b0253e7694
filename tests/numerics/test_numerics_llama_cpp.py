"""producer='llama.cpp' against ggml's recorded rotations (tests/data/llama_cpp.npz, written
and re-checked by tools/llama_cpp_record.py against a ggml built by tools/llama_cpp_build.sh:
llama.cpp builds from source, so the default suite reads its record).  Bits compared; a NaN
the engine's arithmetic makes is compared as a NaN (docs/engines.md)."""
import json
import os
import sys

import numpy as np
import pytest

import sinpe

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import engine_oracles as E  # noqa: E402
from conftest import ROOT  # noqa: E402

RECORD = os.path.join(ROOT, "tests", "data", "llama_cpp.npz")
ARGS = ("freq_scale", "ext_factor", "attn_factor", "beta_fast", "beta_slow", "n_ctx_orig")


def _cases():
    z = np.load(RECORD)
    info = json.loads(bytes(z["meta_json"]).decode())
    out = []
    for i, m in enumerate(info["cases"]):
        p = f"c{i:02d}_"
        out.append((m, z[p + "x"], z[p + "pos"], z[p + "y"],
                    z[p + "ff"] if p + "ff" in z.files else None))
    return info, out


def _rotate(m, x, pos, ff):
    args = {k: m[k] for k in ARGS if k in m}
    if ff is not None:
        args["freq_factors"] = ff
    got = x.copy()  # (tokens, heads, head_dim): ggml's [ne0, ne1, ne2]
    sinpe.apply_rope(got, pos, base=m["freq_base"], layout="half" if m["mode"] == 2 else "pairs",
                     rot_dim=m["n_dims"], seq_dim=0, producer="llama.cpp",
                     engine_args=args or None)
    return got


def test_the_record_covers_both_modes_dtypes_and_yarn():
    info, cases = _cases()
    assert info["llama_cpp_commit"].startswith("0c1e5709")
    names = [m["name"] for m, *_ in cases]
    for word in ("float32_neox", "float32_normal", "float16_neox", "float16_normal", "yarn",
                 "ff", "special", "bigpos", "partial"):
        assert any(word in n for n in names), word


@pytest.mark.parametrize("i", range(22))
def test_llama_cpp_matches_the_recorded_ggml(i):
    _, cases = _cases()
    m, x, pos, y, ff = cases[i]
    got = _rotate(m, x, pos, ff)
    assert E.differ(got, y, "llama.cpp") == 0, m["name"]


def test_the_record_is_not_transformers_bits():
    """Its own angles (theta scaled per pair): most values differ from transformers' tables."""
    _, cases = _cases()
    m, x, pos, y, _ = cases[0]
    eager = x.copy()
    sinpe.apply_rope(eager, pos, base=m["freq_base"], seq_dim=0)
    assert np.count_nonzero(E.uint_view(eager) != E.uint_view(y)) > 0.5 * y.size


def test_engine_args_are_llama_cpps_and_checked():
    x = np.ones((3, 1, 8), np.float32)
    with pytest.raises(ValueError, match="engine_args are the rope parameters"):
        sinpe.apply_rope(x, seq_dim=0, producer="onnxruntime", engine_args={"freq_scale": 0.5})
    with pytest.raises(ValueError, match="MLX takes"):
        sinpe.apply_rope(x, seq_dim=0, producer="mlx", engine_args={"freq_scale": 0.5})
    with pytest.raises(ValueError, match="takes .*got 'scale'"):
        sinpe.apply_rope(x, seq_dim=0, producer="llama.cpp", engine_args={"scale": 0.5})
    with pytest.raises(ValueError, match="finite float32 number"):
        sinpe.apply_rope(x, seq_dim=0, producer="llama.cpp", engine_args={"ext_factor": np.nan})
    with pytest.raises(ValueError, match="rot_dim / 2 = 4 values"):
        sinpe.apply_rope(x, seq_dim=0, producer="llama.cpp", engine_args={"freq_factors": [1.0]})
    with pytest.raises(ValueError, match="does not run bfloat16"):
        sinpe.apply_rope(x.astype(E.np_dtype("bfloat16")), seq_dim=0, producer="llama.cpp")
    assert np.all(x == 1)


LLAMA3 = {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 4,
          "rope_theta": 500000.0, "max_position_embeddings": 131072,
          "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                           "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}


def _converter_llama3(rope_params, hparams, torch):
    """llama.cpp's GGUF converter's rope_freqs for rope_type llama3 (conversion/llama.py,
    generate_extra_tensors, at the recorded commit), as it runs: torch's float32 ops."""
    import math
    base = rope_params.get("rope_theta", 10000.0)
    dim = hparams.get("head_dim") or hparams["hidden_size"] // hparams["num_attention_heads"]
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor = rope_params.get("factor", 8.0)
    low, high = rope_params.get("low_freq_factor", 1.0), rope_params.get("high_freq_factor", 4.0)
    old = rope_params.get("original_max_position_embeddings", 8192)
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            out.append(1)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(out, dtype=torch.float32).numpy()


@pytest.mark.needs_torch
def test_llama3_freq_factors_are_the_converters():
    """hf_rope(config, producer='llama.cpp') takes Llama 3's frequency factors as llama.cpp's
    converter writes them into the GGUF (its own code run here with torch): 64 configs."""
    from conftest import torch
    from sinpe import _angles
    from sinpe._backends.policy import call_opts
    from sinpe._hf.config import read
    bad = 0
    for base in (10000.0, 500000.0, 1e6, 123456.0):
        for dim in (64, 96, 128, 256):
            for f, lo, hi, omp in ((8.0, 1.0, 4.0, 8192), (32.0, 1.0, 4.0, 8192),
                                   (16.0, 2.0, 8.0, 4096), (4.0, 1.0, 4.0, 2048)):
                rp = {"rope_type": "llama3", "rope_theta": base, "factor": f,
                      "low_freq_factor": lo, "high_freq_factor": hi,
                      "original_max_position_embeddings": omp}
                hp = dict(LLAMA3, hidden_size=dim * 4, rope_theta=base, rope_scaling=rp)
                want = _converter_llama3(rp, hp, torch)
                got = _angles._llama3_factors(read(hp, None), call_opts(None, None, None, None, None))
                bad += int(np.count_nonzero(E.uint_view(got) != E.uint_view(want)))
    assert bad == 0


def test_hf_rope_producer_gives_the_engines_tables():
    """presets.hf_rope(config, producer=): the exported cache (transformers' tables) for the
    engines that read one, the engine's own for MLX and llama.cpp; a rope type whose engine
    reading is not reproduced is refused naming it."""
    want = sinpe.presets.hf_rope(LLAMA3, 8)
    for producer in ("onnxruntime", "openvino", "inductor", "transformers"):
        got = sinpe.presets.hf_rope(LLAMA3, 8, producer=producer)
        assert all(np.array_equal(E.uint_view(a), E.uint_view(b)) for a, b in zip(got, want))
    c, s = sinpe.presets.hf_rope(LLAMA3, 8, producer="llama.cpp")
    assert c.shape == want[0].shape and c.dtype == np.float32
    assert not np.array_equal(E.uint_view(c), E.uint_view(want[0]))
    # the rotation by those tables is apply_rope's own llama.cpp rotation from positions
    from sinpe import _angles
    from sinpe._backends.policy import call_opts
    from sinpe._hf.config import read
    kw, _ = _angles.config_args("llama.cpp", read(LLAMA3, None), call_opts(None, None, None, None, None))
    x = np.random.default_rng(1).standard_normal((1, 8, 2, 128)).astype(np.float32)
    a, b = x.copy(), x.copy()
    sinpe.apply_rope(a, cos=c, sin=s, seq_dim=1, producer="llama.cpp")
    sinpe.apply_rope(b, np.arange(8), base=500000.0, seq_dim=1, producer="llama.cpp", **kw)
    assert np.array_equal(E.uint_view(a), E.uint_view(b))
    with pytest.raises(NotImplementedError, match="mlx.*'llama3'"):
        sinpe.presets.hf_rope(LLAMA3, 8, producer="mlx")
    with pytest.raises(ValueError, match="producer must be one of"):
        sinpe.presets.hf_rope(LLAMA3, 8, producer="ggml")


def test_engine_args_and_positions_are_checked_before_anything():
    """A hostile probe's findings: engine_args finite in float64 but not in float32 gave NaN
    rotations, freq_factors of zeros or text were taken, n_ctx_orig was truncated, MLX's
    engine_args without 'freqs' raised KeyError, NaN or 2^40 positions were taken by 'mlx',
    and hf_rope's llama.cpp tables wrapped positions past 2^31: each is refused naming it."""
    x = np.ones((1, 2, 8, 16), np.float32)
    bad = [({"freq_scale": 1e300}, ValueError), ({"ext_factor": 1e300}, ValueError),
           ({"attn_factor": 1e300}, ValueError), ({"freq_scale": 1e-300}, ValueError),
           ({"freq_scale": 10 ** 400}, ValueError), ({"freq_scale": True}, TypeError),
           ({"n_ctx_orig": 1.7}, TypeError), ({"n_ctx_orig": 10 ** 30}, ValueError),
           ({"freq_factors": [0.0] * 8}, ValueError), ({"freq_factors": [np.nan] * 8}, ValueError),
           ({"freq_factors": [1e40] * 8}, ValueError), ({"freq_factors": ["1"] * 8}, TypeError)]
    for args, err in bad:
        with pytest.raises(err, match="engine_args"):
            sinpe.apply_rope(x, producer="llama.cpp", engine_args=args)
    for args in ({}, {"freqs": [1e-40] * 8}):
        with pytest.raises(ValueError, match="engine_args"):
            sinpe.apply_rope(x, producer="mlx", engine_args=args)
    for pos in (np.full(8, np.nan), np.full(8, 2 ** 40, np.uint64)):
        with pytest.raises(ValueError, match="positions for producer='mlx'"):
            sinpe.apply_rope(x, pos, producer="mlx")
    assert np.all(x == 1)
    cfg = dict(LLAMA3, rope_scaling=None)
    with pytest.raises(ValueError, match="int32"):
        sinpe.presets.hf_rope(cfg, np.array([[2 ** 31 + 5]]), producer="llama.cpp")
    with pytest.raises(ValueError, match="needs 'factor'"):
        sinpe.presets.hf_rope(dict(cfg, rope_scaling={"rope_type": "linear"}), 4,
                              producer="llama.cpp")
    with pytest.raises(ValueError, match="positive and finite"):
        sinpe.presets.hf_rope(dict(cfg, rope_scaling={"rope_type": "linear", "factor": 0}), 4,
                              producer="llama.cpp")
