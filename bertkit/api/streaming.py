"""The chunk loop `predict` and `embed` share: chunks in, rows out as each chunk is done.

To standard output, each chunk's rows are written and flushed as soon as they exist (a pipe into
`head` gets its rows after the first chunk). To a file, each chunk becomes a part file in a hidden
sibling directory (``.OUT.bertkit-partial``) beside a progress record (the parts done, the input's
fingerprint, the settings that decide the output); the final file is assembled from the parts and
renamed into place at the end, so it is never half-written. ``resume`` continues after the last
complete part of a killed run; the parts a run makes depend only on the input rows and these
settings, so a resumed run's file equals an uninterrupted one's byte for byte.

The input is read once: each chunk's rows are checked as the chunk is read, before anything is
written for it. A bad row stops the run in one error line; to a file, nothing of that run is kept
(the staged parts go), so a bad row anywhere never leaves a half-written output.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from bertkit.api.stream_progress import Progress, measure, verified_parts
from bertkit.data.sinks import Sink
from bertkit.data.streams import Chunk, InputStream, chunk_sizes
from bertkit.engine.progress import observing_batches
from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.model_dir import atomic_file, write_json
from bertkit.model_dir.removal import discard_owned, remove_owned
from bertkit.model_dir.writer_lock import lock_for_writing, writes_outputs

PROGRESS = "progress.json"
FIRST_CHUNK_ROWS = 64  # the first chunk's rows, doubled chunk after chunk up to --chunk-rows


@dataclass
class StreamSummary:
    rows: int = 0
    chunks: int = 0
    resumed_rows: int = 0  # rows a previous run had done
    seconds: float = 0.0
    written_to: str | None = None
    notices: list = field(default_factory=list)

    @property
    def rows_per_second(self) -> float:
        done = self.rows - self.resumed_rows
        return done / self.seconds if self.seconds else 0.0


@dataclass
class Pipeline:
    """What a command hands the chunk loop. ``chunks(skip)`` reads the input's chunks after ``skip``
    rows, each checked as it is read (a bad row stops the run before its chunk is processed);
    ``process(chunk)`` computes what is written for one chunk; ``ready()`` loads the model, called
    once the first chunk is read and checked (bad input costs no load). The in-memory API collects
    ``results()``, the command line streams them: one path for both."""

    chunks: Callable[[int], Iterator[Chunk]]
    process: Callable[[Chunk], object]
    ready: Callable[[], object] = lambda: None

    def results(self, skip: int = 0) -> Iterator[tuple[Chunk, object]]:
        for number, chunk in enumerate(self.chunks(skip)):
            if number == 0:
                self.ready()
            yield chunk, self.process(chunk)


class InputError(BertkitError):
    """A bad row met while streaming: the run cannot go past it until the input is fixed, and a
    fixed input cannot be resumed, so the parts this run made are worth nothing."""


class PipeClosed(Exception):
    """The reader of standard output went away (`| head`): stop, nothing is wrong."""


def model_fingerprint(model: str) -> dict:
    """A model directory by path and its files' sizes and times (a resumed run must use the same
    weights); a Hub name by name."""
    local = Path(model).expanduser()
    if not local.is_dir():
        return {"model": model}
    files = sorted([p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in local.iterdir() if p.is_file())
    return {"model": str(local.resolve()), "model_files": files}


def partial_dir(target: Path) -> Path:
    return target.with_name(f".{target.name}.bertkit-partial")


def check_apart(target: Path, stream: InputStream, model: str | None = None, flag: str = "--output") -> None:
    """One rule for inputs and outputs, before any work: neither ``target`` nor the hidden work
    directory beside it may be (or, once written, become) one of the input's files (a member of its
    directory or glob: a second run would read its own output), take an input with it, or be one
    of the model's files."""
    from bertkit.model_dir import check_inputs_kept

    target = Path(target).expanduser().resolve()
    for written in (target, partial_dir(target)):
        check_inputs_kept(written, *stream.paths, flag=flag)  # one of the input's files, or holding one
        why = stream.would_read(written)
        if why:
            raise BertkitError(
                f"{flag} {written} {why}",
                f"choose an {flag} outside the input's files (another directory, or a name the input does not match)",
            )
    if model:
        check_model_kept(target, model, flag)


