"""Bad input to `bertkit finetune embedding` and `finetune rerank`: each case ONE line `error: ...
(hint: ...)`, exit 2, no traceback, nothing written (tests/hostile.py's run_case). A triplet whose
negative is its positive is not an error: it is dropped, counted and said, and training goes on."""

from __future__ import annotations

import json

import pytest
from hostile import Case, Context, jsonl, run_case

from bertkit.options import RunOptions

PAIRS = jsonl(
    {"anchor": "the film was good", "positive": "it was a great movie"},
    {"anchor": "the plot was bad", "positive": "the story was awful"},
    {"anchor": "john lives in paris", "positive": "john lives in france"},
)
TRIPLETS = jsonl(
    {"anchor": "the film was good", "positive": "it was a great movie", "negative": "the plot was bad"},
    {"anchor": "john lives in paris", "positive": "john lives in france", "negative": "mary went to germany"},
)
STS = "sentence1,sentence2,score\nthe film was good,it was great,4\nthe plot was bad,john lives in paris,1\n"
RERANK = jsonl(
    {"query": "who lives in paris ?", "passage": "john lives in paris .", "label": 1},
    {"query": "who lives in paris ?", "passage": "mary visited berlin .", "label": 0},
)


def emb(c: Context, data: str, *extra, name: str = "pairs.jsonl") -> list:
    return c.finetune("embedding", (name, data), *extra)


def rerank(c: Context, data: str, *extra) -> list:
    return c.finetune("rerank", ("rr.jsonl", data), *extra)


def model_of(c: Context, task: str):
    """A tiny trained embedding or rerank directory, trained once beside the corpus's shared models."""
    from bertkit import api
    from bertkit.config import TrainConfig

    target = c.trained.root / f"h3-{task}"
    if not (target / "bertkit.json").is_file():
        data = c.trained.root / f"h3-{task}.jsonl"
        data.write_text(PAIRS if task == "embedding" else RERANK)
        config = TrainConfig(epochs=1, batch_size=2, precision="no")
        api.finetune(task, RunOptions(data=str(data), model=str(c.tiny), output=str(target)), config=config)
    return target


