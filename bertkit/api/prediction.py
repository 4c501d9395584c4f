"""`bertkit predict`, and the Predictor behind it: a model loaded once for many predictions (the
server and the ONNX backend use it too).

``examples(records)`` validates one request's rows (a BertkitError names what is wrong) and
``predict(examples)`` runs any number of validated examples, possibly from several requests at
once, returning one ``bertkit predict`` row per example. Not thread-safe: one caller at a time
(the server runs every batch on one worker thread).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import time
from pathlib import Path
from typing import Iterator

from bertkit.data import readers
from bertkit.data.registry import Source
from bertkit.data.streams import Chunk, InputStream
from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.model_dir import load_meta
from bertkit.options import InferenceOptions, PredictOptions, StreamOptions
from bertkit.tasks import task_from_state
from bertkit.tasks.base import PREDICT
from bertkit.tasks.learned import stats_of

BACKENDS = ("torch", "onnx", "onnx-int8", "openvino", "openvino-int8")


class Predictor:
    def __init__(
        self,
        model_dir: str,
        run: InferenceOptions | None = None,
        backend: str = "torch",
        task_options: dict | None = None,
        quiet: bool = False,
    ):
        """``run``: batch size, precision, threads (validated here); ``backend``: torch, an exported
        one (BACKENDS) or auto; ``task_options``: the task's predict options (top_k, n_best...)."""
        run = (run or InferenceOptions()).validate("bertkit predict")
        if backend not in BACKENDS + ("auto",):
            raise BertkitError(f"unknown --backend {backend!r}", f"use one of auto, {', '.join(BACKENDS)}")
        self.backend_reason = None
        if backend == "auto":
            from bertkit.export.runtime import fastest_backend

            backend, self.backend_reason = fastest_backend(model_dir)
            # the words of the runtime line (cli.common.runtime_line), so the CLI says it once
            notice("runtime", f"--backend auto: {backend}: {self.backend_reason}", backend=backend)
        self.model_dir, self.backend, self.batch_size = str(model_dir), backend, run.batch_size
        self.meta = load_meta(self.model_dir)
        self.adapter = task_from_state(self.meta["task"])
        self.adapter.check_predictable()
        self.adapter = self.adapter.apply_options(task_options or {}, "predict")
        if backend != "torch":
            from bertkit.export.runtime import exported_file

            if run.precision not in ("no", "auto"):  # the exported runtimes choose their own (fp32, bf16, int8)
                raise BertkitError(
                    f"--precision {run.precision} applies to the torch backend only",
                    "drop --precision (an exported backend picks its own; docs: serving.md)",
                )
            exported_file(self.model_dir, backend)  # exported? checked before any work
        self.precision, self.quiet, self.threads = run.precision, quiet, run.threads
        self.engine = self.network = self.tokenizer = None
        self.stats: dict = {}
        self.coverage: dict | None = None  # --coverage: what the label sets' quantile came from (api/calibration.py)
        self.timings: dict = {}  # seconds: load (once), and preprocess / model / postprocess of the last call

    def load(self) -> "Predictor":
        """Load the model (once); callers validate their input first, so bad input costs no load."""
        if self.engine is not None:
            return self
        started = time.perf_counter()
        if self.backend == "torch":
            from bertkit.inference import load_for_inference

            # the bertkit.json read in __init__: one read per command
            self.engine, self.network, self.tokenizer = load_for_inference(
                self.model_dir, self.adapter, self.precision, self.threads, meta=self.meta
            )
        else:
            from bertkit.export.runtime import load_runner

            self.engine, self.tokenizer = load_runner(self.model_dir, self.backend, self.threads)
        self.engine.quiet = self.quiet
        self.timings["load_seconds"] = time.perf_counter() - started
        return self

    @property
    def task(self) -> str:
        return self.adapter.name

    def examples(self, records: list, where: str = "request") -> list[dict]:
        """Validated examples from JSON rows: objects as in a JSONL file, or strings (a line of a
        text file: a TAB separates a pair's two texts)."""
        if not records:
            raise BertkitError(f"{where}: no inputs", "send at least one input row")
        rows = []
        for number, record in enumerate(records, 1):
            if isinstance(record, str):
                first, tab, second = record.partition("\t")
                record = {"text": first, "text_pair": second} if tab else {"text": record}
            if not isinstance(record, dict):
                raise BertkitError(
                    f"{where}: input {number} is {readers.json_kind(record)}, not an object or a string",
                    "send rows like the lines of a JSONL file for `bertkit predict`",
                )
            rows.append(record)
        return keep_ids(rows, self.adapter.from_records(rows, Source(where), PREDICT), where)

    def outputs_of(self, examples: list[dict]) -> tuple[list, dict]:
        """(the features, the model's outputs) of ``examples``: what a caller that scores the raw
        outputs (calibration, select, audit) needs before ``postprocess``."""
        adapter = self.load().adapter
        features = adapter.preprocess(examples, self.tokenizer, train=False)
        outputs = self._infer(adapter, features)
        return features, outputs

    def _infer(self, adapter, features: list) -> dict:
        return self.engine.infer(
            self.network,
            features,
            self.batch_size,
            adapter.output_names,
            adapter.per_token_outputs,
            self.tokenizer.pad_token_id,
        )

    def predict(self, examples: list[dict]) -> list[dict]:
        adapter = self.load().adapter
        started = time.perf_counter()
        features = adapter.preprocess(examples, self.tokenizer, train=False)
        tokenized = time.perf_counter()
        outputs = self._infer(adapter, features)
        inferred = time.perf_counter()
        predictions = adapter.postprocess(examples, features, outputs)
        self.stats = stats_of(features)
        rows = [with_id(ex, adapter.format_prediction(ex, p)) for ex, p in zip(examples, predictions)]
        if adapter.options.get("set_quantile") is not None:  # --coverage: counts the chunks sum
            self.stats.update(set_counts([row["prediction_set"] for row in rows], len(adapter.labels)))
        self.timings.update(
            preprocess_seconds=tokenized - started,
            model_seconds=inferred - tokenized,
            postprocess_seconds=time.perf_counter() - inferred,
        )
        return rows

    def runtime(self) -> dict:
        """Precision (and why) and threads of the torch backend; an exported backend's precision (what
        its runtime computes in); empty before loading."""
        runtime = getattr(self.engine, "runtime", None)
        if callable(runtime):  # torch
            reason = {"backend_reason": self.backend_reason} if self.backend_reason else {}
            return {**runtime(self.precision), **reason}
        if self.engine is None:
            return {}
        return {"precision": self.engine.precision, "backend": self.backend, "backend_reason": self.backend_reason}

    def info(self) -> dict:
        meta = self.meta
        return {
            "model": Path(self.model_dir).name,
            "task": self.adapter.name,
            "labels": self.adapter.labels,
            "max_length": self.adapter.max_length,
            "base_model": meta.get("base_model"),
            "metrics": meta.get("metrics"),
            "backend": self.backend,
            "backend_reason": self.backend_reason,
            "versions": {**(meta.get("versions") or {}), "bertkit": meta.get("bertkit_version")},
            **({"coverage": self.coverage} if self.coverage is not None else {}),  # serve --coverage: its sets' source
        }


