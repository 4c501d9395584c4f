"""The model card's usage snippet, run as a user would run it, answers what `bertkit predict` answers
(for a masked LM: what the model's own top-1 is), for every kind of directory; and no card shows a
local path or a missing value."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from extras_models import train_tiny
from test_cli_classification import write_pair_tsv, write_sentiment_csv
from test_mlm import write_corpus

from bertkit.options import RunOptions


# --- tiny trained directories, one of each kind ---------------------------------------------------
def _finetuned(task: str, root: Path, tiny_bert: Path) -> Path:
    if task != "pair":
        return train_tiny(task, root, tiny_bert)
    from bertkit import api
    from bertkit.config import TrainConfig

    root.mkdir(parents=True)
    write_pair_tsv(root / "train.tsv", 48, seed=1)
    write_pair_tsv(root / "dev.tsv", 16, seed=2)
    api.finetune(
        "pair",
        RunOptions(
            data=str(root / "train.tsv"),
            eval_data=str(root / "dev.tsv"),
            model=str(tiny_bert),
            output=str(root / "model"),
        ),
        config=TrainConfig(epochs=1, lr=1e-3, batch_size=16),
    )
    return root / "model"


def _probe(task: str, pooling: str, root: Path, tiny_bert: Path) -> Path:
    from bertkit.api.probing import probe
    from bertkit.options import ProbeOptions, RunOptions
    from bertkit.reporting.build import build_report

    root.mkdir(parents=True)
    write = write_pair_tsv if task == "pair" else write_sentiment_csv
    suffix = ".tsv" if task == "pair" else ".csv"
    train, dev = root / f"train{suffix}", root / f"dev{suffix}"
    write(train, 40, seed=1)
    write(dev, 12, seed=2)
    probe(
        task,
        RunOptions(data=str(train), output=str(root / "model"), model=str(tiny_bert), eval_data=str(dev)),
        options=ProbeOptions(pooling=pooling, holdout=0.25, precision="no"),
    )
    build_report(root / "model")  # as `bertkit report` and `bertkit push` write it
    return root / "model"


def _label_kind(kind: str, root: Path, tiny_bert: Path) -> Path:
    """A regression pair model, or a multi-label cls model with per-label thresholds stored."""
    from test_problem_types import write_emotions_jsonl, write_scores_tsv

    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.reporting.build import build_report

    root.mkdir(parents=True)
    if kind == "regression":
        write_scores_tsv(root / "train.tsv", 48, 1)
        api.finetune(
            "pair",
            RunOptions(data=str(root / "train.tsv"), model=str(tiny_bert), output=str(root / "model")),
            config=TrainConfig(epochs=1, lr=1e-3, batch_size=16, task_options={"problem_type": "regression"}),
        )
        return root / "model"
    write_emotions_jsonl(root / "train.jsonl", 48, 1)
    api.finetune(
        "cls",
        RunOptions(data=str(root / "train.jsonl"), model=str(tiny_bert), output=str(root / "model")),
        config=TrainConfig(epochs=1, lr=1e-3, batch_size=16),
    )
    meta_file = root / "model" / "bertkit.json"
    meta = json.loads(meta_file.read_text())
    meta["task"]["options"]["thresholds"] = [0.0, 1.0, 0.5]  # anger always, fear never, joy at 0.5
    meta_file.write_text(json.dumps(meta))
    build_report(root / "model")  # the card shows the stored thresholds
    return root / "model"


def _mlm(root: Path, tiny_bert: Path) -> Path:
    from bertkit.api.pretraining import pretrain_mlm
    from bertkit.config import TrainConfig
    from bertkit.options import RunOptions
    from bertkit.reporting.build import build_report

    root.mkdir(parents=True)
    write_corpus(root / "corpus.txt", 12, seed=1)
    pretrain_mlm(
        RunOptions(data=str(root / "corpus.txt"), output=str(root / "model"), model=str(tiny_bert)),
        TrainConfig(epochs=1, lr=5e-3, batch_size=8, max_length=16, task_options={"eval_share": 0.25}),
    )
    build_report(root / "model")
    return root / "model"


@pytest.fixture(scope="module")
def directories(tmp_path_factory, tiny_bert) -> dict:
    root = tmp_path_factory.mktemp("cards")
    made = {task: _finetuned(task, root / task, tiny_bert) for task in ("cls", "pair", "ner", "qa")}
    made["probe-mean"] = _probe("cls", "mean", root / "probe-mean", tiny_bert)
    made["probe-pair-max"] = _probe("pair", "max", root / "probe-pair-max", tiny_bert)
    made["mlm"] = _mlm(root / "mlm", tiny_bert)
    for kind in ("regression", "multi-label"):
        made[kind] = _label_kind(kind, root / kind, tiny_bert)
    return made


def _snippet(directory: Path) -> str:
    card = (directory / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)\n```", card, re.S)
    assert len(blocks) == 1, card
    assert re.search(r"^MODEL_DIR = .*$", blocks[0], re.M), blocks[0]
    return re.sub(r"^MODEL_DIR = .*$", f"MODEL_DIR = {json.dumps(str(directory))}", blocks[0], count=1, flags=re.M)


def _run_snippet(directory: Path, tmp_path: Path):
    """The snippet's printed answer (its last line, a Python literal unless it starts with a label)."""
    result = subprocess.run(
        [sys.executable, "-c", _snippet(directory)], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


def _predict(run_cli, directory: Path, tmp_path: Path) -> dict:
    from bertkit.model_dir import load_meta
    from bertkit.tasks import task_from_state

    example = task_from_state(load_meta(str(directory))["task"]).card_text.example
    (tmp_path / "in.jsonl").write_text(json.dumps(example) + "\n")
    code, stdout, stderr = run_cli("predict", directory, "--input", tmp_path / "in.jsonl", "--precision", "no")
    assert code == 0, stderr
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert len(rows) == 1
    return rows[0]


# --- the snippets ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["cls", "pair"])
def test_classifier_snippet_matches_predict(kind, directories, run_cli, tmp_path):
    answer = ast.literal_eval(_run_snippet(directories[kind], tmp_path))
    answer = answer[0] if isinstance(answer, list) else answer
    row = _predict(run_cli, directories[kind], tmp_path)
    assert answer["label"] == row["label"]
    assert answer["score"] == pytest.approx(row["score"], abs=1e-4)


def test_regression_snippet_matches_predict(directories, run_cli, tmp_path):
    answer = float(_run_snippet(directories["regression"], tmp_path))
    assert answer == pytest.approx(_predict(run_cli, directories["regression"], tmp_path)["score"], abs=1e-4)


def test_multi_label_snippet_matches_predict_with_stored_thresholds(directories, run_cli, tmp_path):
    answer = ast.literal_eval(_run_snippet(directories["multi-label"], tmp_path))
    row = _predict(run_cli, directories["multi-label"], tmp_path)
    assert answer["labels"] == row["labels"] and "anger" in row["labels"] and "fear" not in row["labels"]
    assert answer["probabilities"] == pytest.approx(row["probabilities"], abs=1e-5)


def test_ner_snippet_matches_predict(directories, run_cli, tmp_path):
    answer = ast.literal_eval(_run_snippet(directories["ner"], tmp_path))
    row = _predict(run_cli, directories["ner"], tmp_path)
    assert [word for word, _ in answer] == row["words"]
    assert [tag for _, tag in answer] == row["tags"]


def test_qa_snippet_matches_predict(directories, run_cli, tmp_path):
    answer = ast.literal_eval(_run_snippet(directories["qa"], tmp_path))
    row = _predict(run_cli, directories["qa"], tmp_path)
    assert answer == {"answer": row["answer"], "start": row["start"]} and row["answer"]


@pytest.mark.parametrize("kind", ["probe-mean", "probe-pair-max"])
def test_probe_snippet_matches_predict(kind, directories, run_cli, tmp_path):
    label, probabilities = _run_snippet(directories[kind], tmp_path).split(" ", 1)
    row = _predict(run_cli, directories[kind], tmp_path)
    assert label == row["label"]
    probabilities = ast.literal_eval(probabilities)
    assert probabilities == pytest.approx(row["probabilities"], abs=1e-4)
    card = (directories[kind] / "README.md").read_text()
    assert "pipeline(" not in card and "pipeline_tag" not in card  # a pipeline would add a random head


def test_mlm_snippet_gives_the_models_top_guess(directories, tmp_path):
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from bertkit.tasks.mlm import MaskedLMTask

    directory = directories["mlm"]
    guesses = ast.literal_eval(_run_snippet(directory, tmp_path))
    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = AutoModelForMaskedLM.from_pretrained(directory).eval()
    text = MaskedLMTask.card_text.example["text"].replace("[MASK]", tokenizer.mask_token)
    inputs = tokenizer(text, return_tensors="pt")
    position = int((inputs["input_ids"][0] == tokenizer.mask_token_id).nonzero()[0, 0])
    with torch.no_grad():
        probabilities = model(**inputs).logits[0, position].softmax(-1)
    top = int(probabilities.argmax())
    assert guesses[0][0] == tokenizer.decode([top]).strip()
    assert guesses[0][1] == pytest.approx(float(probabilities[top]), abs=1e-3)
    assert "bertkit predict DIR" not in (directory / "README.md").read_text()


# --- what every card leaves out -------------------------------------------------------------------
def test_cards_show_no_local_path_and_no_missing_value(directories, tiny_bert):
    for kind, directory in directories.items():
        card = (directory / "README.md").read_text()
        meta = json.loads((directory / "bertkit.json").read_text())
        local = {
            str(directory.parent),
            str(tiny_bert),
            str(Path.home()),
            meta["data"]["train"],
            meta["data"].get("eval_file"),
        } - {None, ""}
        assert not [path for path in local if path in card], kind
        prose = re.sub(r"```python\n.*?\n```", "", card, flags=re.S)  # code may well say `is not None`
        assert "None" not in prose and "$" not in card, kind
        assert Path(meta["data"]["train"]).name in card, kind  # the file is named, by its name only


def test_probe_card_leaves_out_what_it_does_not_have(directories):
    card = (directories["probe-mean"] / "README.md").read_text()
    assert "Training took" not in card and "Best epoch" not in card
    assert "`mean`-pooled" in card and "probe_head.safetensors" in card


def test_known_dataset_is_named_not_its_local_file():
    from bertkit.reporting.card import model_card

    meta = {
        "task": {"task": "cls", "labels": ["negative", "positive"], "max_length": 64},
        "base_model": "/home/someone/models/bert-tiny",
        "data": {
            "name": "sst2",
            "train": "/data/glue/sst2/train.tsv",
            "eval": "/data/glue/sst2/dev.tsv",
            "eval_file": "/data/glue/sst2/dev.tsv",
            "train_examples": 10,
            "eval_examples": 5,
        },
        "config": {"lr": 1e-3, "resume": "/home/someone/runs/checkpoint-3"},
        "metrics": {"accuracy": 0.5},
        "throughput": {"train_seconds": None},
        "versions": {"torch": None},
        "bertkit_version": "0.1.0",
    }
    card = model_card(meta, "demo")
    assert "/home/someone" not in card and "/data/glue" not in card and "None" not in card
    assert "- train: sst2 (train.tsv) (10 examples)" in card and "`bert-tiny`" in card
    assert "| resume | checkpoint-3 |" in card and "Training took" not in card


# --- a task without card text ---------------------------------------------------------------------
def _toy_meta(task: str) -> dict:
    return {
        "task": {"task": task, "labels": None, "max_length": 32, "options": {}},
        "base_model": "bert-base-cased",
        "data": {"name": None, "train": "toy.jsonl", "eval": None, "train_examples": 3, "eval_examples": 0},
        "config": {"lr": 1e-4},
        "metrics": {"toy_score": 0.25},
        "best_epoch": 1,
        "versions": {},
        "bertkit_version": "0.1.0",
    }


@pytest.mark.parametrize("registered", [True, False])
def test_a_task_without_card_text_gets_a_valid_card(registered, monkeypatch):
    import yaml

    from bertkit import tasks
    from bertkit.reporting.card import model_card
    from bertkit.tasks.base import Task

    class ToyTask(Task):
        name, model_class, main_metric = "toy", "AutoModel", "toy_score"
        from_records = preprocess = postprocess = metrics = format_prediction = lambda *args: None

    if registered:
        monkeypatch.setitem(tasks.TASKS, "toy", ToyTask)
    card = model_card(_toy_meta("toy"), "toy-model")
    front = yaml.safe_load(card.split("---\n")[1])
    assert "pipeline_tag" not in front and front["tags"] == ["bertkit", "toy"]
    assert front["model-index"][0]["results"][0]["task"]["type"] == "toy"
    assert "```" not in card and "bertkit predict DIR" in card and "None" not in card and "$" not in card


def test_the_card_module_does_not_switch_on_task_names():
    from bertkit.tasks import TASKS

    source = (Path(__file__).resolve().parents[2] / "bertkit" / "reporting" / "card.py").read_text()
    assert not [name for name in TASKS if f'"{name}"' in source or f"'{name}'" in source]


@pytest.mark.parametrize("pooling", ["foo", "layer:", 3, None])
def test_a_probe_with_an_edited_pooling_is_one_line_everywhere(pooling, directories, run_cli, tmp_path):
    import shutil

    model = tmp_path / "probe"
    shutil.copytree(directories["probe-mean"], model)
    meta = json.loads((model / "bertkit.json").read_text())
    meta["probe"]["pooling"] = pooling
    (model / "bertkit.json").write_text(json.dumps(meta))
    (tmp_path / "in.txt").write_text("a fine film\n")
    before = sorted(p.name for p in model.iterdir())
    for args in (["report", model], ["predict", model, "--input", tmp_path / "in.txt"]):
        code, out, err = run_cli(*args)
        assert code == 2 and err.count("\n") == 1 and "probe.pooling" in err and "Traceback" not in err, (args, err)
    assert sorted(p.name for p in model.iterdir()) == before