def check_model_kept(target: Path, model: str, flag: str = "--output") -> None:
    """An output is never one of the model's files (weights, config, tokenizer, bertkit.json, an
    export), nor the model directory itself."""
    from bertkit.model_dir import check_inputs_kept
    from bertkit.model_dir.fingerprint import made_from_files

    local = Path(model).expanduser()
    if not local.is_dir():
        return
    check_inputs_kept(target, local, flag=flag)
    local = local.resolve()
    files = {p.resolve() for p in made_from_files(local)} | {local / "bertkit.json"}
    exported = target.is_relative_to(local / "onnx") or target.is_relative_to(local / "openvino")
    if target.resolve() in files or exported:
        raise BertkitError(
            f"{flag} {target} is one of the model's files, which writing it would destroy", f"choose another {flag}"
        )


def run(stream: InputStream, pipeline: Pipeline, *args, long_lived: bool = False, **kwargs) -> StreamSummary:
    """``stream_chunks`` (below); ``long_lived``: what is loaded once the model is (libraries, the
    model) lives as long as the process, so it is kept out of the garbage collector's scans while
    the rows stream (gc.freeze, right after the model loads at the first chunk; unfrozen at the
    end). A row loop's allocations trigger full collections again and again, and each re-scans
    the ~400,000 objects that torch, transformers and their imports leave: 15-25 % of a 100k-row
    predict here. For a command-line process: a library caller's own objects alive at that moment
    would be frozen too (until the end of the call)."""
    if not long_lived:
        return stream_chunks(stream, pipeline, *args, **kwargs)

    def ready_then_freeze():
        pipeline.ready()
        gc.freeze()

    try:
        return stream_chunks(stream, dataclasses.replace(pipeline, ready=ready_then_freeze), *args, **kwargs)
    finally:
        gc.unfreeze()


@writes_outputs  # a file --output: one run at a time, or two would share (and discard) one work directory
def stream_chunks(
    stream: InputStream,
    pipeline: Pipeline,
    sink: Sink,
    target: Path | None,
    settings: dict,
    resume: bool = False,
    total: int | None = None,
    label: str = "predict",
    quiet: bool = False,
    writer: bool | Callable[[], bool] = True,
) -> StreamSummary:
    """One pass over the input: each chunk read, checked, processed and written before the next
    is read (one more is read ahead of a file, so the last progress line knows the total).
    ``target`` None writes JSONL to standard output. ``writer``: whether this process writes
    (under a multi-process launch only the main one does), or a callable that says so once the
    model is loaded (after the first chunk's rows are checked). The rows per second count from
    then, as they did when the model loaded before the stream."""
    if target is None and resume:
        raise BertkitError("--resume needs --output FILE", "standard output cannot be resumed")
    output = _Stdout(sink) if target is None else _Parts(stream, sink, target, settings, resume)
    progress = Progress(label, total, quiet, stream)
    writes = None
    try:
        for chunk, last in _with_last(_read(pipeline.chunks(output.summary.rows)), ahead=not stream.stdin):
            if writes is None:
                writes = _ready(pipeline, writer)
                progress.quiet = quiet or not writes
                progress.start(output.summary.rows)
            progress.chunk(len(chunk.records))
            with observing_batches(progress.within):
                payload = pipeline.process(chunk)
            if writes:
                output.write(chunk, payload)
                progress.update(output.summary.rows, last)
        if writes or (writes is None and _ready(pipeline, writer)):
            output.finish()
    except BaseException as exc:
        replacement = exc if writes is False else output.stopped(exc)  # only the writer has files to tidy
        if replacement is exc:
            raise
        raise replacement from exc
    output.summary.seconds = progress.elapsed()
    return output.summary


