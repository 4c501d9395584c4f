"""`bertkit predict` on a multi-head directory, streamed as one-task predict is (bertkit/api/streaming.py):
chunks of rows in, one row out per input row (each head's answer under its name), written chunk by
chunk; to a file, resumable with ``--resume`` (the parts are fingerprinted with the model, its heads,
the backend and the settings, so a resumed file equals an uninterrupted one byte for byte).

The heads that answer are fixed by the first chunk: every head that reads those rows (a pair head
on single texts is left out, and said); a later row one of them cannot read stops the run as a bad
row does in one-task predict. A CoNLL file, which a tagger head reads whole with its neighbours,
is read whole (one chunk), as one-task predict reads it."""

from __future__ import annotations

from pathlib import Path

from bertkit.api.multihead_serving import MultiHeadServing
from bertkit.data.streams import Chunk, InputStream
from bertkit.errors import BertkitError
from bertkit.options import InferenceOptions, PredictOptions, StreamOptions


def predict_heads_stream(
    model_dir: str, options: PredictOptions, run: InferenceOptions | None = None, stream: StreamOptions | None = None
):
    """Every head's answers for ``options.input``, streamed to ``options.output`` ('-': standard
    output). Returns the stream's summary with ``heads`` (those that answered) and its notices."""
    from bertkit.api import streaming
    from bertkit.data.sinks import sink_for

    stream = (stream or StreamOptions()).validate("bertkit predict")
    target = None if options.output in (None, "-") else Path(options.output).expanduser().resolve()
    serving, heads, source, pipeline, whole = _prepared(model_dir, options, run, stream.chunk_rows, target)
    if whole and stream.resume:
        raise BertkitError("--resume: a CoNLL file is read whole, in one part", "drop --resume")
    settings = {
        **streaming.model_fingerprint(model_dir),
        "heads": heads.names,
        "backend": serving.backend,
        "batch_size": serving.heads.run.batch_size,
        "precision": serving.heads.run.precision,
        "chunk_rows": stream.chunk_rows,
    }
    summary = streaming.run(
        source,
        pipeline,
        sink_for(target, vectors=False),
        target,
        settings,
        resume=stream.resume,
        total=None if whole else source.total_rows(),
        label="predict",
        quiet=stream.quiet,
        long_lived=stream.long_lived,
    )
    return _finished(summary, serving, heads)


def predict_multi(model_dir: str, options: PredictOptions, run: InferenceOptions | None = None) -> dict:
    """The same rows in memory (the Python API): ``rows``, ``heads``, ``notices``, ``runtime``;
    written to ``options.output`` too unless it is '-'."""
    import time

    serving, heads, _, pipeline, _ = _prepared(model_dir, options, run, None, None)
    started = time.perf_counter()
    rows = [row for _, found in pipeline.results() for row in found]
    seconds = time.perf_counter() - started
    if options.output and options.output != "-":
        from bertkit.training.results import write_rows

        write_rows(Path(options.output), rows)
    return {
        "rows": rows,
        "notices": heads.notices,
        "heads": list(heads.answering or heads.names),
        "rows_per_second": len(rows) / max(seconds, 1e-9),
        "runtime": serving.heads.runtime(),
    }


def _prepared(model_dir: str, options: PredictOptions, run, chunk_rows: int | None, target: Path | None) -> tuple:
    """(the server's predictor, the heads, the input, the chunk pipeline, whether it is read whole)."""
    from bertkit.api import streaming
    from bertkit.api.multihead_inference import refuse_given

    refuse_given("bertkit predict", **options.task_options)
    source = InputStream(options.input)
    if target is not None:
        streaming.check_apart(target, source, model_dir)  # before the model: an output never an input
    serving = MultiHeadServing(model_dir, run, options.backend, head=options.head)
    heads = _Heads(serving, [options.head] if options.head else serving.names)
    whole = heads.read_whole(source)
    chunk_rows, first = (None, None) if whole else (chunk_rows, streaming.FIRST_CHUNK_ROWS)

    def chunks(skip: int):
        read = source.chunks(chunk_rows, skip, first=first) if not whole else [_whole_chunk(source, heads)]
        return (heads.checked(chunk) for chunk in read)

    pipeline = streaming.Pipeline(chunks, lambda chunk: serving.predict(chunk.records), serving.load)
    return serving, heads, source, pipeline, whole


def _finished(summary, serving: MultiHeadServing, heads: "_Heads"):
    summary.notices = heads.notices + list(summary.notices)
    summary.heads = list(heads.answering or heads.names)
    summary.runtime = serving.heads.runtime()
    return summary


class _Heads:
    """Which heads answer (fixed by the first chunk) and each chunk's rows as their examples."""

    def __init__(self, serving: MultiHeadServing, names: list[str]):
        self.serving, self.names = serving, names
        self.answering: list[str] | None = None
        self.notices: list[str] = []

    def read_whole(self, source: InputStream) -> bool:
        """A CoNLL file (what a tagger head reads whole): one chunk, read by the heads' readers."""
        adapters = self.serving.heads.adapters
        return not source.stdin and any(
            adapters[name].reads_whole(path) and adapters[name].per_token_outputs
            for name in self.names
            for path in source.paths
        )

    def checked(self, chunk: Chunk) -> Chunk:
        if chunk.examples:  # read whole by the heads themselves
            return chunk
        if self.answering is None:
            self.answering, self.notices = self._first(chunk)
        records = self.serving.examples_of(chunk.records, chunk.where, self.answering)
        return Chunk(chunk.start, records, chunk.where, True)

    def _first(self, chunk: Chunk) -> tuple[list[str], list[str]]:
        """The heads that read the first chunk's rows; the others said and left out."""
        answering, notices, first_error = [], [], None
        for name in self.names:
            try:
                self.serving.examples_of(chunk.records, chunk.where, [name])
                answering.append(name)
            except BertkitError as exc:
                first_error = first_error or exc
                notices.append(f"head {name} left out: {exc.message.split(': ', 1)[-1]}")
        if not answering or (len(self.names) == 1 and first_error):
            raise first_error
        return answering, notices


def _whole_chunk(source: InputStream, heads: _Heads) -> Chunk:
    """The one file every head reads with its own reader (a tagger's CoNLL sentences)."""
    from bertkit.data.registry import Source
    from bertkit.tasks.base import PREDICT

    found, notices = {}, []
    for name in heads.names:
        adapter = heads.serving.heads.adapters[name]
        try:  # every file of the input (a directory or glob of CoNLL files), in order
            found[name] = [ex for path in source.paths for ex in adapter.read(Source(str(path), path=path), PREDICT)]
        except BertkitError as exc:
            if len(heads.names) == 1:
                raise BertkitError(f"head {name}: {exc.message}", exc.hint) from None
            notices.append(f"head {name} left out: {exc.message}")
    if not found:
        raise BertkitError(f"no head reads the rows of {source.description}", "; ".join(notices) or "check the input")
    heads.answering, heads.notices = list(found), notices
    count = max(len(rows) for rows in found.values())
    records = [{name: rows[i] for name, rows in found.items() if i < len(rows)} for i in range(count)]
    return Chunk(0, heads.serving.as_examples(records), source.description, True)
