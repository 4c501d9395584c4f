"""``bertkit embed`` as an API: vectors for every input row (or word) from any checkpoint.

``embed`` validates everything (output format, pooling, columns, lengths) before loading a model,
returns the vectors, and writes them all-or-nothing when given an output path: ``.npy`` (rows x
dim float32), ``.npz`` (``vectors`` and ``ids``; per word also ``words`` and ``row_starts``) or
``.jsonl`` (one object per row, in input order).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from bertkit.api.embedder import Embedder  # noqa: F401  (part of this API)
from bertkit.data import readers
from bertkit.data.readers import pick_column
from bertkit.data.sinks import floats
from bertkit.data.streams import Chunk
from bertkit.errors import BertkitError
from bertkit.model_dir import atomic_file, check_inputs_kept, check_output_file
from bertkit.options import EmbeddingOptions, StreamOptions
from bertkit.tasks.base import require_nonempty

SUFFIXES = (".npy", ".npz", ".jsonl", ".parquet")
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


def embed(model: str, options: EmbeddingOptions) -> Embeddings:
    """Vectors for the rows of ``options.input`` ('-' = stdin), in input order; written to
    ``options.output`` (.npy/.npz/.jsonl/.parquet; '-': not written) when given. The vectors are
    ``embed_stream``'s pipeline collected, the input as one chunk."""
    from bertkit.data.streams import InputStream

    input_path, per_word = options.input, options.per_word
    target = check_output(options.output, per_word)
    if target is not None:
        from bertkit.api.streaming import check_model_kept

        stream = InputStream(input_path)  # read below; its files checked against the output here
        check_inputs_kept(target, *stream.paths)
        why = stream.would_read(target)
        if why:
            raise BertkitError(f"--output {target} {why}", "choose an --output outside the input's files")
        check_model_kept(target, model)
    embedder = Embedder(model, options)
    columns = columns_of(options)
    done = [vectors for _, vectors in _pipeline(embedder, InputStream(input_path), None, columns).results()]
    if not done:  # every reader refuses an input without rows; this says the same for any other
        rows_of([], "<stdin>" if input_path == "-" else input_path, per_word, columns)
    result = _collected(done, embedder, options.precision)
    if target is not None and embedder.engine.is_main_process:
        write(result, target)
        result.written_to = str(target)
    return result


def _collected(done: list["_Vectors"], embedder: Embedder, precision: str) -> Embeddings:
    """One Embeddings from the chunks' vectors, in input order."""
    per_word = done[0].words is not None
    if per_word:
        vectors = [vector for part in done for vector in part.vectors]
    else:  # one chunk (the in-memory call) keeps its array as computed
        vectors = done[0].vectors if len(done) == 1 else np.concatenate([part.vectors for part in done])
    return Embeddings(
        [i for part in done for i in part.ids],
        vectors,
        [words for part in done for words in part.words] if per_word else None,
        embedder.spec.name,
        embedder.dim,
        sum(part.windowed for part in done),
        sum(part.features for part in done),
        None if per_word else embedder.stride,
        sum(part.seconds for part in done),
        runtime=embedder.engine.runtime(precision),
    )


def check_output(output: str | None, per_word: bool) -> Path | None:
    if not isinstance(output, str) or output == "-":  # None, or EmbeddingOptions' output not given
        return None
    target = Path(output).expanduser()
    suffix = target.suffix.lower()
    if suffix not in SUFFIXES:
        raise BertkitError(
            f"--output {output}: unknown format {suffix or '(no suffix)'}",
            "use .npy (vectors), .parquet (id + vector), .npz (vectors + ids) or .jsonl",
        )
    if per_word and suffix == ".parquet":
        raise BertkitError("--per-word vectors are written to .npz or .jsonl", "use --output FILE.npz or FILE.jsonl")
    if per_word and suffix == ".npy":
        raise BertkitError(
            "--per-word vectors are ragged (one row per word), so they do not fit one .npy array",
            "use --output FILE.npz (vectors + row_starts + words + ids) or FILE.jsonl",
        )
    return check_output_file(target)


@dataclass
class Columns:
    """The columns asked for (None: found by name); a stream fixes them from its first chunk."""

    text: str | None = None
    pair: str | None = None
    id: str | None = None
    fixed: bool = False  # pair/id None means none, not "look for one"


def columns_of(options: EmbeddingOptions) -> Columns:
    return Columns(options.text_column, options.text_pair_column, options.id_column)


