"""User mistakes end in one line on stderr, exit code 2, no traceback and no output directory."""

from __future__ import annotations

import pytest
from conftest import assert_user_error

from bertkit.options import RunOptions

GOOD_CSV = "text,label\n" + "".join(
    f"the film was {w},{lab}\n" for w, lab in [("good", "pos"), ("bad", "neg"), ("great", "pos"), ("awful", "neg")] * 4
)


@pytest.fixture
def good_csv(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text(GOOD_CSV)
    return path


def finetune(run_cli, data, out, model, *extra):
    return run_cli("finetune", "cls", "--data", data, "--model", model, "--output", out, "--epochs", 1, *extra)


@pytest.mark.parametrize(
    "content, fragments",
    [
        (None, ("file not found",)),
        ("", ("file is empty",)),
        ("text,label\n", ("no data rows",)),
        ("sentence,review,label\nthe film,good one,pos\nbad,worse,neg\n", ("ambiguous text column", "--text-column")),
        ("body,label\nthe film,pos\nbad,neg\n", ("missing text column", "found columns: body, label")),
        ("text,verdict\nthe film,pos\nbad,neg\n", ("missing label column", "--label-column")),
        ("text,label\nthe film,pos\n  ,neg\nok,pos\n,neg\n", ("2 row(s) with empty text (rows 2, 4)",)),
        # nothing a tokenizer keeps: a zero-width space, a soft hyphen with a NUL, a control character
        (
            "text,label\n\u200b,pos\nfine,neg\n\u00ad\u0000,pos\n\u0007,neg\n",
            ("3 row(s) with empty text (rows 1, 3, 4)",),
        ),
        ("text,label\na,b,c\n", ("3 fields where the header has 2",)),
    ],
)
def test_bad_training_files(tmp_path, tiny_bert, run_cli, content, fragments):
    data = tmp_path / "train.csv"
    if content is not None:
        data.write_text(content)
    out = tmp_path / "out"
    assert_user_error(finetune(run_cli, data, out, tiny_bert), *fragments)
    assert not out.exists() and not list(tmp_path.glob(".out*"))


def test_unreadable_encoding(tmp_path, tiny_bert, run_cli):
    data = tmp_path / "latin.csv"
    data.write_bytes("text,label\ncaf\xe9 cr\xe8me,pos\n".encode("latin-1"))
    assert_user_error(finetune(run_cli, data, tmp_path / "out", tiny_bert), "not UTF-8", "iconv")


def test_unknown_dataset_and_bad_model(tmp_path, tiny_bert, good_csv, run_cli):
    assert_user_error(finetune(run_cli, "sst3", tmp_path / "o", tiny_bert), "not a known dataset", "sst2")
    assert_user_error(finetune(run_cli, good_csv, tmp_path / "o", tmp_path / "nowhere"), "no such directory")
    assert_user_error(
        finetune(run_cli, good_csv, tmp_path / "o", "no-such-org/no-such-model"), "could be loaded", "minilm"
    )
    assert_user_error(run_cli("finetune", "pair", "--data", "sst2", "--output", tmp_path / "o"), "'cls' task")
    assert not (tmp_path / "o").exists()


def test_eval_label_never_seen_in_training(tmp_path, tiny_bert, good_csv, run_cli):
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\nthe film,pos\nmeh,neutral\nugh,angry\n")
    out = tmp_path / "out"
    assert_user_error(
        finetune(run_cli, good_csv, out, tiny_bert, "--eval-data", dev), "never seen in training: angry, neutral"
    )
    assert not out.exists()


def test_existing_output_is_protected_and_eval_needs_a_model_dir(tmp_path, tiny_bert, good_csv, run_cli):
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    assert_user_error(finetune(run_cli, good_csv, out, tiny_bert), "not empty", "--overwrite")
    assert (out / "precious.txt").read_text() == "keep me"
    assert_user_error(run_cli("eval", out, "--data", good_csv), "not a bertkit model")
    assert_user_error(run_cli("predict", tmp_path / "missing", "--input", good_csv), "model directory not found")


def test_bad_hyperparameters_fail_before_work(tmp_path, tiny_bert, good_csv, run_cli):
    assert_user_error(finetune(run_cli, good_csv, tmp_path / "o", tiny_bert, "--lr", "-1"), "--lr")
    assert_user_error(finetune(run_cli, good_csv, tmp_path / "o", tiny_bert, "--precision", "fp16"), "GPU")


def test_debug_env_shows_the_traceback(tmp_path, tiny_bert, run_cli, monkeypatch):
    from bertkit.errors import BertkitError

    monkeypatch.setenv("BERTKIT_DEBUG", "1")
    with pytest.raises(BertkitError):
        import sys

        from bertkit import cli

        monkeypatch.setattr(
            sys,
            "argv",
            [
                "bertkit",
                "finetune",
                "cls",
                "--data",
                str(tmp_path / "x.csv"),
                "--model",
                str(tiny_bert),
                "--output",
                str(tmp_path / "o"),
            ],
        )
        cli.main()


def test_interrupted_training_leaves_no_output(tmp_path, tiny_bert, good_csv, monkeypatch):
    """A failure after training started (here: in saving) must not leave a partial directory."""
    from bertkit import api

    def broken_save(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr("bertkit.api.finetuning.save_model_dir", broken_save)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError):
        api.finetune("cls", RunOptions(data=str(good_csv), model=str(tiny_bert), output=str(out)))
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["train.csv"]
