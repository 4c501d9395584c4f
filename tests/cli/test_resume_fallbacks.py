"""Resuming that succeeds when something is missing or unreadable: --resume passes over an unreadable
newest checkpoint (says so, and ends with the very bytes of a run resumed from the good one),
--resume with no checkpoint starts at step 0 and says so, and a model file without read
permission is called unreadable, not missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from checkpoint_corpus import SHARED, TEXTS, base_checkpoints, damaged, shared_root, train_command  # noqa: F401
from conftest import REPO, assert_user_error
from hostile import Context


# --- resuming that succeeds: said on the console, and exact ---------------------------------------------
@pytest.mark.parametrize(
    "name, how",
    [
        ("model.safetensors", "truncate"),
        ("optimizer.pt", "truncate"),
        ("rank-0.pt", "truncate"),
        ("history.jsonl", "garbage"),
        ("state.json", "json-edit:progress=[]"),
    ],
)
def test_unreadable_newest_checkpoint_is_passed_over_said_and_exact(
    name, how, tmp_path, tiny_bert, trained, run_cli, monkeypatch
):
    """A file of the newest checkpoint cut in half: --resume goes on from the one before, says so,
    and ends with the bytes of a run resumed from that checkpoint directly, and of the run that
    was never interrupted."""
    from safetensors.numpy import load_file

    c = Context(tmp_path, tiny_bert, trained, monkeypatch)
    root = damaged(c, name, how, steps=(8,))
    code, out, err = run_cli(*train_command(c, None, "--resume"))
    assert code == 0, err
    assert f"resumed from {root / 'step-6'}" in out
    assert f"checkpoint step-8 is unreadable ({name}: " in err  # said when passed over, before the work
    assert "resumed from step-6 instead" in err
    reference = tmp_path / "reference"
    reference.mkdir()
    shutil.copytree(base_checkpoints(c), reference / "out.checkpoints")
    code, _, err = run_cli(
        *train_command(
            Context(reference, tiny_bert, trained, monkeypatch),
            None,
            "--resume-from",
            reference / "out.checkpoints" / "step-6",
        )
    )
    assert code == 0, err
    ours, theirs = (
        load_file(str(tmp_path / "out" / "model.safetensors")),
        load_file(str(reference / "out" / "model.safetensors")),
    )
    uninterrupted = load_file(str(SHARED["root"] / "run" / "model.safetensors"))
    assert sorted(ours) == sorted(theirs) == sorted(uninterrupted)
    assert all(ours[k].tobytes() == theirs[k].tobytes() == uninterrupted[k].tobytes() for k in ours)


def test_resume_without_checkpoints_trains_from_step_zero_and_says_so(
    tmp_path, tiny_bert, trained, run_cli, monkeypatch
):
    c = Context(tmp_path, tiny_bert, trained, monkeypatch)
    code, out, err = run_cli(*train_command(c, None, "--resume"))
    assert code == 0, err
    assert "--resume: no checkpoint under" in err and "training started at step 0" in err


@pytest.mark.parametrize("name", ["model.safetensors", "bertkit.json"])
def test_unreadable_model_files_are_not_called_missing(name, tmp_path, trained):
    """As a user without read permission (a user namespace drops root's override), a model file is
    reported as unreadable, not as "No such file"."""
    model = tmp_path / "model"
    shutil.copytree(trained("cls"), model)
    (model / name).chmod(0)
    (tmp_path / "in.txt").write_text(TEXTS)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("BERTKIT_DEBUG", None)
    done = subprocess.run(
        ["unshare", "-U", sys.executable, "-m", "bertkit", "predict", str(model), "--input", str(tmp_path / "in.txt")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    if "unshare" in done.stderr and done.returncode != 2:
        pytest.skip(f"no user namespace here: {done.stderr.strip()[:200]}")
    if os.geteuid() != 0 and os.access(model / name, os.R_OK):
        pytest.skip("this user can read a mode-0 file")
    assert_user_error(
        (done.returncode, done.stdout, done.stderr), f"{name} cannot be read", "Permission denied", "chmod a+r"
    )
    assert "No such file" not in done.stderr