def rows_of(records: list[dict], where: str, per_word: bool, columns: Columns, first_row: int = 0):
    """(ids, texts, pairs or None, word lists or None, the columns used); ids default to the row
    number from 0, counted from ``first_row``."""
    names = list(dict.fromkeys(key for record in records for key in record))
    texts = pairs = sentences = None
    text_col = pair_col = None
    if per_word and "tokens" in names and not columns.text:
        sentences = [record.get("tokens") for record in records]
        bad = [i + 1 for i, words in enumerate(sentences) if not isinstance(words, list) or not words]
        if bad:
            raise BertkitError(
                f"{where}: 'tokens' of row(s) {', '.join(map(str, bad[:5]))} is not a non-empty list",
                "give a list of words per row, or raw text under 'text'",
            )
        sentences = [[str(word) for word in words] for words in sentences]
    else:
        text_col = pick_column(names, columns.text, TEXT_CANDIDATES, "text", "--text-column", where)
        pair_col = columns.pair if columns.fixed else (columns.pair or ("text_pair" if "text_pair" in names else None))
        if pair_col and pair_col not in names and not columns.fixed:
            raise BertkitError(
                f"{where}: no column {pair_col!r} for --text-pair-column", f"columns found: {', '.join(names)}"
            )
        rows = [
            {
                "text": readers.text_value(r, text_col, row, where),
                "text_pair": readers.text_value(r, pair_col, row, where) if pair_col else None,
            }
            for row, r in enumerate(records, first_row + 1)
        ]
        require_nonempty(rows, ("text", "text_pair") if pair_col else ("text",), where)
        texts = [row["text"] for row in rows]
        pairs = [row["text_pair"] for row in rows] if pair_col else None
        if per_word:
            if pairs is not None:
                raise BertkitError(
                    f"{where}: --per-word embeds single texts, but rows have two",
                    "drop the second text (a TAB in .txt lines) or leave out --per-word",
                )
            from bertkit.decoding.tags import split_words

            sentences = [split_words(text)[0] for text in texts]
    id_col = columns.id if columns.fixed else (columns.id or next((c for c in ID_CANDIDATES if c in names), None))
    if id_col and id_col not in names and not columns.fixed:
        raise BertkitError(f"{where}: no column {id_col!r} for --id-column", f"columns found: {', '.join(names)}")
    used = Columns(text_col, pair_col, id_col, fixed=True)
    if not id_col:
        return [str(first_row + i) for i in range(len(records))], texts, pairs, sentences, used
    given = [readers.id_value(record, row, where, id_col) for row, record in enumerate(records, first_row + 1)]
    return ["" if value is None else str(value) for value in given], texts, pairs, sentences, used


def embed_stream(model: str, options: EmbeddingOptions, stream: StreamOptions | None = None):
    """``embed`` in chunks of ``stream.chunk_rows`` rows, each written as it is done: JSONL on
    standard output (``options.output`` '-') or a .npy / .jsonl / .parquet file assembled at the end
    (resumable with ``stream.resume``; see bertkit.api.streaming). Memory does not grow with the
    input. Returns the stream summary with ``dim`` and ``runtime``. Row vectors only (``per_word``:
    ``embed``)."""
    from bertkit.api import streaming
    from bertkit.data.sinks import sink_for
    from bertkit.data.streams import InputStream

    stream = (stream or StreamOptions()).validate("bertkit embed")
    if options.per_word:
        raise BertkitError("--per-word vectors are ragged: they are built in memory, not streamed", "call embed")
    source = InputStream(options.input)
    target = _stream_target(None if options.output == "-" else options.output, source, model)
    embedder = Embedder(model, options)
    embedder.quiet = True  # no per-batch progress: the stream reports per chunk
    pipeline = _pipeline(embedder, source, stream.chunk_rows, columns_of(options), streaming.FIRST_CHUNK_ROWS)
    settings = {
        **streaming.model_fingerprint(model),
        "pooling": embedder.spec.name,
        "max_length": options.max_length,
        "stride": embedder.stride,
        "batch_size": options.batch_size,
        "normalize": options.normalize,
        "precision": options.precision,
        "threads": options.threads,
        "chunk_rows": stream.chunk_rows,
        "columns": [options.text_column, options.text_pair_column, options.id_column],
    }
    windowed = [0]

    def process(chunk: Chunk) -> tuple:
        done = pipeline.process(chunk)
        windowed[0] += done.windowed
        return done.ids, done.vectors  # what the vector sinks write

    # the model loads at the first chunk, after its rows are checked and before any output exists
    streamed = streaming.Pipeline(pipeline.chunks, process, pipeline.ready)
    summary = streaming.run(
        source,
        streamed,
        sink_for(target, vectors=True),
        target,
        settings,
        resume=stream.resume,
        total=source.total_rows(),
        label="embed",
        quiet=stream.quiet,
        writer=lambda: embedder.engine.is_main_process,
        long_lived=stream.long_lived,
    )
    summary.dim, summary.pooling, summary.stride, summary.windowed_rows = (
        embedder.dim,
        embedder.spec.name,
        embedder.stride,
        windowed[0],
    )
    summary.runtime = embedder.engine.runtime(options.precision) if embedder.engine is not None else {}
    return summary


