"""Writing to a full disk (a real tmpfs too small for the model) or a read-only file system ends
in one line and leaves nothing half-written; model directories follow the umask."""

from __future__ import annotations

import os

from test_multiprocess import write_sentiment


def _one_error_line(result, *fragments) -> None:
    code, _, stderr = result
    assert code == 2, stderr
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]  # training's progress lines come before it
    assert last.startswith("error: ") and "(hint: " in last, stderr
    for fragment in fragments:
        assert fragment in last, last


def test_finetune_on_a_full_disk_is_one_line_and_leaves_nothing(tiny_bert, tmp_path, small_disk, run_cli):
    write_sentiment(tmp_path / "train.csv", 32, seed=1)
    disk = small_disk(120)  # the tiny model's weights alone are 155 KB
    result = run_cli(
        "finetune",
        "cls",
        "--data",
        tmp_path / "train.csv",
        "--model",
        tiny_bert,
        "--output",
        disk / "model",
        "--epochs",
        "1",
    )
    _one_error_line(result, "no space left on device while writing", str(disk / "model"), "free some space")
    assert list(disk.iterdir()) == []


def test_a_checkpoint_that_does_not_fit_leaves_no_tmp(tiny_bert, tmp_path, small_disk, run_cli):
    write_sentiment(tmp_path / "train.csv", 32, seed=1)
    disk = small_disk(400)
    result = run_cli(
        "finetune",
        "cls",
        "--data",
        tmp_path / "train.csv",
        "--model",
        tiny_bert,
        "--output",
        disk / "model",
        "--epochs",
        "1",
        "--save-every",
        "1",
        "--batch-size",
        "8",
    )
    _one_error_line(result, "no space left on device while writing", "step-")
    # no half checkpoint, and no checkpoints directory holding only the live history: nothing to resume
    assert not (disk / "model").exists() and not (disk / "model.checkpoints").exists(), list(disk.iterdir())


def test_embed_on_a_full_disk_is_one_line_and_keeps_only_what_resumes(tiny_bert, tmp_path, small_disk, run_cli):
    """The first chunk is small (the first answer in seconds), so the disk fills after some rows are
    done: they are kept in the hidden work directory (hours of work are not thrown away because the
    disk filled), the line says how to go on, and no output file or temporary file is left."""
    (tmp_path / "in.txt").write_text("the film was good\n" * 2000)
    disk = small_disk(64)
    result = run_cli("embed", tiny_bert, "--input", tmp_path / "in.txt", "--output", disk / "vectors.npy")
    _one_error_line(result, "no space left on device")
    left = list(disk.iterdir())
    if left:  # rows were done before the disk filled
        assert [p.name for p in left] == [".vectors.npy.bertkit-partial"], left
        assert "rows done are kept in" in result[2] and "rerun with --resume" in result[2]
        assert not list(left[0].glob("*.tmp")) and not list(left[0].glob(".*.tmp"))


def test_embed_into_a_read_only_directory_fails_before_the_work(tiny_bert, tmp_path, read_only, run_cli):
    (tmp_path / "in.txt").write_text("the film was good\n")
    target = tmp_path / "ro"
    target.mkdir()
    read_only(target)
    code, _, stderr = run_cli("embed", tiny_bert, "--input", tmp_path / "in.txt", "--output", target / "v.npy")
    assert code == 2 and stderr.count("\n") == 1 and "cannot write in" in stderr, stderr


def test_model_directories_follow_the_umask(tiny_bert, tmp_path, run_cli):
    write_sentiment(tmp_path / "train.csv", 16, seed=1)
    old = os.umask(0o022)
    try:
        code, _, stderr = run_cli(
            "finetune",
            "cls",
            "--data",
            tmp_path / "train.csv",
            "--model",
            tiny_bert,
            "--output",
            tmp_path / "model",
            "--epochs",
            "1",
        )
    finally:
        os.umask(old)
    assert code == 0, stderr
    model = tmp_path / "model"
    assert model.stat().st_mode & 0o777 == 0o755
    assert (model / "model.safetensors").stat().st_mode & 0o777 == 0o644
    assert {p.stat().st_mode & 0o777 for p in model.rglob("*") if p.is_file()} == {0o644}