CASES = [
    Case(
        "pairs-empty-positive",
        lambda c: emb(c, PAIRS + jsonl({"anchor": "the film was good", "positive": "  "})),
        ("1 row(s) with empty text", "rows 4"),
    ),
    Case(
        "pairs-empty-anchor-null",
        lambda c: emb(c, jsonl({"anchor": None, "positive": "it was good"}) + PAIRS),
        ("empty text", "rows 1"),
    ),
    Case(
        "triplet-empty-negative",
        lambda c: emb(c, jsonl({"anchor": "a film", "positive": "a movie", "negative": ""})),
        ("empty text",),
    ),
    Case(
        "triplets-every-negative-is-the-positive",
        lambda c: emb(c, jsonl({"anchor": "a film", "positive": "a movie", "negative": "a movie"})),
        ("every triplet's negative is its positive",),
    ),
    Case("pairs-no-columns", lambda c: emb(c, jsonl({"foo": "a", "bar": "b"})), ("no anchor and positive", "foo")),
    Case("pairs-text-a-number", lambda c: emb(c, jsonl({"anchor": 3, "positive": "b"})), ("not a string",)),
    Case(
        "matryoshka-above-the-model",
        lambda c: emb(c, PAIRS, "--matryoshka", "64,16"),
        ("--matryoshka 64", "32 dimensions"),
    ),
    Case("matryoshka-not-numbers", lambda c: emb(c, PAIRS, "--matryoshka", "big"), ("--matryoshka 'big'",)),
    Case("matryoshka-zero", lambda c: emb(c, PAIRS, "--matryoshka", "16,0"), ("distinct positive",)),
    Case("matryoshka-twice", lambda c: emb(c, PAIRS, "--matryoshka", "16,16"), ("distinct positive",)),
    Case("cache-batch-zero", lambda c: emb(c, PAIRS, "--cache-batch", "0"), ("--cache-batch 0 must be at least 1",)),
    Case("cache-batch-negative", lambda c: emb(c, PAIRS, "--cache-batch", "-4"), ("--cache-batch -4",)),
    Case("scale-zero", lambda c: emb(c, PAIRS, "--scale", "0"), ("--scale 0",)),
    Case("loss-unknown", lambda c: emb(c, PAIRS, "--loss", "hinge"), ("not an embedding loss",)),
    Case(
        "triplet-loss-on-pairs",
        lambda c: emb(c, PAIRS, "--loss", "triplet"),
        ("--loss triplet does not fit pairs", "it needs anchor,positive,negative columns"),
    ),
    Case(
        "triplet-loss-on-scored-pairs",
        lambda c: emb(c, STS, "--loss", "triplet", name="sts.csv"),
        ("--loss triplet does not fit scored pairs", "anchor,positive,negative"),
    ),
    Case(
        "triplet-loss-with-symmetric",
        lambda c: emb(c, TRIPLETS, "--loss", "triplet", "--symmetric"),
        ("--symmetric applies to --loss mnrl, not --loss triplet",),
    ),
    Case(
        "triplet-margin-with-mnrl",
        lambda c: emb(c, TRIPLETS, "--triplet-margin", "1"),
        ("--triplet-margin applies to --loss triplet, not --loss mnrl",),
    ),
    Case(
        "triplet-margin-negative",
        lambda c: emb(c, TRIPLETS, "--loss", "triplet", "--triplet-margin", "-1"),
        ("--triplet-margin -1.0 must be a number >= 0",),
    ),
    Case(
        "triplet-distance-unknown",
        lambda c: emb(c, TRIPLETS, "--loss", "triplet", "--triplet-distance", "dot"),
        ("--triplet-distance 'dot' is not a distance",),
    ),
    Case("loss-cosent-on-pairs", lambda c: emb(c, PAIRS, "--loss", "cosent"), ("does not fit pairs",)),
    Case(
        "cosent-with-cache-batch",
        lambda c: emb(c, STS, "--cache-batch", "2", name="sts.csv"),
        ("--cache-batch applies to --loss mnrl, not --loss cosent",),
    ),
    Case(
        "scored-pairs-score-not-a-number",
        lambda c: emb(c, STS + "a film,a movie,high\n", name="sts.csv"),
        ("row 3: score 'high' is not a number",),
    ),
    Case(
        "eval-data-without-scores",
        lambda c: emb(c, PAIRS, "--eval-data", c.file("dev.jsonl", PAIRS)),
        ("needs scored pairs",),
    ),
    Case(
        "eval-scores-all-equal",
        lambda c: emb(c, PAIRS, "--eval-data", c.file("dev.csv", "sentence1,sentence2,score\na,b,1\nc,d,1\n")),
        ("Spearman is undefined",),
    ),
    Case(
        "rerank-label-a-word",
        lambda c: rerank(c, RERANK + jsonl({"query": "q", "passage": "p", "label": "relevant"})),
        ("row 3: label 'relevant' is not a relevance",),
    ),
    Case(
        "rerank-label-negative",
        lambda c: rerank(c, RERANK + jsonl({"query": "q", "passage": "p", "label": -1})),
        ("label -1 is not a relevance",),
    ),
    Case(
        "rerank-label-missing",
        lambda c: rerank(c, jsonl({"query": "q", "passage": "p"})),
        ("no label column",),
    ),
    Case(
        "rerank-no-passage",
        lambda c: rerank(c, jsonl({"query": "q", "answer": "p", "label": 1})),
        ("no query and passage columns",),
    ),
    Case(
        "rerank-empty-passage",
        lambda c: rerank(c, RERANK + jsonl({"query": "q", "passage": "", "label": 1})),
        ("empty text", "rows 3"),
    ),
    Case(
        "rerank-nothing-relevant",
        lambda c: rerank(c, jsonl({"query": "q", "passage": "p", "label": 0})),
        ("every training label is 0",),
    ),
    Case("rerank-loss-unknown", lambda c: rerank(c, RERANK, "--rerank-loss", "pairwise"), ("not a reranker loss",)),
    Case(
        "rerank-listwise-one-passage-per-query",
        lambda c: rerank(
            c,
            jsonl({"query": "q", "passage": "p", "label": 1}, {"query": "r", "passage": "s", "label": 0}),
            "--rerank-loss",
            "listwise",
        ),
        ("needs several passages per query",),
    ),
    Case(
        "rerank-listwise-no-query-with-a-relevant-passage",
        lambda c: rerank(
            c,
            RERANK.replace('"label": 1', '"label": 0') + jsonl({"query": "z", "passage": "p", "label": 1}),
            "--rerank-loss",
            "listwise",
        ),
        ("no query has two passages with one relevant",),
    ),
    Case(
        "eval-embedding-on-unscored-pairs",
        lambda c: ["eval", model_of(c, "embedding"), "--data", c.file("dev.jsonl", PAIRS)],
        ("needs scored pairs",),
    ),
    Case(
        "predict-embedding-no-text-column",
        lambda c: ["predict", model_of(c, "embedding"), "--input", c.file("in.jsonl", jsonl({"words": "a b"}))],
        ("no text column",),
    ),
    Case(
        "eval-rerank-label-not-a-number",
        lambda c: [
            "eval",
            model_of(c, "rerank"),
            "--data",
            c.file("dev.jsonl", RERANK + jsonl({"query": "q", "passage": "p", "label": "yes"})),
        ],
        ("label 'yes' is not a relevance",),
    ),
    Case(
        "predict-rerank-no-passage",
        lambda c: ["predict", model_of(c, "rerank"), "--input", c.file("in.jsonl", jsonl({"query": "q"}))],
        ("no query and passage columns",),
    ),
    Case(
        "rerank-eval-without-both-kinds",
        lambda c: rerank(
            c,
            jsonl({"query": "q", "passage": "p", "label": 1}, {"query": "r", "passage": "s", "label": 0}),
            "--eval-data",
            c.file("dev.jsonl", jsonl({"query": "q", "passage": "p", "label": 1})),
        ),
        ("cannot give auc",),
    ),  # fmt: skip
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_embedding_and_rerank_input_fails_in_one_line_and_writes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys, seconds=60)


def test_a_triplet_whose_negative_is_its_positive_is_dropped_counted_and_said(tmp_path, tiny_bert, run_cli):
    rows = [
        {"anchor": "the film was good", "positive": "it was a great movie", "negative": "the plot was bad"},
        {"anchor": "john lives in paris", "positive": "john lives in france", "negative": "john lives in france"},
        {"anchor": "mary visited berlin", "positive": "mary went to germany", "negative": "mary lives in london"},
    ]
    data = tmp_path / "triplets.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = run_cli(
        "finetune", "embedding", "--data", data, "--model", tiny_bert, "--output", tmp_path / "out",
        "--epochs", 1, "--batch-size", 2,
    )  # fmt: skip
    assert code == 0, err
    assert "1 triplet(s) whose negative is their positive were dropped" in out + err
    meta = json.loads((tmp_path / "out" / "bertkit.json").read_text())
    assert meta["data"]["train_examples"] == 2
