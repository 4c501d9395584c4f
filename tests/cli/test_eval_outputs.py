"""`bertkit eval` writes what it scored: predictions-<data>.jsonl (gold and predicted per example),
which scores to eval's own numbers with the benchmarks' formulas; results.json gathers the train
and eval numbers; NER prints the per-type table."""

from __future__ import annotations

import json
import random

import pytest
from seqeval.metrics import f1_score as seqeval_f1
from test_cli_classification import write_sentiment_csv
from test_squad_v2_threshold import official_compute_exact, official_compute_f1

from bertkit.options import EvalOptions, InferenceOptions, RunOptions

TYPES = {"PER": ["john", "mary", "anna"], "LOC": ["paris", "berlin", "rome"], "ORG": ["acme", "ibm"]}
FILLER = ["lives", "in", "visited", "works", "at", "the", "and", "met"]


def conll_sentences(n: int, seed: int) -> str:
    rng = random.Random(seed)
    blocks = []
    for _ in range(n):
        lines = []
        for _ in range(rng.randint(3, 8)):
            if rng.random() < 0.4:
                kind = rng.choice(sorted(TYPES))
                lines.append(f"{rng.choice(TYPES[kind])} B-{kind}")
            else:
                lines.append(f"{rng.choice(FILLER)} O")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def read_rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def models(tiny_bert, tmp_path_factory):
    """A cls and an ner model trained enough to be right and wrong on some rows."""
    from bertkit import api
    from bertkit.config import TrainConfig

    root = tmp_path_factory.mktemp("eval-outputs")
    write_sentiment_csv(root / "cls-train.csv", 64, seed=1)
    write_sentiment_csv(root / "cls-dev.csv", 40, seed=2)
    (root / "ner-train.txt").write_text(conll_sentences(60, seed=1))
    (root / "ner-dev.txt").write_text(conll_sentences(30, seed=2))
    config = TrainConfig(epochs=2, batch_size=8, lr=5e-4, max_length=32)
    for task in ("cls", "ner"):
        suffix = "csv" if task == "cls" else "txt"
        api.finetune(
            task,
            RunOptions(
                data=str(root / f"{task}-train.{suffix}"),
                eval_data=str(root / f"{task}-dev.{suffix}"),
                model=str(tiny_bert),
                output=str(root / task),
            ),
            config=config,
        )
    return root


def test_cls_predictions_file_scores_to_eval_accuracy_and_results_json(models, run_cli):
    results = json.loads((models / "cls" / "results.json").read_text())  # written by finetune
    assert results["train_samples"] == 64 and results["eval_samples"] == 40 and results["train_loss"] > 0
    assert results["eval_accuracy"] == json.loads((models / "cls" / "bertkit.json").read_text())["metrics"]["accuracy"]

    code, stdout, stderr = run_cli("eval", models / "cls")
    assert code == 0, stderr
    report = json.loads((models / "cls" / "eval-cls-dev.json").read_text())
    rows = read_rows(models / "cls" / "predictions-cls-dev.jsonl")
    assert "predictions-cls-dev.jsonl" in stdout
    assert [row["row"] for row in rows] == list(range(1, 41))
    gold = [row["gold_label"] for row in rows]
    assert gold == [("pos" if i % 2 == 0 else "neg") for i in range(40)]  # the dev file's labels, in order
    right = sum(row["gold_label"] == row["label"] for row in rows)
    assert 0 < right < 40, "every row right or every row wrong: the comparison would prove little"
    assert report["metrics"]["accuracy"] == pytest.approx(right / 40, abs=1e-6)
    results = json.loads((models / "cls" / "results.json").read_text())
    assert results["eval_cls_dev_accuracy"] == report["metrics"]["accuracy"] and results["eval_cls_dev_samples"] == 40
    assert results["train_samples"] == 64  # finetune's keys stay


def test_ner_predictions_file_scores_to_eval_f1_and_the_per_type_table(models, run_cli):
    code, stdout, stderr = run_cli("eval", models / "ner")
    assert code == 0, stderr
    report = json.loads((models / "ner" / "eval-ner-dev.json").read_text())
    rows = read_rows(models / "ner" / "predictions-ner-dev.jsonl")
    assert len(rows) == 30 and all(len(row["gold_tags"]) == len(row["tags"]) == len(row["words"]) for row in rows)
    gold, predicted = [row["gold_tags"] for row in rows], [row["tags"] for row in rows]
    assert 0 < report["metrics"]["f1"] < 1, "all right or all wrong: the comparison would prove little"
    assert report["metrics"]["f1"] == pytest.approx(seqeval_f1(gold, predicted), abs=1e-6)  # conlleval rules
    header = next(line for line in stdout.splitlines() if line.startswith("type"))
    assert header.split() == ["type", "precision", "recall", "f1", "support"]
    for kind, scores in report["metrics"]["per_type"].items():
        line = next(line for line in stdout.splitlines() if line.split()[:1] == [kind])
        assert [float(x) for x in line.split()[1:4]] == pytest.approx(
            [100 * scores["precision"], 100 * scores["recall"], 100 * scores["f1"]], abs=0.006
        )
        assert int(line.split()[4]) == scores["support"]


