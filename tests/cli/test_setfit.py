"""`bertkit finetune cls|pair --recipe setfit` on the tiny model: the directory `eval`, `predict` and
`serve` run, and the one `setfit.SetFitModel.from_pretrained` loads with the same predictions."""

from __future__ import annotations

import ast
import json

import numpy as np
import pytest
from test_cli_classification import write_pair_tsv, write_sentiment_csv

from bertkit.options import InferenceOptions, RunOptions


@pytest.fixture(scope="module")
def setfit_dirs(tmp_path_factory, tiny_bert):
    """task -> (directory, dev file) of a --recipe setfit run on 16 labelled rows."""
    from bertkit import api
    from bertkit.options import TrainConfig

    made = {}

    def get(task: str):
        if task not in made:
            root = tmp_path_factory.mktemp(f"setfit-{task}")
            train, dev = (
                root / ("train.csv" if task == "cls" else "train.tsv"),
                root / ("dev.csv" if task == "cls" else "dev.tsv"),
            )
            write = write_sentiment_csv if task == "cls" else write_pair_tsv
            write(train, 16, seed=1)
            write(dev, 24, seed=2)
            options = {"recipe": "setfit", "pairs_per_example": 6}
            config = TrainConfig(epochs=2, batch_size=8, lr=1e-3, seed=5, precision="no", task_options=options)
            result = api.finetune(
                task,
                RunOptions(data=str(train), eval_data=str(dev), model=str(tiny_bert), output=str(root / "model")),
                config=config,
            )
            made[task] = (root / "model", dev, result)
        return made[task]

    return get


def test_the_run_trains_on_pairs_and_records_them(setfit_dirs):
    model, _, result = setfit_dirs("cls")
    meta = json.loads((model / "bertkit.json").read_text())
    assert meta["task"]["options"]["recipe"] == "setfit" and meta["task"]["labels"] == ["neg", "pos"]
    assert meta["probe"]["pooling"] == "mean"
    assert meta["probe"]["normalize"] is False  # a plain checkpoint: SetFit's body gives raw vectors
    assert meta["probe"]["setfit"] == {
        **meta["probe"]["setfit"],
        "pairs_per_example": 6,
        "pairs": 96,
        "positive_pairs": 48,
        "negative_pairs": 48,
    }
    assert result.preprocessing["train_features"] == 96 and result.train_examples == 16
    assert result.throughput["optimizer_steps"] == 2 * 12  # 96 pairs in batches of 8, 2 epochs
    assert set(result.metrics) >= {"accuracy", "f1"} and meta["metrics"] == result.metrics
    for name in ("modules.json", "sentence_bert_config.json", "1_Pooling/config.json", "config_setfit.json"):
        assert (model / name).is_file(), name
    assert json.loads((model / "config_setfit.json").read_text())["labels"] == ["neg", "pos"]
    assert "contrastive pairs" in (model / "README.md").read_text()
    from bertkit.cli.common import best_line

    assert best_line(result).startswith("final: accuracy") and "None" not in best_line(result)  # no epoch chose it


def test_the_body_is_trained_not_the_base_model(setfit_dirs, tiny_bert):
    from safetensors.numpy import load_file

    model, _, _ = setfit_dirs("cls")
    trained, base = load_file(str(model / "model.safetensors")), load_file(str(tiny_bert / "model.safetensors"))
    shared = [k for k in trained if k in base and trained[k].dtype == np.float32]
    assert shared and any(not np.allclose(trained[k], base[k]) for k in shared)
    assert all(trained[k].dtype == base[k].dtype for k in shared)


@pytest.mark.parametrize("task", ["cls", "pair"])
def test_setfit_loads_the_directory_and_predicts_as_bertkit_does(setfit_dirs, tmp_path, run_cli, task):
    setfit = pytest.importorskip("setfit")
    model, dev, _ = setfit_dirs(task)
    out = tmp_path / "predictions.jsonl"
    code, _, stderr = run_cli("predict", model, "--input", dev, "--output", out, "--precision", "no")
    assert code == 0, stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    loaded = setfit.SetFitModel.from_pretrained(str(model))
    inputs = [row["text"] if task == "cls" else (row["text"], row["text_pair"]) for row in rows]
    theirs = np.asarray(loaded.predict_proba(inputs, as_numpy=True))
    ours = np.array([[row["probabilities"][name] for name in loaded.labels] for row in rows])
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    assert list(loaded.predict(inputs)) == [row["label"] for row in rows]


def _sentence_transformers_copy(tiny_bert, root):
    """tiny_bert as a sentence-transformers model whose modules end in Normalize (as all-MiniLM)."""
    import shutil

    base = root / "st-base"
    shutil.copytree(tiny_bert, base)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (base / "modules.json").write_text(json.dumps(modules))
    (base / "1_Pooling").mkdir()
    (base / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True})
    )
    return base


