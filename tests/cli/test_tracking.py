"""--report-to: TensorBoard logging through Accelerate, read back from the event file."""

from __future__ import annotations

import json

import pytest
from conftest import assert_user_error
from extras_models import train_tiny


def test_parse_report_to():
    from bertkit.engine.tracking import parse_report_to
    from bertkit.errors import BertkitError

    assert parse_report_to(None) == [] and parse_report_to("none") == []
    with pytest.raises(BertkitError, match="unknown --report-to 'tensorbored'"):
        parse_report_to("tensorbored")
    with pytest.raises(BertkitError, match="cannot be combined"):
        parse_report_to("none,tensorboard")


def test_missing_tracker_package_fails_before_any_work(run_cli, tmp_path, monkeypatch):
    import bertkit.engine.tracking as tracking

    monkeypatch.setattr(tracking, "_installed", lambda package: package != "wandb")
    assert_user_error(
        run_cli(
            "finetune", "cls", "--data", tmp_path / "missing.csv", "--output", tmp_path / "m", "--report-to", "wandb"
        ),
        "--report-to wandb needs the wandb package",
    )


def test_tensorboard_event_file_has_loss_lr_and_eval(tmp_path, tiny_bert):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model = train_tiny("cls", tmp_path, tiny_bert, report_to="tensorboard")
    logs = tmp_path / "model.logs" / "bertkit"
    events = EventAccumulator(str(logs))
    events.Reload()
    scalars = events.Tags()["scalars"]
    assert {"train/loss", "train/lr", "eval/accuracy"} <= set(scalars)
    meta = json.loads((model / "bertkit.json").read_text())
    steps = meta["throughput"]["optimizer_steps"]  # 64 examples / 16 x 2 epochs = 8
    loss = events.Scalars("train/loss")
    assert [e.step for e in loss] == list(range(1, steps + 1)) == list(range(1, 9))
    lr = [e.value for e in events.Scalars("train/lr")]
    # linear warmup over int(0.1 x 8) = 0 steps, then linear decay from 1e-3 to 0 over 8 steps
    assert lr == pytest.approx([1e-3 * (8 - s) / 8 for s in range(1, 9)], rel=1e-5)
    accuracy = events.Scalars("eval/accuracy")
    assert [e.step for e in accuracy] == [4, 8]
    assert [round(e.value, 6) for e in accuracy] == [h["metrics"]["accuracy"] for h in meta["history"]]
