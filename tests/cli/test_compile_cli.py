"""finetune --compile end to end (engine/compilation.py): on trains the eager run's weights and
records what it did; combinations it was not tested with are refused in one line."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from test_cli_classification import write_sentiment_csv  # noqa: E402
from test_packed_training import _without_dropout  # noqa: E402


def test_compile_on_trains_the_eager_weights_and_says_so(tmp_path, tiny_bert, run_cli, monkeypatch):
    import torch._dynamo
    from safetensors.torch import load_file

    from bertkit.engine import compilation

    monkeypatch.setattr(compilation, "BACKEND", "aot_eager")  # dynamo and AOT autograd, no C++ build
    monkeypatch.setattr(compilation, "_GIVEN_CACHE", str(tmp_path / "cache"))
    torch._dynamo.reset()
    model = _without_dropout(tiny_bert, tmp_path / "model")
    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 40, seed=1)
    base = ("finetune", "cls", "--data", train, "--model", model, "--epochs", 2, "--batch-size", 8, "--lr", "1e-3")
    outputs = {mode: tmp_path / mode for mode in ("on", "off")}
    said = {}
    for mode, output in outputs.items():
        code, stdout, stderr = run_cli(*base, "--precision", "no", "--compile", mode, "--output", output)
        assert code == 0, stderr
        said[mode] = [line for line in (stdout + stderr).splitlines() if "--compile" in line]
    torch._dynamo.reset()
    assert len(said["on"]) == 1 and "compiling the encoder layers" in said["on"][0] and not said["off"]
    compiled, eager = (load_file(str(outputs[m] / "model.safetensors")) for m in ("on", "off"))
    assert compiled.keys() == eager.keys()  # the saved model is the plain one: no compiled wrapper's names
    for name in eager:
        assert torch.allclose(compiled[name], eager[name], atol=1e-5), name
    facts = {m: json.loads((outputs[m] / "bertkit.json").read_text())["throughput"]["compile"] for m in outputs}
    assert facts["off"] == {"mode": "off", "compiled": False}
    assert facts["on"]["compiled"] and facts["on"]["first_step_seconds"] > 0
    assert facts["on"]["cache"] == str(tmp_path / "cache") and (tmp_path / "cache" / "bertkit-compiled").is_dir()


def test_auto_leaves_a_short_run_eager_without_a_word(tmp_path, tiny_bert, run_cli):
    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 24, seed=1)
    code, stdout, stderr = run_cli("finetune", "cls", "--data", train, "--model", tiny_bert, "--output", tmp_path / "o")
    assert code == 0, stderr
    assert "--compile" not in stdout + stderr  # 3 steps: not even timed
    facts = json.loads((tmp_path / "o" / "bertkit.json").read_text())["throughput"]["compile"]
    assert facts == {"mode": "auto", "compiled": False}


@pytest.mark.parametrize(
    "extra,said",
    [
        (("--packing", "on"), "--compile on runs the padded batches"),
        (("--save-memory",), "--compile on: not with --save-memory"),
        (("--compile", "sometimes"), "--compile"),
    ],
)
def test_untested_combinations_are_refused_in_one_line(extra, said, tmp_path, tiny_bert, run_cli):
    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 24, seed=1)
    args = ("finetune", "cls", "--data", train, "--model", tiny_bert, "--compile", "on", *extra)
    code, stdout, stderr = run_cli(*args, "--output", tmp_path / "o")
    assert code != 0
    errors = [line for line in stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and said in errors[0], stderr
    assert not (tmp_path / "o").exists()


def test_distill_compiles_the_students_layers(tmp_path, tiny_bert, run_cli, monkeypatch):
    import torch._dynamo

    from bertkit.engine import compilation

    monkeypatch.setattr(compilation, "BACKEND", "aot_eager")
    monkeypatch.setattr(compilation, "_GIVEN_CACHE", str(tmp_path / "cache"))
    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 24, seed=1)
    code, _, stderr = run_cli("finetune", "cls", "--data", train, "--model", tiny_bert, "--output", tmp_path / "t")
    assert code == 0, stderr
    torch._dynamo.reset()
    args = ("distill", tmp_path / "t", "--data", train, "--compile", "on", "--output", tmp_path / "s")
    code, stdout, stderr = run_cli(*args)
    torch._dynamo.reset()
    assert code == 0, stderr
    assert "--compile on: compiling the encoder layers" in stdout + stderr
    facts = json.loads((tmp_path / "s" / "bertkit.json").read_text())["throughput"]["compile"]
    assert facts["compiled"] and facts["first_step_seconds"] > 0
