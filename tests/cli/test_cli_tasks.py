"""The per-task CLI: subcommands and their options come from the task registry; help fits 80
columns; `bertkit --help` imports nothing heavy; progress is one line per epoch off a terminal."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO
from test_cli_classification import write_sentiment_csv

LABEL_KIND_FLAGS = {"--problem-type", "--label-columns", "--label-map", "--scale-targets"}
LOSS_FLAGS = {"--class-weights", "--loss", "--focal-gamma"}
FEW_SHOT_FLAGS = {"--recipe", "--pairs-per-example"}  # cls, pair: --recipe setfit (tasks/few_shot.py)
LONG_TEXT_FLAGS = {"--long-text", "--head-tokens", "--stride", "--window-pooling"}  # cls, pair (tasks/long_text.py)
CONTEXT_FLAGS = {"--context", "--context-tokens"}  # ner: document context (tasks/document_context.py)
TASK_FLAGS = {
    "--text-column",
    "--text-pair-column",
    "--label-column",
    "--delimiter",
    "--data-format",
    "--label-control",
    "--span-alignment",
    "--span-offsets",
    "--doc-stride",
    "--max-answer-length",
    *LABEL_KIND_FLAGS,
    *LOSS_FLAGS,
    *FEW_SHOT_FLAGS,
    *CONTEXT_FLAGS,
    *LONG_TEXT_FLAGS,
}


def bertkit(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80", "TERM": "dumb"}
    return subprocess.run(
        [sys.executable, "-m", "bertkit", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_subcommands_are_the_registry():
    from bertkit.cli.finetune import TaskGroup
    from bertkit.tasks import FINETUNE_TASKS, TASKS

    assert TaskGroup(name="finetune").list_commands(None) == list(FINETUNE_TASKS)
    assert list(FINETUNE_TASKS) == ["cls", "pair", "ner", "qa", "embedding", "rerank"]
    assert set(TASKS) - set(FINETUNE_TASKS) == {"mlm", "bert"}  # trained by `bertkit pretrain mlm|bert`


@pytest.mark.parametrize("task", ["cls", "pair", "ner", "qa"])
def test_task_help_shows_only_what_the_task_reads(task):
    from bertkit.tasks import get_task_class

    result = bertkit("finetune", task, "--help")
    assert result.returncode == 0, result.stderr
    help_text = result.stdout
    expected = {"--" + option.name.replace("_", "-") for option in get_task_class(task).options_for("finetune")}
    assert (
        expected
        == {
            "cls": {
                "--text-column",
                "--label-column",
                "--delimiter",
                "--data-format",
                "--label-control",
                *LABEL_KIND_FLAGS,
                *LOSS_FLAGS,
                *FEW_SHOT_FLAGS,
                *LONG_TEXT_FLAGS,
            },
            "pair": {
                "--text-column",
                "--text-pair-column",
                "--label-column",
                "--delimiter",
                "--data-format",
                "--label-control",
                *LABEL_KIND_FLAGS,
                *LOSS_FLAGS,
                *FEW_SHOT_FLAGS,
                *LONG_TEXT_FLAGS,
            },
            "ner": {
                "--doc-stride",
                "--data-format",
                "--span-alignment",
                "--span-offsets",
                "--label-control",
                *LOSS_FLAGS,
                *CONTEXT_FLAGS,
            },
            "qa": {"--doc-stride", "--max-answer-length"},
        }[task]
    )
    shown = {flag for flag in TASK_FLAGS if f"{flag} " in help_text}
    assert shown == expected
    for shared in ("--data ", "--model ", "--epochs ", "--lr ", "--report-to ", "--overwrite "):
        assert shared in help_text
    purposes = {  # the task's flags in panels by purpose (bertkit/tasks/panels.py)
        "cls": ("Reading the data", "Label kinds", "Loss", "Recipe", "Long texts"),
        "pair": ("Reading the data", "Label kinds", "Loss", "Recipe", "Long texts"),
        "ner": ("Reading the data", "Loss", "Long texts"),
        "qa": ("Long texts", "Task options"),
    }[task]
    for panel in ("Data", "Model and output", "Training", *purposes):
        assert f"─ {panel}" in help_text
    lines = help_text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "<bool>" not in help_text and "…" not in help_text  # no placeholders, nothing cut off


def test_every_command_help_fits_80_columns():
    for command in (
        ["--help"],
        ["eval", "--help"],
        ["predict", "--help"],
        ["serve", "--help"],
        ["export", "onnx", "--help"],
        ["report", "--help"],
        ["push", "--help"],
        ["finetune", "--help"],
    ):
        result = bertkit(*command)
        assert result.returncode == 0, (command, result.stderr)
        assert max(len(line) for line in result.stdout.splitlines()) <= 80, command
        assert "<bool>" not in result.stdout and "…" not in result.stdout, command


def test_help_imports_no_heavy_module():
    code = (
        "import sys; sys.argv = ['bertkit', 'finetune', '--help']\n"
        "import bertkit.cli\n"
        "try:\n    bertkit.cli.main()\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'transformers', 'accelerate', 'sklearn', 'fastapi', 'matplotlib')"
        " if m in sys.modules]\n"
        "print('HEAVY', heavy)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert "HEAVY []" in result.stdout, result.stdout + result.stderr


def test_usage_errors_name_the_task_command(run_cli):
    from conftest import assert_user_error

    assert_user_error(
        run_cli("finetune", "cls", "--text-pair-column", "b", "--data", "x.csv"),
        "No such option: --text-pair-column",
        "see `bertkit finetune cls --help`",
    )
    assert_user_error(
        run_cli("finetune", "ner", "--max-answer-length", "3", "--data", "x.txt"),
        "No such option: --max-answer-length",
        "bertkit finetune ner --help",
    )
    assert_user_error(run_cli("export", "onnx"), "Missing argument", "bertkit export onnx --help")


def test_progress_off_a_terminal_is_one_line_per_epoch(tmp_path, tiny_bert, run_cli):
    write_sentiment_csv(tmp_path / "train.csv", 48, seed=1)
    write_sentiment_csv(tmp_path / "dev.csv", 16, seed=2)
    code, _, stderr = run_cli(
        "finetune",
        "cls",
        "--data",
        tmp_path / "train.csv",
        "--eval-data",
        tmp_path / "dev.csv",
        "--model",
        tiny_bert,
        "--output",
        tmp_path / "m",
        "--epochs",
        2,
        "--batch-size",
        16,
        "--lr",
        "1e-3",
    )
    assert code == 0, stderr
    assert "\r" not in stderr
    lines = [line for line in stderr.splitlines() if line.startswith(("train:", "eval:"))]
    assert [line.split(" (")[0].split(",")[0] for line in lines] == [
        "train: epoch 1: 3 batches",
        "eval: done",
        "train: evaluation at step 3",
        "train: epoch 2: 3 batches",
        "eval: done",
        "train: evaluation at step 6",
    ]  # a run shorter than the pace (BERTKIT_PROGRESS_SECONDS, 30 s) has no step lines
