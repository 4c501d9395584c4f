"""Output locations: parents are created, the user's own directories are never replaced, bad
places fail before any work, and what a killed save leaves behind is cleaned on the next run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, assert_user_error

ROWS = [("the film was good", "pos"), ("the film was bad", "neg"), ("a great movie", "pos"), ("awful plot", "neg")]
TRAIN_CSV = "text,label\n" + "".join(f"{t},{lab}\n" for t, lab in ROWS * 4)


@pytest.fixture
def train_csv(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text(TRAIN_CSV)
    return path


def finetune(run_cli, data, model, *extra):
    return run_cli("finetune", "cls", "--data", data, "--model", model, "--epochs", 1, "--batch-size", 8, *extra)


def tree(root: Path) -> dict:
    """Every file under root with its bytes: a before/after picture of what a command wrote."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_missing_parents_are_created_and_the_default_output_works(tmp_path, tiny_bert, train_csv, run_cli, monkeypatch):
    out = tmp_path / "runs" / "deep" / "model"
    code, stdout, stderr = finetune(run_cli, train_csv, tiny_bert, "--output", out)
    assert code == 0, stderr
    assert (out / "bertkit.json").is_file() and f"saved to {out}" in stdout
    assert sorted(p.name for p in out.parent.iterdir()) == ["model"]  # no staging sibling left

    # No --output: runs/<task>-<data stem> under the working directory, which has no runs/ yet.
    work = tmp_path / "fresh"
    work.mkdir()
    monkeypatch.chdir(work)
    code, _, stderr = finetune(run_cli, train_csv, tiny_bert)
    assert code == 0, stderr
    assert (work / "runs" / "cls-train" / "bertkit.json").is_file()


def test_output_under_a_file_or_being_a_file_is_refused_before_reading_data(tmp_path, tiny_bert, run_cli):
    (tmp_path / "notes.txt").write_text("mine")
    before = tree(tmp_path)
    missing = tmp_path / "no-such.csv"  # the data is never looked at: the output check comes first
    assert_user_error(
        finetune(run_cli, missing, tiny_bert, "--output", tmp_path / "notes.txt" / "a" / "model"),
        "is under a file",
        "notes.txt",
    )
    assert_user_error(finetune(run_cli, missing, tiny_bert, "--output", tmp_path / "notes.txt"), "is a file")
    assert tree(tmp_path) == before


def test_output_that_contains_the_working_directory_is_refused(tmp_path, tiny_bert, train_csv, run_cli, monkeypatch):
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    before = tree(tmp_path)
    assert_user_error(
        finetune(run_cli, train_csv, tiny_bert, "--output", tmp_path, "--overwrite"),
        "current directory or one of its parents",
    )
    assert tree(tmp_path) == before


def test_unwritable_place_fails_before_training(tmp_path, tiny_bert, train_csv, run_cli, monkeypatch):
    import bertkit.model_dir.files as checkpoint

    # The probe really creates a directory; refuse it the way a read-only mount would (root ignores chmod).
    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(checkpoint.tempfile, "mkdtemp", read_only)
    monkeypatch.setattr("bertkit.engine.core.Engine.fit", lambda *a, **k: pytest.fail("training started"))
    assert_user_error(
        finetune(run_cli, train_csv, tiny_bert, "--output", tmp_path / "new" / "model"),
        f"cannot write in {tmp_path} (Permission denied)",
        "writable location",
    )
    assert not (tmp_path / "new").exists()


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_directory_fails_before_training(tmp_path, tiny_bert, train_csv, run_cli):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        assert_user_error(finetune(run_cli, train_csv, tiny_bert, "--output", locked / "model"), "cannot write in")
    finally:
        locked.chmod(0o755)


def test_overwrite_never_replaces_a_directory_of_user_files(tmp_path, tiny_bert, run_cli):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.csv").write_text(TRAIN_CSV)
    (project / "notes.md").write_text("my notes")
    before = tree(tmp_path)
    assert_user_error(
        finetune(run_cli, project / "train.csv", tiny_bert, "--output", project, "--overwrite"),
        "holds files bertkit did not write (notes.md, train.csv",
        "new directory",
    )
    assert_user_error(
        finetune(run_cli, project / "train.csv", tiny_bert, "--output", project), "not empty", "--overwrite"
    )
    assert tree(tmp_path) == before


