"""Several processes: 2 real CPU processes (gloo) through the real CLI, and the engine in one process.

The launched runs use sizes that are not multiples of the batch size (37 training rows and 29
evaluation sentences at batch 8, 13 prediction rows at batch 4): every example must be counted
once, outputs must come back in input order with the numbers of a single process, and only rank 0
may print or write. ``accelerate launch --tee 3 --log_dir`` keeps each rank's stdout and stderr in
its own file, which shows that two processes ran and which one printed what.
"""

from __future__ import annotations

import csv
import json
import os
import random
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO
from extras_models import write_conll

from bertkit.options import EvalOptions, InferenceOptions, PredictOptions, RunOptions


def _gloo_available() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_gloo_available()


needs_gloo = pytest.mark.skipif(not _gloo_available(), reason="torch.distributed with the gloo backend is unavailable")


def _gpu_here() -> bool:
    import torch

    return torch.cuda.is_available()


# The ranks run on the CPU (gloo, GPUs hidden); a one-process reference run in this process would
# run on a GPU, whose float sums differ in the 5th decimal: the exact comparison is for CPU machines.
cpu_reference = pytest.mark.skipif(_gpu_here(), reason="the in-process reference would run on the GPU")

SENTIMENT = {"pos": ["good", "great", "fine"], "neg": ["bad", "awful", "poor"]}
FILLER = "the movie film plot story acting it was very this".split()
PREDICT_TEXTS = [  # lengths differ, so the length-sorted batches reorder them
    "good",
    "the film was bad",
    "it was a very good movie and the acting was great",
    "poor plot",
    "this story was awful",
    "fine",
    "the acting was very very poor and the plot was bad",
    "great film",
    "it was not good",
    "the movie",
    "bad bad bad",
    "a fine story with a great actor",
    "awful",
]
PLACES = ["paris", "london", "berlin", "france"]  # the places this test was written with


@dataclass
class Launched:
    console: str  # the launcher's stdout: tee'd lines, each prefixed with its rank
    out: dict  # rank -> that rank's stdout
    err: dict  # rank -> that rank's stderr


def launch(workdir: Path, *args, launcher: str = "accelerate", timeout: int = 180) -> Launched:
    """``bertkit ARGS`` in 2 CPU processes (gloo) from this checkout, under ``accelerate launch``
    (with ACCELERATE_USE_CPU, as the README says) or plain ``torchrun`` (the engine detects the CPU)."""
    logs = workdir / f"logs-{args[0]}-{len(list(workdir.glob('logs-*')))}"
    # CPU processes even on a GPU machine: two ranks on one GPU is not what these tests check
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    env.pop("BERTKIT_DEBUG", None)
    if launcher == "accelerate":
        command = [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--multi_gpu",
            "--num_processes",
            "2",
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "--main_process_port",
            str(_free_port()),
            "--tee",
            "3",
            "--log_dir",
            str(logs),
        ]
        env["ACCELERATE_USE_CPU"] = "true"
    else:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            str(_free_port()),
            "--tee",
            "3",
            "--log_dir",
            str(logs),
        ]
        env.pop("ACCELERATE_USE_CPU", None)
    command += ["-m", "bertkit", *map(str, args)]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    rank_dirs = {int(d.name): d for d in logs.glob("*/attempt_0/*")}
    assert sorted(rank_dirs) == [0, 1], f"expected two processes, found {sorted(rank_dirs)}"
    return Launched(
        done.stdout,
        {r: (d / "stdout.log").read_text() for r, d in rank_dirs.items()},
        {r: (d / "stderr.log").read_text() for r, d in rank_dirs.items()},
    )


def assert_only_rank0_spoke(run: Launched) -> None:
    assert run.out[1] == "" and run.err[1] == "", (run.out[1], run.err[1])
    assert "[default1]" not in run.console


def _free_port() -> int:
    with socket.socket() as sock:  # other test runs on this machine may hold Accelerate's default port
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_sentiment(path: Path, n: int, seed: int) -> None:
    """``n`` rows of 5 known words each: 7 tokens with [CLS] and [SEP]."""
    rng = random.Random(seed)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        for i in range(n):
            label = "pos" if i % 2 == 0 else "neg"
            words = rng.sample(FILLER, 4)
            words.insert(rng.randrange(5), rng.choice(SENTIMENT[label]))
            writer.writerow([" ".join(words), label])


