"""Hostile JSON values and serve limits, through the CLI (tests/hostile.py's contract: ONE line
`error: ... (hint: ...)`, exit 2, no traceback, nothing written or removed).

Python's json module is lenient where JSON is not (NaN, Infinity), turns 1e999 into inf, and
raises a bare ValueError for an integer past its 4300-digit limit; a JSON string may spell an
unpaired surrogate ("\\ud800") that no UTF-8 writer or tokenizer accepts. readers.parse_json and
readers.encodable refuse each where the data is read, for every command that reads records.
"""

from __future__ import annotations

import json

import pytest
from hostile import QA_RECORD, Case, Context, jsonl, run_case

BIG_INT = "9" * 5000  # over sys.get_int_max_str_digits() (4300)


def raw_jsonl(c: Context, line: str, name: str = "in.jsonl"):
    return c.file(name, line + "\n")


def predict(c: Context, task: str, data, *extra) -> list:
    return ["predict", c.trained(task), "--input", data, "--output", c.tmp / "out.jsonl", *extra]


def embed(c: Context, data) -> list:
    return ["embed", c.tiny, "--input", data, "--output", c.tmp / "vectors.npy"]


def serve(c: Context, *extra) -> list:
    return ["serve", c.trained("cls"), "--port", "8765", *extra]


CASES = [
    # --- JSON that Python reads but is not JSON, or not a value bertkit can write back -------------
    Case(
        "predict-cls-id-nan",
        lambda c: predict(c, "cls", raw_jsonl(c, '{"text": "good", "id": NaN}')),
        ("in.jsonl:1", "NaN is not a JSON value"),
    ),
    Case(
        "predict-cls-text-infinity",
        lambda c: predict(c, "cls", raw_jsonl(c, '{"text": Infinity}')),
        ("Infinity is not a JSON value",),
    ),
    Case(
        "predict-cls-id-overflows",
        lambda c: predict(c, "cls", raw_jsonl(c, '{"text": "good", "id": 1e999}')),
        ("1e999 is out of range",),
    ),
    Case(
        "predict-cls-id-5000-digits",
        lambda c: predict(c, "cls", raw_jsonl(c, f'{{"text": "a", "id": {BIG_INT}}}')),
        ("in.jsonl:1", "too many digits"),
    ),
    Case(
        "predict-pair-json-nan",
        lambda c: predict(c, "pair", c.file("in.json", '[{"text": "a", "text_pair": NaN}]')),
        ("in.json", "NaN is not a JSON value"),
    ),
    Case(
        "predict-qa-squad-json-big-int",
        lambda c: predict(
            c,
            "qa",
            c.file("in.json", json.dumps({"data": [{**QA_RECORD, "id": 1}]}).replace('"id": 1', f'"id": {BIG_INT}')),
        ),
        ("too many digits",),
    ),
    Case(
        "predict-ner-id-nan",
        lambda c: predict(c, "ner", raw_jsonl(c, '{"tokens": ["john"], "id": NaN}')),
        ("NaN is not a JSON value",),
    ),
    Case("embed-jsonl-nan", lambda c: embed(c, raw_jsonl(c, '{"text": NaN}')), ("NaN is not a JSON value",)),
    Case(
        "finetune-cls-label-nan",
        lambda c: c.finetune("cls", ("t.jsonl", '{"text": "good", "label": NaN}\n' * 8)),
        ("NaN is not a JSON value",),
    ),
    Case(
        "pretrain-jsonl-big-int",
        lambda c: [
            "pretrain",
            "mlm",
            "--data",
            raw_jsonl(c, f'{{"text": {BIG_INT}}}'),
            "--model",
            c.tiny,
            "--output",
            c.tmp / "mlm",
        ],
        ("too many digits",),
    ),
    # --- an unpaired surrogate where no text_value call looks: NER's pre-split words -----------------
    Case(
        "predict-ner-token-surrogate",
        lambda c: predict(c, "ner", raw_jsonl(c, '{"tokens": ["john", "\\ud800"]}')),
        ("record 0: token 1 holds an unpaired UTF-16 surrogate",),
    ),
    Case(
        "predict-ner-token-low-surrogate-row-2",
        lambda c: predict(
            c, "ner", c.file("in.jsonl", jsonl({"tokens": ["john"]}) + '{"tokens": ["\\udfff paris"]}\n')
        ),
        ("record 1: token 0",),
    ),
    Case(
        "finetune-ner-token-surrogate",
        lambda c: c.finetune(
            "ner",
            (
                "t.jsonl",
                jsonl(*[{"tokens": ["john"], "tags": ["B-PER"]}] * 4) + '{"tokens": ["\\ud83d"], "tags": ["O"]}\n',
            ),
        ),
        ("record 4: token 0 holds an unpaired UTF-16 surrogate",),
    ),
    Case(
        "predict-ner-words-with-surrogate-id",
        lambda c: predict(c, "ner", raw_jsonl(c, '{"tokens": ["john"], "id": "\\ud800"}')),
        ("field 'id'", "surrogate"),
    ),
    # --- QA answers given as JSON inside a CSV cell ---------------------------------------------------
    Case(
        "eval-qa-csv-answers-nested-too-deep",
        lambda c: [
            "eval",
            c.trained("qa"),
            "--data",
            c.file("dev.csv", "question,context,answers\nwho ?,john .," + "[" * 5000 + "\n"),
        ],
        ("question q1", "nested too deeply"),
    ),
    Case(
        "eval-qa-csv-answers-not-json",
        lambda c: [
            "eval",
            c.trained("qa"),
            "--data",
            c.file("dev.csv", 'question,context,answers\nwho ?,john .,"{bad"\n'),
        ],
        ("question q1: answers are not valid JSON",),
    ),
    # --- serve: limits that would let it start and then hang or lie; each fails before serving ------
    Case("serve-max-wait-infinite", lambda c: serve(c, "--max-wait-ms", "inf"), ("--max-wait-ms", "inf")),
    Case("serve-max-wait-nan", lambda c: serve(c, "--max-wait-ms", "nan"), ("--max-wait-ms", "nan")),
    Case("serve-max-wait-over-10-s", lambda c: serve(c, "--max-wait-ms", "60000"), ("between 0 and 10000",)),
    Case("serve-port-zero", lambda c: ["serve", c.trained("cls"), "--port", "0"], ("--port 0",)),
]


def test_case_ids_are_unique():
    assert len(CASES) >= 15 and len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_hostile_json_fails_in_one_line_and_writes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    def never_serve(*args, **kwargs):  # a case that got this far would listen forever
        raise AssertionError(f"{case.id} reached the server")

    monkeypatch.setattr("bertkit.serving.app.serve", never_serve)
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)