def test_overwrite_replaces_a_bertkit_directory_and_an_empty_one_is_used_as_is(tmp_path, tiny_bert, train_csv, run_cli):
    out = tmp_path / "model"
    out.mkdir()  # empty: no --overwrite needed
    code, _, stderr = finetune(run_cli, train_csv, tiny_bert, "--output", out, "--seed", 1)
    assert code == 0, stderr
    (out / "eval-dev.json").write_text("{}")  # what `bertkit eval` leaves in a model directory
    code, _, stderr = finetune(run_cli, train_csv, tiny_bert, "--output", out, "--seed", 2, "--overwrite")
    assert code == 0, stderr
    assert json.loads((out / "bertkit.json").read_text())["config"]["seed"] == 2
    assert not (out / "eval-dev.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "train.csv"]

    # A bertkit directory that holds the training data itself is not replaced either (nor one holding
    # any file the user put there, or a card they edited).
    inside = out / "train.csv"
    inside.write_text(TRAIN_CSV)
    before = tree(tmp_path)
    assert_user_error(
        finetune(run_cli, inside, tiny_bert, "--output", out, "--overwrite"),
        "holds files bertkit did not write (train.csv)",
        "move them out",
    )
    assert tree(tmp_path) == before
    inside.unlink()
    (out / "notes.txt").write_text("my notes")
    card = out / "README.md"
    card.write_text(card.read_text().replace("#", "## my edit\n#", 1))
    before = tree(tmp_path)
    assert_user_error(
        finetune(run_cli, train_csv, tiny_bert, "--output", out, "--overwrite"),
        "holds files bertkit did not write (README.md (edited), notes.txt)",
        "move them out",
    )
    assert tree(tmp_path) == before
    (out / "notes.txt").unlink()
    card.unlink()  # without the user's files, --overwrite replaces the model directory
    code, _, stderr = finetune(run_cli, train_csv, tiny_bert, "--output", out, "--seed", 3, "--overwrite")
    assert code == 0, stderr


def test_stale_staging_siblings_are_removed_and_live_ones_kept(tmp_path):
    from bertkit.model_dir import check_output_dir

    out = tmp_path / "model"
    dead = tmp_path / ".model.partial-999999999-abc"  # above any pid_max: that process cannot exist
    legacy = tmp_path / ".model.partial-x1y2z3"  # the naming before pids were recorded
    live = tmp_path / f".model.partial-{os.getppid()}-abc"  # pytest's parent is alive
    other = tmp_path / ".other.partial-999999999-abc"  # another output's: not ours to judge
    for directory in (dead, legacy, live, other):
        directory.mkdir()
        (directory / "config.json").write_text("{}")
    check_output_dir(out, overwrite=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])


def test_old_copy_is_removed_or_put_back(tmp_path):
    from bertkit.errors import BertkitError
    from bertkit.model_dir import check_output_dir

    out, old = tmp_path / "model", tmp_path / ".model.old"
    for directory in (out, old):
        directory.mkdir()
        (directory / "bertkit.json").write_text(json.dumps({"which": directory.name}))
    check_output_dir(out, overwrite=True)  # killed after the new model was in place: the old copy is garbage
    assert not old.exists() and json.loads((out / "bertkit.json").read_text()) == {"which": "model"}

    # Killed between the two renames: the old model is moved aside and the new one never arrived.
    out.rename(old)
    with pytest.raises(BertkitError, match="exists and is not empty"):
        check_output_dir(out, overwrite=False)
    assert not old.exists() and json.loads((out / "bertkit.json").read_text()) == {"which": "model"}


def test_a_killed_save_is_cleaned_on_the_next_run(tmp_path):
    """SIGKILL runs no cleanup code: the next run for that output must remove the debris."""
    from bertkit.model_dir import check_output_dir

    out = tmp_path / "model"
    script = (
        "import os, sys; from pathlib import Path; from bertkit.model_dir import staged_output\n"
        "with staged_output(Path(sys.argv[1])) as staging:\n"
        "    (staging / 'config.json').write_text('{}')\n"
        "    os.kill(os.getpid(), 9)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", script, str(out)], env=env, capture_output=True)
    assert result.returncode == -9, result.stderr
    [partial] = list(tmp_path.iterdir())
    assert partial.name.startswith(".model.partial-") and not out.exists()
    check_output_dir(out, overwrite=False)
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def fake_model(tmp_path):
    """A directory with only bertkit.json: enough for every check that must run before the model loads."""
    model = tmp_path / "model"
    model.mkdir()
    meta = {
        "task": {"task": "cls", "max_length": 32, "options": {}, "labels": ["neg", "pos"]},
        "data": {"name": None, "eval_file": None},
    }
    (model / "bertkit.json").write_text(json.dumps(meta))
    (tmp_path / "dev.csv").write_text(TRAIN_CSV)
    (tmp_path / "in.txt").write_text("the film was good\n")
    return model


@pytest.mark.parametrize("command", ["eval", "predict"])
def test_eval_and_predict_outputs_are_checked_before_inference(tmp_path, fake_model, run_cli, monkeypatch, command):
    # evaluation first: importing it binds whatever bertkit.inference holds at that moment
    for place in ("bertkit.api.evaluation.load_for_inference", "bertkit.inference.load_for_inference"):
        monkeypatch.setattr(place, lambda *a: pytest.fail("the model was loaded"))
    args = ["--data", tmp_path / "dev.csv"] if command == "eval" else ["--input", tmp_path / "in.txt"]
    (tmp_path / "a-file").write_text("x")
    before = tree(tmp_path)
    cases = [
        (tmp_path / "missing" / "out.json", ("does not exist", f"mkdir -p {tmp_path / 'missing'}")),
        (tmp_path, ("is a directory",)),
        (tmp_path / "a-file" / "out.json", ("is under a file",)),
    ]
    for output, fragments in cases:
        assert_user_error(run_cli(command, fake_model, *args, "--output", output), *fragments)
    assert tree(tmp_path) == before


