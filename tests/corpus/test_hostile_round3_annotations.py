"""#32 parts B and C: annotation tools' exports (Label Studio, doccano, character spans) as data,
`predict --format` and `bertkit select`. Bad annotation files, flags and outputs end in ONE line
(tests/hostile.py's contract: exit 2, nothing written or removed), before any training."""

from __future__ import annotations

import json

import pytest
from hostile import Case, Context, jsonl, run_case


def studio(*tasks: dict) -> str:
    return json.dumps(list(tasks))


def entity_task(number: int, text: str, *spans, cancelled: bool = False) -> dict:
    result = [
        {"from_name": "label", "to_name": "text", "type": "labels", "value": {"start": s, "end": e, "labels": [tag]}}
        for s, e, tag in spans
    ]
    return {
        "id": number,
        "data": {"text": text},
        "annotations": [{"id": number, "result": result, "was_cancelled": cancelled}],
    }


GOOD = [entity_task(i, "john lives in paris", (0, 4, "PER"), (14, 19, "LOC")) for i in range(1, 9)]


def ner(c: Context, name: str, text: str, *extra) -> list:
    return c.finetune("ner", (name, text), *extra)


def eval_ner(c: Context, name: str, text: str) -> list:
    return ["eval", c.trained("ner"), "--data", c.file(name, text), "--output", c.tmp / "m.json"]


def predict(c: Context, task: str, *extra) -> list:
    return ["predict", c.trained(task), "--input", c.file("pool.txt", "john lives in paris\n"), *extra]


def select(c: Context, *extra) -> list:
    return ["select", c.trained("cls"), "--input", c.file("pool.txt", "a good film\n"), *extra]


CASES = [
    Case(
        "label-studio-export-without-annotations",
        lambda c: ner(
            c, "ls.json", studio(*({"id": i, "data": {"text": "john"}, "annotations": []} for i in range(3)))
        ),
        ("a Label Studio file with no annotated tasks", "3 not annotated"),
    ),
    Case(
        "label-studio-every-task-skipped",
        lambda c: ner(c, "ls.json", studio(entity_task(1, "john", (0, 4, "PER"), cancelled=True))),
        ("no annotated tasks", "1 skipped or cancelled"),
    ),
    Case(
        "overlapping-spans",
        lambda c: ner(c, "ls.json", studio(*GOOD, entity_task(9, "john lives", (0, 4, "PER"), (2, 10, "LOC")))),
        ("task 9: spans 1 ('john', PER) and 2 ('hn lives', LOC) overlap",),
    ),
    Case(
        "span-past-the-text",
        lambda c: ner(c, "d.jsonl", jsonl({"id": 4, "text": "john lives", "label": [[0, 40, "PER"]]})),
        ("task 4: span 1 [0, 40, 'PER'] is outside the text (characters 0 to 10)",),
    ),
    Case(
        "span-cutting-a-word-under-strict",
        lambda c: ner(
            c, "d.jsonl", jsonl({"text": "johnny lives", "label": [[0, 4, "PER"]]}), "--span-alignment", "strict"
        ),
        ("span 1 'john' (PER) cuts a word ('johnny')", "--span-alignment expand"),
    ),
    Case(
        "span-alignment-unknown",
        lambda c: ner(c, "ls.json", studio(*GOOD), "--span-alignment", "nearest"),
        ("--span-alignment 'nearest' is not a policy",),
    ),
    Case(
        "data-format-unknown",
        lambda c: ner(c, "ls.json", studio(*GOOD), "--data-format", "prodigy"),
        ("--data-format 'prodigy' is not a format",),
    ),
    Case(
        "cls-forced-to-read-entity-spans",
        lambda c: c.finetune(
            "cls", ("d.jsonl", jsonl({"text": "john lives", "label": [[0, 4, "PER"]]})), "--data-format", "spans"
        ),
        ("--data-format spans holds entity spans",),
    ),
    Case(
        "span-without-a-label",
        lambda c: ner(c, "d.jsonl", jsonl({"text": "john lives", "entities": [{"start": 0, "end": 4}]})),
        ("span 1 has no label",),
    ),
    Case(
        "eval-span-label-the-model-lacks",
        lambda c: eval_ner(c, "e.jsonl", jsonl({"text": "john lives in paris", "label": [[14, 19, "CITY"]]})),
        ("entity type(s) never seen in training: CITY",),
    ),
    Case(
        "eval-label-studio-without-annotations",
        lambda c: eval_ner(c, "e.json", studio({"id": 1, "data": {"text": "john"}})),
        ("no annotated tasks",),
    ),
    Case(
        "predict-format-unknown",
        lambda c: predict(c, "ner", "--format", "prodigy", "--output", c.tmp / "p.json"),
        ("--format 'prodigy' is not an annotation tool",),
    ),
    Case(
        "predict-format-on-ray",  # Ray writes Parquet parts: the tool's format would be dropped silently
        lambda c: predict(c, "ner", "--format", "label-studio", "--ray", "--output", c.tmp / "ray-out"),
        ("--format does not apply with --ray",),
    ),
    Case(
        "predict-format-to-parquet",
        lambda c: predict(c, "ner", "--format", "label-studio", "--output", c.tmp / "p.parquet"),
        ("--format label-studio writes JSON",),
    ),
    Case(
        "predict-format-for-qa",
        lambda c: [
            "predict",
            c.trained("qa"),
            "--input",
            c.file("q.jsonl", jsonl({"question": "a", "context": "b"})),
            "--format",
            "doccano",
        ],
        ("--format does not apply to a qa model",),
    ),
    Case("select-n-zero", lambda c: select(c, "--n", 0, "--output", c.tmp / "s.json"), ("--n must be >= 1",)),
    Case(
        "select-strategy-unknown",
        lambda c: select(c, "--n", 1, "--strategy", "vibes", "--output", c.tmp / "s.json"),
        ("unknown --strategy 'vibes'",),
    ),
    Case(
        "select-output-is-the-pool",
        lambda c: select(c, "--n", 1, "--output", c.tmp / "pool.txt"),
        ("--output",),
    ),
    Case(
        "select-empty-pool",
        lambda c: [
            "select",
            c.trained("cls"),
            "--input",
            c.file("pool.txt", ""),
            "--n",
            1,
            "--output",
            c.tmp / "s.json",
        ],
        ("empty",),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_annotations_are_refused_in_one_line(case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)


def test_a_label_studio_export_trains_and_says_what_it_left_out(tmp_path, tiny_bert, run_cli):
    data = tmp_path / "ls.json"
    data.write_text(
        studio(*GOOD, entity_task(20, "mary", (0, 4, "PER"), cancelled=True), {"id": 21, "data": {"text": "x"}})
    )
    code, out, err = run_cli(
        "finetune", "ner", "--data", data, "--model", tiny_bert, "--output", tmp_path / "out", "--epochs", 1
    )
    assert code == 0, err
    assert (
        "read as a Label Studio export (8 of 10 task(s) used; left out: 1 skipped or cancelled, 1 not annotated)"
        in out + err
    )
    meta = json.loads((tmp_path / "out" / "bertkit.json").read_text())
    assert meta["task"]["labels"] == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
