"""Hostile input to the new problem kinds and loss options (regression, multi-label, class weights,
label maps, thresholds): the corpus contract of tests/hostile.py (one line, exit 2, nothing
written or removed in the case's folder or the shared models)."""

from __future__ import annotations

import json

import pytest
from hostile import CLS_CSV, Case, Context, jsonl, run_case

SCORES = "sentence1\tsentence2\tscore\n" + "".join(f"a {i} film\tb {i} film\t{i % 5 + 0.5}\n" for i in range(12))
SETS = jsonl(*({"text": f"good film {i}", "labels": ["joy"] if i % 2 else ["joy", "anger"]} for i in range(12)))
FLAGS = "text,joy,anger\n" + "".join(f"film {i},{i % 2},{1 - i % 2}\n" for i in range(12))


def cls(c: Context, *extra) -> list:
    return c.finetune("cls", ("t.csv", CLS_CSV), *extra)


def regression(c: Context, data: str = SCORES, *extra) -> list:
    return c.finetune("pair", ("s.tsv", data), "--problem-type", "regression", *extra)


def weights_file(c: Context, content: str):
    return c.file("w.json", content)


def eval_cls(c: Context, data: str, *extra) -> list:
    return ["eval", c.trained("cls"), "--data", c.file("e.csv", data), "--output", c.tmp / "m.json", *extra]


CASES = [
    Case("finetune-problem-type-unknown", lambda c: cls(c, "--problem-type", "ordinal"), ("unknown --problem-type",)),
    Case(
        "finetune-regression-label-a-word",
        lambda c: regression(c, SCORES.replace("\t0.5\n", "\thigh\n", 1)),
        ("is not a number",),
    ),
    Case(
        "finetune-regression-label-nan",
        lambda c: regression(c, SCORES.replace("\t0.5\n", "\tnan\n", 1)),
        ("not a finite number",),
    ),
    Case(
        "finetune-regression-label-empty",
        lambda c: regression(c, SCORES.replace("\t0.5\n", "\t\n", 1)),
        ("is not a number",),
    ),
    Case(
        "finetune-regression-one-score",
        lambda c: regression(c, "sentence1\tsentence2\tscore\n" + "a\tb\t2.0\n" * 6),
        ("nothing to learn",),
    ),
    Case(
        "finetune-regression-class-weights", lambda c: regression(c, SCORES, "--class-weights", "auto"), ("regression",)
    ),
    Case("finetune-regression-focal", lambda c: regression(c, SCORES, "--loss", "focal"), ("regression",)),
    Case(
        "finetune-regression-label-columns",
        lambda c: regression(c, SCORES, "--label-columns", "a,b"),
        ("no column 'a'",),
    ),
    Case(
        "finetune-single-label-scale-targets", lambda c: cls(c, "--scale-targets"), ("--scale-targets does not apply",)
    ),
    Case(
        "finetune-multi-label-one-label",
        lambda c: c.finetune("cls", ("t.jsonl", jsonl(*({"text": f"film {i}", "labels": ["joy"]} for i in range(8))))),
        ("at least two",),
    ),
    Case(
        "finetune-multi-label-nested-list",
        lambda c: c.finetune(
            "cls",
            (
                "t.jsonl",
                jsonl(
                    *(
                        {"text": f"film {i}", "labels": [["joy"]] if i == 3 else ["joy", "love"][i % 2 :]}
                        for i in range(8)
                    )
                ),
            ),
        ),
        ("row 4: the labels [['joy']] hold ['joy'], which is not a label", "flat list"),
    ),
    Case(
        "finetune-multi-label-list-in-single",
        lambda c: c.finetune("cls", ("t.jsonl", SETS), "--problem-type", "single-label"),
        ("add --problem-type multi-label",),
    ),
    Case(
        "finetune-label-columns-one",
        lambda c: c.finetune("cls", ("f.csv", FLAGS), "--label-columns", "joy"),
        ("at least two",),
    ),
    Case(
        "finetune-label-columns-missing",
        lambda c: c.finetune("cls", ("f.csv", FLAGS), "--label-columns", "joy,fear"),
        ("no column 'fear'",),
    ),
    Case(
        "finetune-label-columns-not-flags",
        lambda c: c.finetune("cls", ("f.csv", FLAGS.replace(",1,0\n", ",2,0\n", 1)), "--label-columns", "joy,anger"),
        ("not 0 or 1",),
    ),
    Case(
        "finetune-class-weights-missing-file",
        lambda c: cls(c, "--class-weights", c.tmp / "none.json"),
        ("not auto, none or an existing file",),
    ),
    Case(
        "finetune-class-weights-not-json",
        lambda c: cls(c, "--class-weights", weights_file(c, "{oops")),
        ("invalid JSON",),
    ),
    Case(
        "finetune-class-weights-wrong-labels",
        lambda c: cls(c, "--class-weights", weights_file(c, json.dumps({"good": 1, "bad": 2}))),
        ("exactly the model's labels",),
    ),
    Case(
        "finetune-class-weights-negative",
        lambda c: cls(c, "--class-weights", weights_file(c, json.dumps({"neg": -1, "pos": 2}))),
        (">= 0",),
    ),
    Case(
        "finetune-class-weights-nan",
        lambda c: cls(c, "--class-weights", weights_file(c, '{"neg": NaN, "pos": 1}')),
        ("invalid JSON",),
    ),
    Case("finetune-loss-unknown", lambda c: cls(c, "--loss", "hinge"), ("unknown --loss",)),
    Case(
        "finetune-focal-gamma-negative", lambda c: cls(c, "--loss", "focal", "--focal-gamma", "-2"), ("--focal-gamma",)
    ),
    Case(
        "finetune-label-map-malformed",
        lambda c: cls(
            c,
            "--eval-data",
            c.file("e.csv", CLS_CSV.replace(",pos", ",1").replace(",neg", ",0")),
            "--label-map",
            "0:neg",
        ),
        ("FILE_LABEL=MODEL_LABEL",),
    ),
    Case(
        "eval-label-map-unknown-model-label",
        lambda c: eval_cls(c, CLS_CSV, "--label-map", "0=great"),
        ("a label the model knows",),
    ),
    Case(
        "eval-labels-neither-names-nor-ids",
        lambda c: eval_cls(c, CLS_CSV.replace(",pos", ",7")),
        ("never seen in training: 7", "--label-map"),
    ),
    Case(
        "eval-tune-per-label-single-label",
        lambda c: eval_cls(c, CLS_CSV, "--tune-per-label"),
        ("--tune-per-label does not apply",),
    ),
    Case(
        "eval-label-map-on-ner",
        lambda c: ["eval", c.trained("ner"), "--label-map", "0=O", "--output", c.tmp / "m.json"],
        ("--label-map does not apply to a ner model",),
    ),
    Case(
        "predict-top-k-zero",
        lambda c: ["predict", c.trained("cls"), "--input", c.file("in.txt", "good\n"), "--top-k", "0"],
        ("--top-k must be >= 1",),
    ),
    Case(
        "predict-top-k-on-qa",
        lambda c: [
            "predict",
            c.trained("qa"),
            "--input",
            c.file("in.jsonl", jsonl({"question": "who", "context": "john"})),
            "--top-k",
            "2",
        ],
        ("--top-k does not apply to a qa model",),
    ),
    Case(
        "probe-multi-label-data",
        lambda c: ["probe", "cls", "--data", c.file("t.jsonl", SETS), "--model", c.tiny, "--output", c.tmp / "probe"],
        ("fits one class per text",),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_hostile_problem_input_fails_in_one_line_and_writes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)
