"""The fresh-clone path: the Makefile's demo and the README's commands work in a checkout that has
no runs/ directory, CI runs what the README says, and eval finds the data training recorded."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, assert_user_error

WORDS = {"1": ["good", "great", "fine"], "0": ["bad", "awful", "poor"]}


def write_sst2(root: Path, train: int = 24, dev: int = 8) -> Path:
    """A miniature <data dir>/sst2 in the GLUE layout (a trailing space before the tab, as GLUE has)."""
    folder = root / "sst2"
    folder.mkdir(parents=True)
    for split, n in (("train", train), ("dev", dev)):
        rows = [f"the movie was {WORDS[str(i % 2)][i % 3]} \t{i % 2}" for i in range(n)]
        (folder / f"{split}.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n")
    (folder / "test.tsv").write_text("index\tsentence\n0\tthe plot was good\n1\tit was bad\n")
    return root


def make_recipe(target: str, **variables: str) -> list[list[str]]:
    """The commands `make TARGET` would run, without running them or installing anything."""
    venv = "/nonexistent-venv"
    settings = [f"{k}={v}" for k, v in {"VENV": venv, "BERTKIT": "bertkit", **variables}.items()]
    result = subprocess.run(
        ["make", "-n", "-s", "-C", str(REPO), target, "-o", f"{venv}/.installed-core", "-o", f"{venv}/.installed-all"]
        + settings,
        capture_output=True,
        text=True,
        check=True,
    )
    text = result.stdout.replace("\\\n", " ")
    return [shlex.split(line) for line in text.splitlines() if line.strip()]


@pytest.fixture
def clone(tmp_path, monkeypatch):
    """A checkout as git would produce it: tracked files only (examples/ is what the demo reads)."""
    work = tmp_path / "bertkit"
    shutil.copytree(REPO / "examples", work / "examples")
    shutil.copy(REPO / "Makefile", work / "Makefile")
    monkeypatch.chdir(work)
    monkeypatch.setenv("BERTKIT_DATA_DIR", str(write_sst2(tmp_path / "data")))
    return work


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_runs_in_a_fresh_clone(clone, tiny_bert, run_cli):
    recipe = make_recipe("demo", DEMO_ROWS="16")
    commands = [c for c in recipe if c[0] == "bertkit"]  # the echo lines and the accuracy check aside
    assert [c[:2] for c in commands] == [["bertkit", "finetune"], ["bertkit", "eval"], ["bertkit", "predict"]]
    assert any("demo-check: accuracy" in " ".join(c) for c in recipe)  # the demo checks what it learned
    assert "--max-train-samples" in commands[0] and commands[0][commands[0].index("--max-train-samples") + 1] == "16"
    assert not (clone / "runs").exists()
    outputs = []
    for command in commands:
        args = [str(tiny_bert) if a == "minilm" else a for a in command[1:]]  # the tiny BERT stands in for MiniLM
        code, stdout, stderr = run_cli(*args)
        assert code == 0, (command, stderr)
        outputs.append(stdout)
    model = clone / "runs" / "demo-sst2"
    assert json.loads((model / "bertkit.json").read_text())["data"]["train_examples"] == 16
    assert json.loads((model / "eval-sst2-dev.json").read_text())["examples"] == 8
    sentences = (clone / "examples" / "sentences.txt").read_text().strip().split("\n")
    rows = [json.loads(line) for line in outputs[2].strip().split("\n")]
    assert [r["text"] for r in rows] == sentences and {r["label"] for r in rows} <= {"negative", "positive"}

    # The demo again (make demo twice): --overwrite replaces the model bertkit wrote.
    code, _, stderr = run_cli(*[str(tiny_bert) if a == "minilm" else a for a in commands[0][1:]])
    assert code == 0, stderr


def test_readme_commands_without_output_work_in_a_fresh_clone(clone, tiny_bert, run_cli):
    (clone / "reviews.txt").write_text("a good film\nan awful plot\n")
    code, stdout, stderr = run_cli("finetune", "cls", "--data", "sst2", "--model", tiny_bert, "--epochs", 1)
    assert code == 0, stderr
    assert (clone / "runs" / "cls-sst2" / "bertkit.json").is_file()
    code, stdout, stderr = run_cli("eval", "runs/cls-sst2")
    assert code == 0, stderr
    assert "8 examples" in stdout
    code, stdout, stderr = run_cli("predict", "runs/cls-sst2", "--input", "reviews.txt")
    assert code == 0, stderr
    assert len(stdout.strip().split("\n")) == 2
    # GLUE's test split has no labels: eval says so instead of asking for a label column.
    assert_user_error(
        run_cli("eval", "runs/cls-sst2", "--split", "test"), "split 'test' has no labels", "bertkit predict"
    )


def test_eval_finds_the_eval_file_recorded_at_training(tmp_path, tiny_bert, run_cli, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    lines = ["text,label"] + [
        f"the movie was {WORDS[str(i % 2)][i % 3]},{'pos' if i % 2 else 'neg'}" for i in range(24)
    ]
    (project / "train.csv").write_text("\n".join(lines) + "\n")
    (project / "dev.csv").write_text("\n".join(lines[:11]) + "\n")
    monkeypatch.chdir(project)  # relative paths at training time ...
    code, _, stderr = run_cli(
        "finetune",
        "cls",
        "--data",
        "train.csv",
        "--eval-data",
        "dev.csv",
        "--model",
        tiny_bert,
        "--output",
        tmp_path / "model",
        "--epochs",
        1,
    )
    assert code == 0, stderr
    code, _, stderr = run_cli(
        "finetune", "cls", "--data", "train.csv", "--model", tiny_bert, "--output", tmp_path / "no-eval", "--epochs", 1
    )
    assert code == 0, stderr

    monkeypatch.chdir(tmp_path)  # ... and eval from somewhere else
    code, stdout, stderr = run_cli("eval", "model")
    assert code == 0, stderr
    assert "10 examples" in stdout
    report = json.loads((tmp_path / "model" / "eval-dev.json").read_text())
    assert report["examples"] == 10 and report["data"] == str(project / "dev.csv")
    assert_user_error(run_cli("eval", "model", "--split", "test"), "--split test applies only to known datasets")
    assert_user_error(run_cli("eval", "no-eval"), "without evaluation data", "--data FILE")
    (project / "dev.csv").unlink()
    assert_user_error(run_cli("eval", "model"), "recorded at training time is gone", "--data FILE")


def test_version_matches_the_package(run_cli):
    declared = re.search(r'^version = "(.+)"$', (REPO / "pyproject.toml").read_text(), re.M).group(1)
    assert run_cli("--version") == (0, f"bertkit {declared}\n", "")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_ci_runs_the_readme_commands_in_a_clean_clone(tmp_path):
    """.ci/run, with `make` replaced by a recorder: it must clone, then run each Quickstart command."""
    readme = (REPO / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("```")[1]
    readme_targets = re.findall(r"^make (\S+)", quickstart, re.M)
    assert readme_targets == ["demo", "test", "test-min", "test-learning"]

    bin_dir, log = tmp_path / "bin", tmp_path / "make.log"
    bin_dir.mkdir()
    recorder = bin_dir / "make"
    recorder.write_text(f'#!/bin/sh\necho "$PWD|$*|$(ls -A | tr "\\n" " ")" >> {log}\n')
    recorder.chmod(0o755)
    (bin_dir / "apt-get").write_text("#!/bin/sh\nexit 1\n")  # the best-effort Chromium install stays offline
    (bin_dir / "apt-get").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run([str(REPO / ".ci" / "run")], env=env, check=True, capture_output=True)
    calls = [line.split("|") for line in log.read_text().strip().split("\n")]
    assert [args.split()[0] for _, args, _ in calls] == ["test", "test-min", "test-learning", "demo"]
    assert "DEMO_ROWS=" in calls[-1][1]
    for cwd, _, listing in calls:
        assert Path(cwd) != REPO and not Path(cwd).exists()  # a temporary clone, removed afterwards
        assert "Makefile" in listing.split() and not {".venv", ".venv-min", "runs"} & set(listing.split())


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_test_and_make_test_learning_split_the_suite_between_them():
    """`make test` leaves out exactly the tests `make test-learning` runs (CI runs both), each on
    pytest-xdist workers with one torch thread."""

    def pytest_args(target: str) -> list[str]:
        (command,) = [c for c in make_recipe(target) if "pytest" in c]
        assert command[0] == "OMP_NUM_THREADS=1"
        options = command[command.index("pytest") + 1 :]
        assert "-n" in options
        return options

    quick, learning = pytest_args("test"), pytest_args("test-learning")
    assert quick[quick.index("-m") + 1] == "not learning"
    assert learning[learning.index("-m") + 1] == "learning"
