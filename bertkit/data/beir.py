"""The BEIR retrieval layout, read with one-line errors, and the TREC run file written from a search.

A BEIR directory holds ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
``text``) and ``qrels/<split>.tsv`` (``query-id``, ``corpus-id``, ``score``: an integer grade, a
header line first). The corpus may be larger than memory: it is read row by row (``corpus_rows``),
once to check it and collect its ids (``check_corpus``), and again for the search; queries and
qrels are small and read whole.

A run file is TREC's: ``qid Q0 docid rank score tag``, one line per retrieved passage. trec_eval
(and pytrec_eval) ignore the rank column and order a query's passages by score, ties broken by the
passage id in reverse (``ranked``), so the file is written in that order, with scores spelled to the
digits a float32 has: read back, it ranks exactly as the metrics that were computed from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bertkit.data import readers
from bertkit.errors import BertkitError
from bertkit.metrics.retrieval import ranked  # trec_eval's order: the run files rank as the measures do

CORPUS, QUERIES, QRELS = "corpus.jsonl", "queries.jsonl", "qrels"
LAYOUT_HINT = "a BEIR directory holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv"
ID_FIELDS = ("_id", "id")


@dataclass
class Beir:
    """What a search needs, checked: the queries judged in the split and their judgements; the
    corpus stays on disk (``corpus_path``), only its ids are held."""

    directory: Path
    split: str
    queries: dict[str, str]  # the split's judged queries only, in qrels order
    qrels: dict[str, dict[str, int]]  # query id -> passage id -> grade
    corpus_ids: list[str] = field(default_factory=list)

    @property
    def corpus_path(self) -> Path:
        return self.directory / CORPUS


def is_beir_dir(path: str | Path | None) -> bool:
    """A directory with any of the BEIR names (so a directory missing one of them is said, not
    mistaken for another kind of dataset directory)."""
    if path is None:
        return False
    directory = Path(path).expanduser()
    return directory.is_dir() and any((directory / name).exists() for name in (CORPUS, QUERIES, QRELS))


def splits(directory: Path) -> list[str]:
    qrels = directory / QRELS
    return sorted(p.stem for p in qrels.glob("*.tsv")) if qrels.is_dir() else []


def read_beir(directory: str | Path, split: str) -> Beir:
    """The split's queries and judgements, and the corpus's ids, all checked against each other."""
    directory = Path(directory).expanduser()
    for name in (CORPUS, QUERIES):
        if not (directory / name).is_file():
            raise BertkitError(f"--data {directory}: no {name}", LAYOUT_HINT)
    qrels_file = directory / QRELS / f"{split}.tsv"
    if not qrels_file.is_file():
        found = splits(directory)
        raise BertkitError(
            f"--data {directory}: no {QRELS}/{split}.tsv (split {split!r})",
            f"use --split {found[0]} (splits found: {', '.join(found)})" if found else LAYOUT_HINT,
        )
    qrels = read_qrels(qrels_file)
    every_query = read_queries(directory / QUERIES)
    unknown = [q for q in qrels if q not in every_query]
    if unknown:
        raise BertkitError(
            f"{qrels_file}: {len(unknown)} query id(s) not in {QUERIES} (e.g. {unknown[0]!r})",
            "the qrels and the queries must come from the same dataset",
        )
    corpus_ids = check_corpus(directory / CORPUS)
    known = set(corpus_ids)
    missing = sorted({d for judged in qrels.values() for d in judged if d not in known})
    if missing:
        raise BertkitError(
            f"{qrels_file}: {len(missing)} passage id(s) not in {CORPUS} (e.g. {missing[0]!r})",
            "the qrels and the corpus must come from the same dataset",
        )
    return Beir(directory, split, {q: every_query[q] for q in qrels}, qrels, corpus_ids)


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """query id -> passage id -> integer grade; a header line (a grade that is not a number) first."""
    qrels: dict[str, dict[str, int]] = {}
    lines = readers.split_lines(readers.read_text(path))
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise BertkitError(
                f"{path}:{number}: expected 3 TAB-separated fields (query-id, corpus-id, score), got {len(parts)}",
                "one judgement per line: query-id<TAB>corpus-id<TAB>score",
            )
        query, passage, grade = (part.strip() for part in parts)
        try:
            value = int(grade)
        except ValueError:
            if number == 1 and not qrels:
                continue  # the header
            raise BertkitError(
                f"{path}:{number}: score {grade!r} is not an integer", "grades are 0, 1, 2 ..."
            ) from None
        if not query or not passage:
            raise BertkitError(f"{path}:{number}: an empty query or corpus id", "every judgement names both")
        qrels.setdefault(query, {})[passage] = value
    if not qrels:
        raise BertkitError(f"{path} has no judgements", "one judgement per line: query-id<TAB>corpus-id<TAB>score")
    return qrels


def read_queries(path: Path) -> dict[str, str]:
    queries = {}
    for row, record in _records(path):
        query_id = _id_of(record, row, path)
        text = readers.text_value(record, "text", row, str(path)).strip()
        if not text:
            raise BertkitError(f"{path}: row {row} (query {query_id!r}) has no text", "every query needs its text")
        queries[query_id] = text
    return queries


def corpus_rows(path: Path) -> Iterator[tuple[str, str]]:
    """(id, text) per passage, in file order; the text is ``title text`` (BEIR's dense retrieval
    joins them so), or a .txt line whose id is its row number from 0."""
    text_file = path.suffix.lower() == ".txt"
    for row, record in _records(path):
        if text_file:
            text = "\t".join(v for v in (record.get("text"), record.get("text_pair")) if v)
            yield str(row - 1), text.strip()
            continue
        passage = readers.text_value(record, "text", row, str(path))
        title = readers.text_value(record, "title", row, str(path))
        yield _id_of(record, row, path), " ".join(part for part in (title.strip(), passage.strip()) if part)


def check_corpus(path: Path) -> list[str]:
    """The corpus's ids in order, after checking every row (one pass, no text kept)."""
    ids, seen = [], set()
    for row, (passage_id, text) in enumerate(corpus_rows(path), 1):
        if not text:
            raise BertkitError(f"{path}: row {row} (passage {passage_id!r}) has no text", "remove it or give its text")
        if passage_id in seen:
            raise BertkitError(f"{path}: row {row}: passage id {passage_id!r} appears twice", "ids must be unique")
        seen.add(passage_id)
        ids.append(passage_id)
    return ids


