"""`bertkit mine` on the tiny random BERT: the negatives skip the positive and its near-copies, the
candidates within --margin of the positive and the first --skip-top, and are the model's best
remaining passages (checked against the whole score matrix computed here)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bertkit.options import EmbeddingOptions

PAIRS = [
    {"anchor": "who lives in paris", "positive": "john lives in paris"},
    {"anchor": "what is google", "positive": "google is a company"},
    {"anchor": "was the film good", "positive": "the film was good"},
]
CORPUS = [
    "john lives in paris",
    "John  lives in PARIS",  # a near-copy of the first positive: case and spacing
    "google is a company",
    "the film was good",
    "mary visited berlin",
    "the plot was bad",
    "he works in london",
    "the acting was awful",
    "the story was fine",
    "they went to france",
]


def expected_negatives(tiny, margin: float, skip_top: int, negatives: int) -> list[list[str]]:
    from bertkit.api.embedder import Embedder
    from bertkit.api.mining import same_text

    embedder = Embedder(str(tiny), EmbeddingOptions(max_length=256, normalize=True, precision="no"))
    anchors = embedder.vectors([p["anchor"] for p in PAIRS])
    positives = embedder.vectors([p["positive"] for p in PAIRS])
    scores = anchors @ embedder.vectors(CORPUS).T
    found = []
    for i, pair in enumerate(PAIRS):
        order = sorted(range(len(CORPUS)), key=lambda j: (-scores[i, j], j))[:10]
        copies = {same_text(pair["positive"]), same_text(pair["anchor"])}
        rest = [j for j in order if same_text(CORPUS[j]) not in copies][skip_top:]
        limit = float(anchors[i] @ positives[i]) - margin
        found.append([CORPUS[j] for j in rest if scores[i, j] <= limit][:negatives])
    return found


@pytest.mark.parametrize("margin, skip_top", [(-10.0, 0), (0.0, 1)])
def test_mine_skips_the_positive_its_copies_and_close_candidates(tmp_path, tiny_bert, run_cli, margin, skip_top):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(p) + "\n" for p in PAIRS))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n")
    output = tmp_path / "triplets.jsonl"
    code, out, err = run_cli(
        *("mine", tiny_bert, "--data", pairs, "--corpus", corpus, "--output", output, "--negatives", 2),
        *("--margin", margin, "--skip-top", skip_top, "--precision", "no"),
    )
    assert code == 0, err
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    wanted = expected_negatives(tiny_bert, margin, skip_top, 2)
    assert [[r["negative"] for r in rows if r["anchor"] == p["anchor"]] for p in PAIRS] == wanted
    assert all(r["negative"].casefold().split() != r["positive"].casefold().split() for r in rows)
    assert len(rows) == sum(map(len, wanted)) and f"{len(rows)} triplets from 3 pairs" in out
    if margin < 0:  # no candidate is too close: every pair gets its 2
        assert len(rows) == 6
    code, _, err = run_cli("mine", tiny_bert, "--data", pairs, "--corpus", corpus, "--output", output)
    assert code == 2 and "--overwrite" in err  # an existing output is kept unless asked
    assert [json.loads(line) for line in output.read_text().splitlines()] == rows


def test_mine_reads_a_beir_corpus_and_replaces_with_overwrite(tmp_path, tiny_bert, run_cli):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(p) + "\n" for p in PAIRS))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"_id": f"d{i}", "title": "", "text": t}) + "\n" for i, t in enumerate(CORPUS))
    )
    output = tmp_path / "triplets.jsonl"
    output.write_text("old\n")
    code, _, err = run_cli(
        *("mine", tiny_bert, "--data", pairs, "--corpus", corpus, "--output", output, "--overwrite"),
        *("--margin", -10, "--candidates", 4, "--precision", "no"),
    )
    assert code == 0, err
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert len(rows) == 3 and np.all([set(r) == {"anchor", "positive", "negative"} for r in rows])
