"""`bertkit mine MODEL --data pairs --corpus passages --output triplets.jsonl`: hard negatives.

For each (anchor, positive) pair the model ranks the corpus (embedded once, in chunks, as
`eval --data BEIR_DIR` searches: bertkit.api.retrieval), and the negatives are taken from its top
``candidates`` passages, best-ranked first, after dropping:

1. copies of the positive or of the anchor (the same text, ignoring case and spacing);
2. the first ``skip_top`` of the rest (the very top is where unlabelled positives hide);
3. any passage scoring above the positive's own score minus ``margin`` (as sentence-transformers'
   absolute margin: a passage the model finds as close as the positive may well be one);
4. a passage already taken for this pair.

Each pair gives up to ``negatives`` triplets (anchor, positive, negative); a pair with fewer is
counted and said. The output is written whole or not at all, never over an input or a model file,
and never over an existing file without ``overwrite``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bertkit.api.embedder import Embedder
from bertkit.api.retrieval import embedding_options, scaled, search_vectors
from bertkit.api.streaming import check_apart
from bertkit.data import formats, readers
from bertkit.data.beir import check_corpus, corpus_rows
from bertkit.data.streams import InputStream
from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.model_dir import atomic_file, check_output_file
from bertkit.options.retrieval import MineOptions

COLUMNS = ("anchor", "positive")


@dataclass
class Mined:
    pairs: int
    triplets: int
    short_pairs: int  # pairs that got fewer than --negatives
    dropped: dict = field(default_factory=dict)  # why candidates were not taken: copies, skipped, margin
    written_to: str | None = None
    runtime: dict | None = None
    notices: list = field(default_factory=list)


def mine(model: str, options: MineOptions) -> Mined:
    """Triplets from the pairs of ``options.data`` and the passages of ``options.corpus``, written
    to ``options.output`` (see the module's docstring for how the negatives are chosen)."""
    settings = options.validate()
    target = _target(model, settings.data, settings.corpus, settings.output, settings.overwrite)
    anchors, positives = read_pairs(Path(settings.data).expanduser())
    corpus_path = Path(settings.corpus).expanduser()
    check_corpus(corpus_path)  # every passage checked before the model loads
    embedder = Embedder(model, embedding_options(settings.max_length, settings))
    cosine = settings.similarity == "cosine"
    anchor_vectors = scaled(embedder.vectors(anchors), cosine)
    positive_scores = np.einsum("ij,ij->i", anchor_vectors, scaled(embedder.vectors(positives), cosine))
    positions, scores = search_vectors(
        embedder, anchor_vectors, corpus_path, settings.candidates, cosine, settings.corpus_chunk
    )
    wanted = set(positions.ravel().tolist())
    texts = {i: text for i, (_, text) in enumerate(corpus_rows(corpus_path)) if i in wanted}
    rows, result = [], Mined(len(anchors), 0, 0, {"copies": 0, "skipped": 0, "margin": 0})
    for i, (anchor, positive) in enumerate(zip(anchors, positives)):
        ranked = [(texts[p], float(s)) for p, s in zip(positions[i], scores[i])]
        chosen = choose_negatives(anchor, positive, float(positive_scores[i]), ranked, settings, result.dropped)
        rows += [{"anchor": anchor, "positive": positive, "negative": negative} for negative in chosen]
        result.short_pairs += len(chosen) < settings.negatives
    result.triplets = len(rows)
    if result.short_pairs:
        result.notices.append(
            notice(
                "data",
                f"{result.short_pairs} of {result.pairs} pairs got fewer than {settings.negatives} negative(s) "
                f"from their top {settings.candidates} (dropped: {_said(result.dropped)}); raise --candidates for more",
                **result.dropped,
            ).text
        )
    if embedder.engine.is_main_process:
        with atomic_file(target) as handle:
            handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        result.written_to = str(target)
    result.runtime = embedder.engine.runtime(settings.precision)
    return result


def choose_negatives(
    anchor: str, positive: str, positive_score: float, ranked: list[tuple[str, float]], settings, dropped: dict
) -> list[str]:
    """The negatives of one pair from its candidates ``ranked`` (text, score), best first."""
    copies = {same_text(positive), same_text(anchor)}
    chosen, taken, to_skip = [], set(), settings.skip_top
    for text, score in ranked:
        key = same_text(text)
        if key in copies:
            dropped["copies"] += 1
        elif to_skip:
            to_skip -= 1
            dropped["skipped"] += 1
        elif score > positive_score - settings.margin:
            dropped["margin"] += 1
        elif key not in taken:
            taken.add(key)
            chosen.append(text)
            if len(chosen) == settings.negatives:
                break
    return chosen


def same_text(text: str) -> str:
    """Texts equal but for case and spacing are the same passage."""
    return " ".join(text.casefold().split())


def read_pairs(path: Path) -> tuple[list[str], list[str]]:
    records = formats.read_records(path)
    missing = [name for name in COLUMNS if records and name not in records[0]]
    if missing:
        raise BertkitError(
            f"{path}: no column {missing[0]!r} (columns found: {', '.join(records[0])})",
            "give pairs as 'anchor' and 'positive' columns (e.g. the SQuAD set's train-pairs.jsonl)",
        )
    anchors, positives = [], []
    for row, record in enumerate(records, 1):
        anchor = readers.text_value(record, "anchor", row, str(path)).strip()
        positive = readers.text_value(record, "positive", row, str(path)).strip()
        if not anchor or not positive:
            side = "anchor" if not anchor else "positive"
            raise BertkitError(f"{path}: row {row} has an empty {side}", "every pair needs both texts")
        anchors.append(anchor)
        positives.append(positive)
    return anchors, positives


def _target(model: str, data: str, corpus: str, output: str, overwrite: bool) -> Path:
    target = check_output_file(output)
    for source in (data, corpus):
        if not Path(source).expanduser().is_file():
            flag = "--data" if source == data else "--corpus"
            raise BertkitError(f"{flag} {source}: no such file", f"give {flag} a file")
        check_apart(target, InputStream(source), model)
    if target.exists() and not overwrite:
        raise BertkitError(f"--output {output} exists", "choose another --output, or pass --overwrite to replace it")
    return target


def _said(dropped: dict) -> str:
    return ", ".join(f"{count} {why}" for why, count in dropped.items())