def rows_of(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


# --- 2 processes through the CLI -----------------------------------------------------------------
@pytest.fixture(scope="module")
def cls_run(tiny_bert, tmp_path_factory):
    if not _gloo_available():
        pytest.skip("torch.distributed with the gloo backend is unavailable")
    root = tmp_path_factory.mktemp("mp-cls")
    write_sentiment(root / "train.csv", 37, seed=1)
    write_sentiment(root / "dev.csv", 29, seed=2)
    run = launch(
        root,
        "finetune",
        "cls",
        "--data",
        root / "train.csv",
        "--eval-data",
        root / "dev.csv",
        "--model",
        tiny_bert,
        "--output",
        root / "model",
        "--epochs",
        2,
        "--batch-size",
        8,
        "--eval-batch-size",
        8,
        "--grad-accum",
        2,
        "--lr",
        "5e-3",
    )
    return root, run


@needs_gloo
@cpu_reference
def test_finetune_in_two_processes_uses_every_example_once(cls_run, run_cli):
    root, run = cls_run
    assert_only_rank0_spoke(run)
    lines = run.out[0].splitlines()
    assert len(lines) == 5 and lines[0].startswith("epoch 1: ") and lines[1].startswith("epoch 2: ")
    said = run.err[0].splitlines()  # each said when chosen: the family's recipe once the model is known, then precision
    assert said[0].endswith("the flags override") and said[1].startswith("precision: ")
    assert lines[2].startswith("train: 37 examples")
    # 37 examples, 2 epochs: the best may still be a constant answer, and is then called so
    called = ("best (epoch ", "best, but degenerate", "best, but no better than a baseline")
    assert lines[3].startswith(called) and lines[4] == f"saved to {root / 'model'}"
    meta = json.loads((root / "model" / "bertkit.json").read_text())
    throughput = meta["throughput"]
    # 37 rows x 2 epochs, 7 tokens each, none padded; 5 batches a epoch -> 3 per rank -> 2 steps of 2
    assert throughput["examples"] == 74 and throughput["tokens"] == 74 * 7 and throughput["padding_share"] == 0
    assert throughput["optimizer_steps"] == 4  # one process would take 2 x ceil(5 / 2) = 6
    assert [h["epoch"] for h in meta["history"]] == [1, 2]
    assert sorted(p.name for p in root.iterdir() if p.name.startswith(".")) == []  # no staging left over

    # the evaluation run inside 2-process training scored what one process scores on the saved model
    code, stdout, stderr = run_cli(
        "eval", root / "model", "--data", root / "dev.csv", "--batch-size", 8, "--output", root / "eval-1.json"
    )
    assert code == 0, stderr
    one = json.loads((root / "eval-1.json").read_text())
    assert one["examples"] == 29 and one["metrics"] == meta["metrics"]


@needs_gloo
@cpu_reference
def test_predict_in_two_processes_prints_each_row_once_in_input_order(cls_run, run_cli):
    root, _ = cls_run
    (root / "in.txt").write_text("\n".join(PREDICT_TEXTS) + "\n")
    run = launch(root, "predict", root / "model", "--input", root / "in.txt", "--batch-size", 4, launcher="torchrun")
    assert_only_rank0_spoke(run)
    rows = rows_of(run.out[0])
    assert [r["text"] for r in rows] == PREDICT_TEXTS
    code, stdout, stderr = run_cli("predict", root / "model", "--input", root / "in.txt", "--batch-size", 4)
    assert code == 0, stderr
    assert rows == rows_of(stdout)  # the same numbers as one process
    assert len({r["score"] for r in rows}) > 5  # distinct rows: a mix-up would show


@needs_gloo
@cpu_reference
def test_ner_eval_and_predict_file_in_two_processes_match_one_process(tiny_bert, tmp_path, run_cli):
    from bertkit import api
    from bertkit.config import TrainConfig

    write_conll(tmp_path / "train.txt", 40, seed=3, places=PLACES)
    write_conll(tmp_path / "dev.txt", 29, seed=4, places=PLACES)
    model = tmp_path / "ner"
    api.finetune(
        "ner",
        RunOptions(data=str(tmp_path / "train.txt"), model=str(tiny_bert), output=str(model)),
        config=TrainConfig(epochs=1, batch_size=8),
    )

    run = launch(
        tmp_path, "eval", model, "--data", tmp_path / "dev.txt", "--batch-size", 8, "--output", tmp_path / "eval-2.json"
    )
    assert_only_rank0_spoke(run)
    assert run.out[0].count("written to") == 1
    code, _, stderr = run_cli(
        "eval", model, "--data", tmp_path / "dev.txt", "--batch-size", 8, "--output", tmp_path / "eval-1.json"
    )
    assert code == 0, stderr
    two, one = (json.loads((tmp_path / f"eval-{n}.json").read_text()) for n in (2, 1))
    assert two["examples"] == one["examples"] == 29
    assert two["metrics"] == one["metrics"] and 0 < two["metrics"]["token_accuracy"] < 1

    texts = [
        " ".join(word for word, _ in (line.split() for line in block.splitlines()))
        for block in (tmp_path / "dev.txt").read_text().strip().split("\n\n")
    ][:13]
    texts[3] = "john lives in paris and mary lives in london and obama works for google in berlin ."
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    run = launch(
        tmp_path,
        "predict",
        model,
        "--input",
        tmp_path / "in.txt",
        "--batch-size",
        4,
        "--output",
        tmp_path / "pred-2.jsonl",
        launcher="torchrun",
    )
    assert_only_rank0_spoke(run)
    assert run.out[0] == "" and run.err[0].count("13 predictions written") == 1
    code, stdout, stderr = run_cli("predict", model, "--input", tmp_path / "in.txt", "--batch-size", 4)
    assert code == 0, stderr
    rows = rows_of((tmp_path / "pred-2.jsonl").read_text())
    assert [r["text"] for r in rows] == texts and rows == rows_of(stdout)
    assert all(len(r["tags"]) == len(r["words"]) == len(r["text"].split()) for r in rows)


@needs_gloo
@cpu_reference
def test_multi_head_training_in_two_processes_is_one_process_with_grad_accum_2(tiny_bert, tmp_path, run_cli):
    """Rank r takes batches r, r + 2, ... of the one plan, whichever head each is: a step of two
    processes sums the two batches one process accumulates with --grad-accum 2 (no dropout, fp32)."""
    import shutil

    from safetensors.torch import load_file

    model = tmp_path / "tiny-no-dropout"
    shutil.copytree(tiny_bert, model)
    config = json.loads((model / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (model / "config.json").write_text(json.dumps(config))
    write_sentiment(tmp_path / "cls.csv", 32, seed=1)
    write_conll(tmp_path / "ner.txt", 32, seed=3, places=PLACES)
    heads = [f"s:cls:{tmp_path / 'cls.csv'}:eval_data={tmp_path / 'cls.csv'}", f"n:ner:{tmp_path / 'ner.txt'}"]
    common = ["finetune", "multi", "--task", heads[0], "--task", heads[1], "--model", model, "--epochs", 2]
    common += ["--batch-size", 8, "--lr", "5e-3", "--precision", "no"]  # 4 + 4 batches an epoch: 4 per rank
    common += ["--no-lazy"]  # one CPU process would step only the rows a batch used; two processes step all

    run = launch(tmp_path, *common, "--output", tmp_path / "two")
    assert_only_rank0_spoke(run)
    assert run.out[0].count("saved to") == 1
    code, _, stderr = run_cli(*common, "--grad-accum", 2, "--output", tmp_path / "one")
    assert code == 0, stderr
    two, one = (json.loads((tmp_path / d / "bertkit.json").read_text()) for d in ("two", "one"))
    assert two["throughput"]["examples"] == one["throughput"]["examples"] == 2 * 64  # every row once an epoch
    assert two["throughput"]["optimizer_steps"] == one["throughput"]["optimizer_steps"] == 8
    weights = [load_file(str(tmp_path / d / "model.safetensors")) for d in ("two", "one")]
    assert weights[0].keys() == weights[1].keys()
    for name in weights[0]:
        assert np.allclose(weights[0][name].numpy(), weights[1][name].numpy(), atol=1e-5), name
    assert two["heads"][0]["metrics"] == pytest.approx(one["heads"][0]["metrics"], abs=1e-4)


# --- one process: what the launched runs cannot show cheaply -------------------------------------
def test_ranks_other_than_0_neither_print_nor_write(small_cls_model, tmp_path, run_cli, monkeypatch):
    """A process of rank 1 runs the command but leaves the terminal and the files to rank 0."""
    from bertkit import api
    from bertkit.engine import Engine

    model, dev = small_cls_model
    monkeypatch.setenv("RANK", "1")  # what the CLI reads
    monkeypatch.setattr(Engine, "is_main_process", property(lambda self: False))  # what api reads
    code, stdout, _ = run_cli("predict", model, "--input", dev, "--output", tmp_path / "pred.jsonl")
    assert code == 0 and stdout == "" and not (tmp_path / "pred.jsonl").exists()
    code, stdout, stderr = run_cli("eval", model, "--data", dev, "--output", tmp_path / "eval.json")
    assert code == 0 and stdout == "" and "written" not in stderr
    code, stdout, stderr = run_cli("predict", model, "--input", tmp_path / "missing.txt")
    assert code == 2 and stdout == stderr == ""  # rank 0 reports the error once
    report = api.evaluate(str(model), EvalOptions(output=str(tmp_path / "eval.json"), data=str(dev)))
    assert report["examples"] == 12 and not (tmp_path / "eval.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def small_cls_model(tiny_bert, tmp_path_factory):
    from bertkit import api
    from bertkit.config import TrainConfig

    root = tmp_path_factory.mktemp("cls-model")
    write_sentiment(root / "data.csv", 12, seed=5)
    api.finetune(
        "cls",
        RunOptions(data=str(root / "data.csv"), model=str(tiny_bert), output=str(root / "model")),
        config=TrainConfig(epochs=1, batch_size=8),
    )
    return root / "model", root / "data.csv"


def _features(lengths: list[int]) -> list[dict]:
    # ids 5.. are ordinary words of the tiny vocab; 2 and 3 are [CLS] and [SEP]
    return [
        {"input_ids": [2] + [5 + (i + k) % 50 for k in range(n - 2)] + [3], "token_type_ids": [0] * n, "labels": i % 2}
        for i, n in enumerate(lengths)
    ]


def test_fit_counts_fractional_epochs_and_accumulation(tiny_bert):
    from transformers import AutoModelForSequenceClassification

    from bertkit.config import TrainConfig
    from bertkit.engine import Engine

    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=2)
    # 40 rows of 6 tokens at batch 8: 5 batches, 3 optimizer steps an epoch with --grad-accum 2;
    # 1.5 epochs = ceil(4.5) = 5 steps: epoch 1 (5 batches, 40 rows), then 2 steps = 4 batches = 32 rows
    _, report = Engine("no").fit(
        model, _features([6] * 40), TrainConfig(epochs=1.5, batch_size=8, grad_accum=2, lr=1e-3), pad_token_id=0
    )
    assert (report.optimizer_steps, report.examples, report.real_tokens, report.padded_tokens) == (5, 72, 432, 432)
    assert [h["epoch"] for h in report.history] == [1, 1.5]

    # one batch of lengths 3..7: 25 real tokens in a 5 x 7 batch
    _, report = Engine("no").fit(model, _features([3, 4, 5, 6, 7]), TrainConfig(epochs=1, batch_size=5), 0)
    assert (report.examples, report.real_tokens, report.padded_tokens) == (5, 25, 35)
    assert report.throughput()["padding_share"] == round(1 - 25 / 35, 4) == 0.2857


def test_engines_of_different_precision_follow_each_other(tiny_bert, small_cls_model, tmp_path):
    import torch
    from transformers import AutoModelForSequenceClassification

    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.engine import Engine
    from bertkit.engine.batching import Collator

    _, data = small_cls_model
    result = api.finetune(
        "cls",
        RunOptions(data=str(data), model=str(tiny_bert), output=str(tmp_path / "bf16")),
        config=TrainConfig(epochs=1, batch_size=8, precision="bf16"),
    )
    assert result.throughput["examples"] == 12
    rows = api.predict(
        str(tmp_path / "bf16"), PredictOptions(input=str(data)), InferenceOptions(precision="no")
    )  # fp32 after bf16 in one process
    assert len(rows) == 12

    device = Engine("no").accelerator.device  # infer takes a model already on the engine's device
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "bf16").eval().to(device)
    features = _features([9] * 6)  # equal lengths: infer's single batch is exactly this one
    with torch.no_grad():
        batch = {k: v.to(device) for k, v in Collator(0)(features).items() if k != "labels"}
        reference = model(**batch).logits.cpu().numpy()
    outputs = {}
    for precision in ("bf16", "no", "bf16", "no"):
        engine = Engine(precision)
        assert engine.precision == precision  # bf16 runs without Accelerate's autocast (bertkit.engine.precision)
        outputs[precision] = np.stack(engine.infer(model, features, 8, ("logits",), False, 0)["logits"])
    np.testing.assert_array_equal(outputs["no"], reference)  # really fp32 again
    difference = np.abs(outputs["bf16"] - reference).max()
    assert 0 < difference < 0.05  # really bf16: rounded, but close
