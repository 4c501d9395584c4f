"""`bertkit probe`: frozen features + logistic regression, saved so that `eval` and `predict` work."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_user_error
from test_cli_classification import write_pair_tsv, write_sentiment_csv


def softmax(logits):
    z = np.exp(logits - logits.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def test_probe_then_eval_and_predict(tmp_path, tiny_bert, run_cli):
    import torch
    from safetensors.numpy import load_file
    from transformers import AutoModel, AutoTokenizer

    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    write_sentiment_csv(train, 160, seed=1)
    write_sentiment_csv(dev, 40, seed=2)
    out = tmp_path / "probe"
    code, stdout, stderr = run_cli(
        "probe",
        "cls",
        "--data",
        train,
        "--eval-data",
        dev,
        "--model",
        tiny_bert,
        "--output",
        out,
        "--pooling",
        "mean",
        "--holdout",
        "0.25",
    )
    assert code == 0, stderr
    assert "held-out score by C (25% of training rows): 0.001:" in stdout and "saved to" in stdout

    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["task"]["task"] == "cls" and meta["task"]["labels"] == ["neg", "pos"]
    assert meta["probe"]["pooling"] == "mean" and meta["probe"]["holdout_share"] == 0.25
    assert [row["C"] for row in meta["probe"]["c_search"]] == [0.001, 0.01, 0.1, 1.0, 10.0, 100.0]
    best = max(row["holdout_score"] for row in meta["probe"]["c_search"])
    assert meta["probe"]["C"] == next(row["C"] for row in meta["probe"]["c_search"] if row["holdout_score"] == best)
    # A random 2-layer BERT still keeps word identity in the mean vector: 'good' vs 'bad' is linear.
    assert meta["metrics"]["accuracy"] >= 0.9 and meta["data"]["train_examples"] == 160

    # eval scores the saved directory through the shared path and agrees with the probe's own report.
    code, stdout, stderr = run_cli(
        "eval", out, "--data", dev, "--output", tmp_path / "metrics.json", "--precision", "no"
    )
    assert code == 0, stderr
    report = json.loads((tmp_path / "metrics.json").read_text())
    assert report["examples"] == 40
    for key in ("accuracy", "f1", "mcc"):
        assert report["metrics"][key] == pytest.approx(meta["metrics"][key], abs=1e-6)

    # predict: rows in input order; the documented form (encoder + head file) reproduces the numbers.
    texts = ["the plot was awful", "a great great film", "it was poor", "very good acting"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    code, stdout, stderr = run_cli("predict", out, "--input", tmp_path / "in.txt", "--precision", "no")
    assert code == 0, stderr
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert [r["text"] for r in rows] == texts
    head = load_file(str(out / "probe_head.safetensors"))
    assert head["weight"].shape == (2, 32) and head["bias"].shape == (2,)
    tokenizer, encoder = AutoTokenizer.from_pretrained(out), AutoModel.from_pretrained(out).eval()
    for text, row in zip(texts, rows):
        with torch.no_grad():
            vector = encoder(**tokenizer(text, return_tensors="pt")).last_hidden_state[0].mean(0).numpy()
        probabilities = softmax(head["weight"] @ vector + head["bias"])
        assert [row["probabilities"]["neg"], row["probabilities"]["pos"]] == pytest.approx(probabilities, abs=1e-5)
        assert row["label"] == ["neg", "pos"][int(probabilities.argmax())]

    # The encoder copy is the base model, untouched.
    base = AutoModel.from_pretrained(tiny_bert)
    assert torch.equal(encoder.embeddings.word_embeddings.weight, base.embeddings.word_embeddings.weight)


def test_pair_probe_with_cls_pooling(tmp_path, tiny_bert, run_cli):
    train, dev = tmp_path / "train.tsv", tmp_path / "dev.tsv"
    write_pair_tsv(train, 60, seed=5)
    write_pair_tsv(dev, 20, seed=6)
    out = tmp_path / "pair"
    code, stdout, stderr = run_cli(
        "probe", "pair", "--data", train, "--eval-data", dev, "--model", tiny_bert, "--output", out, "--pooling", "cls",
        "--threads", 1,
    )  # fmt: skip
    assert code == 0, stderr
    assert ", 1 thread" in stderr  # --threads reaches the probe's engine, as the busy-machine notice suggests
    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["task"]["labels"] == ["different", "same"] and meta["probe"]["pooling"] == "cls"
    (tmp_path / "pairs.txt").write_text("the film was good\tthe film was good\nbad plot\tgreat acting\n")
    code, stdout, stderr = run_cli("predict", out, "--input", tmp_path / "pairs.txt", "--precision", "no")
    assert code == 0, stderr
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert [r["text_pair"] for r in rows] == ["the film was good", "great acting"]
    code, stdout, stderr = run_cli("eval", out, "--data", dev)  # the probe's own precision (auto): same scores
    assert code == 0, stderr
    assert f"accuracy {meta['metrics']['accuracy']:.4f}" in stdout


def test_fit_head_folds_the_standardisation_into_the_weights():
    from sklearn.linear_model import LogisticRegression

    from bertkit.api.probing import fit_head

    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1, 2], 40)
    # Three classes on very different feature scales and offsets; one constant dimension.
    features = rng.normal(size=(120, 4)) * [1.0, 50.0, 0.01, 0.0] + [0.0, 200.0, -3.0, 7.0]
    features[:, 0] += labels * 2.0
    weight, bias, c, search = fit_head(features, labels, 3, 0.25, 0, lambda rows, p: 0.5)
    assert c == 0.001 and len(search) == 6  # a tie everywhere keeps the smallest C
    std = features.std(0)
    std[std < 1e-12] = 1.0
    reference = LogisticRegression(C=c, max_iter=2000).fit((features - features.mean(0)) / std, labels)
    expected = reference.predict_proba((features - features.mean(0)) / std)
    np.testing.assert_allclose(softmax(features @ weight.T + bias), expected, atol=1e-8)


def test_binary_head_gives_sklearn_probabilities():
    from sklearn.linear_model import LogisticRegression

    from bertkit.api.probing import fit_head

    rng = np.random.default_rng(1)
    labels = np.array([0, 1] * 30)
    features = rng.normal(size=(60, 3)) + labels[:, None] * [1.5, 0.0, -1.0]
    weight, bias, c, _ = fit_head(features, labels, 2, 0.2, 0, lambda rows, p: 1.0)
    assert weight.shape == (2, 3) and not weight[0].any() and bias[0] == 0  # logits (0, w.x + b)
    scaled = (features - features.mean(0)) / features.std(0)
    expected = LogisticRegression(C=c, max_iter=2000).fit(scaled, labels).predict_proba(scaled)
    np.testing.assert_allclose(softmax(features @ weight.T + bias), expected, atol=1e-8)


def test_probe_user_errors_write_nothing(tmp_path, tiny_bert, run_cli):
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    write_sentiment_csv(train, 40, seed=1)
    write_sentiment_csv(dev, 10, seed=2)
    out = tmp_path / "probe"
    base = ["probe", "cls", "--data", train, "--eval-data", dev, "--model", tiny_bert, "--output", out]
    assert_user_error(run_cli(*base, "--pooling", "mean-max"), "unknown --pooling")
    assert_user_error(run_cli(*base, "--holdout", "1.5"), "--holdout must be between 0 and 1")
    assert_user_error(run_cli(*base, "--max-train-samples", "3"), "too few training rows to hold out")
    (tmp_path / "odd.csv").write_text("text,label\nthe film was good,meh\n")
    assert_user_error(run_cli(*base[:4], "--eval-data", tmp_path / "odd.csv", *base[6:]), "never seen in training")
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging left behind
    out.mkdir()
    (out / "keep.txt").write_text("x")
    assert_user_error(run_cli(*base), "exists and is not empty", "--overwrite")


def test_how_the_file_was_read_is_not_stored_with_a_probe(tmp_path, tiny_bert, run_cli):
    """--delimiter says how this file is read; a probe (like finetune) does not keep it, so its
    predict and eval read their own files as theirs are."""
    rows = ["the film was good;pos", "the plot was bad;neg"] * 10
    (tmp_path / "t.csv").write_text("text;label\n" + "\n".join(rows) + "\n")
    out = tmp_path / "probe"
    code, _, err = run_cli(
        "probe", "cls", "--data", tmp_path / "t.csv", "--model", tiny_bert, "--output", out, "--delimiter", ";"
    )
    assert code == 0, err
    options = json.loads((out / "bertkit.json").read_text())["task"]["options"]
    assert "delimiter" not in options and options["label_column"] == "label", options
