"""sinpe rope-check / sinpe._rope_check.rope_check: configs of 12 families (tiny, written as
config.json files), the results' form, what must hold between the producers, the command
line's output and exit codes."""
import json

import pytest

from sinpe import __main__ as cli
from sinpe._rope_check import rope_check

BASE = {"hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 4096}
FAMILIES = {
    "llama": dict(BASE, model_type="llama", rope_theta=500000.0),
    "llama3": dict(BASE, model_type="llama", rope_theta=500000.0, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192}),
    "mistral": dict(BASE, model_type="mistral", rope_theta=1e6, head_dim=128),
    "qwen2": dict(BASE, model_type="qwen2", rope_theta=1e6, rope_scaling={
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}),
    "qwen3": dict(BASE, model_type="qwen3", rope_theta=1e6, head_dim=128),
    "gemma2": dict(BASE, model_type="gemma2", head_dim=256, rope_theta=10000.0),
    "phi": dict(BASE, model_type="phi", partial_rotary_factor=0.5, rope_theta=10000.0),
    "gpt_neox": dict(BASE, model_type="gpt_neox", partial_rotary_factor=0.25, rope_theta=10000),
    "cohere": dict(BASE, model_type="cohere", rope_theta=10000.0),
    "olmo": dict(BASE, model_type="olmo", rope_theta=10000.0),
    "starcoder2": dict(BASE, model_type="starcoder2", rope_theta=100000.0, rope_scaling={
        "rope_type": "linear", "factor": 4.0}),
    "gpt_oss": dict(BASE, model_type="gpt_oss", head_dim=64, rope_theta=150000, rope_scaling={
        "rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
        "truncate": False, "original_max_position_embeddings": 4096}),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("configs")
    for name, cfg in FAMILIES.items():
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(cfg))
    return root


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_rope_check_runs_on_each_family(folders, family):
    r = rope_check(folders / family, positions=48, dtype="float32")
    head = FAMILIES[family].get("head_dim", 64)
    assert set(r) == {"inductor", "onnxruntime", "openvino", "openvino-bf16", "mlx", "llama.cpp"}
    # torch.compile keeps float32 intermediates: in float32 they are eager's bits
    assert r["inductor"] == {"differ": 0, "total": 48 * 4 * head, "max_abs": 0.0,
                             "first_position": None}
    # ONNX Runtime's FMA form differs somewhere, from position 1 on (position 0 is x itself)
    ort = r["onnxruntime"]
    assert 0 < ort["differ"] < ort["total"] and ort["first_position"] >= 1
    assert 0 < ort["max_abs"] < 1e-3
    for name, res in r.items():
        assert ("refused" in res) != ("differ" in res), (name, res)
        if "refused" in res:
            assert name in res["refused"] or "rope_type" in res["refused"], res
    kind = (FAMILIES[family].get("rope_scaling") or {}).get("rope_type", "default")
    assert ("refused" in r["mlx"]) == (kind != "default")
    assert ("refused" in r["llama.cpp"]) == (kind not in ("default", "linear", "yarn", "llama3"))


def test_rope_check_16_bit_and_refusals(folders):
    r = rope_check(folders / "llama", positions=32, dtype="bfloat16")
    assert "does not run bfloat16" in r["onnxruntime"]["refused"]
    assert "does not run bfloat16" in r["llama.cpp"]["refused"]
    assert r["inductor"]["differ"] > 0  # one rounding against eager's per-op rounding
    r = rope_check(FAMILIES["llama"], positions=32, dtype="float16",
                   producers=["onnxruntime", "openvino"])
    assert list(r) == ["onnxruntime", "openvino"]
    assert r["onnxruntime"] == r["openvino"]  # the same FMA form on the halves
    with pytest.raises(ValueError, match="producer must be one of .*got 'ort'"):
        rope_check(FAMILIES["llama"], positions=8, producers=["ort"])


def test_cli_prints_json_and_text(folders, capsys):
    assert cli.main(["rope-check", str(folders / "qwen3"), "--positions", "16", "--json",
                     "--producers", "onnxruntime,mlx"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"onnxruntime", "mlx"}
    assert set(out["mlx"]) == {"differ", "total", "max_abs", "first_position"}
    assert cli.main(["rope-check", str(folders / "cohere" / "config.json"),
                     "--positions", "8"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].split()[0] == "producer" and "onnxruntime" in text


def test_cli_plot(folders, tmp_path):
    png = tmp_path / "rc.png"
    assert cli.main(["rope-check", str(folders / "llama"), "--positions", "8", "--plot",
                     str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_cli_errors(folders, tmp_path, capsys):
    assert cli.main(["rope-check", str(tmp_path / "missing")]) == 2
    assert "rope-check: error" in capsys.readouterr().err
    assert cli.main(["rope-check", str(folders / "llama"), "--positions", "0"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert cli.main(["rope-check", str(bad)]) == 2
    assert cli.main(["rope-check", str(folders / "llama"), "--producers", "ort"]) == 2
    with pytest.raises(SystemExit):
        cli.main(["rope-check"])


def test_cli_refuses_what_it_cannot_compare(tmp_path, capsys):
    """A hostile probe's findings: a config whose own tables are NaN reported "0 differ", an
    unknown serving CPU a "refused" row with exit 0, an empty --producers an empty table, a
    malformed file an error without its name: each is exit 2 with the reason."""
    nan = tmp_path / "nan.json"
    nan.write_text(json.dumps(dict(FAMILIES["llama"], rope_scaling={"rope_type": "linear",
                                                                    "factor": 0})))
    with pytest.warns(RuntimeWarning):
        assert cli.main(["rope-check", str(nan), "--positions", "8"]) == 2
    assert "not finite" in capsys.readouterr().err
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps(FAMILIES["llama"]))
    assert cli.main(["rope-check", str(ok), "--producers", "openvino:sse"]) == 2
    assert cli.main(["rope-check", str(ok), "--producers", ","]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert cli.main(["rope-check", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err
