"""What every command prints around its work: help that fits 80 columns, the precision and
threads it used (README: every command says them), and one number per epoch's training loss."""

from __future__ import annotations

import re

import pytest
from hostile import CLS_CSV

CORPUS = "the film was good . the plot was bad .\n\nit was a great film .\njohn lives in paris .\n" * 4
RUNTIME = re.compile(r"^precision: \S+ \(.+\), \d+ threads?$", re.MULTILINE)


def every_command_path() -> list[tuple[str, ...]]:
    """Every command and subcommand, groups included (finetune's tasks, pretrain mlm, inspect ...)."""
    import typer.main

    from bertkit.cli.app import app

    root = typer.main.get_command(app)
    paths = [()]

    def walk(group, prefix):
        for name in group.list_commands(None):
            command = group.get_command(None, name)
            if command is None or getattr(command, "hidden", False):
                continue
            paths.append((*prefix, name))
            if hasattr(command, "list_commands"):
                walk(command, (*prefix, name))

    walk(root, ())
    return paths


def test_every_help_fits_80_columns(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERMINAL_WIDTH", "80")
    paths = every_command_path()
    assert ("probe",) in paths and ("pretrain", "mlm") in paths and ("finetune", "cls") in paths
    cut = {}
    for path in paths:
        code, out, err = run_cli(*path, "--help")
        assert code == 0, (path, err)
        wide = [line for line in out.splitlines() if len(line) > 80]
        if "…" in out or wide:
            cut[" ".join(path) or "bertkit"] = [line for line in out.splitlines() if "…" in line or len(line) > 80]
    assert not cut, cut


@pytest.fixture
def files(tmp_path):
    (tmp_path / "train.csv").write_text(CLS_CSV)
    (tmp_path / "corpus.txt").write_text(CORPUS)
    (tmp_path / "in.txt").write_text("the film was good\nthe plot was bad\n")
    return tmp_path


def test_embed_probe_and_pretrain_print_precision_and_threads(files, tiny_bert, run_cli):
    code, _, err = run_cli("embed", tiny_bert, "--input", files / "in.txt", "--output", files / "v.npy")
    assert code == 0, err
    assert RUNTIME.search(err), err  # stderr: stdout may be the vectors (--output -)
    code, out, err = run_cli(
        "probe", "cls", "--data", files / "train.csv", "--model", tiny_bert, "--output", files / "probe"
    )
    assert code == 0, err
    assert RUNTIME.search(err), err  # said on stderr when the engine chose it, not again on stdout
    code, out, err = run_cli(
        "pretrain",
        "mlm",
        "--data",
        files / "corpus.txt",
        "--model",
        tiny_bert,
        "--output",
        files / "mlm",
        "--epochs",
        "1",
        "--threads",
        "1",
    )
    assert code == 0, err
    assert RUNTIME.search(err) and "1 thread" in err and not RUNTIME.search(out), (out, err)


def test_the_epoch_loss_is_one_number_on_stdout_and_stderr(files, tiny_bert, run_cli):
    """bf16 weights give a bf16 loss: the epoch line on stderr summed it in bf16 (0.7031 where the
    summary said 0.6920). Both are the mean over the epoch's batches, summed in fp32."""
    rows = CLS_CSV.splitlines()
    (files / "big.csv").write_text("\n".join([rows[0]] + rows[1:] * 8) + "\n")  # 128 rows: 32 batches of 4
    code, out, err = run_cli(
        "finetune",
        "cls",
        "--data",
        files / "big.csv",
        "--model",
        tiny_bert,
        "--output",
        files / "out",
        "--epochs",
        "2",
        "--batch-size",
        "4",
        "--precision",
        "bf16",
    )
    assert code == 0, err
    stderr_losses = re.findall(r"train: epoch (\d+): \d+ batches, loss ([\d.]+)", err)
    stdout_losses = re.findall(r"^epoch (\d+): train loss ([\d.]+)", out, re.MULTILINE)
    assert len(stderr_losses) == 2 and stderr_losses == stdout_losses, (err, out)
