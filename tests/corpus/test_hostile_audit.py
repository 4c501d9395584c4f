"""The hostile-input corpus of `bertkit audit` (the contract of tests/hostile.py's run_case: ONE line
`error: ... (hint: ...)`, exit 2, no traceback, nothing written or removed): data it cannot audit,
a model or run of another kind or other data, a second model's probabilities into an earlier audit,
cleanlab missing, options that do not go together."""

from __future__ import annotations

import json

import pytest
from hostile import CLS_CSV, Case, Context, run_case

from bertkit.options import RunOptions

ONE_CLASS = "text,label\n" + "".join(f"the film was {w},pos\n" for w in ("good", "great", "fine", "nice") * 4)
OTHER_LABELS = CLS_CSV.replace(",pos", ",yes").replace(",neg", ",no")
SCORES = "sentence1\tsentence2\tscore\n" + "".join(
    f"the film was {w}\tit was {w}\t{s}\n" for w, s in [("good", 4.5), ("bad", 0.5), ("fine", 2.25)] * 4
)


def audit(c: Context, *extra, data=None) -> list:
    return ["audit", "--data", data or c.file("t.csv", CLS_CSV), "--output", c.tmp / "audit", *extra]


def folds(c: Context, data=None, *extra) -> list:
    return audit(c, "--folds", 2, "--task", "cls", "--model", c.tiny, "--epochs", 1, *extra, data=data)


def folds_run(c: Context):
    """A `finetune --folds 2` run on CLS_CSV (trained inside the case: its directory is the case's)."""
    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.options import RepeatOptions

    data = c.file("t.csv", CLS_CSV)
    run = RunOptions(data=str(data), model=str(c.tiny), output=str(c.tmp / "run"))
    api.finetune_folds("cls", run, TrainConfig(epochs=1, batch_size=8, max_length=32), RepeatOptions(folds=2))
    return c.tmp / "run"


def regression_model(c: Context):
    from bertkit import api
    from bertkit.config import TrainConfig

    data = c.file("scores.tsv", SCORES)
    config = TrainConfig(epochs=1, batch_size=8, max_length=32, task_options={"problem_type": "regression"})
    api.finetune("pair", RunOptions(data=str(data), model=str(c.tiny), output=str(c.tmp / "reg")), config=config)
    return c.tmp / "reg"


def earlier_audit(c: Context):
    """An audit directory holding another model's audit."""
    earlier = c.tmp / "audit"
    earlier.mkdir()
    (earlier / "summary.json").write_text(json.dumps({"source": {"kind": "model", "model": "/models/other"}}))
    return earlier


def without_cleanlab(c: Context):
    import sys

    c.monkeypatch.setitem(sys.modules, "cleanlab", None)  # importlib.util.find_spec then finds nothing


CASES = [
    Case("audit-one-class", lambda c: folds(c, c.file("one.csv", ONE_CLASS)), ("one label", "pos")),
    Case(
        "audit-fewer-rows-per-class-than-folds",
        lambda c: audit(c, "--folds", 9, "--task", "cls", "--model", c.tiny),
        ("fewer than --folds 9",),
    ),
    Case(
        "audit-model-of-another-task", lambda c: audit(c, "--model", c.trained("qa")), ("qa model", "cls, pair and ner")
    ),
    Case(
        "audit-model-of-another-label-set",
        lambda c: audit(c, "--model", c.trained("cls"), data=c.file("yn.csv", OTHER_LABELS)),
        ("yes", "the model's own label names"),
    ),
    Case(
        "audit-regression-model",
        lambda c: audit(c, "--model", regression_model(c), data=c.file("s.tsv", SCORES)),
        ("regression labels (numbers)",),
    ),
    Case(
        "audit-regression-data",
        lambda c: audit(c, "--folds", 2, "--task", "pair", "--model", c.tiny, data=c.file("s.tsv", SCORES)),
        ("continuous", "class labels"),
    ),
    Case(
        "audit-oof-of-other-data",
        lambda c: audit(c, "--from", folds_run(c), data=c.file("yn.csv", CLS_CSV.replace("good,pos", "good,neg"))),
        ("written for other data",),
    ),
    Case(
        "audit-rerun-into-another-models-audit",
        lambda c: [earlier_audit(c), *audit(c, "--model", c.trained("cls"))][1:],
        ("an earlier audit, of /models/other", "one model's probabilities"),
    ),
    Case(
        "audit-without-cleanlab",
        lambda c: [without_cleanlab(c), *audit(c, "--model", c.trained("cls"))][1:],
        ("cleanlab", "bertkit[quality]"),
    ),
    Case(
        "audit-training-setting-without-folds",
        lambda c: audit(c, "--model", c.trained("cls"), "--epochs", 2),
        ("--epochs", "with --folds only"),
    ),
    Case("audit-folds-and-from", lambda c: audit(c, "--folds", 2, "--from", c.tmp), ("give one",)),
    Case("audit-folds-without-task", lambda c: audit(c, "--folds", 2, "--model", c.tiny), ("--task and --model",)),
    Case("audit-no-source", lambda c: audit(c), ("out-of-sample probabilities",)),
    Case(
        "audit-from-a-model-without-folds",
        lambda c: audit(c, "--from", c.trained("cls")),
        ("no out-of-fold predictions",),
    ),
    Case(
        "audit-output-inside-the-model",
        lambda c: [
            "audit",
            "--data",
            c.file("t.csv", CLS_CSV),
            "--model",
            c.trained("cls"),
            "--output",
            c.trained("cls") / "a",
        ],
        ("inside the model directory",),
    ),
    Case(
        "audit-output-is-the-data",
        lambda c: [
            "audit",
            "--data",
            c.file("t.csv", CLS_CSV),
            "--model",
            c.trained("cls"),
            "--output",
            c.tmp / "t.csv",
        ],
        ("would destroy",),
    ),
    Case(
        "audit-one-fold",
        lambda c: audit(c, "--folds", 1, "--task", "cls", "--model", c.tiny),
        ("between 2 and",),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_hostile_audit_fails_in_one_line_and_writes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)
