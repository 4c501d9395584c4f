"""`bertkit finetune cls|pair --recipe setfit`: what few-shot training cannot do is refused in ONE line
`error: ... (hint: ...)`, exit 2, no traceback, nothing written (tests/hostile.py's run_case), and
before the model loads: labels that make no pairs, a problem type that is not one class per text,
a pair count below 1, an unknown recipe, and the flags of the finetune loop that --recipe setfit
does not use."""

from __future__ import annotations

import pytest
from hostile import PAIR_TSV, Case, Context, jsonl, run_case

FEW = "text,label\n" + "".join(f"the film was {w},{lab}\n" for w, lab in [("good", "pos"), ("bad", "neg")] * 3)
ONE_CLASS = "text,label\n" + "".join(f"the film was {w},pos\n" for w in ("good", "great", "fine", "bad"))
ONE_ROW_OF_NEG = "text,label\nthe film was good,pos\nthe film was great,pos\nthe film was bad,neg\n"
SCORES = "text,label\n" + "".join(
    f"the film was {w},{s}\n" for w, s in [("good", 4.5), ("bad", 0.5), ("fine", 3.25)] * 2
)
LISTED = jsonl(
    *[{"text": f"the film was {w}", "label": labels} for w, labels in [("good", ["x", "y"]), ("bad", ["y"])] * 3]
)
PAIR_ONE_ROW = "sentence1\tsentence2\tlabel\nit was good\tit was good\tsame\nit was good\tit was bad\tdifferent\n"


def setfit(c: Context, text: str, *extra, task: str = "cls", name: str = "t.csv") -> list:
    return c.finetune(task, (name, text), "--recipe", "setfit", *extra)


CASES = [
    Case("one-class", lambda c: setfit(c, ONE_CLASS), ("training data has only one label (pos)", "at least two")),
    Case("one-row-of-a-class", lambda c: setfit(c, ONE_ROW_OF_NEG), ("2 rows of every label", "'neg' has 1")),
    Case(
        "pair-one-row-of-each-class",
        lambda c: setfit(c, PAIR_ONE_ROW, task="pair", name="t.tsv"),
        ("2 rows of every label", "'different', 'same' have 1"),
    ),
    Case(
        "regression",
        lambda c: setfit(c, SCORES, "--problem-type", "regression"),
        ("--recipe setfit trains one class per text, not regression data", "--recipe finetune"),
    ),
    Case(
        "multi-label-flag",
        lambda c: setfit(c, FEW, "--problem-type", "multi-label"),
        ("one class per text, not multi-label data", "--recipe finetune"),
    ),
    Case(
        "multi-label-read-from-the-labels",
        lambda c: setfit(c, LISTED, name="t.jsonl"),
        ("one class per text, not multi-label data",),
    ),
    Case("pairs-per-example-0", lambda c: setfit(c, FEW, "--pairs-per-example", 0), ("at least 1, not 0",)),
    Case("pairs-per-example-negative", lambda c: setfit(c, FEW, "--pairs-per-example", -3), ("at least 1, not -3",)),
    Case(
        "pairs-per-example-without-setfit",
        lambda c: c.finetune("cls", ("t.csv", FEW), "--pairs-per-example", 4),
        ("--pairs-per-example applies only with --recipe setfit",),
    ),
    Case(
        "unknown-recipe",
        lambda c: c.finetune("cls", ("t.csv", FEW), "--recipe", "contrastive"),
        ("unknown --recipe 'contrastive'", "finetune, setfit"),
    ),
    Case(
        "unknown-recipe-pair",
        lambda c: c.finetune("pair", ("t.tsv", PAIR_TSV), "--recipe", "set-fit"),
        ("unknown --recipe 'set-fit'",),
    ),
    Case(
        "with-save-every",
        lambda c: setfit(c, FEW, "--save-every", 2),
        ("--recipe setfit does not compose with --save-every/--resume",),
    ),
    Case("with-folds", lambda c: setfit(c, FEW, "--folds", 2), ("--recipe setfit does not compose with --folds",)),
    Case("with-class-weights", lambda c: setfit(c, FEW, "--class-weights", "auto"), ("--class-weights does not",)),
    Case("with-focal-loss", lambda c: setfit(c, FEW, "--loss", "focal"), ("--loss does not apply",)),
    Case("with-patience", lambda c: setfit(c, FEW, "--patience", 2), ("--patience does not apply",)),
    Case("with-eval-every", lambda c: setfit(c, FEW, "--eval-every", 2), ("--eval-every does not apply",)),
]


def test_the_corpus_names_each_case_once():
    assert len(CASES) >= 12 and len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_setfit_mistakes_fail_in_one_line_and_write_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)
