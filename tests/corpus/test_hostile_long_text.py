"""--long-text, --head-tokens, --stride and --window-pooling (cls, pair) given values that cannot
work. Same contract as the other hostile corpora (tests/hostile.py's run_case): ONE line
`error: ... (hint: ...)`, exit 2, no traceback, nothing written or removed.

--window-pooling (and --stride, --head-tokens) without the strategy that reads it is refused, not
ignored: finetune hints at the --long-text that would read it, eval and predict (whose model was
trained otherwise) at dropping it. Limits that depend on the tokenizer's special tokens (a stride
below the window's room, a head within it) are checked before any feature is made."""

from __future__ import annotations

import pytest
from hostile import CLS_CSV, PAIR_TSV, Case, Context, run_case

from bertkit.options import RunOptions

TEXTS = "the film was good\nthe plot was bad\n"


def cls(c: Context, *extra) -> list:
    return c.finetune("cls", ("train.csv", CLS_CSV), *extra)


def pair(c: Context, *extra) -> list:
    return c.finetune("pair", ("train.tsv", PAIR_TSV), *extra)


@pytest.fixture(scope="module")
def windows_model(trained, tiny_bert):
    """A tiny cls model trained with --long-text windows (in the shared models' folder: watched)."""
    from bertkit import api
    from bertkit.config import TrainConfig

    path = trained.root / "cls-windows"
    if not path.exists():
        data = trained.root / "long-train.csv"
        data.write_text(CLS_CSV)
        config = TrainConfig(epochs=1, batch_size=8, max_length=32, task_options={"long_text": "windows"})
        api.finetune("cls", RunOptions(data=str(data), model=str(tiny_bert), output=str(path)), config=config)
    return path


class Models:
    windows = None


MODELS = Models()

CASES = [
    # --- finetune: the choice itself ---------------------------------------------------------------
    Case("long-text-unknown", lambda c: cls(c, "--long-text", "slide"), ("unknown --long-text 'slide'", "windows")),
    Case("long-text-upper-case", lambda c: cls(c, "--long-text", "Windows"), ("unknown --long-text 'Windows'",)),
    Case("long-text-empty", lambda c: cls(c, "--long-text", ""), ("unknown --long-text ''", "head-tail")),
    Case(
        "window-pooling-unknown",
        lambda c: cls(c, "--long-text", "windows", "--window-pooling", "sum"),
        ("unknown --window-pooling 'sum'", "mean, max"),
    ),
    # --- finetune: an option its strategy does not read ----------------------------------------------
    Case(
        "window-pooling-without-windows",
        lambda c: cls(c, "--window-pooling", "max"),
        ("--window-pooling applies to --long-text windows only", "by truncate", "add --long-text windows"),
    ),
    Case(
        "stride-with-head-tail",
        lambda c: cls(c, "--long-text", "head-tail", "--stride", "8"),
        ("--stride applies to --long-text windows only", "head-tail"),
    ),
    Case(
        "head-tokens-with-windows",
        lambda c: cls(c, "--long-text", "windows", "--head-tokens", "8"),
        ("--head-tokens applies to --long-text head-tail only",),
    ),
    Case(
        "head-tokens-without-long-text",
        lambda c: pair(c, "--head-tokens", "8"),
        ("--head-tokens applies to --long-text head-tail only", "truncate"),
    ),
    # --- finetune: sizes ------------------------------------------------------------------------------
    Case(
        "stride-negative",
        lambda c: cls(c, "--long-text", "windows", "--stride", "-1"),
        ("--stride -1 must be at least 0",),
    ),
    Case(
        "stride-beyond-max-length",
        lambda c: cls(c, "--long-text", "windows", "--stride", "500", "--max-length", "64"),
        ("--stride 500 must be at least 0 and below --max-length 64",),
    ),
    Case(
        "stride-equal-to-window-room",
        lambda c: cls(c, "--long-text", "windows", "--stride", "30", "--max-length", "32"),
        ("--stride 30 must be below the 30 text tokens a window of --max-length holds", "lower --stride"),
    ),
    Case(
        "stride-beyond-pair-second-text-room",
        lambda c: pair(c, "--long-text", "windows", "--stride", "15", "--max-length", "32"),
        ("--stride 15 must be below the 15 text tokens the second text of a pair has at least",),
    ),
    Case(
        "head-tokens-beyond-window-room",
        lambda c: cls(c, "--long-text", "head-tail", "--head-tokens", "31", "--max-length", "32"),
        ("--head-tokens 31 must be at most the 30 text tokens",),
    ),
    Case(
        "head-tokens-beyond-max-length",
        lambda c: cls(c, "--long-text", "head-tail", "--head-tokens", "128"),
        ("--head-tokens 128 must be at least 0 and below --max-length 128",),
    ),
    Case(
        "head-tokens-negative",
        lambda c: cls(c, "--long-text", "head-tail", "--head-tokens", "-5"),
        ("--head-tokens -5 must be at least 0",),
    ),
    Case("stride-not-a-number", lambda c: cls(c, "--long-text", "windows", "--stride", "half"), ("--stride",)),
    # --- eval and predict ------------------------------------------------------------------------------
    Case(
        "predict-window-pooling-on-a-truncating-model",
        lambda c: ["predict", c.trained("cls"), "--input", c.file("in.txt", TEXTS), "--window-pooling", "max"],
        ("--window-pooling applies to models trained with --long-text windows", "drop --window-pooling"),
        absent=("--long-text windows,", "add --long-text"),
    ),
    Case(
        "eval-window-pooling-on-a-truncating-model",
        lambda c: ["eval", c.trained("cls"), "--data", c.file("dev.csv", CLS_CSV), "--window-pooling", "mean"],
        ("--window-pooling applies to models trained with --long-text windows", "drop --window-pooling"),
    ),
    Case(
        "predict-window-pooling-unknown",
        lambda c: ["predict", MODELS.windows, "--input", c.file("in.txt", TEXTS), "--window-pooling", "median"],
        ("unknown --window-pooling 'median'",),
    ),
    Case(
        "predict-stride-is-the-models",
        lambda c: ["predict", MODELS.windows, "--input", c.file("in.txt", TEXTS), "--stride", "4"],
        ("--stride",),
    ),
    Case(
        "ner-has-no-long-text",
        lambda c: c.finetune("ner", ("train.txt", "john B-PER\n\n"), "--long-text", "windows"),
        ("--long-text",),
    ),
]


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 20 and len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_long_text_options_that_cannot_work_fail_in_one_line_and_change_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys, windows_model
):
    MODELS.windows = windows_model
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)
