"""`bertkit pretrain mlm` is finetune with the mlm task: it offers every training option finetune
has (they are generated from one declaration), and a run killed with SIGKILL resumes with
``--resume`` to the very bytes of an uninterrupted run, as finetune does (test_long_runs.py)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from test_long_runs import assert_same_tensors, finish, run_here, start
from test_mlm import write_corpus

STEPS = 8
# fp32: in bf16 the masked-LM resume matches to about 1e-3 in the loss from the second step after
# the checkpoint, not bit for bit (finetune's tasks are exact in bf16); see README, Long runs
PRECISION = "no"


def option_names(*args: str) -> set:
    """The options a command accepts, read from the click command the CLI builds."""
    import typer

    from bertkit.cli import app

    group = typer.main.get_command(app)
    command = group
    for name in args:
        command = command.get_command(None, name)
    return {option for parameter in command.params for option in parameter.opts if option.startswith("--")}


def test_pretrain_offers_every_training_option_finetune_has():
    from bertkit.tasks import get_task_class

    finetune = option_names("finetune", "cls")
    pretrain = option_names("pretrain", "mlm")
    cls_only = {"--" + o.name.replace("_", "-") for o in get_task_class("cls").options_for("finetune")}
    # several runs for the spread of a task metric (seeds, folds) are fine-tuning's, not pre-training's
    repeats = {"--seeds", "--folds", "--keep-all"}
    repeats |= {"--lora", "--lora-alpha", "--lora-dropout", "--lora-targets", "--save-adapter"}  # adapters: finetune's
    assert finetune - cls_only - repeats <= pretrain, sorted(finetune - cls_only - repeats - pretrain)
    assert "--config" in pretrain
    for option in (
        "--resume",
        "--resume-from",
        "--save-every",
        "--keep-checkpoints",
        "--max-steps",
        "--eval-every",
        "--threads",
        "--report-to",
        "--patience",
        "--freeze-embeddings",
        "--save-memory",
    ):
        assert option in pretrain
    assert {"--mask-rate", "--whole-word-masking", "--eval-share"} <= pretrain - finetune


def command(root: Path, output: str, *extra) -> list[str]:
    return [
        "pretrain",
        "mlm",
        "--data",
        str(root / "corpus.txt"),
        "--model",
        str(root / "tiny"),
        "--output",
        str(root / output),
        "--max-steps",
        str(STEPS),
        "--max-length",
        "16",
        "--batch-size",
        "8",
        "--lr",
        "5e-3",
        "--eval-every",
        "4",
        "--save-every",
        "2",
        "--log-every",
        "1",
        "--eval-share",
        "0.25",
        "--precision",
        PRECISION,
        *map(str, extra),
    ]


@pytest.fixture(scope="module")
def runs(tiny_bert, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pretrain-resume")
    write_corpus(root / "corpus.txt", 32, seed=1)
    (root / "tiny").symlink_to(tiny_bert)
    killed = start(command(root, "killed"), kill_at="KILL@save-6")
    code, _, err = run_here(command(root, "full"))
    assert code == 0, err
    code, _, _ = finish(killed, expect_ok=False)
    assert code == -signal.SIGKILL and not (root / "killed").exists()
    code, stdout, err = run_here(command(root, "killed", "--resume"))
    assert code == 0, err
    return root


def test_killed_pretraining_resumes_to_the_same_bytes(runs):
    full, resumed = runs / "full", runs / "killed"
    assert_same_tensors(full / "model.safetensors", resumed / "model.safetensors")
    a, b = (json.loads((d / "bertkit.json").read_text()) for d in (full, resumed))
    assert b["resumed_from"].endswith("step-4") and a["resumed_from"] is None
    assert a["kind"] == b["kind"] == "pretrain"
    assert a["metrics"] == b["metrics"] and a["history"] == b["history"] and a["before"] == b["before"]
    assert [h["step"] for h in a["history"]] == [4, 8]
    # the saved evaluation is the one with the lowest held-out loss (greater_is_better False)
    losses = {h["step"]: h["metrics"]["loss"] for h in a["history"]}
    assert a["best_step"] == min(losses, key=losses.get) and a["metrics"]["loss"] == min(losses.values())
    assert a["metrics"]["loss"] < a["before"]["loss"]  # it learned: the comparison is a real one


def test_a_pretraining_run_replays_from_its_config_yaml(runs):
    """pretrain writes config.yaml like finetune, and `pretrain mlm --config` reads it: the same
    run again, the same bytes."""
    import yaml

    written = yaml.safe_load((runs / "full" / "config.yaml").read_text())
    assert written["task"] == "mlm" and written["max_steps"] == STEPS and written["eval_share"] == 0.25
    code, _, err = run_here(
        ["pretrain", "mlm", "--config", str(runs / "full" / "config.yaml"), "--output", str(runs / "replayed")]
    )
    assert code == 0, err
    assert_same_tensors(runs / "full" / "model.safetensors", runs / "replayed" / "model.safetensors")
