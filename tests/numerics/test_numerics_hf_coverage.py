"""sinpe.presets.hf_rope against the installed transformers' own rotary modules, on a fixed
sample of model families, bit for bit (tools/hf_rope_coverage.py's harness, run in-process:
the same configs, positions and comparisons as the full coverage table, docs/hf_rope.md).

For each sampled (family, rotary class) and each rope_type column (the config class's own
parameters, then default, linear, dynamic, yarn, longrope, llama3, proportional), the module
``XRotaryEmbedding(config)(x, position_ids)`` is called with x in float32, bfloat16 and
float16, on two position sets (past max_position_embeddings and inside it), and
hf_rope(config, position_ids, dtype=x.dtype) must give the same bits.  A rope_type the
family's config refuses is skipped by the harness; which ones are refused is pinned below, so
that a harness that stopped building configs could not pass by refusing everything."""
import numpy as np
import pytest

from conftest import hf_coverage_harness

pytestmark = [pytest.mark.oracle_packages, pytest.mark.needs_torch]

H = hf_coverage_harness()

#: The rope_types each sampled family's config refuses (transformers 5.24.0): Phi-3's
#: validate_rope allows only default and longrope (and maps yarn to longrope, which then
#: lacks its factors).  Every other sampled family accepts every column.
REFUSED_BY_CONFIG = {"phi3": {"linear", "dynamic", "yarn", "llama3", "proportional"}}


def _hf_rope():
    fn, why = H.load_hf_rope()
    assert fn is not None, f"sinpe.presets.hf_rope is missing: {why}"
    return fn


@pytest.fixture(scope="module")
def sample_rows():
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        rows = H.walk([f for f, _ in H.SAMPLE], _hf_rope(), H.COLUMNS, H.DTYPES,
                      {c for _, c in H.SAMPLE})
    finally:
        torch.set_num_threads(threads)
    return {(r["family"], r["class"]): r for r in rows}


@pytest.mark.parametrize("family,cls", H.SAMPLE, ids=[f for f, _ in H.SAMPLE])
def test_sampled_family_bit_for_bit(sample_rows, family, cls):
    row = sample_rows.get((family, cls))
    assert row is not None, f"{family}: no {cls} in this transformers"
    refused = REFUSED_BY_CONFIG.get(family, set())
    bad = []
    for rt in H.COLUMNS:
        status = row["cases"][rt]["status"]
        if rt in refused:
            if H.category(status) != H.REJECTS:
                bad.append(f"{rt}: expected the config to refuse it, got {status}")
        elif status != H.BIT:
            bad.append(f"{rt}: {status}")
    assert not bad, f"{family}/{cls}:\n  " + "\n  ".join(bad)


def test_sample_covers_both_dtypes_and_shapes(sample_rows):
    """The cases compared what they should: (batch, seq) positions past max_position_embeddings,
    (3, batch, seq) for the mrope family, and each layer type of the per-layer family."""
    qwen = sample_rows[("qwen2_vl", "Qwen2VLRotaryEmbedding")]["cases"]["default"]
    assert qwen["position_ids_shape"] == [3, 2, H.SEQ], qwen
    gemma3 = sample_rows[("gemma3", "Gemma3RotaryEmbedding")]["cases"]["default"]
    assert set(gemma3["layer_types"]) == {"full_attention", "sliding_attention"}, gemma3
    llama = sample_rows[("llama", "LlamaRotaryEmbedding")]["cases"]["dynamic"]
    assert llama["position_ids_shape"] == [2, H.SEQ] and max(H.OFFSETS) + H.SEQ > H.MAX_POS


def test_harness_sees_one_flipped_bit():
    """The comparison is of bits: one flipped bit in one table is reported as a difference."""
    fn = _hf_rope()

    def flipped(config, position_ids, **kw):
        cos, sin = fn(config, position_ids, **kw)
        cos = np.array(cos)
        cos.view({2: np.uint16, 4: np.uint32}[cos.itemsize]).flat[7] ^= 1
        return cos, sin

    rows = H.walk(["llama"], flipped, ["default"], H.DTYPES, {"LlamaRotaryEmbedding"})
    status = rows[0]["cases"]["default"]["status"]
    calls = len(H.DTYPES) * len(H.OFFSET_SETS)  # one flipped value per call
    assert status.startswith(f"differs ({calls} of "), status


@pytest.mark.parametrize("family,cls", [("llama", "LlamaRotaryEmbedding"),
                                        ("qwen2_vl", "Qwen2VLRotaryEmbedding"),
                                        ("gemma3", "Gemma3RotaryEmbedding")])
def test_config_as_dict(family, cls):
    """hf_rope takes config.to_dict() as well as the config object."""
    fn = _hf_rope()

    def from_dict(config, position_ids, **kw):
        return fn(config.to_dict(), position_ids, **kw)

    rows = H.walk([family], from_dict, ["default", "yarn"], H.DTYPES, {cls})
    for rt, case in rows[0]["cases"].items():
        assert case["status"] == H.BIT, f"{family}/{cls}:{rt}: {case['status']}"
