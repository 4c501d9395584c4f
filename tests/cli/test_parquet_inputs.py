"""Parquet trains, evaluates and predicts as JSON Lines does: every task family fine-tuned on a tiny
.parquet file (written here with pyarrow) through the real CLI, reading the columns the JSONL
reader reads (token and tag lists for ner, SQuAD's answers struct for qa)."""

from __future__ import annotations

import json

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

TRAIN = ("--epochs", 1, "--batch-size", 8, "--max-length", 32, "--precision", "no")
CLS = [{"text": f"the film was {w}", "label": lab} for w, lab in [("good", "pos"), ("bad", "neg")] * 8]
PAIR = [
    {"sentence1": f"the film was {a}", "sentence2": f"it was {b}", "label": lab}
    for a, b, lab in [("good", "good", "same"), ("bad", "great", "different")] * 6
]
NER = [
    {"tokens": ["john", "lives", "in", "paris"], "tags": ["B-PER", "O", "O", "B-LOC"]},
    {"tokens": ["mary", "visited", "berlin"], "tags": ["B-PER", "O", "B-LOC"]},
] * 4
QA = [
    {
        "id": f"q{i}",
        "question": "who lives in paris ?",
        "context": "john lives in paris .",
        "answers": {"text": ["john"], "answer_start": [0]},
    }
    for i in range(8)
]
PAIRS = [{"anchor": f"who lives in {c} ?", "positive": f"john lives in {c} ."} for c in ("paris", "rome", "berlin")] * 3
RERANK = [
    {"query": "who lives in paris ?", "passage": p, "label": lab}
    for p, lab in [("john lives in paris .", 1), ("the film was good .", 0)] * 4
]
MLM = [{"text": f"the film was {w} .\nthe plot was {w} ."} for w in ("good", "bad", "fine", "awful")] * 3


def parquet(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def meta(model):
    return json.loads((model / "bertkit.json").read_text())


def test_cls_trains_evaluates_and_predicts_on_parquet(tmp_path, tiny_bert, run_cli):
    data = parquet(tmp_path / "train.parquet", CLS)
    model = tmp_path / "cls"
    code, _, err = run_cli(
        "finetune", "cls", "--data", data, "--eval-data", data, "--model", tiny_bert, "--output", model, *TRAIN
    )
    assert code == 0, err
    assert meta(model)["data"]["train_examples"] == len(CLS) and sorted(meta(model)["task"]["labels"]) == ["neg", "pos"]
    code, out, err = run_cli("eval", model, "--data", data, "--output", tmp_path / "eval.json")
    assert code == 0, err
    assert json.loads((tmp_path / "eval.json").read_text())["examples"] == len(CLS)
    code, _, err = run_cli("predict", model, "--input", data, "--output", tmp_path / "p.jsonl")
    assert code == 0, err
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(rows) == len(CLS) and {row["label"] for row in rows} <= {"neg", "pos"}


@pytest.mark.parametrize(
    "task, rows, labels",
    [
        ("pair", PAIR, ["different", "same"]),
        ("ner", NER, ["B-LOC", "B-PER", "I-LOC", "I-PER", "O"]),
        ("qa", QA, None),
        ("embedding", PAIRS, None),
        ("rerank", RERANK, None),
    ],
)
def test_each_task_family_trains_on_parquet(tmp_path, tiny_bert, run_cli, task, rows, labels):
    data = parquet(tmp_path / "train.parquet", rows)
    model = tmp_path / task
    code, _, err = run_cli("finetune", task, "--data", data, "--model", tiny_bert, "--output", model, *TRAIN)
    assert code == 0, err
    assert meta(model)["data"]["train_examples"] == len(rows)
    if labels:
        assert sorted(meta(model)["task"]["labels"]) == labels
    if task == "ner":  # eval reads the same token/tag lists
        code, _, err = run_cli("eval", model, "--data", data, "--output", tmp_path / "eval.json")
        assert code == 0, err


def test_mlm_pretrains_on_a_parquet_text_column(tmp_path, tiny_bert, run_cli):
    data = parquet(tmp_path / "corpus.parquet", MLM)
    model = tmp_path / "mlm"
    code, out, err = run_cli(
        "pretrain", "mlm", "--data", data, "--model", tiny_bert, "--output", model, *TRAIN, "--eval-share", "0.25"
    )
    assert code == 0, err
    assert "train: 9 documents" in out and "eval: 3 documents" in out
