"""The fuzzer's corpus (tools/fuzz/corpus) replayed by the suite: every JSON case goes
through the harness's invariant (a documented exception with every input untouched, or a
result that wrote nothing outside its destination), so each hostile class the fuzzer was
seeded with, and each finding turned into a case, is checked on every CI pass, under the
sanitized pass too.  The binary inputs are libFuzzer's and need atheris (tools/fuzz/run.sh);
their findings have JSON cases and tests of their own."""
import json
import os

import numpy as np
import pytest

from conftest import ROOT, fuzz_harness

CORPUS = os.path.join(ROOT, "tools", "fuzz", "corpus")
CASES = sorted(f for f in os.listdir(CORPUS) if f.endswith(".json"))


def harness():
    return fuzz_harness("fuzz_sinpe")


HARNESS = harness()


def test_the_corpus_is_there():
    assert len(CASES) >= 40
    assert {"pe_offset_end_of_int64.json", "add_offset_end_of_int64.json",
            "pe_f16_positions_nan_tail.json"} <= set(CASES)


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", CASES)
def test_fuzz_corpus_case(name):
    """Cases name torch dtypes, and the harness's models are torch's: needs torch."""
    with open(os.path.join(CORPUS, name)) as f:
        case = json.load(f)
    assert case["entry"] in HARNESS.ENTRIES or case["entry"] in HARNESS.P.__all__ \
        or case["entry"] == "cache_sequence", case
    # a case must describe a call; a failure raises the harness's Finding (an AssertionError)
    HARNESS.run_json(case, strict=True)


def test_the_harness_tolerance_takes_equal_infinities():
    """The fuzzer's finding tools/fuzz/corpus/add_f16_inf_builtin_tolerance.bin (a float16 x
    holding -inf, the built-in backend, compared within ulps): inf - inf is NaN, so the
    harness's tolerance compare called equal results different.  Equal infinities match;
    opposite ones, a number against an infinity and NaN against a number still do not."""
    f16 = lambda *v: np.array(v, np.float16)  # noqa: E731
    assert HARNESS.close(f16(-np.inf, 1.0, np.nan), f16(-np.inf, 1.0, np.nan), exact=False)
    assert not HARNESS.close(f16(-np.inf), f16(np.inf), exact=False)
    assert not HARNESS.close(f16(65504.0), f16(np.inf), exact=False)
    assert not HARNESS.close(f16(np.nan), f16(1.0), exact=False)
