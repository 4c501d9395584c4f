"""The chunk loop `predict` and `embed` share: chunks in, rows out as each chunk is done.

To standard output, each chunk's rows are written and flushed as soon as they exist (a pipe into
`head` gets its rows after the first chunk). To a file, each chunk becomes a part file in a hidden
sibling directory (``.OUT.bertkit-partial``) beside a progress record (the parts done, the input's
fingerprint, the settings that decide the output); the final file is assembled from the parts and
renamed into place at the end, so it is never half-written. ``resume`` continues after the last
complete part of a killed run; the parts a run makes depend only on the input rows and these
settings, so a resumed run's file equals an uninterrupted one's byte for byte.
"""

from __future__ import annotations

import gc
import json
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from bertkit.data.sinks import Sink
from bertkit.data.streams import Chunk, InputStream
from bertkit.errors import BertkitError
from bertkit.model_dir import atomic_file, write_json

PROGRESS = "progress.json"


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


def run(*args, long_lived: bool = False, **kwargs) -> StreamSummary:
    """``stream_chunks`` (below); ``long_lived``: what is loaded so far (libraries, the model) lives
    as long as the process, so it is kept out of the garbage collector's scans while the rows
    stream (gc.freeze; unfrozen at the end). A row loop's allocations trigger full collections
    again and again, and each re-scans the ~400,000 objects that torch, transformers and their
    imports leave: 15-25 % of a 100k-row predict here. For a command-line process: a library
    caller's own objects alive at this moment would be frozen too (until the end of the call)."""
    if not long_lived:
        return stream_chunks(*args, **kwargs)
    gc.freeze()
    try:
        return stream_chunks(*args, **kwargs)
    finally:
        gc.unfreeze()


def stream_chunks(stream: InputStream, chunks: Callable[[int], Iterator[Chunk]], process: Callable[[Chunk], object],
                  sink: Sink, target: Path | None, settings: dict, resume: bool = False, total: int | None = None,
                  label: str = "predict", quiet: bool = False, writer: bool = True) -> StreamSummary:
    """``chunks(skip)`` yields the input's chunks after ``skip`` rows; ``process(chunk)`` returns
    what ``sink`` writes for it. ``target`` None writes JSONL to standard output."""
    summary = StreamSummary()
    progress = Progress(label, total, quiet or not writer)
    if not writer:  # another process of a multi-process run: it computes its share, the main one writes
        skip = 0
        if resume and target is not None and (partial_dir(target) / PROGRESS).is_file():
            skip = sum(part["rows"] for part in json.loads((partial_dir(target) / PROGRESS).read_text())["parts"])
        for chunk in chunks(skip):
            process(chunk)
        return summary
    if target is None:
        if resume:
            raise BertkitError("--resume needs --output FILE", "standard output cannot be resumed")
        for chunk in chunks(0):
            _to_stdout(sink.lines(process(chunk)))
            summary.rows, summary.chunks = chunk.start + len(chunk.records), summary.chunks + 1
            progress.update(summary.rows)
        summary.seconds = progress.elapsed()
        return summary
    work = partial_dir(target)
    record = {"settings": settings, "input": stream.fingerprint(), "parts": []}
    if resume:
        record = _resumable(work, record, stream)
        summary.resumed_rows = summary.rows = sum(part["rows"] for part in record["parts"])
        summary.chunks = len(record["parts"])
        if summary.rows:
            summary.notices.append(f"resumed after {summary.rows:,} rows done by an earlier run")
    elif work.exists():
        shutil.rmtree(work)
        summary.notices.append(f"an unfinished earlier run's {work.name} was discarded (--resume continues one)")
    progress.start(summary.rows)
    try:
        if not resume or not work.exists():
            work.mkdir()
            write_json(work / PROGRESS, record)
        for chunk in chunks(summary.rows):
            name = f"part-{len(record['parts']):06d}{sink.part_suffix}"
            with atomic_file(work / name, "wb") as handle:
                sink.write_part(process(chunk), handle)
            record["parts"].append({"file": name, "rows": len(chunk.records)})
            write_json(work / PROGRESS, record)  # after the part: a kill between the two redoes that chunk
            summary.rows, summary.chunks = summary.rows + len(chunk.records), summary.chunks + 1
            progress.update(summary.rows)
        if not record["parts"]:
            raise BertkitError(f"{stream.description} has no rows to process", "point --input at rows")
        with atomic_file(target, "wb") as handle:
            sink.assemble([work / part["file"] for part in record["parts"]], handle)
    except BaseException as exc:
        replacement = _stopped(exc, work, summary.rows)
        if replacement is exc:
            raise
        raise replacement from exc
    shutil.rmtree(work, ignore_errors=True)
    summary.seconds, summary.written_to = progress.elapsed(), str(target)
    return summary


def _stopped(exc: BaseException, work: Path, rows: int) -> BaseException:
    """What a run that stopped early leaves: nothing when no chunk was complete (a mistake found at
    the first chunk leaves the directory as it was); else the parts, and the way to continue."""
    if not rows:  # (a resumed run's rows count too: its parts stay)
        shutil.rmtree(work, ignore_errors=True)
        return exc
    kept = f"the {rows:,} rows done are kept in {work}: rerun with --resume to continue"
    if isinstance(exc, BertkitError):
        return BertkitError(exc.message, f"{exc.hint}; {kept}" if exc.hint else kept)
    print(f"{kept}", file=sys.stderr, flush=True)  # Ctrl-C, a kill signal turned exception
    return exc


def _resumable(work: Path, record: dict, stream: InputStream) -> dict:
    if stream.stdin:
        raise BertkitError("--resume cannot check standard input is the same as before", "give --input FILE")
    if not (work / PROGRESS).is_file():
        return record  # nothing to resume: a fresh run
    try:
        saved = json.loads((work / PROGRESS).read_text())
    except (OSError, ValueError) as exc:
        raise BertkitError(f"{work / PROGRESS} is unreadable ({exc})", f"remove {work} and run without --resume") from exc
    if saved.get("input") != record["input"]:
        raise BertkitError(f"--resume: the input changed since the unfinished run in {work} (size or time)",
                           "rerun without --resume (the earlier parts are discarded), or restore the input")
    if saved.get("settings") != record["settings"]:
        changed = sorted(k for k in set(saved.get("settings", {})) | set(record["settings"])
                         if saved.get("settings", {}).get(k) != record["settings"].get(k))
        raise BertkitError(f"--resume: {', '.join(changed)} differ from the unfinished run's, so its rows would not "
                           "match the rest", "resume with the same model and options, or rerun without --resume")
    parts = [part for part in saved.get("parts", []) if (work / part["file"]).is_file()]
    return {**record, "parts": parts[:len(parts)]}


def _to_stdout(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError as exc:
        raise PipeClosed() from exc


class Progress:
    """One stderr line per chunk: rows done, rows per second and, with a known total, an ETA."""

    def __init__(self, label: str, total: int | None, quiet: bool):
        self.label, self.total, self.quiet = label, total, quiet
        self.started, self.first = time.perf_counter(), 0

    def start(self, done: int) -> None:
        self.started, self.first = time.perf_counter(), done

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def update(self, done: int) -> None:
        if self.quiet:
            return
        rate = (done - self.first) / max(self.elapsed(), 1e-9)
        line = f"{self.label}: {done:,} rows"
        if self.total:
            line += f" of {self.total:,} ({100 * done / self.total:.1f}%)"
        line += f", {rate:,.0f} rows/s"
        if self.total and rate > 0 and done < self.total:
            line += f", ETA {_duration((self.total - done) / rate)}"
        print(line, file=sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