def test_qa_predictions_file_scores_to_eval_with_the_official_formulas(trained, run_cli, tmp_path):
    from hostile import QA_JSONL

    data, out = tmp_path / "qa.jsonl", tmp_path / "metrics.json"
    records = [json.loads(line) for line in QA_JSONL.splitlines()]
    data.write_text(QA_JSONL)
    code, _, stderr = run_cli("eval", trained("qa"), "--data", data, "--output", out)
    assert code == 0, stderr
    predicted = [row["answer"] for row in read_rows(tmp_path / "predictions-metrics.jsonl")]
    context = records[0]["context"]
    for i, record in enumerate(records):  # golds the model gets right, partly right and wrong
        text = predicted[i] if i % 3 == 0 else "lives in paris" if i % 3 == 1 else "."
        record["answers"] = {"text": [text, "john"], "answer_start": [max(context.find(text), 0), 0]}
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, _, stderr = run_cli("eval", trained("qa"), "--data", data, "--output", out)
    assert code == 0, stderr
    report = json.loads(out.read_text())
    rows = read_rows(tmp_path / "predictions-metrics.jsonl")
    assert [row["id"] for row in rows] == [r["id"] for r in records]
    assert [[g["text"] for g in row["gold_answers"]] for row in rows] == [r["answers"]["text"] for r in records]
    exact = [max(official_compute_exact(g["text"], row["answer"]) for g in row["gold_answers"]) for row in rows]
    f1 = [max(official_compute_f1(g["text"], row["answer"]) for g in row["gold_answers"]) for row in rows]
    assert 0 < sum(exact) < len(rows), "all right or all wrong: the comparison would prove little"
    assert report["metrics"]["exact_match"] == pytest.approx(100 * sum(exact) / len(rows), abs=1e-4)
    assert report["metrics"]["f1"] == pytest.approx(100 * sum(f1) / len(rows), abs=1e-4)


def _mean_cross_entropy(model_dir, texts, gold) -> float:
    """The evaluation loss by hand: plain transformers, one row at a time, fp32."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    losses = []
    with torch.no_grad():
        for text, label in zip(texts, gold):
            logits = model(**tokenizer(text, return_tensors="pt")).logits.float()
            losses.append(
                float(torch.nn.functional.cross_entropy(logits, torch.tensor([model.config.label2id[label]])))
            )
    return sum(losses) / len(losses)


def test_eval_reports_the_evaluation_loss_the_model_gives_row_by_row(models):
    """The loss over the evaluated rows equals the mean cross-entropy computed row by row with plain
    transformers (batch means weighted by their rows: the same mean), and lands in results.json."""
    import csv

    from bertkit import api

    report = api.evaluate(
        str(models / "cls"),
        EvalOptions(output=str(models / "cls-loss.json"), data=str(models / "cls-dev.csv")),
        InferenceOptions(precision="no"),
    )
    with open(models / "cls-dev.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    expected = _mean_cross_entropy(str(models / "cls"), [r["text"] for r in rows], [r["label"] for r in rows])
    assert report["metrics"]["loss"] == pytest.approx(expected, rel=1e-4, abs=1e-5)
    assert json.loads((models / "cls" / "results.json").read_text())["cls_loss_loss"] == report["metrics"]["loss"]
    trained_metrics = json.loads((models / "cls" / "bertkit.json").read_text())["metrics"]
    assert trained_metrics["loss"] > 0  # finetune's own evaluations report it too


def test_eval_loss_for_tagging_and_qa(models, trained):
    """NER and QA evaluation data carry their targets too (first sub-words; the first answer's span),
    so their loss is reported."""
    from bertkit import api

    ner = api.evaluate(
        str(models / "ner"),
        EvalOptions(output=str(models / "ner-loss.json"), data=str(models / "ner-dev.txt")),
        InferenceOptions(precision="no"),
    )["metrics"]
    assert 0 < ner["loss"] < 1.9  # ln(7 tags) = 1.95: a model that guesses uniformly
    from hostile import QA_JSONL

    path = models / "qa.jsonl"
    path.write_text(QA_JSONL)
    qa = api.evaluate(
        trained("qa"),
        EvalOptions(output=str(models / "qa-loss.json"), data=str(path)),
        InferenceOptions(precision="no"),
    )["metrics"]
    assert qa["loss"] > 0
