"""What a token-tagging input file is: the format checks of bertkit/tasks/tagging.py's reading (a
CoNLL column file told from sentence-level data, raw sentences split into words with offsets)."""

from __future__ import annotations

import re

from bertkit.decoding.tags import split_words
from bertkit.errors import BertkitError

TEXT_CANDIDATES = ("text", "sentence")
BIO_TAG = re.compile(r"^(O|[BI]-\S+)$")
QA_FIELDS = {"paragraphs", "context", "qas", "answers"}
CLASSIFICATION_FIELDS = {
    "sentence",
    "text",
    "label",
    "labels",
    "sentence1",
    "sentence2",
    "question",
    "question1",
    "question2",
    "premise",
    "hypothesis",
    "quality",
    "gold_label",
    "is_duplicate",
    "#1 string",
    "#2 string",
    "review",
    "content",
    "class",
    "target",
    "text_a",
    "text_b",
    "index",
}
FORMAT_HINT = (
    "NER data is a CoNLL file (one 'token ... tag' line per word, blank line between sentences) "
    "or JSON/JSONL/Parquet records with 'tokens' and 'tags'"
)


def raw_examples(texts: list[str], where: str, unit: str, trailing: bool = False) -> list[dict]:
    """Examples from raw sentences: CoNLL-style words with character offsets into the text."""
    while trailing and texts and not texts[-1].strip():
        texts = texts[:-1]
    examples = []
    for number, text in enumerate(texts, 1):
        words, offsets = split_words(text)
        if not words:
            raise BertkitError(
                f"{where}: {unit} {number} has no words", f"remove empty {unit}s; one sentence per {unit}"
            )
        examples.append({"tokens": words, "text": text, "offsets": offsets})
    if not examples:
        raise BertkitError(f"{where}: no sentences to tag", "give one sentence per line")
    return examples


def looks_like_conll(text: str) -> bool:
    """A column file whose every line (of the first 500) ends in a BIO tag, or has -DOCSTART-."""
    lines = [line for line in text.split("\n")[:500] if line.strip()]
    if any(line.lstrip().startswith("-DOCSTART-") for line in lines):
        return True
    rows = [line.strip().split("\t") if "\t" in lines[0] else line.split() for line in lines]
    return (
        bool(rows)
        and len({len(row) for row in rows}) == 1
        and len(rows[0]) >= 2
        and all(BIO_TAG.match(row[-1].strip()) for row in rows)
    )


def reject_classification_header(text: str, suffix: str, where: str) -> None:
    """Fail clearly on a classification file (a CSV, or a header such as ``sentence<TAB>label``)."""
    first = next((line for line in text.split("\n") if line.strip()), "")
    columns = [
        c.strip()
        for c in (first.split(",") if suffix == ".csv" else first.split("\t") if "\t" in first else first.split())
    ]
    named = {c.lower() for c in columns} & CLASSIFICATION_FIELDS
    if suffix == ".csv" or (len(columns) >= 2 and named and not BIO_TAG.match(columns[-1])):
        raise BertkitError(
            f"{where}: this looks like sentence-level (classification) data (first line: "
            f"{', '.join(columns)}), not token tagging",
            FORMAT_HINT + "; for sentence labels use `bertkit finetune cls`",
        )
