"""The torch fuzzer's corpus (tools/fuzz/corpus_torch) replayed by the suite: every JSON case
goes through the harness's invariant (tools/fuzz/fuzz_torch.py), so each class the fuzzer
is seeded with and each finding turned into a case is checked on every pass:

- rotation forms against transformers' own functions (outputs and gradients bit for bit, or
  the same exception type; the core's documented NaN rules aside), under vmap, func.grad,
  autocast, inference mode, on hostile layouts and values;
- patch state sequences on tiny models against an unpatched twin (copies, pickles,
  torch.save, casts, config edits, names replaced in the modeling module, forward,
  generate, a training step), patched() and unpatch's state after each;
- patch/unpatch/patched messages; a framework's plain name on a faked installed release.

Meta-device models and torch.compile are the other tests' (test_robust_patch.py,
test_numerics_torch_grads.py): too slow for a fuzz loop."""
import json
import os

import pytest

from conftest import ROOT, fuzz_harness

pytestmark = [pytest.mark.oracle_packages, pytest.mark.needs_torch]

import torch  # noqa: E402  (a TORCH_MODULES module: not collected without torch)

CORPUS = os.path.join(ROOT, "tools", "fuzz", "corpus_torch")
CASES = sorted(f for f in os.listdir(CORPUS) if f.endswith(".json"))


def harness():
    return fuzz_harness("fuzz_torch")


HARNESS = harness()


def _case(name):
    with open(os.path.join(CORPUS, name)) as f:
        return json.load(f)


def test_the_corpus_is_there():
    """One case per class at least, and the issue's findings (issue 35)."""
    assert len(CASES) >= 40
    entries = {_case(n)["entry"] for n in CASES}
    assert entries == set(HARNESS.ENTRIES), entries
    assert {"issue35_olmo_bfloat16_gradients_route.json",
            "issue35_modernbert_bfloat16_vmap.json", "issue35_esm_bfloat16_func_grad.json",
            "issue35_ernie4_5_float16_func_grad.json", "issue35_seq_deepcopy_then_unpatch.json",
            "issue35_seq_pickle_and_save_gemma3.json",
            "issue35_seq_nested_patches_inner_undone_first.json",
            "issue35_seq_name_replaced_after_patching.json",
            "issue35_seq_yarn_config_edited_after_build.json",
            "messages_unpatch_7.json", "messages_patched_none.json"} <= set(CASES)


@pytest.mark.parametrize("name", CASES)
def test_fuzz_torch_corpus_case(name):
    """A case must describe a call (strict); a violated invariant raises the harness's
    Finding (an AssertionError) naming what differs."""
    HARNESS.run_json(_case(name), strict=True)


def test_the_harness_compares_bits():
    """Integer views, never values: -0.0 is not 0.0, NaNs of other payloads differ; the
    core's documented NaN rules (docs/numerics.md) only where asked: any NaN for any NaN in
    float32 and float16, bfloat16's 0xffff where torch's scalar tail gave 0x7fc0 (not the
    other way round); a NaN's sign alone for the interleave and half forms (strict)."""
    f32 = lambda *v: torch.tensor(v, dtype=torch.float32)  # noqa: E731
    assert HARNESS.diff_bits(f32(0.0, 1.0), f32(-0.0, 1.0)) == 1
    nan, nnan = f32(float("nan")), -f32(float("nan"))
    payload = torch.tensor([0x7fc12345], dtype=torch.int32).view(torch.float32)
    assert HARNESS.diff_bits(nan, nnan) == 1 and HARNESS.diff_bits(nan, payload) == 1
    assert HARNESS.diff_bits(nan, nnan, "sign") == 0
    assert HARNESS.diff_bits(nan, payload, "sign") == 1
    assert HARNESS.diff_bits(nan, payload, "core") == 0
    assert HARNESS.diff_bits(nan, f32(1.0), "core") == 1
    bf = lambda v: torch.tensor([v], dtype=torch.int16).view(torch.bfloat16)  # noqa: E731
    assert HARNESS.diff_bits(bf(0x7fc0), bf(-1), "core") == 0
    assert HARNESS.diff_bits(bf(-1), bf(0x7fc0), "core") == 1
    assert HARNESS.diff_bits(bf(0x7fc0), bf(-64), "sign") == 1  # (bfloat16: no sign rule)
    assert HARNESS.diff_bits(f32(1.0), f32(1.0, 2.0)) == "(1,) torch.float32 against (2,) " \
                                                        "torch.float32"


def test_the_harness_catches_a_graph_that_widens_q_once(monkeypatch):
    """The issue's OLMo finding, restated: a form whose graph widens q to float32 once
    (instead of rounding each branch's gradient to q's dtype as transformers' graph does)
    gives other bfloat16 gradients, and the corpus case says so."""
    from sinpe._torch import forms, graphs

    def widened(q, k, cos, sin, unsqueeze_dim=1):
        qt, kt = q.dtype, k.dtype
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        q, k = q.float(), k.float()
        return ((q * cos) + (graphs.rotate_half(q) * sin)).to(qt), \
            ((k * cos) + (graphs.rotate_half(k) * sin)).to(kt)

    monkeypatch.setattr(forms.FORMS["apply_rotary_pos_emb_olmo"], "graph", widened)
    with pytest.raises(HARNESS.Finding, match=r"q\.grad differs"):
        HARNESS.run_json(_case("issue35_olmo_bfloat16_gradients_public.json"), strict=True)


def test_a_mutated_case_is_ignored_and_a_strict_one_refused():
    """The fuzzer mutates JSON cases: one that describes nothing is skipped (never a
    finding), and the suite's strict replay refuses it."""
    bad = dict(_case("form_llama_float32_public.json"), ref=["llama"])
    HARNESS.run_json(bad)
    with pytest.raises(HARNESS.Malformed):
        HARNESS.run_json(bad, strict=True)
    HARNESS.TestOneInput(b'{"entry": "patch_sequence", "model": "llama", "ops": 7}')
    HARNESS.TestOneInput(b"\x00\x01\x02")  # bytes: a drawn case (a form here)