def test_eval_default_output_in_an_unwritable_model_directory_fails_first(tmp_path, fake_model, run_cli, monkeypatch):
    import bertkit.model_dir.files as checkpoint

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(checkpoint.tempfile, "mkdtemp", read_only)
    # evaluation first: importing it binds whatever bertkit.inference holds at that moment
    for place in ("bertkit.api.evaluation.load_for_inference", "bertkit.inference.load_for_inference"):
        monkeypatch.setattr(place, lambda *a: pytest.fail("the model was loaded"))
    assert_user_error(
        run_cli("eval", fake_model, "--data", tmp_path / "dev.csv"),
        f"the metrics file {fake_model / 'eval-dev.json'}: cannot write in {fake_model}",
    )


def test_a_failed_replace_keeps_the_old_output_and_removes_the_staging(tmp_path, monkeypatch):
    from bertkit.model_dir import staged_output

    output = tmp_path / "out"
    output.mkdir()
    (output / "bertkit.json").write_text("old")  # bertkit's: the one rule lets only that be replaced
    original = Path.rename

    def rename(self, target):  # the staging's rename into place fails (EBUSY, as on a mount point)
        if self.name.startswith(".out.partial-"):
            raise OSError(16, "Device or resource busy")
        return original(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    with pytest.raises(OSError):
        with staged_output(output) as staging:
            (staging / "new.txt").write_text("new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert [p.name for p in output.iterdir()] == ["bertkit.json"] and (output / "bertkit.json").read_text() == "old"


def test_a_diverged_run_stops_in_one_line_and_keeps_the_model_it_would_replace(tmp_path, tiny_bert, train_csv, run_cli):
    """A loss that turns NaN (here: an absurd learning rate) would have saved NaN weights over a good
    model with --overwrite; it stops at the next log or evaluation point instead."""
    out = tmp_path / "model"
    code, _, stderr = finetune(run_cli, train_csv, tiny_bert, "--output", out)
    assert code == 0, stderr
    before = tree(tmp_path)
    code, _, stderr = finetune(run_cli, train_csv, tiny_bert, "--output", out, "--overwrite", "--lr", "1e30")
    last = stderr.strip().splitlines()[-1]  # after the epoch's progress line
    assert code == 2 and "Traceback" not in stderr, stderr
    assert (
        last.startswith("error: training diverged: the mean training loss was nan by step ")
        and "(hint: lower --lr (it is 1e+30)" in last
    ), stderr
    assert tree(tmp_path) == before
    assert_user_error(
        finetune(run_cli, train_csv, tiny_bert, "--output", out, "--overwrite", "--lr", "inf"),
        "--lr must be a finite number, got inf",
    )


def test_a_second_run_on_an_output_being_written_is_refused_then_runs_once_the_first_is_gone(
    tmp_path, tiny_bert, train_csv, run_cli
):
    """Two runs on one --output: the second is refused before it reads anything, in one line that
    names the first run's process; once that process is gone its lock is stale and the run goes on
    (model_dir/writer_lock.py)."""
    out = tmp_path / "model"
    lock = tmp_path / ".model.bertkit-lock"
    first = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        os.symlink(str(first.pid), lock)
        before = tree(tmp_path)
        assert_user_error(
            finetune(run_cli, tmp_path / "no-such.csv", tiny_bert, "--output", out),
            f"being written by another bertkit run (process {first.pid})",
        )
        assert tree(tmp_path) == before
    finally:
        first.kill()
        first.wait()
    code, _, stderr = finetune(run_cli, train_csv, tiny_bert, "--output", out)
    assert code == 0, stderr
    assert (out / "bertkit.json").is_file() and not os.path.lexists(lock)


@pytest.mark.parametrize(("command", "name"), [("predict", "out.jsonl"), ("embed", "out.npy")])
def test_a_streamed_output_being_written_is_refused_and_its_work_directory_kept(
    command, name, trained, tiny_bert, tmp_path, run_cli
):
    """predict and embed to a file stage their chunks in `.OUT.bertkit-partial`: a second run on the same
    --output would discard the first one's parts while it writes them (or, with --resume, add its own to
    them). It is refused in one line, and the first run's work directory is left as it was."""
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"id": i, "text": "a good film"}) + "\n" for i in range(5)))
    work = tmp_path / f".{name}.bertkit-partial"
    work.mkdir()
    (work / "part-000000.jsonl").write_text("the first run's part\n")
    first = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        os.symlink(str(first.pid), tmp_path / f".{name}.bertkit-lock")
        before = tree(tmp_path)
        for extra in ([], ["--resume"]):
            model = trained("cls") if command == "predict" else tiny_bert
            code, _, stderr = run_cli(command, model, "--input", source, "--output", tmp_path / name, *extra)
            assert code == 2 and f"being written by another bertkit run (process {first.pid})" in stderr, stderr
            assert tree(tmp_path) == before
    finally:
        first.kill()
        first.wait()
