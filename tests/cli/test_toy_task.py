"""A task from a module that exists only in the tests (toy_task.py: one file, one register call)
runs through every command, through the CLI, with no other change to bertkit: finetune, eval,
predict, report, export onnx and serve."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
PLAIN = [
    "the film was good",
    "a great story",
    "john lives in paris",
    "the acting was fine",
    "he went to london",
    "it is a very good movie",
    "she met mary in berlin",
    "the plot was great",
]
NEGATED = [
    "the film was not good",
    "not a great story",
    "john does not live in paris",
    "no , the acting was bad",
    "he did not go to london",
    "it is not a good movie",
    "she never met mary",
    "no good plot",
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture(scope="module", autouse=True)
def toy_task():
    """Importing the module registers the task; it leaves the registry when these tests end."""
    import importlib

    from bertkit.tasks import TASKS

    sys.modules.pop("toy_task", None)
    module = importlib.import_module("toy_task")
    yield module
    TASKS.pop("negation", None)
    sys.modules.pop("toy_task", None)


@pytest.fixture(scope="module")
def toy_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    rows = [{"text": t, "negated": False} for t in PLAIN] + [{"text": t, "negated": True} for t in NEGATED]
    write_jsonl(root / "train.jsonl", rows * 6)
    write_jsonl(root / "dev.jsonl", rows)
    write_jsonl(root / "input.jsonl", [{"text": "the story was not good"}, {"text": "the story was good"}])
    return root


@pytest.fixture(scope="module")
def toy_model(toy_files, tiny_bert):
    """Trained once through the CLI's entry point (in-process, where toy_task is registered)."""
    from bertkit import cli

    out = toy_files / "model"
    argv = sys.argv
    sys.argv = [
        "bertkit",
        "finetune",
        "negation",
        "--data",
        str(toy_files / "train.jsonl"),
        "--eval-data",
        str(toy_files / "dev.jsonl"),
        "--model",
        str(tiny_bert),
        "--epochs",
        "6",
        "--lr",
        "3e-3",
        "--batch-size",
        "8",
        "--precision",
        "no",
        "--output",
        str(out),
    ]
    try:
        cli.main()
    except SystemExit as exc:
        assert not exc.code, f"finetune negation exited with {exc.code}"
    finally:
        sys.argv = argv
    return out


def test_finetune_lists_the_registered_task(run_cli):
    code, out, _ = run_cli("finetune", "--help")
    assert code == 0 and "negation" in out
    code, out, _ = run_cli("finetune", "negation", "--help")
    assert code == 0 and "--text-field" in out and "does the text negate?" in out


def test_finetune_eval_predict_report(toy_model, toy_files, run_cli, toy_task):
    meta = json.loads((toy_model / "bertkit.json").read_text())
    assert meta["task"]["task"] == "negation"
    assert meta["metrics"]["balanced_accuracy"] >= 0.9  # the tiny model learned the toy rule
    code, out, err = run_cli("eval", toy_model, "--precision", "no")
    assert code == 0, err
    scored = json.loads((toy_model / "eval-dev.json").read_text())
    assert scored["metrics"]["balanced_accuracy"] == meta["metrics"]["balanced_accuracy"]
    code, out, err = run_cli("predict", toy_model, "--input", toy_files / "input.jsonl", "--precision", "no")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [row["negated"] for row in rows] == [True, False]
    assert all(set(row) == set(toy_task.NegationTask.prediction_fields) for row in rows)
    code, out, err = run_cli("report", toy_model)
    assert code == 0, err
    card = (toy_model / "README.md").read_text()
    assert "negation" in card and (toy_model / "report.html").is_file()


def test_eval_and_predict_offer_the_task_flags(run_cli):
    """A TaskOption tagged "eval" or "predict" is a flag of that command only, in the task panel."""
    code, out, err = run_cli("eval", "--help")
    assert code == 0, err
    assert "--score-cutoff" in out and "--cutoff " not in out
    code, out, err = run_cli("predict", "--help")
    assert code == 0, err
    assert "--cutoff" in out and "--score-cutoff" not in out


def test_the_task_flags_reach_the_task(toy_model, toy_files, run_cli):
    """--cutoff 0 calls every row negated; --score-cutoff 1 scores every row as plain: half right."""
    code, out, err = run_cli(
        "predict", toy_model, "--input", toy_files / "input.jsonl", "--precision", "no", "--cutoff", "0"
    )
    assert code == 0, err
    assert [json.loads(line)["negated"] for line in out.splitlines()] == [True, True]
    scores = toy_files / "scored-at-1.json"
    code, out, err = run_cli("eval", toy_model, "--precision", "no", "--score-cutoff", "1", "--output", scores)
    assert code == 0, err
    assert json.loads(scores.read_text())["metrics"]["balanced_accuracy"] == 0.5


def test_export_onnx_gives_the_same_rows(toy_model, toy_files, run_cli):
    pytest.importorskip("onnxruntime")
    code, _, err = run_cli("export", "onnx", toy_model, "--samples", "16")
    assert code == 0, err
    rows = {}
    for backend in ("torch", "onnx"):
        code, out, err = run_cli(
            "predict", toy_model, "--input", toy_files / "input.jsonl", "--backend", backend, "--precision", "no"
        )
        assert code == 0, err
        rows[backend] = [json.loads(line) for line in out.splitlines()]
    assert [r["negated"] for r in rows["onnx"]] == [r["negated"] for r in rows["torch"]]
    for a, b in zip(rows["onnx"], rows["torch"]):
        assert a["probability"] == pytest.approx(b["probability"], abs=1e-4)


def test_serve_answers_like_predict(toy_model, toy_files, run_cli):
    """A separate process: the task module comes in through BERTKIT_TASK_MODULES."""
    pytest.importorskip("fastapi")
    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "BERTKIT_TASK_MODULES": "toy_task",
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "bertkit", "serve", str(toy_model), "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                if server.poll() is not None:
                    pytest.fail(f"serve exited: {server.stderr.read()}")
                time.sleep(0.2)
        answer = httpx.post(
            f"{url}/predict", json=[{"text": "the story was not good"}, {"text": "the story was good"}], timeout=60
        )
        assert answer.status_code == 200, answer.text
        served = answer.json()["predictions"]
    finally:
        server.terminate()
        server.wait(timeout=30)
    code, out, err = run_cli("predict", toy_model, "--input", toy_files / "input.jsonl")  # serve's precision
    assert code == 0, err
    predicted = [json.loads(line) for line in out.splitlines()]
    assert [r["negated"] for r in served] == [r["negated"] for r in predicted]
    from bertkit.engine.precision import resolve

    # bf16 (auto on a CPU with native bf16) rounds differently in another batch's padding
    close = 2e-2 if resolve("auto", "cpu")[0] == "bf16" else 1e-5
    for a, b in zip(served, predicted):
        assert a["probability"] == pytest.approx(b["probability"], abs=close)
