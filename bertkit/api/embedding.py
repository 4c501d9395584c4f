"""``bertkit embed`` as an API: vectors for every input row (or word) from any checkpoint.

``embed`` validates everything (output format, pooling, columns, lengths) before loading a model,
returns the vectors, and writes them all-or-nothing when given an output path: ``.npy`` (rows x
dim float32), ``.npz`` (``vectors`` and ``ids``; per word also ``words`` and ``row_starts``) or
``.jsonl`` (one object per row, in input order).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertkit.data import readers
from bertkit.data.readers import pick_column
from bertkit.errors import BertkitError
from bertkit.model_dir import atomic_file, check_inputs_kept, check_output_file
from bertkit.models import load_tokenizer, resolve_model
from bertkit.networks.pooling import parse_pooling
from bertkit.tasks.base import require_nonempty

SUFFIXES = (".npy", ".npz", ".jsonl")
TEXT_CANDIDATES = ("sentence", "text", "review", "content")
ID_CANDIDATES = ("id", "idx", "guid", "index")


@dataclass
class Embeddings:
    ids: list[str]
    vectors: object  # np.ndarray (rows, dim); with --per-word a list of (words, dim) arrays
    words: list[list[str]] | None
    pooling: str
    dim: int
    windowed_rows: int  # rows longer than max_length, split into windows
    features: int  # model inputs (windows) actually run
    stride: int | None
    seconds: float  # inference time
    written_to: str | None = None
    runtime: dict | None = None  # precision used (and why), threads

    @property
    def rows(self) -> int:
        return len(self.ids)


def embed(model: str, input_path: str, output: str | None = None, pooling: str | None = None, per_word: bool = False,
          max_length: int = 128, stride: int | None = None, batch_size: int = 64, normalize: bool = False,
          text_column: str | None = None, text_pair_column: str | None = None, id_column: str | None = None,
          precision: str = "auto") -> Embeddings:
    """Vectors for the rows of ``input_path`` ('-' = stdin), in input order; written to ``output``
    (.npy/.npz/.jsonl) when given."""
    target = check_output(output, per_word)
    if target is not None:
        check_inputs_kept(target, input_path)
    spec = parse_pooling(pooling, per_word)
    if not 8 <= max_length <= 8192:
        raise BertkitError("--max-length must be between 8 and 8192", "128 is the fine-tuning default")
    if batch_size < 1:
        raise BertkitError("--batch-size must be >= 1", "e.g. --batch-size 64")
    stride = max_length // 4 if stride is None else stride
    ids, texts, pairs, sentences = read_rows(input_path, per_word, text_column, text_pair_column, id_column)

    from bertkit.networks import embedding

    model_ref = resolve_model(model)
    tokenizer = load_tokenizer(model_ref, model)
    embedding.check_encoder(model_ref, model, spec, max_length)
    if per_word:
        features, windowed = embedding.word_features(tokenizer, sentences, max_length)
    else:
        features = embedding.row_features(tokenizer, texts, pairs, max_length, stride)
        windowed = sum(n > 1 for n in _window_counts(features, len(texts)))

    from bertkit.engine import Engine  # heavy: torch + accelerate

    engine = Engine(precision)
    network = engine.prepare_model(embedding.EmbeddingNetwork(embedding.load_encoder(model_ref, model), spec, per_word))
    started = time.perf_counter()
    outputs = embedding.run(engine, network, features, batch_size, tokenizer.pad_token_id)
    seconds = time.perf_counter() - started
    if per_word:
        vectors = embedding.words_from_windows(features, outputs, sentences)
        vectors = [embedding.l2_normalize(v) for v in vectors] if normalize else vectors
        dim = vectors[0].shape[1]
    else:
        vectors = embedding.rows_from_windows(features, outputs, len(texts), spec)
        vectors = embedding.l2_normalize(vectors) if normalize else vectors
        dim = vectors.shape[1]
    result = Embeddings(ids, vectors, sentences if per_word else None, spec.name, dim, windowed, len(features),
                        None if per_word else stride, seconds, runtime=engine.runtime(precision))
    if target is not None and engine.is_main_process:
        write(result, target)
        result.written_to = str(target)
    return result


def check_output(output: str | None, per_word: bool) -> Path | None:
    if output is None or output == "-":
        return None
    target = Path(output).expanduser()
    suffix = target.suffix.lower()
    if suffix not in SUFFIXES:
        raise BertkitError(f"--output {output}: unknown format {suffix or '(no suffix)'}",
                           "use .npy (vectors), .npz (vectors + ids) or .jsonl")
    if per_word and suffix == ".npy":
        raise BertkitError("--per-word vectors are ragged (one row per word), so they do not fit one .npy array",
                           "use --output FILE.npz (vectors + row_starts + words + ids) or FILE.jsonl")
    return check_output_file(target)


def read_rows(input_path: str, per_word: bool, text_column: str | None, text_pair_column: str | None,
              id_column: str | None):
    """(ids, texts, pairs or None, word lists or None) from a file or stdin ('-')."""
    if input_path == "-":
        where, records = "<stdin>", readers.parse_records(sys.stdin.read(), "", "<stdin>")
    else:
        path = Path(input_path).expanduser()
        where, records = str(path), readers.read_records(path)
    columns = list(dict.fromkeys(key for record in records for key in record))
    texts = pairs = sentences = None
    if per_word and "tokens" in columns and not text_column:
        sentences = [record.get("tokens") for record in records]
        bad = [i + 1 for i, words in enumerate(sentences) if not isinstance(words, list) or not words]
        if bad:
            raise BertkitError(f"{where}: 'tokens' of row(s) {', '.join(map(str, bad[:5]))} is not a non-empty list",
                               "give a list of words per row, or raw text under 'text'")
        sentences = [[str(word) for word in words] for words in sentences]
    else:
        text_col = pick_column(columns, text_column, TEXT_CANDIDATES, "text", "--text-column", where)
        pair_col = text_pair_column or ("text_pair" if "text_pair" in columns else None)
        if pair_col and pair_col not in columns:
            raise BertkitError(f"{where}: no column {pair_col!r} for --text-pair-column", f"columns found: {', '.join(columns)}")
        rows = [{"text": readers.text_value(r, text_col, row, where),
                 "text_pair": readers.text_value(r, pair_col, row, where) if pair_col else None}
                for row, r in enumerate(records, 1)]
        require_nonempty(rows, ("text", "text_pair") if pair_col else ("text",), where)
        texts = [row["text"] for row in rows]
        pairs = [row["text_pair"] for row in rows] if pair_col else None
        if per_word:
            if pairs is not None:
                raise BertkitError(f"{where}: --per-word embeds single texts, but rows have two",
                                   "drop the second text (a TAB in .txt lines) or leave out --per-word")
            from bertkit.decoding.tags import split_words

            sentences = [split_words(text)[0] for text in texts]
    id_col = id_column or next((c for c in ID_CANDIDATES if c in columns), None)
    if id_col and id_col not in columns:
        raise BertkitError(f"{where}: no column {id_col!r} for --id-column", f"columns found: {', '.join(columns)}")
    if not id_col:
        return [str(i) for i in range(len(records))], texts, pairs, sentences
    given = [readers.id_value(record, row, where, id_col) for row, record in enumerate(records, 1)]
    return ["" if value is None else str(value) for value in given], texts, pairs, sentences


def write(result: Embeddings, target: Path) -> None:
    """Write all-or-nothing: a failure never leaves half a file."""
    suffix = target.suffix.lower()
    with atomic_file(target, "wb") as handle:
        if suffix == ".npy":
            np.save(handle, result.vectors)
        elif suffix == ".npz" and result.words is None:
            np.savez(handle, vectors=result.vectors, ids=np.array(result.ids))
        elif suffix == ".npz":
            counts = [len(words) for words in result.words]
            np.savez(handle, vectors=np.concatenate(result.vectors), ids=np.array(result.ids),
                     words=np.array([w for words in result.words for w in words]),
                     row_starts=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
        else:
            handle.writelines(line.encode("utf-8") for line in jsonl_lines(result))


def jsonl_lines(result: Embeddings):
    for index, row_id in enumerate(result.ids):
        if result.words is None:
            row = {"id": row_id, "vector": _floats(result.vectors[index])}
        else:
            row = {"id": row_id, "words": result.words[index], "vectors": [_floats(v) for v in result.vectors[index]]}
        yield json.dumps(row, ensure_ascii=False) + "\n"


def _floats(vector) -> list[float]:
    return [float(f"{x:.7g}") for x in vector.tolist()]


def _window_counts(features: list[dict], rows: int) -> list[int]:
    counts = [0] * rows
    for feature in features:
        counts[feature["example_index"]] += 1
    return counts
