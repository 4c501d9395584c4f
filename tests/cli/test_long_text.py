"""--long-text end to end: a tiny model on texts whose label is decided only after token 128, and
one answer for a long row from predict, serve and the exported ONNX / OpenVINO backends."""

from __future__ import annotations

import csv
import importlib.util
import json
import random

import pytest

from bertkit.options import InferenceOptions, PredictOptions, RunOptions

FILLER = "the movie film plot story acting it was very this a an and of to in on with".split()
POSITIVE, NEGATIVE = ["good", "great"], ["bad", "awful"]


def write_late_label_csv(path, n: int, seed: int) -> list[dict]:
    """130-139 words of filler (one token each in the tiny vocab), then 24 words that decide the
    label: with [CLS], nothing before token 131 says anything about it."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = "pos" if i % 2 else "neg"
        words = [rng.choice(FILLER) for _ in range(rng.randrange(130, 140))]
        words += [rng.choice(POSITIVE if label == "pos" else NEGATIVE) for _ in range(24)]
        rows.append({"text": " ".join(words), "label": label})
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["text", "label"])
        writer.writeheader()
        writer.writerows(rows)
    return rows


@pytest.fixture(scope="module")
def late_label(tmp_path_factory, tiny_bert):
    """how -> (model dir, its dev metrics), trained on first use at --max-length 128, 6 epochs each."""
    from bertkit import api
    from bertkit.config import TrainConfig

    root = tmp_path_factory.mktemp("long-text")
    write_late_label_csv(root / "train.csv", 128, seed=1)
    write_late_label_csv(root / "dev.csv", 32, seed=2)
    trained = {}

    def get(how: str):
        if how not in trained:
            config = TrainConfig(epochs=6, lr=2e-3, batch_size=16, max_length=128, task_options={"long_text": how})
            run = RunOptions(
                data=str(root / "train.csv"),
                eval_data=str(root / "dev.csv"),
                model=str(tiny_bert),
                output=str(root / how),
            )
            result = api.finetune("cls", run, config)
            trained[how] = (root / how, result.metrics)
        return trained[how]

    get.root = root
    return get


@pytest.mark.parametrize(("how", "learns"), [("truncate", False), ("head-tail", True), ("windows", True)])
def test_only_head_tail_and_windows_read_a_label_decided_after_token_128(late_label, how, learns):
    _, metrics = late_label(how)
    if learns:
        assert metrics["accuracy"] >= 0.95, metrics
    else:
        assert metrics["accuracy"] <= 0.75, metrics  # it never sees a word that decides the label


def test_the_choice_is_stored_and_predict_rows_say_their_windows(late_label, run_cli, tmp_path):
    model, _ = late_label("windows")
    meta = json.loads((model / "bertkit.json").read_text())
    assert meta["task"]["options"]["long_text"] == "windows"
    rows = write_late_label_csv(tmp_path / "long.csv", 4, seed=3)
    lines = tmp_path / "in.jsonl"
    lines.write_text("".join(json.dumps({"text": r["text"]}) + "\n" for r in rows) + '{"text": "good film"}\n')
    code, stdout, stderr = run_cli("predict", model, "--input", lines, "--precision", "no")
    assert code == 0, stderr
    predicted = [json.loads(line) for line in stdout.splitlines()]
    assert [p["label"] for p in predicted[:4]] == [r["label"] for r in rows]
    assert [p["windows"] for p in predicted] == [2, 2, 2, 2, 1] and not any("truncated" in p for p in predicted)
    assert "4 of 5 texts were longer than a window and were read as overlapping windows" in stderr
    code, stdout_max, stderr = run_cli(
        "predict", model, "--input", lines, "--precision", "no", "--window-pooling", "max"
    )
    assert code == 0, stderr
    assert stdout_max != stdout  # max pooling reads the same windows otherwise
    code, stdout, stderr = run_cli("eval", model, "--data", late_label.root / "dev.csv", "--precision", "no")
    assert code == 0, stderr
    assert "accuracy 1.0000" in stdout, stdout
    assert "32 of 32 texts were longer than a window" in stderr, stderr


def _probabilities(row: dict) -> list[float]:
    return [row["probabilities"][k] for k in sorted(row["probabilities"])]


@pytest.mark.parametrize("how", ["head-tail", "windows"])
def test_predict_serve_onnx_and_openvino_agree_on_long_rows(late_label, run_cli, tmp_path, how):
    from bertkit import api
    from bertkit.api.prediction import Predictor

    model, _ = late_label(how)
    rows = write_late_label_csv(tmp_path / "long.csv", 6, seed=4)
    texts = [r["text"] for r in rows] + ["good film", "the plot " * 120 + "bad"]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    want = list(
        api.predict(str(model), PredictOptions(input=str(tmp_path / "in.jsonl")), InferenceOptions(precision="no"))
    )
    assert [row.get("windows", 1) for row in want][-1] >= (2 if how == "windows" else 1)
    answers = {}
    if importlib.util.find_spec("fastapi") and importlib.util.find_spec("httpx"):
        from fastapi.testclient import TestClient

        from bertkit.serving.app import create_app

        with TestClient(
            create_app(Predictor(str(model), InferenceOptions(precision="no"), quiet=True).load())
        ) as client:
            response = client.post("/predict", content=json.dumps([{"text": t} for t in texts]))
            assert response.status_code == 200, response.text
            answers["serve"] = response.json()["predictions"]
    for fmt, modules in (("onnx", ("onnx", "onnxruntime")), ("openvino", ("openvino",))):
        if all(importlib.util.find_spec(m) for m in modules):
            code, _, stderr = run_cli("export", fmt, model)
            assert code == 0, stderr
            answers[fmt] = list(api.predict(str(model), PredictOptions(input=str(tmp_path / "in.jsonl"), backend=fmt)))
    if not answers:
        pytest.skip("no serve or exported backend installed")
    for name, got in answers.items():
        # OpenVINO runs its own fp32 kernels (bf16 ones on a CPU with native bf16): its export report
        # says how close it is (tests/cli/test_export_openvino.py); serve and ONNX agree to 1e-5
        limit = _openvino_tolerance(model) if name == "openvino" else 1e-5
        for a, b in zip(want, got):
            assert [a["score"], *_probabilities(a)] == pytest.approx([b["score"], *_probabilities(b)], abs=limit), name
            if abs(a["score"] - 0.5) > limit:  # a label the runtime's rounding cannot flip
                assert _shape(a) == _shape(b), name


def _openvino_tolerance(model) -> float:
    report = json.loads((model / "openvino" / "export.json").read_text())
    return 0.05 if "bf16" in report["fp32"]["computes_in"] else 1e-3


def _shape(row: dict) -> dict:
    """Everything a row says but its numbers."""
    return {k: v for k, v in row.items() if k not in ("score", "probabilities")}


def test_a_pair_model_windows_only_its_second_text(tmp_path, tiny_bert, run_cli):
    lines = ["sentence1\tsentence2\tlabel"]
    for i in range(16):
        word = "good" if i % 2 else "bad"
        lines.append(
            f"the film was {word}\tit was {word} {'the plot ' * (i % 3) * 10}\t{'same' if i % 4 < 2 else 'different'}"
        )
    (tmp_path / "train.tsv").write_text("\n".join(lines) + "\n")
    code, _, stderr = run_cli(
        "finetune", "pair", "--data", tmp_path / "train.tsv", "--model", tiny_bert, "--output", tmp_path / "m",
        "--epochs", "1", "--max-length", "24", "--long-text", "windows", "--stride", "2",
    )  # fmt: skip
    assert code == 0, stderr
    assert "texts were longer than a window and were read as overlapping windows" in stderr
    long_first = "the film was " * 10
    rows = [
        {"text": "the film was good", "text_pair": "it was good " + "the plot " * 20},
        {"text": long_first, "text_pair": "it was good"},
    ]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, stdout, stderr = run_cli("predict", tmp_path / "m", "--input", tmp_path / "in.jsonl")
    assert code == 0, stderr
    first, second = [json.loads(line) for line in stdout.splitlines()]
    assert first["windows"] > 2 and "truncated" not in first  # the second text is windowed, nothing lost
    assert second["windows"] == 1 and second["truncated"] is True  # the first text was cut to half the room
    assert "1 of 2 first texts of pairs were cut to 10 tokens" in stderr


@pytest.mark.parametrize("kind", ["single-label", "regression", "multi-label"])
def test_predict_answers_the_mean_of_the_windows_logits_for_every_label_kind(tmp_path, tiny_bert, kind):
    """The row's answer is the windows' logits, each from plain transformers, averaged and decoded."""
    import numpy as np
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.tasks import task_from_state

    def label(i: int):
        if kind == "regression":
            return float(i % 2) + 0.5 * (i % 3)
        if kind == "multi-label":
            return (["a", "b"] if i % 3 == 0 else ["a"]) if i % 2 else ["b"]
        return "pos" if i % 2 else "neg"

    rows = [{"text": "the film was good" if i % 2 else "the plot was bad", "label": label(i)} for i in range(16)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    options = {"long_text": "windows", "stride": 2, **({"problem_type": "regression"} if kind == "regression" else {})}
    config = TrainConfig(epochs=1, lr=1e-3, batch_size=8, max_length=16, task_options=options)
    api.finetune(
        "cls",
        RunOptions(data=str(tmp_path / "train.jsonl"), model=str(tiny_bert), output=str(tmp_path / "m")),
        config=config,
    )
    texts = ["the film was good " * 8, "the plot was bad and the acting was poor " * 3, "good"]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    got = list(
        api.predict(
            str(tmp_path / "m"), PredictOptions(input=str(tmp_path / "in.jsonl")), InferenceOptions(precision="no")
        )
    )

    task = task_from_state(json.loads((tmp_path / "m" / "bertkit.json").read_text())["task"])
    features = task.preprocess([{"text": t} for t in texts], AutoTokenizer.from_pretrained(tmp_path / "m"), False)
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "m").eval()
    with torch.no_grad():
        logits = [model(input_ids=torch.tensor([f["input_ids"]])).logits[0].double().numpy() for f in features]
    for row, index in enumerate(range(len(texts))):
        mine = np.mean([x for x, f in zip(logits, features) if f["example_index"] == index], axis=0)
        want = task.format_prediction({"text": texts[row]}, {**task.kind.decode(mine[None])[0], "truncated": False})
        assert got[row]["windows"] == sum(f["example_index"] == index for f in features)
        assert {k: v for k, v in got[row].items() if k not in ("windows", "score", "probabilities")} == {
            k: v for k, v in want.items() if k not in ("score", "probabilities")
        }
        if "score" in want:  # multi-label rows have none
            assert got[row]["score"] == pytest.approx(want["score"], abs=1e-4)  # predict rounds to 4-6 decimals
        for name, value in (want.get("probabilities") or {}).items():
            assert got[row]["probabilities"][name] == pytest.approx(value, abs=1e-5)
    assert [r["windows"] for r in got][:2] != [1, 1]