def _ready(pipeline: Pipeline, writer: bool | Callable[[], bool]) -> bool:
    """The model loaded; whether this process writes."""
    pipeline.ready()
    return writer() if callable(writer) else writer


def _read(chunks: Iterator[Chunk]) -> Iterator[Chunk]:
    """The chunks, a mistake found while reading or checking them marked as the input's."""
    try:
        yield from chunks
    except InputError:
        raise
    except BertkitError as exc:
        raise InputError(exc.message, exc.hint) from exc


def _with_last(chunks: Iterator[Chunk], ahead: bool) -> Iterator[tuple[Chunk, bool]]:
    """(chunk, whether it is the last), one chunk read ahead. Standard input is not read ahead: a
    person (or a slow producer) typing rows gets each chunk's rows without waiting for the next."""
    if not ahead:
        yield from ((chunk, False) for chunk in chunks)
        return
    held = next(chunks, None)
    while held is not None:
        following = next(chunks, None)
        yield held, following is None
        held = following


class _Stdout:
    """Standard output: each chunk's JSONL written and flushed as soon as it exists."""

    def __init__(self, sink: Sink):
        self.sink, self.summary = sink, StreamSummary()

    def write(self, chunk: Chunk, payload) -> None:
        _to_stdout(self.sink.lines(payload))
        self.summary.rows, self.summary.chunks = chunk.start + len(chunk.records), self.summary.chunks + 1

    def finish(self) -> None:
        pass

    def stopped(self, exc: BaseException) -> BaseException:
        return exc


class _Parts:
    """A file: each chunk a part file in the hidden work directory beside the progress record; the
    file assembled from the parts at the end and renamed into place, so it is never half-written."""

    def __init__(self, stream: InputStream, sink: Sink, target: Path, settings: dict, resume: bool):
        lock_for_writing(target)  # before the work directory is read (--resume) or discarded (a new run)
        self.sink, self.target, self.resume, self.work = sink, target, resume, partial_dir(target)
        self.description, self.opened, self.summary = stream.description, False, StreamSummary()
        self.resumable = not stream.stdin  # standard input cannot be read again: its parts are worth nothing
        self.record = {"settings": settings, "input": stream.fingerprint(), "parts": []}
        if resume:
            self.record, damaged = _resumable(self.work, self.record, stream)
            done = sum(part["rows"] for part in self.record["parts"])
            self.summary.resumed_rows = self.summary.rows = done
            self.summary.chunks = len(self.record["parts"])
            if damaged:
                self._say("resume", damaged)
            if done:
                self._say("resume", f"resumed after {done:,} rows done by an earlier run", rows=done)

    def _say(self, kind: str, text: str, **data) -> None:
        """A decided fact: told now (bertkit.events) and kept in the summary."""
        notice(kind, text, **data)
        self.summary.notices.append(text)

    def _open(self) -> None:
        """The work directory, made once the first chunk is done: a mistake found in that chunk
        leaves an earlier run's directory as it was."""
        if self.opened:
            return
        self.opened = True
        if not self.resume and self.work.exists():
            remove_owned(self.work, "discarding the unfinished earlier run", also=(PROGRESS, "part-*"))
            self._say("resume", f"an unfinished earlier run's {self.work.name} was discarded (--resume continues one)")
        if not self.work.exists():
            self.work.mkdir()
            write_json(self.work / PROGRESS, self.record)

    def write(self, chunk: Chunk, payload) -> None:
        self._open()
        name = f"part-{len(self.record['parts']):06d}{self.sink.part_suffix}"
        with atomic_file(self.work / name, "wb") as handle:
            self.sink.write_part(payload, handle)
        size, digest = measure(self.work / name)
        self.record["parts"].append({"file": name, "rows": len(chunk.records), "bytes": size, "sha256": digest})
        write_json(self.work / PROGRESS, self.record)  # after the part: a kill between the two redoes that chunk
        self.summary.rows, self.summary.chunks = self.summary.rows + len(chunk.records), self.summary.chunks + 1

    def finish(self) -> None:
        self._open()
        if not self.record["parts"]:
            raise BertkitError(f"{self.description} has no rows to process", "point --input at rows")
        with atomic_file(self.target, "wb") as handle:
            self.sink.assemble([self.work / part["file"] for part in self.record["parts"]], handle)
        discard_owned(self.work, "removing the finished parts", also=(PROGRESS, "part-*"))
        self.summary.written_to = str(self.target)

    def stopped(self, exc: BaseException) -> BaseException:
        """What a run that stopped early leaves (see _stopped); a bad row, or a mistake found
        before the first chunk was done, leaves the directory as the run found it."""
        if not self.opened and not self.summary.rows:
            return exc
        if isinstance(exc, InputError):
            if not self.resume:
                discard_owned(self.work, "removing the stopped run's parts", also=(PROGRESS, "part-*"))
            return exc
        return _stopped(exc, self.work, self.summary.rows if self.resumable else 0)


