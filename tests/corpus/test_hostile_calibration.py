"""Calibration's bad input (finetune --calibrate, bertkit calibrate, predict/select --coverage):
a coverage outside (0, 1), a calibration file without gold labels or of another label set, a task
or label kind whose probabilities one temperature does not scale, a run mode calibration does not
take part in, --coverage on a model with nothing to compute its sets from. Same contract as the
other hostile corpora (tests/hostile.py's run_case): ONE line `error: ... (hint: ...)`, exit 2,
no traceback, nothing written or removed."""

from __future__ import annotations

import pytest
from hostile import CLS_CSV, QA_JSONL, Case, Context, run_case

UNLABELLED = "text\nthe film was good\nthe film was bad\n"
OTHER_LABELS = "text,label\nthe film was good,yes\nthe film was bad,no\n"
REGRESSION = "text,label\n" + "".join(f"the film was good,{v}\n" for v in (0.5, 1.5, 2.25, 3.75) * 3)
TEXTS = "the film was good\nthe film was bad\n"


def cls(c: Context, *extra) -> list:
    return c.finetune("cls", ("t.csv", CLS_CSV), "--eval-data", c.file("dev.csv", CLS_CSV), *extra)


def predict(c: Context, model: str, *extra) -> list:
    return ["predict", c.trained(model), "--input", c.file("in.txt", TEXTS), "--output", c.tmp / "p.jsonl", *extra]


def calibrate(c: Context, text: str) -> list:
    return ["calibrate", c.trained("cls"), "--data", c.file("cal.csv", text)]


CASES = [
    # --- --coverage outside (0, 1) ------------------------------------------------------------------------
    *(
        Case(f"coverage-{value}", lambda c, v=value: predict(c, "cls", "--coverage", v), ("--coverage must be",))
        for value in ("0", "1", "1.5", "-0.1", "nan")
    ),
    Case(
        "select-coverage-above-one",
        lambda c: [
            "select",
            c.trained("cls"),
            "--input",
            c.file("pool.txt", TEXTS),
            "--n",
            1,
            "--strategy",
            "prediction-set",
            "--coverage",
            2,
            "--output",
            c.tmp / "s.json",
        ],
        ("--coverage must be strictly between 0 and 1",),
    ),
    Case(
        "select-prediction-set-without-coverage",
        lambda c: [
            "select",
            c.trained("cls"),
            "--input",
            c.file("pool.txt", TEXTS),
            "--n",
            1,
            "--strategy",
            "prediction-set",
            "--output",
            c.tmp / "s.json",
        ],
        ("--strategy prediction-set", "--coverage"),
    ),
    Case(
        "calibration-data-without-coverage",
        lambda c: predict(c, "cls", "--calibration-data", c.file("cal.csv", CLS_CSV)),
        ("--calibration-data applies only with --coverage",),
    ),
    Case(
        "finetune-calibration-data-without-calibrate",
        lambda c: cls(c, "--calibration-data", c.file("cal.csv", CLS_CSV)),
        ("--calibration-data applies only with --calibrate",),
    ),
    # --- the model has nothing to compute its sets from -----------------------------------------------------
    Case(
        "coverage-on-an-uncalibrated-model-without-a-file",
        lambda c: predict(c, "cls", "--coverage", 0.9),
        ("--coverage needs conformal scores", "--calibration-data"),
    ),
    # --- a calibration file without gold labels, or of another label set ----------------------------------
    Case("calibrate-file-without-labels", lambda c: calibrate(c, UNLABELLED), ("--data",)),
    Case("calibrate-file-of-other-labels", lambda c: calibrate(c, OTHER_LABELS), ("never seen in training",)),
    Case(
        "calibrate-file-missing",
        lambda c: ["calibrate", c.trained("cls"), "--data", c.tmp / "nowhere.csv"],
        ("--data", "file not found"),
    ),
    Case(
        "coverage-file-without-labels",
        lambda c: predict(c, "cls", "--coverage", 0.9, "--calibration-data", c.file("cal.csv", UNLABELLED)),
        ("--calibration-data",),
    ),
    Case(
        "coverage-file-of-other-labels",
        lambda c: predict(c, "cls", "--coverage", 0.9, "--calibration-data", c.file("cal.csv", OTHER_LABELS)),
        ("never seen in training",),
        ("--label-map",),
    ),
    Case(
        "finetune-calibration-file-of-other-labels",
        lambda c: cls(c, "--calibrate", "--calibration-data", c.file("cal.csv", OTHER_LABELS)),
        ("--calibration-data", "never seen in training"),
    ),
    # --- tasks and label kinds one temperature does not scale ----------------------------------------------
    Case(
        "finetune-qa-calibrate",
        lambda c: c.finetune("qa", ("t.jsonl", QA_JSONL), "--calibrate"),
        ("--calibrate does not apply to qa",),
    ),
    Case(
        "finetune-regression-calibrate",
        lambda c: c.finetune("cls", ("t.csv", REGRESSION), "--problem-type", "regression", "--calibrate"),
        ("--calibrate does not compose with --problem-type regression",),
    ),
    Case(
        "finetune-regression-seen-in-the-data-calibrate",
        lambda c: c.finetune("cls", ("t.csv", REGRESSION), "--eval-data", c.file("dev.csv", REGRESSION), "--calibrate"),
        ("regression",),
    ),
    Case(
        "calibrate-qa-model",
        lambda c: ["calibrate", c.trained("qa"), "--data", c.file("q.jsonl", QA_JSONL)],
        ("bertkit calibrate does not apply to a qa model",),
    ),
    Case("coverage-on-a-qa-model", lambda c: predict(c, "qa", "--coverage", 0.9), ("--coverage does not apply",)),
    Case("coverage-on-a-ner-model", lambda c: predict(c, "ner", "--coverage", 0.9), ("--coverage does not apply",)),
    # --- run modes and methods it does not take part in -------------------------------------------------------
    Case(
        "calibrate-with-folds",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--calibrate", "--folds", 2),
        ("--calibrate does not compose with --folds",),
    ),
    Case(
        "calibrate-with-setfit",
        lambda c: cls(c, "--calibrate", "--recipe", "setfit"),
        ("--calibrate does not compose with --recipe setfit",),
    ),
    Case(
        "calibrate-without-held-out-rows",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--calibrate"),
        ("--calibrate needs held-out labelled rows", "--calibration-data"),
    ),
    Case(
        "coverage-with-ray",
        lambda c: predict(c, "cls", "--coverage", 0.9, "--ray"),
        ("--coverage does not compose with --ray",),
    ),
]


def test_the_corpus_covers_every_flag():
    assert len({case.id for case in CASES}) == len(CASES) >= 20


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_calibration_input_fails_in_one_line_and_changes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)
