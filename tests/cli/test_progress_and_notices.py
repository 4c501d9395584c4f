"""What a user sees while a command works (issue #31), with its output going to files, as under a
scheduler, CI, `nohup` or `make demo > log`: a progress line at a steady pace, and every fact the
user could act on (precision, threads, a busy machine, the class weights) before the first step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import CLS_CSV

from bertkit.engine.progress import PACE_ENV, LineProgress, Pace, pace_seconds, progress_text
from bertkit.errors import BertkitError

REPO = Path(__file__).resolve().parents[2]
# imbalanced (3 pos : 1 neg), so that --class-weights auto has weights to say
IMBALANCED = "text,label\n" + "".join(
    f"the film was {w},{lab}\n" for w, lab in [("good", "pos"), ("great", "pos"), ("fine", "pos"), ("bad", "neg")] * 10
)
# os.getloadavg says the machine is busy, as on a shared machine (the notice's condition)
BUSY = "import os\nos.getloadavg = lambda: (50.0, 50.0, 50.0)\n"


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_line_comes_when_the_pace_says_with_position_speed_loss_and_eta(capsys):
    clock = FakeClock()
    progress = LineProgress(100, "train", pace=Pace(30, clock))
    progress.set_position(0, 40, 0, lambda: 0.6931)
    for second in range(1, 30):  # 29 s of steps: nothing yet
        clock.now += 1
        progress.step = (second, 40, 0)
        progress.update(1, examples=8)
    assert capsys.readouterr().err == ""
    clock.now += 1
    progress.step = (30, 40, 0)
    progress.update(1, examples=8)
    line = capsys.readouterr().err.strip()
    assert line == "train: step 30/40 (75%), 8.0 examples/s, loss 0.6931, 30s elapsed, ETA 10s", line
    clock.now += 5  # the next line waits for the next 30 s
    progress.update(1, examples=8)
    assert capsys.readouterr().err == ""


def test_a_resumed_run_counts_its_speed_from_where_it_began():
    text = progress_text("train from step 50", 60, 100, "step", elapsed=20.0, new=10)
    assert text == "train from step 50: step 60/100 (60%), 20s elapsed, ETA 1m20s"
    assert progress_text("eval", 3, None, "batch", elapsed=3661.0) == "eval: batch 3, 1h01m elapsed"


def test_the_pace_is_configurable(monkeypatch):
    monkeypatch.delenv(PACE_ENV, raising=False)
    assert pace_seconds() == 30
    monkeypatch.setenv(PACE_ENV, "5")
    assert pace_seconds() == 5
    for bad in ("soon", "-1", "inf", "nan"):
        monkeypatch.setenv(PACE_ENV, bad)
        with pytest.raises(BertkitError, match=PACE_ENV):
            pace_seconds()


def test_a_bad_pace_fails_before_the_work_in_one_line(tmp_path, tiny_bert, run_cli, monkeypatch):
    from conftest import assert_user_error

    (tmp_path / "train.csv").write_text(CLS_CSV)
    monkeypatch.setenv(PACE_ENV, "soon")
    data, output = tmp_path / "train.csv", tmp_path / "m"
    result = run_cli("finetune", "cls", "--data", data, "--model", tiny_bert, "--output", output)
    assert_user_error(result, PACE_ENV)
    assert not (tmp_path / "m").exists()


def bertkit(args: list, folder: Path, name: str, pace: str = "0") -> tuple[str, str]:
    """Run the real command in a fresh process, stdout and stderr to files; (stdout, stderr)."""
    (folder / "busy").mkdir(exist_ok=True)
    (folder / "busy" / "sitecustomize.py").write_text(BUSY)
    env = {
        **os.environ,
        PACE_ENV: pace,
        "PYTHONPATH": os.pathsep.join([str(folder / "busy"), str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("OMP_NUM_THREADS", None)  # the default thread count: the busy notice's case
    out, err = folder / f"{name}.out", folder / f"{name}.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        code = subprocess.run(
            [sys.executable, "-m", "bertkit", *map(str, args)], stdout=stdout, stderr=stderr, env=env, timeout=600
        ).returncode
    assert code == 0, err.read_text()
    return out.read_text(), err.read_text()


def before(lines: list[str], wanted: str, first_step: int) -> int:
    found = [i for i, line in enumerate(lines) if line.startswith(wanted)]
    assert found, f"no {wanted!r} line in:\n" + "\n".join(lines)
    assert found[0] < first_step, f"{wanted!r} came after the first step:\n" + "\n".join(lines)
    return found[0]


def test_finetune_eval_and_predict_to_files_say_where_they_are_and_what_they_decided(tmp_path, tiny_bert):
    (tmp_path / "train.csv").write_text(IMBALANCED)
    (tmp_path / "in.txt").write_text("the film was good\nthe plot was bad\n")
    model = tmp_path / "model"
    out, err = bertkit(
        ["finetune", "cls", "--data", tmp_path / "train.csv", "--eval-data", tmp_path / "train.csv"]
        + ["--model", tiny_bert, "--output", model, "--epochs", "1", "--batch-size", "4", "--class-weights", "auto"],
        tmp_path,
        "finetune",
    )
    lines = err.splitlines()
    steps = [i for i, line in enumerate(lines) if line.startswith("train: step ")]
    assert steps, err  # a progress line while training, not only at the end
    assert " examples/s, loss " in lines[steps[-1]] and " elapsed" in lines[steps[-1]], err
    assert "/10 (" in lines[steps[0]], err  # step/total: 40 examples in batches of 4
    assert before(lines, "precision: ", steps[0]) >= 0
    assert before(lines, "train: training with class weights", steps[0]) >= 0
    if len(os.sched_getaffinity(0)) > 1:  # the busy notice needs more than one thread by default
        assert before(lines, "the machine is busy", steps[0]) >= 0
    assert any(line.startswith("train: evaluation at step 10 (epoch 1): accuracy ") for line in lines), err
    summary = out + err
    for said in ("precision: ", "the machine is busy", "train: training with class weights"):
        assert sum(line.startswith(said) for line in summary.splitlines()) <= 1, summary  # once, not again at the end

    out, err = bertkit(["eval", model, "--data", tmp_path / "train.csv", "--batch-size", "8"], tmp_path, "eval")
    lines = err.splitlines()
    batches = [i for i, line in enumerate(lines) if line.startswith("eval: batch ")]
    assert batches and lines[batches[-1]].startswith("eval: batch 5/5 (100%), "), err
    assert before(lines, "precision: ", batches[0]) >= 0
    assert "accuracy" in out

    out, err = bertkit(["predict", model, "--input", tmp_path / "in.txt"], tmp_path, "predict")
    assert [json.loads(line)["label"] in ("pos", "neg") for line in out.splitlines()] == [True, True]
    lines = err.splitlines()
    progress = [i for i, line in enumerate(lines) if line.startswith("predict: ")]
    assert progress and before(lines, "precision: ", progress[0]) >= 0, err


def test_eval_on_part_of_the_data_names_the_part_and_results_json_holds_numbers(tmp_path, tiny_bert, run_cli):
    (tmp_path / "train.csv").write_text(CLS_CSV)
    model = tmp_path / "model"
    code, _, err = run_cli(
        "finetune", "cls", "--data", tmp_path / "train.csv", "--eval-data", tmp_path / "train.csv",
        "--model", tiny_bert, "--output", model, "--epochs", "1", "--threads", "1",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = run_cli("eval", model, "--data", tmp_path / "train.csv", "--max-eval-samples", "6")
    assert code == 0, err
    assert (model / "eval-train-first6.json").is_file() and not (model / "eval-train.json").exists(), out
    assert json.loads((model / "eval-train-first6.json").read_text())["examples"] == 6
    results = json.loads((model / "results.json").read_text())
    assert results["eval_train_first6_samples"] == 6
    text = {key: value for key, value in results.items() if not isinstance(value, (int, float))}
    assert not text, text  # the positive label, a string, no longer among the numbers


HEAVY = ("torch", "transformers", "accelerate", "numpy", "tqdm", "matplotlib", "pandas", "datasets")


def test_help_and_the_progress_line_load_nothing_heavy():
    """`bertkit --help` was 766 ms under load: it imports none of the heavy libraries (what is left is
    typer and rich); the progress line (bertkit.engine.progress), which a stream's progress uses too,
    neither."""
    code = (
        "import sys\n"
        "import bertkit.engine.progress\n"
        "sys.argv = ['bertkit', '--help']\n"
        "from bertkit.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('heavy:', ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "Usage" in done.stdout and done.stdout.strip().endswith("heavy:"), done.stdout[-500:]