def _stopped(exc: BaseException, work: Path, rows: int) -> BaseException:
    """What a run that stopped early leaves: nothing when no chunk was complete (a mistake found at
    the first chunk leaves the directory as it was) or none can be resumed (``rows`` 0: standard
    input); else the parts, and the way to continue."""
    if not rows:  # (a resumed run's rows count too: its parts stay)
        discard_owned(work, "removing the stopped run's parts", also=(PROGRESS, "part-*"))
        return exc
    kept = f"the {rows:,} rows done are kept in {work}: rerun with --resume to continue"
    if isinstance(exc, BertkitError):
        return BertkitError(exc.message, f"{exc.hint}; {kept}" if exc.hint else kept)
    print(f"{kept}", file=sys.stderr, flush=True)  # Ctrl-C, a kill signal turned exception
    return exc


def _resumable(work: Path, record: dict, stream: InputStream) -> tuple[dict, str | None]:
    """(the record to continue, what was found damaged): the earlier run's parts that are as it
    recorded them (rows, bytes, sha256), up to the first that is not; that one and those after it
    are done again."""
    if stream.stdin:
        raise BertkitError("--resume cannot check standard input is the same as before", "give --input FILE")
    if not (work / PROGRESS).is_file():
        return record, None  # nothing to resume: a fresh run
    try:
        saved = json.loads((work / PROGRESS).read_text())
    except (OSError, ValueError) as exc:
        raise BertkitError(
            f"{work / PROGRESS} is unreadable ({exc})", f"remove {work} and run without --resume"
        ) from exc
    if saved.get("input") != record["input"]:
        raise BertkitError(
            f"--resume: the input changed since the unfinished run in {work} (size or time)",
            "rerun without --resume (the earlier parts are discarded), or restore the input",
        )
    if saved.get("settings") != record["settings"]:
        changed = sorted(
            k
            for k in set(saved.get("settings", {})) | set(record["settings"])
            if saved.get("settings", {}).get(k) != record["settings"].get(k)
        )
        raise BertkitError(
            f"--resume: {', '.join(changed)} differ from the unfinished run's, so its rows would not match the rest",
            "resume with the same model and options, or rerun without --resume",
        )
    chunk_rows = record["settings"].get("chunk_rows")
    sizes = chunk_sizes(chunk_rows, FIRST_CHUNK_ROWS) if isinstance(chunk_rows, int) else None
    parts, damaged = verified_parts(work, saved.get("parts"), sizes)
    return {**record, "parts": parts}, damaged


def _to_stdout(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError as exc:
        raise PipeClosed() from exc
