"""End to end through the real CLI entry point: finetune -> eval -> predict on a tiny random BERT."""

from __future__ import annotations

import csv
import json
import random

import numpy as np
import pytest

POSITIVE, NEGATIVE = ["good", "great", "fine"], ["bad", "awful", "poor"]
FILLER = "the movie film plot story acting it was very this".split()


def sentence(rng: random.Random, word: str) -> str:
    words = rng.sample(FILLER, 4)
    words.insert(rng.randrange(5), word)
    return " ".join(words)


def write_sentiment_csv(path, n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = "pos" if i % 2 == 0 else "neg"
        rows.append({"text": sentence(rng, rng.choice(POSITIVE if label == "pos" else NEGATIVE)), "label": label})
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["text", "label"])
        writer.writeheader()
        writer.writerows(rows)
    return rows


def write_sentiment_split(directory, train_rows: int, dev_rows: int) -> tuple:
    """train.csv and dev.csv of sentiment rows in ``directory`` (different seeds): their paths."""
    train, dev = directory / "train.csv", directory / "dev.csv"
    write_sentiment_csv(train, train_rows, seed=1)
    write_sentiment_csv(dev, dev_rows, seed=2)
    return train, dev


def write_pair_tsv(path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    lines = ["sentence1\tsentence2\tlabel"]
    for i in range(n):
        first = rng.choice(POSITIVE + NEGATIVE)
        same = i % 2 == 0
        second = first if same else rng.choice([w for w in POSITIVE + NEGATIVE if w != first])
        lines.append(f"{sentence(rng, first)}\t{sentence(rng, second)}\t{'same' if same else 'different'}")
    path.write_text("\n".join(lines) + "\n")


def test_cls_finetune_eval_predict(tmp_path, tiny_bert, run_cli):
    import torch
    from transformers import AutoModelForSequenceClassification, BertModel, pipeline

    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    write_sentiment_csv(train, 96, seed=1)
    write_sentiment_csv(dev, 40, seed=2)
    out = tmp_path / "model"
    code, stdout, stderr = run_cli(
        "finetune",
        "cls",
        "--data",
        train,
        "--eval-data",
        dev,
        "--model",
        tiny_bert,
        "--output",
        out,
        "--epochs",
        2,
        "--lr",
        "1e-3",
        "--batch-size",
        16,
    )
    assert code == 0, stderr
    assert "examples/s" in stdout and "padding" in stdout

    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["task"]["task"] == "cls" and meta["task"]["labels"] == ["neg", "pos"]
    assert meta["task"]["options"]["text_column"] == "text"
    assert [h["epoch"] for h in meta["history"]] == [1, 2]
    assert 0.0 <= meta["metrics"]["accuracy"] <= 1.0

    # The directory is a plain transformers model: loads, names its labels, and the weights moved.
    model = AutoModelForSequenceClassification.from_pretrained(out)
    assert model.config.id2label == {0: "neg", 1: "pos"}
    before = BertModel.from_pretrained(tiny_bert).embeddings.word_embeddings.weight
    assert not torch.allclose(model.bert.embeddings.word_embeddings.weight, before)
    classifier = pipeline("text-classification", model=str(out), device=-1)
    assert classifier("the film was great")[0]["label"] in {"neg", "pos"}

    code, stdout, stderr = run_cli("eval", out, "--data", dev, "--output", tmp_path / "metrics.json")
    assert code == 0, stderr
    report = json.loads((tmp_path / "metrics.json").read_text())
    assert report["examples"] == 40 and set(report["metrics"]) >= {"accuracy", "f1", "mcc"}

    texts = ["the plot was awful", "a great great film", "it was poor", "very good acting", "bad"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    code, stdout, stderr = run_cli("predict", out, "--input", tmp_path / "in.txt")
    assert code == 0, stderr
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert [r["text"] for r in rows] == texts  # input order survives length-sorted batching
    for row in rows:
        assert row["label"] in {"neg", "pos"}
        assert sum(row["probabilities"].values()) == pytest.approx(1.0, abs=1e-4)
        assert row["score"] == pytest.approx(max(row["probabilities"].values()), abs=1e-6)

    # JSONL input and a file output give the same predictions; no label column is needed.
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    code, _, stderr = run_cli("predict", out, "--input", tmp_path / "in.jsonl", "--output", tmp_path / "p.jsonl")
    assert code == 0, stderr
    from_jsonl = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [r["label"] for r in from_jsonl] == [r["label"] for r in rows]
    assert np.allclose([r["score"] for r in from_jsonl], [r["score"] for r in rows], atol=1e-5)


def test_cls_learns_an_easy_rule(tmp_path, tiny_bert, run_cli):
    """Even a 2-layer random BERT must separate 'good' from 'bad' words: a check the loop trains."""
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    write_sentiment_csv(train, 256, seed=3)
    write_sentiment_csv(dev, 64, seed=4)
    out = tmp_path / "model"
    code, _, stderr = run_cli(
        "finetune",
        "cls",
        "--data",
        train,
        "--eval-data",
        dev,
        "--model",
        tiny_bert,
        "--output",
        out,
        "--epochs",
        6,
        "--lr",
        "3e-3",
        "--batch-size",
        16,
    )
    assert code == 0, stderr
    assert json.loads((out / "bertkit.json").read_text())["metrics"]["accuracy"] >= 0.9


def test_pair_finetune_eval_predict(tmp_path, tiny_bert, run_cli):
    train, dev = tmp_path / "train.tsv", tmp_path / "dev.tsv"
    write_pair_tsv(train, 64, seed=5)
    write_pair_tsv(dev, 24, seed=6)
    out = tmp_path / "pair"
    code, _, stderr = run_cli(
        "finetune",
        "pair",
        "--data",
        train,
        "--eval-data",
        dev,
        "--model",
        tiny_bert,
        "--output",
        out,
        "--epochs",
        1,
        "--batch-size",
        8,
    )
    assert code == 0, stderr
    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["task"]["options"] == {
        "text_column": "sentence1",
        "text_pair_column": "sentence2",
        "label_column": "label",
        "problem_type": "single-label",
    }
    assert meta["task"]["labels"] == ["different", "same"]

    pairs = [("the film was good", "the film was good"), ("bad plot", "great acting"), ("it was fine", "fine")]
    (tmp_path / "pairs.txt").write_text("".join(f"{a}\t{b}\n" for a, b in pairs))
    code, stdout, stderr = run_cli("predict", out, "--input", tmp_path / "pairs.txt")
    assert code == 0, stderr
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert [(r["text"], r["text_pair"]) for r in rows] == pairs
    assert all(r["label"] in {"same", "different"} for r in rows)

    # Segment ids: the second text is segment 1, as BERT was pre-trained.
    from transformers import AutoTokenizer

    encoded = AutoTokenizer.from_pretrained(out)("good film", "bad plot")
    assert encoded["token_type_ids"] == [0, 0, 0, 0, 1, 1, 1]

    (tmp_path / "single.txt").write_text("only one text here\nand another\n")
    code, _, stderr = run_cli("predict", out, "--input", tmp_path / "single.txt")
    assert code == 2 and "pair model needs two texts" in stderr


def test_known_dataset_from_a_local_data_dir(tmp_path, tiny_bert, run_cli, monkeypatch):
    """`--data sst2` reads <data dir>/sst2/{train,dev}.tsv with the label names, and `eval` finds the
    data again through the directory recorded at training time."""
    monkeypatch.delenv("BERTKIT_DATA_DIR", raising=False)
    root = tmp_path / "data" / "sst2"
    root.mkdir(parents=True)
    rng = random.Random(8)
    for split, n in (("train", 32), ("dev", 12)):
        rows = [f"{sentence(rng, rng.choice(POSITIVE if i % 2 else NEGATIVE))} \t{i % 2}" for i in range(n)]
        (root / f"{split}.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n")
    out = tmp_path / "model"
    code, _, stderr = run_cli(
        "finetune",
        "cls",
        "--data",
        "sst2",
        "--data-dir",
        tmp_path / "data",
        "--model",
        tiny_bert,
        "--output",
        out,
        "--epochs",
        1,
    )
    assert code == 0, stderr
    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["task"]["labels"] == ["negative", "positive"] and meta["data"]["eval_examples"] == 12
    code, stdout, stderr = run_cli("eval", out)
    assert code == 0, stderr
    assert "12 examples" in stdout and (out / "eval-sst2-dev.json").is_file()