def _records(path: Path) -> Iterator[tuple[int, dict]]:
    from bertkit.data.streams import InputStream

    if not path.is_file():
        raise BertkitError(f"no such file: {path}", LAYOUT_HINT)
    for row, record, _, _ in InputStream(str(path)).records():
        yield row, record


def _id_of(record: dict, row: int, path: Path) -> str:
    for name in ID_FIELDS:
        value = readers.id_value(record, row, str(path), name)
        if value is not None and str(value).strip():
            return str(value).strip()
    raise BertkitError(f"{path}: row {row} has no _id", "every row needs its id under _id")


def score_text(score: float) -> str:
    """Nine significant digits: every float32 back exactly, so the file ranks as its scores did."""
    return f"{score:.9g}"


def run_lines(run: dict[str, dict[str, float]], tag: str) -> Iterator[str]:
    for query, scores in run.items():
        for rank, (passage, score) in enumerate(ranked(scores), 1):
            yield f"{query} Q0 {passage} {rank} {score_text(score)} {tag}\n"


def read_run(path: Path) -> dict[str, dict[str, float]]:
    """A TREC run file back (for tests and tools): query id -> passage id -> score."""
    run: dict[str, dict[str, float]] = {}
    for number, line in enumerate(readers.split_lines(readers.read_text(path)), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise BertkitError(f"{path}:{number}: not a TREC run line", "qid Q0 docid rank score tag")
        run.setdefault(parts[0], {})[parts[2]] = float(parts[4])
    return run
