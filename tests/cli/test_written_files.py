"""What commands leave on disk when they succeed or run out of room: created files follow the
umask, a full disk during or after the work ends in one error line with nothing half-written left,
and a read-only model directory is evaluated without being touched."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hostile import CLS_CSV, Context

TEXTS = "the film was good\nthe plot was bad\n"
CORPUS = "the film was good . the plot was bad .\n\nit was a great film .\njohn lives in paris .\n" * 4


def _modes(root: Path) -> set[tuple[str, int]]:
    return {("dir" if p.is_dir() else "file", p.stat().st_mode & 0o777) for p in [root, *root.rglob("*")]}


def test_written_files_follow_the_umask(tiny_bert, tmp_path, run_cli):
    """mkdtemp's 0700 and weights writers' 0600 would keep another user or a container out."""
    (tmp_path / "t.csv").write_text(CLS_CSV)
    (tmp_path / "in.txt").write_text(TEXTS)
    old = os.umask(0o002)
    try:
        runs = [
            ("probe", "cls", "--data", tmp_path / "t.csv", "--model", tiny_bert, "--output", tmp_path / "probe"),
            ("embed", tiny_bert, "--input", tmp_path / "in.txt", "--output", tmp_path / "v.npy"),
            (
                "finetune",
                "cls",
                "--data",
                tmp_path / "t.csv",
                "--model",
                tiny_bert,
                "--output",
                tmp_path / "m",
                "--epochs",
                "1",
                "--save-every",
                "1",
                "--batch-size",
                "8",
            ),
            ("eval", tmp_path / "m", "--data", tmp_path / "t.csv", "--output", tmp_path / "metrics.json"),
        ]
        for args in runs:
            code, _, err = run_cli(*args)
            assert code == 0, err
    finally:
        os.umask(old)
    for root in (tmp_path / "probe", tmp_path / "m", tmp_path / "m.checkpoints"):
        assert _modes(root) == {("dir", 0o775), ("file", 0o664)}, (root, _modes(root))
    assert (tmp_path / "v.npy").stat().st_mode & 0o777 == 0o664
    assert (tmp_path / "metrics.json").stat().st_mode & 0o777 == 0o664


def test_finetune_full_disk_says_so_once_and_leaves_nothing(tiny_bert, tmp_path, small_disk, run_cli):
    (tmp_path / "t.csv").write_text(CLS_CSV)
    disk = small_disk(3072)
    stats = os.statvfs(disk)
    (disk / "filler.bin").write_bytes(b"\0" * (stats.f_bavail * stats.f_frsize - 100 * 1024))
    code, _, err = run_cli(
        "finetune",
        "cls",
        "--data",
        tmp_path / "t.csv",
        "--model",
        tiny_bert,
        "--output",
        disk / "m",
        "--epochs",
        "1",
        "--save-every",
        "1",
        "--batch-size",
        "8",
    )
    assert code == 2 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: no space left on device while writing") and "(hint: " in last, err
    left = sorted(str(p.relative_to(disk)) for p in disk.rglob("*"))
    # no model, no staging directory, no .step-N.tmp: only the resumable state (here just the live history)
    assert not (disk / "m").exists() and not [name for name in left if "/." in name or name.startswith(".")], left


def test_eval_of_a_read_only_model_dir_writes_only_its_output(trained, tmp_path, run_cli, read_only):
    """A shared or mounted model is evaluated all the same; its report and card are left as they are."""
    from hostile import snapshot

    model = tmp_path / "model"
    shutil.copytree(trained("cls"), model)
    read_only(model)
    (tmp_path / "e.csv").write_text(CLS_CSV)
    before = snapshot(model)
    code, out, err = run_cli("eval", model, "--data", tmp_path / "e.csv", "--output", tmp_path / "m.json")
    assert code == 0, err
    assert "the model directory is read-only" in out + err and (tmp_path / "m.json").is_file()
    assert snapshot(model) == before


FULL_DISK_AFTER_PROGRESS = {  # these print their progress (stderr) before the write that fails
    "eval": lambda c, disk: ["eval", c.trained("cls"), "--data", c.file("e.csv", CLS_CSV), "--output", disk / "m.json"],
    "predict": lambda c, disk: [
        "predict",
        c.trained("cls"),
        "--input",
        c.file("in.txt", TEXTS * 200),
        "--output",
        disk / "p.jsonl",
    ],
    "pretrain": lambda c, disk: [
        "pretrain",
        "mlm",
        "--data",
        c.file("corpus.txt", CORPUS),
        "--model",
        c.tiny,
        "--output",
        disk / "m",
        "--epochs",
        "1",
    ],
}


@pytest.mark.parametrize("command", sorted(FULL_DISK_AFTER_PROGRESS))
def test_full_disk_after_the_work_ends_in_one_error_line_and_leaves_nothing(
    command, tmp_path, tiny_bert, trained, run_cli, monkeypatch, small_disk
):
    disk = small_disk(64)
    (disk / "filler.bin").write_bytes(b"\0" * (os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize))  # full
    code, _, err = run_cli(*FULL_DISK_AFTER_PROGRESS[command](Context(tmp_path, tiny_bert, trained, monkeypatch), disk))
    assert code == 2 and "Traceback" not in err, err
    assert [line for line in err.splitlines() if line.startswith("error: ")] == [err.strip().splitlines()[-1]]
    assert err.strip().splitlines()[-1].startswith("error: no space left on device while writing"), err
    assert sorted(p.name for p in disk.iterdir()) == ["filler.bin"]
