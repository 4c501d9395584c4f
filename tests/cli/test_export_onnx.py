"""`bertkit export onnx` and `predict --backend onnx|onnx-int8` on tiny fine-tuned models."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_user_error
from extras_models import train_tiny

from bertkit.options import PredictOptions, RunOptions

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def cls_dir(tmp_path_factory, tiny_bert):
    return train_tiny("cls", tmp_path_factory.mktemp("onnx-cls"), tiny_bert)


def rows(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_predict_onnx_before_export_is_one_line(cls_dir, run_cli, tmp_path):
    (tmp_path / "in.txt").write_text("a great film\n")
    assert_user_error(
        run_cli("predict", cls_dir, "--input", tmp_path / "in.txt", "--backend", "onnx"),
        "has no exported ONNX model",
        "bertkit export onnx",
    )
    assert_user_error(
        run_cli("predict", cls_dir, "--input", tmp_path / "in.txt", "--backend", "tf"), "unknown --backend 'tf'"
    )


def test_export_parity_and_same_predictions(cls_dir, run_cli, tmp_path):
    code, stdout, stderr = run_cli("export", "onnx", cls_dir, "--int8")
    assert code == 0, stderr
    report = json.loads((cls_dir / "onnx" / "export.json").read_text())
    assert report["parity_examples"] == 24 and report["torch"]["main_metric"] == "accuracy"
    assert report["fp32"]["max_abs_diff"] < 1e-4  # the same float32 graph
    assert 0 < report["int8"]["max_abs_diff"] < 0.05  # int8 weights: close, not equal
    assert report["fp32"]["delta"] == 0.0 and abs(report["int8"]["delta"]) <= 1 / 24 + 1e-9
    assert report["int8"]["megabytes"] < report["fp32"]["megabytes"]
    assert f"max abs logit diff {report['fp32']['max_abs_diff']:.2e}" in stdout and "delta" in stdout

    texts = ["the plot was awful", "a great great film", "it was poor", "very good acting", "bad"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    outputs = {}
    for backend in ("torch", "onnx", "onnx-int8"):
        fp32 = ["--precision", "no"] if backend == "torch" else []  # auto would be bf16 on a bf16 CPU
        code, stdout, stderr = run_cli("predict", cls_dir, "--input", tmp_path / "in.txt", "--backend", backend, *fp32)
        assert code == 0, stderr
        outputs[backend] = rows(stdout)
    torch_rows, onnx_rows = outputs["torch"], outputs["onnx"]
    assert [r["text"] for r in onnx_rows] == texts and set(onnx_rows[0]) == set(torch_rows[0])
    for a, b in zip(torch_rows, onnx_rows):
        assert a["label"] == b["label"]
        assert all(abs(a["probabilities"][k] - b["probabilities"][k]) <= 2e-6 for k in a["probabilities"])
    for a, b in zip(torch_rows, outputs["onnx-int8"]):
        assert all(abs(a["probabilities"][k] - b["probabilities"][k]) <= 0.02 for k in a["probabilities"])


def test_export_per_token_task(tmp_path, tiny_bert, run_cli):
    from bertkit import api

    ner = train_tiny("ner", tmp_path / "ner", tiny_bert)
    code, _, stderr = run_cli("export", "onnx", ner)
    assert code == 0, stderr
    report = json.loads((ner / "onnx" / "export.json").read_text())
    assert report["fp32"]["max_abs_diff"] < 1e-4 and report["fp32"]["delta"] == 0.0 and "int8" not in report
    (tmp_path / "in.txt").write_text("john lives in paris .\nmary works for google in berlin\n")
    torch_rows = api.predict(str(ner), PredictOptions(input=str(tmp_path / "in.txt")))
    onnx_rows = api.predict(str(ner), PredictOptions(input=str(tmp_path / "in.txt"), backend="onnx"))
    assert list(torch_rows) == list(onnx_rows)  # tags and entities, word for word


def test_export_needs_eval_data_or_data(tmp_path, tiny_bert, run_cli, capsys):
    from test_cli_classification import write_sentiment_csv

    from bertkit import api
    from bertkit.config import TrainConfig

    write_sentiment_csv(tmp_path / "train.csv", 32, seed=1)
    api.finetune(
        "cls",
        RunOptions(data=str(tmp_path / "train.csv"), model=str(tiny_bert), output=str(tmp_path / "m")),
        config=TrainConfig(epochs=1, lr=1e-3, batch_size=16),
    )
    capsys.readouterr()  # the training's own progress lines
    assert_user_error(run_cli("export", "onnx", tmp_path / "m"), "without evaluation data", "--data")
    assert not (tmp_path / "m" / "onnx").exists()
    code, stdout, stderr = run_cli("export", "onnx", tmp_path / "m", "--data", tmp_path / "train.csv", "--samples", 10)
    assert code == 0, stderr
    assert "parity on 10 examples" in stdout
    assert np.isfinite(json.loads((tmp_path / "m" / "onnx" / "export.json").read_text())["fp32"]["max_abs_diff"])


def test_export_parity_data_with_label_ids(cls_dir, run_cli, tmp_path):
    """A GLUE-style file whose labels are the model's label ids (SST-2's 0/1) is read as eval reads
    it (ids mapped to the model's labels), not a traceback."""
    labels = json.loads((cls_dir / "bertkit.json").read_text())["task"]["labels"]
    rows = [("a great great film", "pos"), ("the plot was awful", "neg"), ("very good acting", "pos")]
    (tmp_path / "ids.tsv").write_text("sentence\tlabel\n" + "".join(f"{t}\t{labels.index(lab)}\n" for t, lab in rows))
    code, stdout, stderr = run_cli("export", "onnx", cls_dir, "--data", tmp_path / "ids.tsv")
    assert code == 0, stderr
    assert (
        "parity on 3 examples" in stdout
        and json.loads((cls_dir / "onnx" / "export.json").read_text())["torch"]["value"] is not None
    )


def test_an_export_cleans_up_after_a_killed_one(cls_dir, run_cli, tmp_path):
    """A killed export leaves its staging folder (and maybe the old export moved aside): the next
    export removes them, as finetune does for its output; a live writer's folder is left alone."""
    import os
    import shutil

    model = tmp_path / "model"
    shutil.copytree(cls_dir, model, ignore=shutil.ignore_patterns("onnx", "openvino"))
    dead = model / ".onnx.partial-999999999-x1"  # no such process
    live = model / f".onnx.partial-{os.getpid()}-x2"  # a writer still running
    old = model / ".onnx.old"
    for folder in (dead, live, old):
        folder.mkdir()
        (folder / "model.onnx").write_bytes(b"\0" * 1000)
    (old / "export.json").write_text("{}")
    code, _, stderr = run_cli("export", "onnx", model)
    assert code == 0, stderr
    assert not dead.exists() and not old.exists() and live.is_dir()
    assert json.loads((model / "onnx" / "export.json").read_text())["fp32"]["max_abs_diff"] < 1e-3


def change_weights(model) -> None:
    """New weights under the export, as `cp other/model.safetensors M/` would bring."""
    from safetensors.torch import load_file, save_file

    weights = load_file(str(model / "model.safetensors"))
    name = next(iter(weights))
    weights[name] = weights[name] + 0.5
    save_file(weights, str(model / "model.safetensors"), metadata={"format": "pt"})


def test_an_export_of_other_weights_is_refused_or_passed_over(cls_dir, run_cli, tmp_path):
    """export.json records the fingerprint of the weights, config and tokenizer it was made from:
    once they change, `--backend onnx` is refused in one line and `auto` (serve's default) passes
    the export over, saying why; exporting again makes it current."""
    import shutil

    from bertkit.api.prediction import Predictor

    model = tmp_path / "model"
    shutil.copytree(cls_dir, model, ignore=shutil.ignore_patterns("onnx", "openvino"))
    assert run_cli("export", "onnx", model)[0] == 0
    made_from = json.loads((model / "onnx" / "export.json").read_text())["made_from"]
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= set(made_from)
    (tmp_path / "in.txt").write_text("a great film\n")
    assert run_cli("predict", model, "--input", tmp_path / "in.txt", "--backend", "onnx")[0] == 0
    change_weights(model)
    assert_user_error(
        run_cli("predict", model, "--input", tmp_path / "in.txt", "--backend", "onnx"),
        "model.safetensors changed since it was exported",
        f"bertkit export onnx {model}` again",
    )
    auto = Predictor(str(model), backend="auto")
    assert auto.backend == "torch" and "onnx passed over: model.safetensors changed" in auto.backend_reason
    code, _, stderr = run_cli("predict", model, "--input", tmp_path / "in.txt", "--backend", "auto")
    assert code == 0 and "onnx passed over" in stderr, stderr
    assert run_cli("export", "onnx", model, "--threads", "1")[0] == 0  # exported again (export takes --threads)
    torch_row = rows(run_cli("predict", model, "--input", tmp_path / "in.txt", "--precision", "no")[1])[0]
    onnx_row = rows(run_cli("predict", model, "--input", tmp_path / "in.txt", "--backend", "onnx")[1])[0]
    assert onnx_row["probabilities"] == pytest.approx(torch_row["probabilities"], abs=2e-6)  # the new weights
    with open(model / "tokenizer.json", "a") as tokenizer:  # a tokenizer changed under the export
        tokenizer.write("\n")
    assert_user_error(
        run_cli("predict", model, "--input", tmp_path / "in.txt", "--backend", "onnx"), "tokenizer.json changed"
    )
    (model / "onnx" / "export.json").write_text("{not json")
    assert "onnx passed over: its export.json is damaged" in Predictor(str(model), backend="auto").backend_reason
    assert_user_error(
        run_cli("predict", model, "--input", tmp_path / "in.txt", "--backend", "onnx"), "export.json is damaged"
    )
