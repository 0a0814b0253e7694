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
    with pytest.raises(ValueError, match="engine_args are llama.cpp's"):
        sinpe.apply_rope(x, seq_dim=0, producer="mlx", engine_args={"freq_scale": 0.5})
    with pytest.raises(ValueError, match="takes .*got 'scale'"):
        sinpe.apply_rope(x, seq_dim=0, producer="llama.cpp", engine_args={"scale": 0.5})
    with pytest.raises(ValueError, match="finite number"):
        sinpe.apply_rope(x, seq_dim=0, producer="llama.cpp", engine_args={"ext_factor": np.nan})
    with pytest.raises(ValueError, match="rot_dim / 2 = 4 values"):
        sinpe.apply_rope(x, seq_dim=0, producer="llama.cpp", engine_args={"freq_factors": [1.0]})
    with pytest.raises(ValueError, match="does not run bfloat16"):
        sinpe.apply_rope(x.astype(E.np_dtype("bfloat16")), seq_dim=0, producer="llama.cpp")
    assert np.all(x == 1)