def keep_ids(records: list[dict], examples: list[dict], source: str) -> list[dict]:
    """Each example given its record's "id" (a JSONL field, a CSV column), which ``with_id`` puts
    back in the prediction row: the tasks build examples from their own fields only (QA's carry an
    id already) and make one example per record."""
    if len(records) == len(examples):
        for row, (record, example) in enumerate(zip(records, examples), 1):
            given = readers.id_value(record, row, source)
            if given is not None and "id" not in example:
                example["id"] = given
    return examples


def with_id(example: dict, row: dict) -> dict:
    """The prediction row with the input's id first, as QA's rows have it."""
    return {"id": example["id"], **row} if "id" in example and "id" not in row else row


def _read_whole(adapter, path: Path) -> list[dict]:
    """A file the task reads itself (a .json array, a CoNLL file), each example given its record's
    id. The task builds its examples in from_records, called from inside its own read; a shallow
    copy of the task, whose from_records keeps the ids, reads the file, so the task itself is left
    as it was (a read that returned its records would need no copy: see tasks/base.py)."""
    source = Source(str(path), path=path)
    reader = copy.copy(adapter)
    reader.from_records = functools.partial(_from_records_keeping_ids, adapter, source.description)
    return reader.read(source, PREDICT)


def _from_records_keeping_ids(adapter, where: str, records: list[dict], *args, **kwargs) -> list[dict]:
    return keep_ids(records, adapter.from_records(records, *args, **kwargs), where)


