"""ner --context / --context-tokens (document context): bad values and bad documents. Same contract as
the other hostile corpora (tests/hostile.py's run_case): ONE line `error: ... (hint: ...)`, exit 2, no
traceback, nothing written or removed. Data without any document boundary is not an error: it is
said, and run as sentences (the last test)."""

from __future__ import annotations

import importlib.util
import json

import pytest
from hostile import NER_CONLL, Case, Context, jsonl, run_case

DOCUMENTS = "-DOCSTART- O\n\n" + NER_CONLL + "-DOCSTART- O\n\n" + NER_CONLL


def finetune(c: Context, *extra, data=("train.conll", DOCUMENTS)) -> list:
    return c.finetune("ner", data, "--max-length", 64, *extra)


def predict(c: Context, name: str, text: str, *extra) -> list:
    return ["predict", c.trained("ner"), "--input", c.file(name, text), "--context", "document", *extra]


def evaluate(c: Context, name: str, text: str) -> list:
    return ["eval", c.trained("ner"), "--data", c.file(name, text), "--context", "document", "--context-tokens", 8]


def tagged(*documents) -> str:
    """JSONL sentences of the given documents, in that order."""
    return jsonl(*({"tokens": ["john", "lives"], "tags": ["B-PER", "O"], "document": d} for d in documents))


CASES = [
    Case(
        "finetune-context-unknown", lambda c: finetune(c, "--context", "paragraph"), ("unknown --context 'paragraph'",)
    ),
    Case(
        "finetune-context-tokens-negative",
        lambda c: finetune(c, "--context", "document", "--context-tokens", -1),
        ("--context-tokens -1 is invalid",),
    ),
    Case(
        "finetune-context-leaves-no-room",
        lambda c: finetune(c, "--context", "document", "--context-tokens", 62),
        ("leaves no room for the sentence at --max-length 64",),
    ),
    Case(
        "finetune-context-default-size-at-a-small-window",  # 64 pieces a side cannot fit beside anything at 64
        lambda c: finetune(c, "--context", "document"),
        ("--context-tokens 64 leaves no room",),
    ),
    Case(
        "finetune-context-document-comes-back",
        lambda c: finetune(
            c, "--context", "document", "--context-tokens", 8, data=("t.jsonl", tagged("a", "a", "b", "a"))
        ),
        ("document 'a' comes back at row 4",),
    ),
    Case(
        "finetune-context-row-without-document",
        lambda c: finetune(c, "--context", "document", "--context-tokens", 8, data=("t.jsonl", tagged(1, None, 1))),
        ("row 2 has no document id",),
    ),
    Case(
        "eval-context-document-comes-back",
        lambda c: evaluate(c, "dev.jsonl", tagged(1, 2, 1)),
        ("document 1 comes back at row 3",),
    ),
    Case(
        "predict-context-document-comes-back",
        lambda c: predict(
            c,
            "in.jsonl",
            jsonl(*({"text": "john lives in paris", "document": d} for d in ("x", "y", "x"))),
            "--context-tokens",
            8,
        ),
        ("document 'x' comes back at row 3",),
    ),
    Case(
        "predict-context-document-not-a-name",
        lambda c: predict(c, "in.jsonl", jsonl({"text": "john lives", "document": [1]}), "--context-tokens", 8),
        ("'document' is [1]",),
    ),
    Case(
        "predict-context-tokens-leave-no-room",  # the session model was trained at --max-length 64
        lambda c: predict(c, "in.txt", "john lives in paris\n", "--context-tokens", 100),
        ("--context-tokens 100 leaves no room for the sentence at --max-length 64",),
    ),
    Case(
        "predict-context-unknown",
        lambda c: ["predict", c.trained("ner"), "--input", c.file("in.txt", "john\n"), "--context", "page"],
        ("unknown --context 'page'",),
    ),
    pytest.param(
        Case(
            "predict-context-document-on-ray",  # Ray predicts batches of rows apart: a document would be cut
            lambda c: [
                *predict(c, "in.jsonl", jsonl({"text": "john lives"}), "--context-tokens", 8),
                "--ray",
                "--output",
                c.tmp / "o",
            ],
            ("--context document needs each document whole", "drop --ray"),
        ),
        marks=pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed"),
    ),
    Case(
        "predict-context-on-a-cls-model",
        lambda c: ["predict", c.trained("cls"), "--input", c.file("in.txt", "good\n"), "--context", "document"],
        ("--context does not apply to a cls model",),
    ),
]


IDS = [case.values[0].id if hasattr(case, "values") else case.id for case in CASES]


def test_the_corpus_covers_each_command():
    assert len(set(IDS)) == len(CASES)
    assert {name.split("-")[0] for name in IDS} == {"finetune", "eval", "predict"}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bad_context_fails_in_one_line_and_writes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)


def test_document_context_on_data_without_a_boundary_is_said_and_run_as_sentences(trained, run_cli, tmp_path):
    data = tmp_path / "dev.conll"
    data.write_text(NER_CONLL)  # no -DOCSTART- line
    outputs = {}
    for context in ("sentence", "document"):
        output = tmp_path / f"{context}.json"
        code, out, err = run_cli(
            "eval", trained("ner"), "--data", data, "--context", context, "--context-tokens", 8, "--output", output
        )
        assert code == 0, err
        outputs[context] = json.loads(output.read_text())
    said = "has no document boundary (no -DOCSTART- line), so each sentence is read alone"
    assert said in out + err
    assert outputs["document"]["metrics"] == outputs["sentence"]["metrics"]
