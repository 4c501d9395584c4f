"""The way in: `bertkit` alone says where to start, `bertkit --help` lists the commands by purpose,
`finetune --help` summarises each task in whole sentences, `distill --help` offers only what a
distillation honours, and a run given no --model on an offline machine trains the bundled MiniLM
(said in one line) instead of failing on the Hub's bert-base-uncased."""

from __future__ import annotations

import json
import re

import pytest
from conftest import minilm_or_skip
from hostile import CLS_CSV

PANELS = ("Train", "Evaluate and predict", "Serve and export", "Data", "Inspect")
COMMANDS = ("finetune", "distill", "tune", "pretrain", "probe", "eval", "calibrate", "predict", "embed", "report")
COMMANDS += ("serve", "export", "push", "datasets", "audit", "select", "mine", "inspect")


def positions(text: str, words) -> list[int]:
    return [text.index(word) for word in words]


def test_help_lists_the_commands_by_purpose_in_order(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    code, out, err = run_cli("--help")
    assert code == 0 and not err
    assert positions(out, [f"─ {panel} ─" for panel in PANELS]) == sorted(positions(out, [f"─ {p} ─" for p in PANELS]))
    rows = re.findall(r"^│ ([a-z]+) ", out, re.MULTILINE)  # the first word of each command row
    assert rows == list(COMMANDS)
    assert "─ Commands ─" not in out and "─ Other ─" not in out  # every built-in command has its panel


def test_bertkit_alone_says_where_to_start(run_cli):
    code, out, err = run_cli()
    assert code == 0 and not err
    assert "Start here" in out and "bertkit finetune cls --data sst2 --model minilm" in out
    assert "bertkit --help" in out
    assert "Usage:" not in out  # not the whole help


def test_finetune_summaries_are_whole_sentences(run_cli, monkeypatch):
    from bertkit.cli.finetune import task_help
    from bertkit.tasks import finetune_tasks, get_task_class

    for task in finetune_tasks():
        text = task_help(get_task_class(task))
        assert "``" not in text and text.endswith("."), text
        assert "bertkit finetune" not in text, text
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run_cli("finetune", "--help")
    assert code == 0
    words = " ".join(out.replace("│", " ").split())  # the table's rows, wrapped or not
    assert "saved as a sentence-transformers directory." in words  # embedding's summary, no longer cut
    assert "the score is its sigmoid." in words  # rerank's


def test_finetune_flags_come_in_panels_by_purpose(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = run_cli("finetune", "cls", "--help")
    assert code == 0
    order = ["Data", "Reading the data", "Model and output", "Training", "Label kinds", "Loss", "Recipe"]
    order += ["Long texts", "LoRA adapters", "Long runs", "Output"]
    found = positions(out, [f"─ {panel}" for panel in order])
    assert found == sorted(found)
    panel_of = {}
    for line in out.splitlines():
        title = re.match(r"╭─ (.+?) ─", line)
        if title:
            panel = title.group(1)
        flag = re.match(r"│ (?:\*\s+)?(--[a-z-]+)", line)
        if flag:
            panel_of[flag.group(1)] = panel
    assert panel_of["--text-column"].startswith("Reading the data")
    assert panel_of["--problem-type"].startswith("Label kinds")
    assert panel_of["--focal-gamma"] == "Loss"
    assert panel_of["--recipe"].startswith("Recipe")
    assert panel_of["--long-text"] == "Long texts"


NOT_HONOURED = ("--model", "--save-adapter", "--recipe", "--pairs-per-example", "--problem-type")
NOT_HONOURED += ("--label-columns", "--scale-targets", "--class-weights", "--loss", "--focal-gamma")
NOT_HONOURED += ("--seeds", "--folds", "--keep-all")


def test_distill_offers_only_what_it_honours(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = run_cli("distill", "--help")
    assert code == 0
    flags = set(re.findall(r"^│ (?:\*\s+)?(--[a-z-]+)", out, re.MULTILINE))
    assert not flags & set(NOT_HONOURED), flags & set(NOT_HONOURED)
    assert {"--student", "--student-layers", "--temperature", "--alpha", "--lora", "--data", "--epochs"} <= flags
    assert {"--text-column", "--long-text", "--context"} <= flags  # the teachers' tasks' reading flags


def test_distill_api_refuses_the_gold_loss_options(tmp_path):
    from bertkit.api.distillation import _check_task_options
    from bertkit.errors import BertkitError

    with pytest.raises(BertkitError, match="--class-weights, --loss: bertkit distill trains with its own loss"):
        _check_task_options("cls", {"loss": "focal", "class_weights": "auto"})
    _check_task_options("cls", {"text_column": "text"})  # a reading option: fine


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No Hub and an empty Hugging Face cache, whatever the machine running the tests has."""
    import huggingface_hub.constants

    from bertkit import hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))
    hub.hub_reachable.cache_clear()
    yield
    hub.hub_reachable.cache_clear()


def test_default_model_is_the_hub_one_when_the_hub_answers(monkeypatch):
    from bertkit import hub, models
    from bertkit.events import listening

    monkeypatch.setattr(hub, "hub_reachable", lambda: True)
    heard = []
    with listening(heard.append):
        assert models.default_model() == "bert-base-uncased"
    assert heard == []


def test_default_model_offline_is_the_bundled_minilm(offline):
    from bertkit import models
    from bertkit.events import listening

    heard = []
    with listening(heard.append):
        assert models.default_model() == "minilm"
    assert len(heard) == 1 and "no --model given" in heard[0].text and "minilm" in heard[0].text


def test_finetune_without_model_offline_trains_the_minilm(offline, run_cli, tmp_path):
    minilm_or_skip()
    data = tmp_path / "train.csv"
    data.write_text(CLS_CSV)
    out = tmp_path / "out"
    args = ("--data", data, "--output", out, "--max-steps", 1, "--batch-size", 4, "--max-length", 16)
    code, stdout, stderr = run_cli("finetune", "cls", *args, "--threads", 1)
    assert code == 0, stderr
    said = [line for line in stderr.splitlines() if "no --model given" in line]
    assert len(said) == 1 and "bundled MiniLM" in said[0], stderr
    recorded = json.loads((out / "bertkit.json").read_text())
    assert "minilm" in json.dumps(recorded).lower()


def test_an_explicit_hub_name_offline_still_fails_in_one_line(offline, run_cli, tmp_path):
    data = tmp_path / "train.csv"
    data.write_text(CLS_CSV)
    code, _, stderr = run_cli(
        "finetune", "cls", "--data", data, "--model", "bert-base-uncased", "--output", tmp_path / "o"
    )
    assert code == 2 and stderr.startswith("error: --model bert-base-uncased"), stderr
    assert "no --model given" not in stderr
