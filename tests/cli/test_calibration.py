"""Calibration end to end on the tiny model: `finetune --calibrate` stores one temperature that eval,
predict (torch and ONNX), serve's Predictor and select decode with, the argmax unchanged;
`bertkit calibrate` writes only bertkit.json's calibration (and the figures and card it redraws);
`predict --coverage` gives split-conformal label sets that cover held-out rows at the rate asked;
`select --strategy prediction-set` takes the rows with the largest sets first."""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil

import numpy as np
import pytest

from bertkit.options import CoverageOptions, InferenceOptions, PredictOptions, RunOptions

WORDS = {"pos": ("good", "great", "fine"), "neg": ("bad", "awful", "poor")}


def noisy_rows(count: int, seed: int) -> str:
    """A two-class problem the tiny model learns to about 0.8: the word shown agrees with the label
    four times in five."""
    rng = random.Random(seed)
    lines = ["text,label"]
    for _ in range(count):
        label = rng.choice(("pos", "neg"))
        shown = label if rng.random() < 0.8 else ("neg" if label == "pos" else "pos")
        lines.append(f"the film was {rng.choice(WORDS[shown])},{label}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("calibration-data")
    for name, count, seed in (("train", 300, 0), ("dev", 200, 1), ("cal", 400, 2), ("test", 600, 3)):
        (root / f"{name}.csv").write_text(noisy_rows(count, seed))
    return root


def train(tiny_bert, data, output, calibrate: bool):
    from bertkit import api
    from bertkit.config import TrainConfig

    config = TrainConfig(epochs=4, batch_size=16, lr=5e-3, max_length=32, calibrate=calibrate)
    run = RunOptions(
        data=str(data / "train.csv"), eval_data=str(data / "dev.csv"), model=str(tiny_bert), output=str(output)
    )
    return api.finetune("cls", run, config=config)


@pytest.fixture(scope="module")
def calibrated(tiny_bert, data, tmp_path_factory):
    output = tmp_path_factory.mktemp("calibrated") / "model"
    train(tiny_bert, data, output, calibrate=True)
    return output


@pytest.fixture(scope="module")
def plain(tiny_bert, data, tmp_path_factory):
    output = tmp_path_factory.mktemp("plain") / "model"
    train(tiny_bert, data, output, calibrate=False)
    return output


def logits_of(model_dir, texts: list[str]) -> np.ndarray:
    import torch
    import transformers

    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    with torch.no_grad():
        return model(**tokenizer(texts, return_tensors="pt", padding=True)).logits.double().numpy()


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def meta_of(model_dir) -> dict:
    return json.loads((model_dir / "bertkit.json").read_text())


def test_finetune_calibrate_stores_one_temperature_that_predict_and_eval_decode_with(calibrated, data, tmp_path):
    from bertkit import api
    from bertkit.options import EvalOptions

    meta = meta_of(calibrated)
    record, temperature = meta["calibration"], meta["task"]["options"]["temperature"]
    assert record["temperature"] == temperature and "calibrate" in meta["methods"]
    assert record["examples"] == 200 and record["data"].endswith("dev.csv")
    assert record["after"]["nll"] <= record["before"]["nll"]  # the fit minimises it on these very rows
    assert record["after"]["accuracy"] == record["before"]["accuracy"] == meta["metrics"]["accuracy"]
    assert len(record["conformal"]["scores"]) == 200
    assert sum(row["count"] for row in record["reliability"]["after"]) == 200

    texts = ["the film was good", "the film was awful", "the film was fine"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    rows = api.predict(
        str(calibrated), PredictOptions(input=str(tmp_path / "in.txt")), InferenceOptions(precision="no")
    )
    expected = softmax(logits_of(calibrated, texts) / temperature)
    labels = meta["task"]["labels"]
    for row, p in zip(rows, expected):
        assert [row["probabilities"][name] for name in labels] == pytest.approx(list(p), abs=2e-6)
        assert row["label"] == labels[int(p.argmax())]
    report = api.evaluate(str(calibrated), EvalOptions(data=str(data / "dev.csv"), output=str(tmp_path / "e.json")))
    assert report["metrics"]["accuracy"] == pytest.approx(meta["metrics"]["accuracy"])
    assert (calibrated / "figures" / "reliability.png").is_file()
    assert f"Calibration: temperature {temperature:.3f}" in (calibrated / "README.md").read_text()


def test_the_calibration_line_is_said_and_the_serving_predictor_applies_it(calibrated):
    from bertkit.api.prediction import Predictor

    predictor = Predictor(str(calibrated), InferenceOptions(precision="no"), quiet=True)
    row = predictor.predict(predictor.examples(["the film was great"]))[0]
    temperature = meta_of(calibrated)["task"]["options"]["temperature"]
    p = softmax(logits_of(calibrated, ["the film was great"]) / temperature)[0]
    assert max(row["probabilities"].values()) == pytest.approx(p.max(), abs=2e-6)


def test_bertkit_calibrate_writes_only_the_calibration_and_refits_from_uncalibrated_probabilities(
    plain, data, tmp_path, run_cli
):
    model = tmp_path / "model"
    shutil.copytree(plain, model)
    weights = hashlib.sha256((model / "model.safetensors").read_bytes()).hexdigest()
    before = meta_of(model)
    code, out, err = run_cli("calibrate", model, "--data", data / "cal.csv", "--precision", "no")
    assert code == 0, err
    after = meta_of(model)
    assert "temperature" in out and "ECE" in out
    assert hashlib.sha256((model / "model.safetensors").read_bytes()).hexdigest() == weights
    changed = {key for key in set(before) | set(after) if before.get(key) != after.get(key)}
    assert changed == {"task", "calibration", "methods"}, changed
    assert {k: v for k, v in after["task"]["options"].items() if k != "temperature"} == before["task"]["options"]
    assert after["calibration"]["examples"] == 400
    assert (model / "figures" / "reliability.png").is_file()
    first = after["calibration"]["temperature"]
    code, _, err = run_cli("calibrate", model, "--data", data / "cal.csv", "--precision", "no")
    assert code == 0, err
    assert meta_of(model)["calibration"]["temperature"] == pytest.approx(first, rel=1e-5)  # not T applied twice


@pytest.mark.parametrize("coverage", [0.7, 0.9])
def test_predict_coverage_covers_held_out_rows(plain, data, coverage, run_cli, tmp_path):
    output = tmp_path / "sets.jsonl"
    code, _, err = run_cli(
        "predict",
        plain,
        "--input",
        data / "test.csv",
        "--coverage",
        coverage,
        "--calibration-data",
        data / "cal.csv",
        "--output",
        output,
    )
    assert code == 0, err
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    gold = [line.rsplit(",", 1)[1] for line in (data / "test.csv").read_text().splitlines()[1:]]
    covered = np.mean([g in row["prediction_set"] for row, g in zip(rows, gold)])
    assert covered >= coverage - 3 * math.sqrt(coverage * (1 - coverage) / len(rows))
    sizes = [len(row["prediction_set"]) for row in rows]
    assert f"--coverage {coverage:g} (split conformal, 400 calibration rows of" in err
    assert f"mean set size {np.mean(sizes):.3f}" in err
    assert f"full sets {sizes.count(2) / len(sizes):.1%}" in err
    assert all(row["prediction_set"][0] == row["label"] for row in rows if row["prediction_set"])


def test_predict_coverage_from_the_stored_scores_needs_no_file(calibrated, tmp_path):
    from bertkit import api

    (tmp_path / "in.txt").write_text("the film was good\nthe film was bad\n")
    options = PredictOptions(input=str(tmp_path / "in.txt"), conformal=CoverageOptions(0.9))
    rows = api.predict(str(calibrated), options)
    assert all("prediction_set" in row for row in rows)
    assert rows.prediction_sets["calibration_rows"] == 200 and rows.prediction_sets["coverage"] == 0.9


def test_serve_coverage_answers_each_row_with_the_set_predict_gives_it(plain, data, tmp_path, run_cli):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from bertkit import api
    from bertkit.api.serving import served_predictor
    from bertkit.serving.app import create_app

    conformal, texts = CoverageOptions(0.8, str(data / "cal.csv")), ["the film was good", "the film was fine"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    expected = api.predict(str(plain), PredictOptions(input=str(tmp_path / "in.txt"), conformal=conformal))
    predictor = served_predictor(str(plain), InferenceOptions(precision="no"), "torch", conformal)
    with TestClient(create_app(predictor)) as client:
        answered = client.post("/predict", json={"inputs": texts}).json()
        info = client.get("/info").json()
    assert [row["prediction_set"] for row in answered["predictions"]] == [row["prediction_set"] for row in expected]
    assert info["coverage"]["coverage"] == 0.8 and info["coverage"]["calibration_rows"] == 400
    without = served_predictor(str(plain), InferenceOptions(precision="no"), "torch", CoverageOptions())
    assert "prediction_set" not in without.predict(without.examples(texts))[0]
    code, _, err = run_cli("serve", plain, "--coverage", 1.5)
    assert code != 0 and "--coverage must be strictly between 0 and 1" in err and "Traceback" not in err


def test_select_prediction_set_takes_the_largest_sets_first(plain, data, run_cli, tmp_path):
    from bertkit import api

    conformal = CoverageOptions(0.8, str(data / "cal.csv"))
    rows = api.predict(str(plain), PredictOptions(input=str(data / "test.csv"), conformal=conformal))
    sizes = [len(row["prediction_set"]) for row in rows]
    output = tmp_path / "next.json"
    args = ("--input", data / "test.csv", "--n", 20, "--strategy", "prediction-set", "--output", output)
    code, out, err = run_cli("select", plain, *args, "--coverage", 0.8, "--calibration-data", data / "cal.csv")
    assert code == 0, err
    tasks = json.loads(output.read_text())
    chosen = [task["meta"]["row"] for task in tasks]
    assert min(sizes[r - 1] for r in chosen) >= max(s for i, s in enumerate(sizes) if i + 1 not in chosen)
    assert [task["meta"]["prediction-set"] for task in tasks] == [sizes[r - 1] for r in chosen]


def test_the_onnx_backend_decodes_with_the_temperature(calibrated, run_cli, tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    code, _, err = run_cli("export", "onnx", calibrated)
    assert code == 0, err
    (tmp_path / "in.txt").write_text("the film was good\nthe film was poor\n")
    found = {}
    for backend in ("torch", "onnx"):
        fp32 = ["--precision", "no"] if backend == "torch" else []
        code, out, err = run_cli("predict", calibrated, "--input", tmp_path / "in.txt", "--backend", backend, *fp32)
        assert code == 0, err
        found[backend] = [json.loads(line)["probabilities"] for line in out.splitlines()]
    temperature = meta_of(calibrated)["task"]["options"]["temperature"]
    p = softmax(logits_of(calibrated, ["the film was good", "the film was poor"]) / temperature)
    labels = meta_of(calibrated)["task"]["labels"]
    for probabilities, expected in zip(found["onnx"], p):
        assert [probabilities[name] for name in labels] == pytest.approx(list(expected), abs=2e-6)
    for a, b in zip(found["onnx"], found["torch"]):
        assert all(abs(a[k] - b[k]) <= 2e-6 for k in a)


def raw_and_calibrated(model_dir, texts_file, tmp_path) -> tuple:
    """predict's probabilities of the directory as it is and of a copy without its temperature."""
    from bertkit import api

    bare = tmp_path / "bare"
    shutil.copytree(model_dir, bare)
    meta = meta_of(bare)
    meta["task"]["options"].pop("temperature")
    (bare / "bertkit.json").write_text(json.dumps(meta))
    found = []
    for directory in (bare, model_dir):
        rows = api.predict(str(directory), PredictOptions(input=str(texts_file)), InferenceOptions(precision="no"))
        found.append(np.array([list(row["probabilities"].values()) for row in rows]))
    return found


# --calibrate with what it composes with (tests/unit/test_method_declarations.py): each path that
# differs in what the finished model is (merged adapters, adapter files over a base model, a
# student, pooled windows, the kept seed of several) is calibrated and decoded with its temperature
COMBINATIONS = {
    "lora-merged": ("finetune", "cls", "--lora", 4),
    "lora-adapter": ("finetune", "cls", "--lora", 4, "--save-adapter"),
    "long-text-windows": ("finetune", "cls", "--long-text", "windows", "--max-length", 16),
    "seeds": ("finetune", "cls", "--seeds", 2),
    "distill": ("distill",),
}


@pytest.mark.parametrize("combination", COMBINATIONS, ids=list(COMBINATIONS))
def test_calibrate_composes_with(combination, plain, data, tiny_bert, run_cli, tmp_path):
    command, *rest = COMBINATIONS[combination]
    out = tmp_path / "model"
    source = (plain,) if command == "distill" else (rest.pop(0), "--model", tiny_bert)
    args = (command, *source, "--data", data / "train.csv", "--eval-data", data / "dev.csv", "--output", out)
    args += (*rest, "--calibrate", "--epochs", 1, "--batch-size", 16, "--lr", "5e-3")
    if command == "distill":
        args += ("--student-layers", 1)
    code, _, err = run_cli(*args)
    assert code == 0, err
    meta = meta_of(out)
    temperature = meta["task"]["options"]["temperature"]
    assert meta["calibration"]["temperature"] == temperature and meta["calibration"]["examples"] == 200
    assert "calibrate" in meta["methods"] and "temperature" in err
    texts = tmp_path / "in.txt"
    texts.write_text("the film was good\nthe film was poor\nthe film was fine\n")
    raw, calibrated = raw_and_calibrated(out, texts, tmp_path)
    expected = softmax(np.log(raw) / temperature)
    assert calibrated == pytest.approx(expected, abs=3e-6)
    assert (calibrated.argmax(1) == raw.argmax(1)).all()


def test_calibrating_a_read_only_directory_is_one_line_before_any_work(plain, data, tmp_path, read_only, run_cli):
    from conftest import assert_user_error
    from hostile import snapshot

    model = tmp_path / "model"
    shutil.copytree(plain, model)
    read_only(model)
    before = snapshot(model)
    assert_user_error(run_cli("calibrate", model, "--data", data / "cal.csv"), "cannot write in")
    assert snapshot(model) == before