class Predictions(list):
    """The rows of ``predict`` (a plain list) plus ``preprocessing``: the task's facts about the
    input, with human-readable ``notices`` (truncated texts, windows...)."""

    preprocessing: dict
    runtime: dict  # precision used (and why), threads
    timings: dict  # seconds: load_seconds, preprocess_seconds, model_seconds, postprocess_seconds
    prediction_sets: dict | None = None  # --coverage: the quantile, its source, mean size, empty and full rates


def predict(model_dir: str, options: PredictOptions, run: InferenceOptions | None = None) -> Predictions:
    """One output row per row of ``options.input``, in input order, in memory ('-' reads standard
    input; a directory or glob reads its shards in order; ``options.output`` is not written).
    ``options.backend``: torch, or onnx / onnx-int8 after `bertkit export onnx`;
    ``options.task_options``: the task's predict options. For inputs of any size, ``predict_stream``
    writes as it goes. The rows are ``predict_stream``'s pipeline collected, the input as one chunk."""
    predictor = _predictor(model_dir, options, run, quiet=False)
    rows = Predictions()
    for _, predicted in _pipeline(predictor, InputStream(options.input), None, _Facts()).results():
        rows.extend(predicted)
    rows.preprocessing = predictor.stats  # the one chunk's facts, whole (non-counts included)
    rows.runtime = predictor.runtime()
    if predictor.coverage is not None:
        rows.prediction_sets = {**predictor.coverage, **_set_rates(predictor.stats)}
    rows.timings = dict(predictor.timings)
    return rows


def predict_stream(
    model_dir: str, options: PredictOptions, run: InferenceOptions | None = None, stream: StreamOptions | None = None
):
    """Predict in chunks of ``stream.chunk_rows`` rows, each written as soon as it is done: JSONL on
    standard output (``options.output`` '-'), or a .jsonl / .parquet file assembled at the end
    (resumable with ``stream.resume``; see bertkit.api.streaming). Memory does not grow with the
    input. Returns the stream's summary, with ``preprocessing`` and ``runtime`` like ``predict``'s
    rows. ``stream.quiet``, ``stream.long_lived``: see bertkit.api.streaming.run (the command line
    sets them)."""
    from bertkit.api import streaming
    from bertkit.data.annotation_sinks import annotation_sink
    from bertkit.data.sinks import sink_for

    stream = (stream or StreamOptions()).validate("bertkit predict")
    target = None if options.output in (None, "-") else Path(options.output).expanduser().resolve()
    source, facts = InputStream(options.input), _Facts()
    if target is not None:
        streaming.check_apart(target, source, model_dir)  # before the model: an output never an input
    predictor = _predictor(model_dir, options, run, quiet=True)
    tool = predictor.adapter.options.get("format")  # --format label-studio|doccano (cls, pair, ner)
    sink = annotation_sink(tool, predictor.adapter.prediction_fields, target, Path(model_dir).name)
    sink = sink or sink_for(target, vectors=False)
    settings = {
        **streaming.model_fingerprint(model_dir),
        "options": dict(predictor.adapter.options),
        "batch_size": predictor.batch_size,
        "precision": predictor.precision,
        "backend": options.backend,
        "threads": predictor.threads,
        "chunk_rows": stream.chunk_rows,
        "format": type(sink).__name__,
    }
    summary = streaming.run(
        source,
        _pipeline(predictor, source, stream.chunk_rows, facts, first=streaming.FIRST_CHUNK_ROWS),
        sink,
        target,
        settings,
        resume=stream.resume,
        total=source.total_rows(),
        label="predict",
        quiet=stream.quiet,
        writer=lambda: getattr(predictor.engine, "is_main_process", True),
        long_lived=stream.long_lived,
    )
    summary.preprocessing = facts.report(spans=not source.stdin)
    summary.runtime = predictor.runtime()
    if predictor.coverage is not None:
        from bertkit.api.calibration import set_line

        summary.prediction_sets = {**predictor.coverage, **_set_rates(facts.counts)}
        summary.preprocessing["notices"].append(set_line(predictor.coverage, facts.counts))
    return summary


