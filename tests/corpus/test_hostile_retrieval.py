"""Retrieval's bad input: `eval --data BEIR_DIR` (a directory missing a file, qrels naming unknown
query or passage ids, an empty or malformed corpus, reranking flags out of range or a reranker that
is not one), `bertkit mine` (an output that is an input or a model file, counts out of range, pairs
with an empty side). Same contract as the other hostile corpora (tests/hostile.py's run_case): ONE
line `error: ... (hint: ...)`, exit 2, no traceback, nothing written or removed."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile import Case, Context, jsonl, run_case

PASSAGES = [("d1", "paris", "john lives in paris"), ("d2", "", "mary visited berlin"), ("d3", "", "the film was good")]
QUERIES = {"q1": "who lives in paris", "q2": "what did mary visit"}
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n"
PAIRS = jsonl({"anchor": "who lives in paris", "positive": "john lives in paris"})
CORPUS_TXT = "john lives in paris\nmary visited berlin\nthe film was good\n"


def beir(c: Context, name: str = "beir", skip: tuple = (), qrels: str = QRELS, corpus: str | None = None) -> Path:
    """A small valid BEIR directory, less the files named in ``skip``, with the qrels or corpus given."""
    root = c.tmp / name
    if "corpus" not in skip:
        rows = jsonl(*({"_id": i, "title": t, "text": x} for i, t, x in PASSAGES))
        c.file(f"{name}/corpus.jsonl", rows if corpus is None else corpus)
    if "queries" not in skip:
        c.file(f"{name}/queries.jsonl", jsonl(*({"_id": q, "text": t} for q, t in QUERIES.items())))
    if "qrels" not in skip:
        c.file(f"{name}/qrels/test.tsv", qrels)
    return root


def evaluate(c: Context, *extra, data=None, model=None) -> list:
    return ["eval", model or c.tiny, "--data", data or beir(c), "--output", c.tmp / "scores.json", *extra]


def mine(c: Context, *extra, output=None, pairs: str = PAIRS, corpus: str = CORPUS_TXT) -> list:
    data, passages = c.file("pairs.jsonl", pairs), c.file("corpus.txt", corpus)
    return [
        "mine",
        c.tiny,
        "--data",
        data,
        "--corpus",
        passages,
        "--output",
        output or c.tmp / "triplets.jsonl",
        *extra,
    ]


def one_logit_free_classifier(c: Context) -> Path:
    return c.trained("cls")  # two labels: a classifier, not a reranker


CASES = [
    # --- eval --data BEIR_DIR: the directory and its files
    Case("beir-no-queries", lambda c: evaluate(c, data=beir(c, skip=("queries",))), ("no queries.jsonl",)),
    Case("beir-no-corpus", lambda c: evaluate(c, data=beir(c, skip=("corpus",))), ("no corpus.jsonl",)),
    Case("beir-no-qrels", lambda c: evaluate(c, data=beir(c, skip=("qrels",))), ("no qrels/test.tsv",)),
    Case(
        "beir-split-absent",
        lambda c: evaluate(c, "--split", "dev"),
        ("no qrels/dev.tsv", "--split test"),
    ),
    Case(
        "qrels-unknown-query",
        lambda c: evaluate(c, data=beir(c, qrels=QRELS + "q9\td1\t1\n")),
        ("query id(s) not in queries.jsonl", "'q9'"),
    ),
    Case(
        "qrels-unknown-passage",
        lambda c: evaluate(c, data=beir(c, qrels=QRELS + "q1\td404\t1\n")),
        ("passage id(s) not in corpus.jsonl", "'d404'"),
    ),
    Case("qrels-grade-not-integer", lambda c: evaluate(c, data=beir(c, qrels=QRELS + "q1\td2\thigh\n")), ("'high'",)),
    Case("qrels-two-fields", lambda c: evaluate(c, data=beir(c, qrels=QRELS + "q1\td2\n")), ("3 TAB-separated",)),
    Case(
        "qrels-header-only",
        lambda c: evaluate(c, data=beir(c, qrels="query-id\tcorpus-id\tscore\n")),
        ("no judgements",),
    ),
    Case("corpus-empty", lambda c: evaluate(c, data=beir(c, corpus="")), ("empty",)),
    Case(
        "corpus-id-twice",
        lambda c: evaluate(c, data=beir(c, corpus=jsonl({"_id": "d1", "text": "a"}, {"_id": "d1", "text": "b"}))),
        ("appears twice",),
    ),
    Case(
        "corpus-row-without-text",
        lambda c: evaluate(c, data=beir(c, corpus=jsonl({"_id": "d1", "text": "a"}, {"_id": "d2", "text": " "}))),
        ("has no text",),
    ),
    Case("corpus-row-without-id", lambda c: evaluate(c, data=beir(c, corpus=jsonl({"text": "a"}))), ("no _id",)),
    Case("corpus-not-json", lambda c: evaluate(c, data=beir(c, corpus="{not json\n")), ("invalid JSON",)),
    # --- eval's retrieval flags
    Case("rerank-top-zero", lambda c: evaluate(c, "--rerank-top", 0), ("--rerank-top must be >= 1",)),
    Case("corpus-chunk-zero", lambda c: evaluate(c, "--corpus-chunk", 0), ("--corpus-chunk must be >= 1",)),
    Case("similarity-unknown", lambda c: evaluate(c, "--similarity", "euclid"), ("unknown --similarity",)),
    Case("retrieval-max-length-tiny", lambda c: evaluate(c, "--max-length", 4), ("--max-length must be between",)),
    Case(
        "rerank-bare-encoder",
        lambda c: evaluate(c, "--rerank", c.tiny),
        ("is not a reranker", "BertModel"),
    ),
    Case(
        "rerank-two-label-classifier",
        lambda c: evaluate(c, "--rerank", one_logit_free_classifier(c)),
        ("is not a reranker", "2 outputs"),
    ),
    Case("rerank-missing-dir", lambda c: evaluate(c, "--rerank", c.tmp / "nowhere"), ("no such directory",)),
    Case(
        "rerank-flag-without-beir",
        lambda c: ["eval", c.trained("cls"), "--rerank-top", 5],
        ("only when --data is a BEIR directory",),
    ),
    Case("beir-with-max-eval-samples", lambda c: evaluate(c, "--max-eval-samples", 1), ("--max-eval-samples",)),
    Case(
        "beir-hub-model-without-output",
        lambda c: ["eval", "minilm", "--data", beir(c)],
        ("not a local directory", "--output"),
    ),
    Case(
        "beir-output-is-the-corpus",
        lambda c: ["eval", c.tiny, "--data", beir(c), "--output", c.tmp / "beir" / "corpus.jsonl"],
        ("corpus.jsonl",),
    ),
    Case(
        "beir-output-is-a-model-file",
        lambda c: ["eval", c.tiny, "--data", beir(c), "--output", Path(c.tiny) / "config.json"],
        ("model",),
    ),
    Case(
        "beir-output-dir-missing",
        lambda c: evaluate(c)[:-1] + [c.tmp / "no" / "scores.json"],
        ("does not exist",),
    ),
    # --- bertkit mine
    Case("mine-output-is-the-pairs", lambda c: mine(c, output=c.tmp / "pairs.jsonl"), ("input",)),
    Case("mine-output-is-the-corpus", lambda c: mine(c, output=c.tmp / "corpus.txt"), ("input",)),
    Case("mine-output-is-a-model-file", lambda c: mine(c, output=Path(c.tiny) / "tokenizer.json"), ("model",)),
    Case(
        "mine-output-exists",
        lambda c: (c.file("triplets.jsonl", "keep me\n"), mine(c))[1],
        ("exists", "--overwrite"),
    ),
    Case("mine-output-dir-missing", lambda c: mine(c, output=c.tmp / "no" / "t.jsonl"), ("does not exist",)),
    Case("mine-negatives-zero", lambda c: mine(c, "--negatives", 0), ("--negatives must be >= 1",)),
    Case("mine-candidates-zero", lambda c: mine(c, "--candidates", 0), ("--candidates must be >= 1",)),
    Case("mine-skip-top-negative", lambda c: mine(c, "--skip-top", -1), ("--skip-top must be >= 0",)),
    Case(
        "mine-more-than-candidates",
        lambda c: mine(c, "--negatives", 3, "--skip-top", 8),
        ("more than the --candidates",),
    ),
    Case("mine-margin-nan", lambda c: mine(c, "--margin", "nan"), ("--margin must be a number",)),
    Case(
        "mine-pairs-without-positive",
        lambda c: mine(c, pairs=jsonl({"anchor": "a", "text": "b"})),
        ("no column 'positive'",),
    ),
    Case(
        "mine-pairs-empty-anchor",
        lambda c: mine(c, pairs=PAIRS + jsonl({"anchor": " ", "positive": "b"})),
        ("row 2 has an empty anchor",),
    ),
    Case("mine-corpus-empty", lambda c: mine(c, corpus=""), ("empty",)),
    Case(
        "mine-corpus-missing",
        lambda c: (
            ["mine", c.tiny, "--data", c.file("pairs.jsonl", PAIRS), "--corpus", c.tmp / "none.txt"]
            + ["--output", c.tmp / "t.jsonl"]
        ),
        ("--corpus", "no such file"),
    ),
    Case(
        "mine-corpus-bad-row",
        lambda c: [
            *mine(c)[:5],
            c.file("c.jsonl", jsonl({"_id": "1", "text": "a"}, {"_id": "2", "text": ["a"]})),
            *mine(c)[6:],
        ],
        ("not a string",),
    ),
]


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 30 and len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_retrieval_input_fails_in_one_line_and_changes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys, tiny_bert, seconds=60)