def test_a_checkpoint_that_normalises_gets_a_head_on_unit_vectors_as_in_setfit(tiny_bert, tmp_path, run_cli):
    """SetFit's body is the checkpoint as a SentenceTransformer: with a Normalize module its head reads
    unit vectors. bertkit's does too, says so, and SetFit loads the directory with the same answers."""
    setfit = pytest.importorskip("setfit")
    from bertkit import api
    from bertkit.options import TrainConfig

    base = _sentence_transformers_copy(tiny_bert, tmp_path)
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    write_sentiment_csv(train, 16, seed=1)
    write_sentiment_csv(dev, 24, seed=2)
    options = {"recipe": "setfit", "pairs_per_example": 6}
    config = TrainConfig(epochs=1, batch_size=8, lr=1e-3, seed=5, precision="no", task_options=options)
    api.finetune(
        "cls",
        RunOptions(data=str(train), eval_data=str(dev), model=str(base), output=str(tmp_path / "model")),
        config=config,
    )
    model = tmp_path / "model"
    assert json.loads((model / "bertkit.json").read_text())["probe"]["normalize"] is True
    assert json.loads((model / "config_setfit.json").read_text())["normalize_embeddings"] is True
    out = tmp_path / "predictions.jsonl"
    code, _, stderr = run_cli("predict", model, "--input", dev, "--output", out, "--precision", "no")
    assert code == 0, stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    loaded = setfit.SetFitModel.from_pretrained(str(model))
    theirs = np.asarray(loaded.predict_proba([row["text"] for row in rows], as_numpy=True))
    ours = np.array([[row["probabilities"][name] for name in loaded.labels] for row in rows])
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    # the model card's snippet normalises too, and answers as predict does
    from test_model_card import _predict, _run_snippet

    label, probabilities = _run_snippet(model, tmp_path).split(" ", 1)
    row = _predict(run_cli, model, tmp_path)
    assert label == row["label"] and ast.literal_eval(probabilities) == pytest.approx(row["probabilities"], abs=1e-4)
    # and the head is really one of unit vectors: on the raw vectors its answers differ
    raw = loaded.model_body.encode([row["text"] for row in rows], normalize_embeddings=False)
    assert np.abs(np.linalg.norm(raw, axis=1) - 1).max() > 0.05
    assert not np.allclose(loaded.model_head.predict_proba(raw), theirs, atol=1e-3)


def test_eval_scores_the_directory_as_the_run_did(setfit_dirs, tmp_path, run_cli):
    model, dev, result = setfit_dirs("pair")
    code, _, stderr = run_cli("eval", model, "--data", dev, "--output", tmp_path / "m.json", "--precision", "no")
    assert code == 0, stderr
    scored = json.loads((tmp_path / "m.json").read_text())["metrics"]
    assert scored["accuracy"] == result.metrics["accuracy"] and scored["f1"] == result.metrics["f1"]


def test_serve_answers_from_the_directory(setfit_dirs):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from bertkit.api.prediction import Predictor
    from bertkit.serving.app import create_app

    model, _, _ = setfit_dirs("cls")
    with TestClient(create_app(Predictor(str(model), InferenceOptions(precision="no"), quiet=True).load())) as client:
        answer = client.post("/predict", json=[{"text": "the film was good"}, {"text": "the plot was bad"}])
    assert answer.status_code == 200, answer.text
    rows = answer.json()
    rows = rows.get("predictions", rows) if isinstance(rows, dict) else rows
    assert [set(row["probabilities"]) for row in rows] == [{"neg", "pos"}] * 2


def test_overwrite_replaces_a_setfit_directory_but_keeps_a_file_of_the_user(tmp_path, tiny_bert, run_cli):
    data = tmp_path / "train.csv"
    write_sentiment_csv(data, 8, seed=3)
    out = tmp_path / "model"
    run = ("finetune", "cls", "--data", data, "--model", tiny_bert, "--output", out, "--epochs", 1)
    setfit = ("--recipe", "setfit", "--pairs-per-example", 2)
    assert run_cli(*run, *setfit)[0] == 0
    code, _, stderr = run_cli(*run, *setfit, "--overwrite")
    assert code == 0, stderr
    (out / "1_Pooling" / "notes.txt").write_text("mine")
    code, _, stderr = run_cli(*run, "--overwrite")  # a plain finetune over it: the user's file stays
    assert code == 2 and "1_Pooling/notes.txt" in stderr
    assert (out / "1_Pooling" / "notes.txt").read_text() == "mine" and (out / "model_head.pkl").is_file()


def test_seeds_repeat_the_setfit_recipe_and_keep_one_directory(tmp_path, tiny_bert, run_cli):
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    write_sentiment_csv(train, 8, seed=3)
    write_sentiment_csv(dev, 8, seed=4)
    out = tmp_path / "model"
    code, stdout, stderr = run_cli(
        "finetune", "cls", "--data", train, "--eval-data", dev, "--model", tiny_bert, "--output", out,
        "--epochs", 1, "--recipe", "setfit", "--pairs-per-example", 2, "--seeds", 2,
    )  # fmt: skip
    assert code == 0, stderr
    assert "accuracy over 2 seeds" in stdout
    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["probe"]["setfit"]["pairs"] == 16 and (out / "model_head.pkl").is_file()
