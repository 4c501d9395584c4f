"""finetune --seeds: one run per seed, every seed's metrics and their spread, the best run kept."""

from __future__ import annotations

import json
import math

import pytest
import yaml
from conftest import assert_user_error
from test_cli_classification import write_sentiment_split

from bertkit.options import RunOptions


@pytest.fixture
def data(tmp_path):
    return write_sentiment_split(tmp_path, 48, 30)


def finetune_args(train, dev, tiny_bert, out, *extra):
    return (
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
        1,
        "--lr",
        "1e-3",
        "--batch-size",
        8,
        "--max-length",
        32,
        *extra,
    )


def test_two_seeds_give_two_runs_their_spread_and_the_best_model(tmp_path, tiny_bert, run_cli, data):
    out = tmp_path / "model"
    code, stdout, stderr = run_cli(*finetune_args(*data, tiny_bert, out, "--seeds", 2, "--seed", 7))
    assert code == 0, stderr
    meta = json.loads((out / "bertkit.json").read_text())
    seeds = meta["seeds"]
    assert seeds["seeds"] == [7, 8] and seeds["main_metric"] == "accuracy"
    first, second = seeds["runs"]
    assert first["train_loss"] != second["train_loss"]  # different seeds: different runs
    for name in ("accuracy", "f1"):
        a, b = first["metrics"][name], second["metrics"][name]
        stats = seeds["summary"][name]
        assert stats["mean"] == pytest.approx((a + b) / 2, abs=1e-6)
        assert stats["std"] == pytest.approx(abs(a - b) / math.sqrt(2), abs=1e-6)  # sample std of two values
        assert (stats["min"], stats["max"]) == (pytest.approx(min(a, b)), pytest.approx(max(a, b)))
    chosen = max(seeds["runs"], key=lambda run: run["metrics"]["accuracy"])
    assert seeds["chosen_seed"] == chosen["seed"] and meta["metrics"] == chosen["metrics"]
    assert meta["config"]["seed"] == chosen["seed"]  # the directory is that run's model
    assert "accuracy over 2 seeds:" in stdout and f"kept seed {chosen['seed']}'s model" in stdout
    assert "seed 7: accuracy" in stderr and "seed 8: accuracy" in stderr
    assert not (tmp_path / "model.seeds").exists()  # without --keep-all only the best stays
    assert "mean ± std" in (out / "README.md").read_text()  # the card shows the spread
    assert "over 2 seeds" in (out / "report.html").read_text()
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["seeds"] == "7,8" and config["output"] == str(out.resolve())

    code, stdout, stderr = run_cli("eval", out)
    assert code == 0, stderr
    assert f"this model is seed {chosen['seed']} of 2" in stdout and "accuracy over the seeds" in stdout


def test_keep_all_keeps_the_other_seeds_models(tmp_path, tiny_bert, run_cli, data):
    from transformers import AutoModelForSequenceClassification

    out = tmp_path / "model"
    code, stdout, stderr = run_cli(*finetune_args(*data, tiny_bert, out, "--seeds", "3,5", "--keep-all"))
    assert code == 0, stderr
    chosen = json.loads((out / "bertkit.json").read_text())["seeds"]["chosen_seed"]
    other = ({3, 5} - {chosen}).pop()
    kept = tmp_path / "model.seeds" / f"seed-{other}"
    # beside the kept run, only the manifest of what bertkit made there (model_dir.ownership)
    assert sorted(p.name for p in (tmp_path / "model.seeds").iterdir()) == [".bertkit-owned.json", f"seed-{other}"]
    assert json.loads((kept / "bertkit.json").read_text())["config"]["seed"] == other
    AutoModelForSequenceClassification.from_pretrained(kept)  # a complete model directory
    assert "the others' in" in stdout


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (("--seeds", "abc"), "neither a count nor a list"),
        (("--seeds", "1,1"), "distinct"),
        (("--seeds", "0"), "between 1 and 100"),
        (("--keep-all",), "--keep-all applies only with --seeds or --folds"),
        (("--seeds", "2", "--resume"), "--resume continues one run"),
    ],
)
def test_seed_mistakes_are_one_line_before_training(tmp_path, tiny_bert, run_cli, data, extra, fragment):
    out = tmp_path / "model"
    assert_user_error(run_cli(*finetune_args(*data, tiny_bert, out, *extra)), fragment)
    assert not out.exists() and not (tmp_path / "model.seeds").exists()


def test_seeds_need_evaluation_data(tmp_path, tiny_bert, run_cli, data):
    train, _ = data
    out = tmp_path / "model"
    assert_user_error(
        run_cli("finetune", "cls", "--data", train, "--model", tiny_bert, "--output", out, "--seeds", 2),
        "there is none",
    )
    assert not out.exists()


def test_seeds_train_side_by_side_when_threads_leave_cores_and_match_single_runs(tmp_path, tiny_bert, data):
    """--threads 1 on a machine with 2+ cores: the seeds run at once in their own processes, and each
    gives exactly the numbers of the same seed trained alone."""
    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.engine.threads import usable_cores
    from bertkit.options import RepeatOptions

    if usable_cores() < 2:
        pytest.skip("one usable core: the seeds run one after another")
    train, dev = data
    config = TrainConfig(epochs=1, lr=1e-3, batch_size=8, max_length=32)
    run = RunOptions(data=str(train), output=str(tmp_path / "together"), model=str(tiny_bert), eval_data=str(dev))
    run.threads = 1
    together = api.finetune_seeds("cls", run, config, RepeatOptions(seeds=[7, 8]))
    section = json.loads((tmp_path / "together" / "bertkit.json").read_text())["seeds"]
    assert section["parallel"] == 2 and [run["seed"] for run in together.runs] == [7, 8]
    import dataclasses

    for run in together.runs:
        alone = api.finetune(
            "cls",
            RunOptions(
                data=str(train),
                eval_data=str(dev),
                model=str(tiny_bert),
                output=str(tmp_path / f"alone-{run['seed']}"),
                threads=1,
            ),
            config=dataclasses.replace(config, seed=run["seed"]),
        )
        assert run["metrics"] == alone.metrics and run["train_loss"] == alone.history[-1]["train_loss"]


def test_a_user_error_crosses_processes_whole():
    import pickle

    from bertkit.errors import BertkitError

    error = pickle.loads(pickle.dumps(BertkitError("bad column", "name it with --text-column")))
    assert (error.message, error.hint) == ("bad column", "name it with --text-column")


def test_a_parallel_runs_lines_carry_its_name():
    import io

    from bertkit.api.parallel_runs import PrefixedStream

    out = io.StringIO()
    stream = PrefixedStream(out, "[seed 7] ")
    stream.write("train: epoch 1")
    stream.write(" done\neval: done\n")
    assert out.getvalue() == "[seed 7] train: epoch 1 done\n[seed 7] eval: done\n" and not stream.isatty()


def test_a_pool_worker_running_a_second_run_prefixes_its_lines_once(monkeypatch):
    """The process pool reuses a worker: the second run's lines carry its own name alone."""
    import io
    import sys

    from bertkit.api import parallel_runs

    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)

    def run(**kwargs):
        print("epoch 1", file=sys.stderr)

    parallel_runs._child("[seed 42] ", run, {})
    parallel_runs._child("[seed 44] ", run, {})
    assert out.getvalue() == "[seed 42] epoch 1\n[seed 44] epoch 1\n"