def _stream_target(output: str | None, stream, model: str) -> Path | None:
    """The file a stream writes (None: standard output), checked before the model loads: a format
    written chunk by chunk, and never one of the input's or the model's files."""
    from bertkit.api.streaming import check_apart

    target = check_output(output, False) if output else None
    if target is not None and target.suffix.lower() == ".npz":
        raise BertkitError(
            ".npz is one zip of all vectors and cannot be written chunk by chunk",
            "use --output FILE.npy (vectors; ids in input order) or .parquet (id + vector)",
        )
    if target is not None:
        check_apart(target, stream, model)
    return target


@dataclass
class _Rows:
    """A chunk's rows as embed reads them: ids, and texts (and pairs) or, per word, word lists."""

    ids: list[str]
    texts: list[str] | None
    pairs: list[str] | None
    words: list[list[str]] | None

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class _Vectors:
    """A chunk's vectors: (rows, dim), or per word one (words, dim) array per row."""

    ids: list[str]
    vectors: object
    words: list[list[str]] | None
    windowed: int  # rows split into windows
    features: int  # model inputs run
    seconds: float  # inference time


def _pipeline(embedder: Embedder, stream, chunk_rows: int | None, columns: Columns, first: int | None = None):
    """Chunks of ``chunk_rows`` rows (None: one chunk; ``first``: the first chunk's, growing to
    ``chunk_rows``), each checked as it is read, then embedded. The input's first chunk finds the
    columns (text, pair, id) that every later chunk reads."""
    from bertkit.api.streaming import Pipeline

    found = [columns]

    def chunks(skip: int) -> Iterator[Chunk]:
        # read from the first row even when resuming, so the first chunk names the columns as it
        # did for the earlier run; that run's chunks (the same sizes: --resume checks) are skipped
        for chunk in stream.chunks(chunk_rows, first=first):
            done_before = chunk.start + len(chunk.records) <= skip
            if done_before and found[0].fixed:
                continue
            checked = _checked(chunk, found, embedder.per_word)
            if not done_before:
                yield checked

    return Pipeline(chunks, lambda chunk: _embedded(embedder, chunk.records), embedder.load)


def _checked(chunk: Chunk, found: list[Columns], per_word: bool) -> Chunk:
    """The chunk's rows read as ``_Rows`` (a bad row is a BertkitError naming its row)."""
    ids, texts, pairs, words, found[0] = rows_of(chunk.records, chunk.where, per_word, found[0], chunk.start)
    return dataclasses.replace(chunk, records=_Rows(ids, texts, pairs, words))


def _embedded(embedder: Embedder, rows: _Rows) -> _Vectors:
    embedder.load()  # before the clock: ``seconds`` is inference time
    started = time.perf_counter()
    if rows.words is not None:
        vectors, windowed, features = embedder.word_vectors(rows.words)
    else:
        vectors, windowed, features = embedder.vectors_with_counts(rows.texts, rows.pairs)
    return _Vectors(rows.ids, vectors, rows.words, windowed, features, time.perf_counter() - started)


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
            np.savez(
                handle,
                vectors=np.concatenate(result.vectors),
                ids=np.array(result.ids),
                words=np.array([w for words in result.words for w in words]),
                row_starts=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            )
        elif suffix == ".parquet":
            from bertkit.data.sinks import ParquetVectors

            ParquetVectors().write_part((result.ids, result.vectors), handle)
        else:
            handle.writelines(line.encode("utf-8") for line in jsonl_lines(result))


def jsonl_lines(result: Embeddings):
    for index, row_id in enumerate(result.ids):
        if result.words is None:
            row = {"id": row_id, "vector": floats(result.vectors[index])}
        else:
            row = {"id": row_id, "words": result.words[index], "vectors": [floats(v) for v in result.vectors[index]]}
        yield json.dumps(row, ensure_ascii=False) + "\n"