def _set_rates(counts: dict) -> dict:
    rows = max(counts.get("set_rows", 0), 1)
    return {
        "mean_set_size": counts.get("set_labels", 0) / rows,
        "empty_rate": counts.get("empty_sets", 0) / rows,
        "full_rate": counts.get("full_sets", 0) / rows,
    }


def _predictor(model_dir, options: PredictOptions, run: InferenceOptions | None, quiet: bool) -> Predictor:
    """The Predictor, its label sets' quantile set (--coverage) before any row is read."""
    from bertkit.api.calibration import set_quantile

    predictor = Predictor(model_dir, run, options.backend, options.task_options, quiet=quiet)
    predictor.coverage = set_quantile(predictor, options.conformal, "bertkit predict")
    return predictor


def set_counts(sets: list[list], labels: int) -> dict:
    """Rows with a set, labels in them, empty and full sets: integers, summed over chunks."""
    sizes = [len(s) for s in sets]
    return {
        "set_rows": len(sizes),
        "set_labels": sum(sizes),
        "empty_sets": sizes.count(0),
        "full_sets": sizes.count(labels),
    }


def _pipeline(
    predictor: Predictor, stream: InputStream, chunk_rows: int | None, facts: "_Facts", first: int | None = None
):
    """Chunks of ``chunk_rows`` rows (None: one chunk; ``first``: the first chunk's, growing to
    ``chunk_rows``), each checked as it is read; processed into prediction rows, the task's facts
    about each chunk gathered in ``facts``."""
    from bertkit.api.streaming import Pipeline

    adapter = predictor.adapter
    if adapter.whole_input:  # rows read with their neighbours (a document's sentences): one chunk
        chunk_rows = first = None

    def chunks(skip: int) -> Iterator[Chunk]:
        read = stream.chunks(
            chunk_rows,
            skip,
            whole_needed=adapter.reads_whole,
            read_whole=lambda path: _read_whole(adapter, path),
            first=first,
        )
        return (_checked(predictor, chunk) for chunk in read)

    def process(chunk: Chunk) -> list[dict]:
        rows = predictor.predict(chunk.records)
        facts.add(predictor.stats, chunk)
        return rows

    return Pipeline(chunks, process, predictor.load)


def _checked(predictor: Predictor, chunk: Chunk) -> Chunk:
    """The chunk's records as validated examples (a bad row is a BertkitError naming its row)."""
    if chunk.examples:  # read whole by the task, which validated them
        return chunk
    return dataclasses.replace(chunk, records=predictor.examples(chunk.records, chunk.where), examples=True)


class _Facts:
    """The task's facts about the rows streamed (truncations, windows): counts summed over the
    chunks, notices kept with the rows they are about."""

    SHOWN = 10  # notices listed; the rest are counted

    def __init__(self):
        self.counts: dict = {}
        self.notices: list[tuple[int, int, str]] = []  # (first row, last row, notice)
        self.several = False  # rows after the first chunk: the notices name their rows

    def add(self, stats: dict, chunk: Chunk) -> None:
        for key, value in stats.items():
            if isinstance(value, int) and not isinstance(value, bool):
                self.counts[key] = self.counts.get(key, 0) + value
        first, last = chunk.start + 1, chunk.start + len(chunk.records)
        self.notices += [(first, last, notice) for notice in stats.get("notices", ())]
        self.several = self.several or chunk.start > 0

    def report(self, spans: bool) -> dict:
        """``spans``: prefix each notice with its rows when the input ran to several chunks."""
        named = spans and self.several
        notices = [(f"rows {first:,}-{last:,}: " if named else "") + notice for first, last, notice in self.notices]
        if len(notices) > self.SHOWN:
            notices = notices[: self.SHOWN] + [f"... and {len(notices) - self.SHOWN} more such notice(s)"]
        return {"notices": notices, **self.counts}
