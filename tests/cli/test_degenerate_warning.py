"""A model that predicts one thing for everything is said (issue #31): one warning on the console
with the likely causes and the baseline it equals, in bertkit.json, on the card, and in `eval`."""

from __future__ import annotations

import json

from hostile import CLS_CSV

WARNING = "warning: the model predicts"


def test_a_constant_model_is_said_on_the_console_in_bertkit_json_and_on_the_card(tmp_path, tiny_bert, run_cli):
    (tmp_path / "train.csv").write_text(CLS_CSV)
    output = tmp_path / "model"
    # a learning rate of 1e-9: the random head hardly moves, and gives every text the same label
    code, out, err = run_cli(
        "finetune",
        "cls",
        "--data",
        tmp_path / "train.csv",
        "--eval-data",
        tmp_path / "train.csv",
        "--model",
        tiny_bert,
        "--output",
        output,
        "--lr",
        "1e-9",
        "--epochs",
        "1",
        "--threads",
        "1",
    )
    assert code == 0, err
    shown = [line for line in (out + err).splitlines() if line.startswith(WARNING)]
    assert len(shown) == 1, out + err  # said once: when decided, not again with the summary
    line = shown[0]
    assert "for 100% of the 16 examples" in line and "'always " in line and "accuracy 0.5000" in line, line
    assert "see --epochs, --lr" in line, line
    assert "best, but degenerate (see the warning) (epoch 1" in out  # the summary does not call it fine
    recorded = json.loads((output / "bertkit.json").read_text())["warnings"]
    assert [w["text"] for w in recorded] == [line]
    card = (output / "README.md").read_text()
    assert f"**Warning:** {line.removeprefix('warning: ')}" in card

    code, out, err = run_cli("eval", output, "--data", tmp_path / "train.csv", "--threads", "1")
    assert code == 0, err
    said = [line for line in (out + err).splitlines() if line.startswith(WARNING)]
    assert len(said) == 1 and "bertkit finetune --epochs, --lr" in said[0], out + err
    report = json.loads((output / "eval-train.json").read_text())
    assert report["warnings"][0]["text"] == said[0] and report["warnings"][0]["baseline"]["accuracy"] == 0.5


def test_a_model_that_learned_gets_no_warning(tmp_path, tiny_bert, run_cli):
    (tmp_path / "train.csv").write_text(CLS_CSV)
    output = tmp_path / "model"
    code, out, err = run_cli(
        "finetune",
        "cls",
        "--data",
        tmp_path / "train.csv",
        "--eval-data",
        tmp_path / "train.csv",
        "--model",
        tiny_bert,
        "--output",
        output,
        "--lr",
        "5e-3",
        "--epochs",
        "15",
        "--batch-size",
        "4",
        "--threads",
        "1",
    )
    assert code == 0, err
    metrics = json.loads((output / "bertkit.json").read_text())["metrics"]
    assert metrics["mcc"] > 0.5, f"the tiny model did not learn the toy data: {metrics}"
    assert WARNING not in out + err and "degenerate" not in out and "\nbest (epoch" in "\n" + out
    assert json.loads((output / "bertkit.json").read_text())["warnings"] is None
