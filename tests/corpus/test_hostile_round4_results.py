"""Trust, round four: eval's result files (the metrics JSON, its predictions file, its run file)
never go over a file bertkit did not write for this model: the user's file of that name, another
model's scores, a predictions file the user edited, an earlier run's --output (model_dir.ownership
check_results_kept). Same contract as the other hostile corpora (tests/hostile.py's run_case): ONE
line `error: ... (hint: ...)`, exit 2, no traceback, nothing written or removed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostile import CLS_CSV, Case, Context, jsonl, run_case

PASSAGES = [("d1", "paris", "john lives in paris"), ("d2", "", "mary visited berlin"), ("d3", "", "the film was good")]
QUERIES = {"q1": "who lives in paris", "q2": "what did mary visit"}
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n"
ANOTHER = {"model": "/elsewhere/another-model", "metrics": {"ndcg@10": 0.5}}


def beir(c: Context) -> Path:
    c.file("beir/corpus.jsonl", jsonl(*({"_id": i, "title": t, "text": x} for i, t, x in PASSAGES)))
    c.file("beir/queries.jsonl", jsonl(*({"_id": q, "text": t} for q, t in QUERIES.items())))
    c.file("beir/qrels/test.tsv", QRELS)
    return c.tmp / "beir"


def retrieval(c: Context, output: str = "scores.json") -> list:
    return ["eval", c.tiny, "--data", beir(c), "--output", c.tmp / output, "--precision", "no"]


def classify(c: Context, output: str = "s.json") -> list:
    return ["eval", c.trained("cls"), "--data", c.file("e.csv", CLS_CSV), "--output", c.tmp / output]


def retrieved_then_edited(c: Context) -> list:
    """A retrieval eval whose run file the user then changed: the next eval into it is refused."""
    from bertkit.api.retrieval import evaluate_retrieval
    from bertkit.options import EvalOptions, InferenceOptions

    args = retrieval(c)
    evaluate_retrieval(str(c.tiny), EvalOptions(data=str(args[3]), output=str(args[5])), None, InferenceOptions())
    run = c.tmp / "run-scores.trec"
    run.write_text(run.read_text().replace("bertkit", "mine"))
    return args


def evaluated_then_edited(c: Context) -> list:
    """An eval whose predictions file the user then changed: the next eval into it is refused."""
    from bertkit import api
    from bertkit.options import EvalOptions

    args = classify(c)
    api.evaluate(str(c.trained("cls")), EvalOptions(data=str(args[3]), output=str(c.tmp / "s.json")))
    rows = c.tmp / "predictions-s.jsonl"
    rows.write_text(rows.read_text() + '{"row": 99, "note": "mine"}\n')
    return args


def evaluated_then_named(c: Context) -> list:
    """An eval into s.json wrote predictions-s.jsonl; an eval whose --output is that file is refused."""
    from bertkit import api
    from bertkit.options import EvalOptions

    args = classify(c)
    api.evaluate(str(c.trained("cls")), EvalOptions(data=str(args[3]), output=str(c.tmp / "s.json")))
    return classify(c, "predictions-s.jsonl")


CASES = [
    # --- eval --data BEIR_DIR: the run file and the metrics JSON -----------------------------------------
    Case(
        "run-file-of-the-user",
        lambda c: (c.file("run-scores.trec", "q1 Q0 d1 1 9.0 mine\n"), retrieval(c))[1],
        ("the run file", "run-scores.trec", "was not written by bertkit"),
    ),
    Case(
        "retrieval-output-of-the-user",
        lambda c: (c.file("scores.json", '{"mine": true}\n'), retrieval(c))[1],
        ("--output", "scores.json", "is not a bertkit evaluation"),
    ),
    Case(
        "retrieval-output-of-another-model",
        lambda c: (c.file("scores.json", json.dumps(ANOTHER)), retrieval(c))[1],
        ("holds the scores of another model (/elsewhere/another-model)", "one per model"),
    ),
    Case(
        "run-file-edited-since",
        retrieved_then_edited,
        ("run-scores.trec exists and was not written by bertkit with scores.json for this model",),
    ),
    # --- eval of a task: the predictions file and the metrics JSON ----------------------------------------
    Case(
        "predictions-file-of-the-user",
        lambda c: (c.file("predictions-s.jsonl", '{"mine": 1}\n'), classify(c))[1],
        ("the predictions file", "predictions-s.jsonl", "was not written by bertkit with s.json"),
    ),
    Case(
        "eval-output-of-the-user",
        lambda c: (c.file("s.json", "my own notes, not JSON\n"), classify(c))[1],
        (
            "--output",
            "s.json exists and is not a bertkit evaluation",
        ),
    ),
    Case(
        "eval-output-of-another-model",
        lambda c: (c.file("s.json", json.dumps({**ANOTHER, "metrics": {"accuracy": 1.0}})), classify(c))[1],
        ("holds the scores of another model",),
    ),
    Case(
        "predictions-file-edited-since",
        evaluated_then_edited,
        ("predictions-s.jsonl exists and was not written by bertkit with s.json for this model",),
    ),
    Case(
        "eval-output-is-an-earlier-evals-predictions",
        evaluated_then_named,
        (
            "--output",
            "predictions-s.jsonl exists and is not a bertkit evaluation",
        ),
    ),
]


def test_the_corpus_covers_each_result_file():
    assert len({case.id for case in CASES}) == len(CASES) >= 9


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_eval_never_writes_over_what_bertkit_did_not_write_for_the_model(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)
