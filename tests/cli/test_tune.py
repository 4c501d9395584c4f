"""bertkit tune on Optuna: trials in a real SQLite study, the best trial's model as the output, a
killed search resumed (the trial count continues), two processes sharing one study finish the
budget together, pruning leaves nothing behind, and every mistake is one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from bertkit.options import RunOptions
from bertkit.training.plan import Driver

optuna = pytest.importorskip("optuna", reason="Optuna is not installed (pip install 'bertkit[tune]')")

from conftest import assert_user_error
from test_cli_classification import write_sentiment_split


@pytest.fixture
def data(tmp_path):
    return write_sentiment_split(tmp_path, 32, 20)


def tune_args(train, dev, tiny_bert, out, *extra):
    return (
        "tune",
        "cls",
        "--data",
        train,
        "--eval-data",
        dev,
        "--model",
        tiny_bert,
        "--output",
        out,
        "--max-length",
        32,
        *extra,
    )


def study_trials(out, name=None):
    storage = f"sqlite:///{out.parent / (out.name + '.tune') / 'study.db'}"
    return optuna.load_study(study_name=name or f"bertkit-cls-{out.name}", storage=storage).get_trials()


def env():
    return {**os.environ, "OMP_NUM_THREADS": "1", "BERTKIT_DEBUG": ""}


def test_three_trials_the_best_model_and_a_fixed_flag(tmp_path, tiny_bert, run_cli, data):
    out = tmp_path / "best"
    code, stdout, stderr = run_cli(*tune_args(*data, tiny_bert, out, "--trials", 3, "--epochs", 1))
    assert code == 0, stderr
    trials = study_trials(out)
    assert [t.state.name for t in trials] == ["COMPLETE"] * 3
    assert all(
        "epochs" not in t.params and {"lr", "batch_size", "warmup_ratio", "weight_decay"} <= set(t.params)
        for t in trials
    )  # --epochs given: fixed, not searched
    best = max(trials, key=lambda t: t.value)
    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["tune"]["best_trial"] == best.number and meta["config"]["epochs"] == 1
    assert meta["config"]["lr"] == pytest.approx(best.params["lr"]) and meta["metrics"]["accuracy"] == best.value
    assert [t["number"] for t in meta["tune"]["trials"]] == [0, 1, 2]
    assert (out / "figures" / "tune_trials.png").is_file() and "Hyperparameter search" in (
        out / "report.html"
    ).read_text()
    assert list((tmp_path / "best.tune").glob("trial-*")) == []  # the best moved to --output, the others deleted
    import yaml  # its config.yaml replays the best trial into --output, not into its trial folder

    replay = yaml.safe_load((out / "config.yaml").read_text())
    assert replay["output"] == str(out) and replay["lr"] == pytest.approx(best.params["lr"])
    assert f"best: trial {best.number}" in stdout and stderr.count("trial ") >= 3


def test_max_steps_takes_epochs_out_of_the_search(tmp_path, tiny_bert, run_cli, data):
    out = tmp_path / "steps"
    code, _, stderr = run_cli(*tune_args(*data, tiny_bert, out, "--trials", 2, "--max-steps", 2))
    assert code == 0, stderr
    trials = study_trials(out)
    assert len(trials) == 2 and all("epochs" not in t.params and "lr" in t.params for t in trials)
    assert "epochs" not in json.loads((out / "bertkit.json").read_text())["tune"]["importances"]


def test_a_killed_search_resumes_and_the_count_continues(tmp_path, tiny_bert, data):
    out = tmp_path / "model"
    command = [
        sys.executable,
        "-m",
        "bertkit",
        *map(str, tune_args(*data, tiny_bert, out, "--trials", 3, "--epochs", 2)),
    ]
    # the process kills itself as trial 1 starts (watching the study from here raced fast trials)
    killed = subprocess.run(
        command,
        env={**env(), "BERTKIT_TEST_SIGNAL": "KILL@trial-1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert [t.state.name for t in study_trials(out)] == ["COMPLETE", "RUNNING"]
    done = subprocess.run(command, env=env(), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    states = [t.state.name for t in study_trials(out)]
    assert states[:2] == ["COMPLETE", "FAIL"]  # the killed trial is marked failed, not counted
    assert states.count("COMPLETE") + states.count("PRUNED") == 3 and len(states) == 4  # numbering continues
    assert "this process ran 2" in done.stdout


def test_two_processes_sharing_one_study_finish_the_budget_together(tmp_path, tiny_bert, data):
    out = tmp_path / "shared"
    command = [
        sys.executable,
        "-m",
        "bertkit",
        *map(str, tune_args(*data, tiny_bert, out, "--trials", 4, "--epochs", 1)),
    ]
    processes = [
        subprocess.Popen(command, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], [err[-2000:] for _, err in outputs]
    trials = study_trials(out)
    assert len(trials) == 4 and all(t.state.name in ("COMPLETE", "PRUNED") for t in trials)
    ran = sorted(int(stdout.split("this process ran ")[1].split()[0]) for stdout, _ in outputs)
    assert sum(ran) == 4
    meta = json.loads((out / "bertkit.json").read_text())
    assert (
        meta["tune"]["best_trial"]
        == max((t for t in trials if t.state.name == "COMPLETE"), key=lambda t: t.value).number
    )


def test_a_pruned_trial_leaves_nothing(tmp_path, tiny_bert, data):
    from bertkit import api
    from bertkit.config import TrainConfig

    train, dev = data
    calls = []

    def prune(number, metrics, main):
        calls.append((number, main))
        raise optuna.TrialPruned()

    with pytest.raises(optuna.TrialPruned):
        api.finetune(
            "cls",
            RunOptions(data=str(train), eval_data=str(dev), model=str(tiny_bert), output=str(tmp_path / "m")),
            config=TrainConfig(epochs=2, batch_size=8, max_length=32),
            driver=Driver(on_evaluation=prune),
        )
    assert calls == [(1, "accuracy")] and sorted(p.name for p in tmp_path.iterdir()) == ["dev.csv", "train.csv"]


@pytest.mark.parametrize(
    "space, fragment",
    [
        ("lr: {low: 1e-3, high: 1e-5}\n", "low < high"),
        ("learning_rate: [1e-5]\n", "not a hyperparameter bertkit tune can search"),
        ("lr: {low: 0, high: 1e-3, log: true}\n", "must start above 0"),
        ("- lr\n", "not a mapping"),
    ],
)
def test_space_mistakes_are_one_line_before_any_trial(tmp_path, tiny_bert, run_cli, data, space, fragment):
    path = tmp_path / "space.yaml"
    path.write_text(space)
    out = tmp_path / "model"
    assert_user_error(run_cli(*tune_args(*data, tiny_bert, out, "--space", path)), fragment)
    assert not out.exists() and not (tmp_path / "model.tune").exists()


def test_other_mistakes(tmp_path, tiny_bert, run_cli, data, monkeypatch):
    train, _ = data
    out = tmp_path / "model"
    assert_user_error(run_cli("tune", "cls", "--data", train, "--model", tiny_bert, "--output", out), "there is none")
    assert_user_error(run_cli(*tune_args(*data, tiny_bert, out, "--trials", 0)), "--trials must be >= 1")
    assert_user_error(
        run_cli(*tune_args(*data, tiny_bert, out, "--storage", "nosuchdb://x/y")), "cannot open the study"
    )
    monkeypatch.setitem(sys.modules, "optuna", None)
    assert_user_error(run_cli(*tune_args(*data, tiny_bert, out)), "Optuna is not installed", "bertkit[tune]")
