"""The SQuAD retrieval set: split by article (no held-out paragraph in the train pairs or qrels),
every paragraph in the corpus, each question judged on its own paragraph, the same bytes twice."""

from __future__ import annotations

import json

from bertkit.api.datasets import build_squad_retrieval
from bertkit.data.beir import read_beir


def article(title: str, paragraphs: list[tuple[str, list[str]]]) -> dict:
    return {
        "title": title,
        "paragraphs": [
            {"context": context, "qas": [{"id": f"{title}-{q}", "question": q, "answers": []} for q in questions]}
            for context, questions in paragraphs
        ],
    }


SQUAD = {
    "version": "1.1",
    "data": [
        article("Paris_City", [("paris is in france", ["where is paris"]), ("it has a tower", ["what has it"])]),
        article("Berlin", [("berlin is in germany", ["where is berlin", "what is berlin"])]),
        article("Google", [("google is a company", ["what is google"]), ("it is big", [])]),
    ],
}


def test_split_by_article_every_paragraph_in_the_corpus_and_deterministic(tmp_path):
    source = tmp_path / "dev.json"
    source.write_text(json.dumps(SQUAD))
    done = build_squad_retrieval(str(source), str(tmp_path / "a"), test_articles=1)
    assert done["passages"] == 5 and done["queries"] == {"train": 4, "test": 1} and done["pairs"] == 4
    test = read_beir(tmp_path / "a", "test")
    assert test.qrels == {"Google-what is google": {"a002p000": 1}}
    assert len(test.corpus_ids) == 5  # the train articles' paragraphs are distractors
    train = read_beir(tmp_path / "a", "train")
    assert train.qrels["Paris_City-what has it"] == {"a000p001": 1} and len(train.qrels) == 4
    pairs = [json.loads(line) for line in (tmp_path / "a" / "train-pairs.jsonl").read_text().splitlines()]
    assert {"anchor": "where is berlin", "positive": "Berlin berlin is in germany"} in pairs
    assert not any("google" in pair["positive"] for pair in pairs)  # no held-out paragraph is trained on
    build_squad_retrieval(str(source), str(tmp_path / "b"), test_articles=1)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "qrels/train.tsv", "train-pairs.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
