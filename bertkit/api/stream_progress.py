"""The progress of a long stream (predict, embed): one stderr line per chunk, so a log or a
scheduler sees the work move, with an ETA from a known or estimated total; and the proof that an
unfinished run's recorded parts (progress.json: rows, bytes, sha256 of each) are still as written,
before a resumed run builds on them."""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path
from typing import Iterator

from bertkit.data.streams import InputStream
from bertkit.engine.progress import Pace


class Progress:
    """One stderr line per chunk: rows done, rows per second and, with a known or estimated total
    (the ``stream``'s, from the bytes read so far: '~' marks it), an ETA."""

    def __init__(self, label: str, total: int | None, quiet: bool, stream: InputStream | None = None):
        self.label, self.total, self.quiet, self.stream = label, total, quiet, stream
        self.started, self.first = time.perf_counter(), 0
        self.done, self.in_flight, self.chunk_rows, self.pace = 0, 0, 0, Pace()

    def start(self, done: int) -> None:
        self.started, self.first, self.done = time.perf_counter(), done, done

    def chunk(self, rows: int) -> None:
        """The next chunk's rows go in: what ``within`` counts towards."""
        self.chunk_rows, self.in_flight = rows, 0

    def within(self, examples: int) -> None:
        """A batch of the chunk in flight is done: a line when one is due (a 10,000-row chunk on a
        slow CPU takes minutes, and a log must not go silent meanwhile). Batches count features,
        so a row cut into windows may count more than once: capped at the chunk's rows."""
        self.in_flight += examples
        if self.quiet or not self.chunk_rows or not self.pace.due():
            return
        self._say(self.done + min(self.in_flight, self.chunk_rows - 1))

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def update(self, done: int, last: bool = False) -> None:
        """``last``: the input ends with this chunk, so its rows are the total when none was known."""
        if last and self.total is None:
            self.total = done
        self.done, self.chunk_rows = done, 0
        if self.quiet:
            return
        self._say(done)

    def _say(self, done: int) -> None:
        rate = (done - self.first) / max(self.elapsed(), 1e-9)
        total, about = self.total or (self.stream and self.stream.counted_rows), ""
        if total is None and self.stream and self.stream.estimated_rows() is not None:
            total, about = max(self.stream.estimated_rows(), done), "~"
        line = f"{self.label}: {done:,} rows"
        if total:
            line += f" of {about}{total:,} ({100 * done / total:.1f}%)"
        line += f", {rate:,.0f} rows/s"
        if total and rate > 0 and done < total:
            line += f", ETA {_duration((total - done) / rate)}"
        print(line, file=sys.stderr, flush=True)
        self.pace.said()


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


def verified_parts(work: Path, saved, sizes: Iterator[int | None] | None = None) -> tuple[list, str | None]:
    """The saved parts in order up to the first that is missing or not as recorded (a truncated,
    replaced or swapped file), and a line saying which and from which row the run goes on.
    ``sizes``: the rows each chunk has (the input's last may have fewer), checked against the record."""
    parts, rows = [], 0
    saved = saved if isinstance(saved, list) else []
    for number, part in enumerate(saved):
        problem = _part_problem(work, part, number)
        size = next(sizes) if sizes is not None else None
        if not problem and size is not None and not _fits(part["rows"], size, number == len(saved) - 1):
            problem = f"part {number} of the unfinished run records {part['rows']:,} rows where its chunk has {size:,}"
        if problem:
            return parts, f"{problem}: redoing it and what follows, from row {rows + 1:,}"
        parts.append(part)
        rows += part["rows"]
    return parts, None


def _fits(rows: int, size: int, last: bool) -> bool:
    """A part has its chunk's rows; the last one recorded may be the input's end, with fewer."""
    return rows == size or (last and rows < size)


def _part_problem(work: Path, part, number: int) -> str | None:
    if not isinstance(part, dict) or not isinstance(part.get("rows"), int) or part.get("rows") < 1:
        return f"part {number} of the unfinished run is not recorded as a part"
    name = part.get("file")
    if name != Path(str(name)).name or not str(name).startswith(f"part-{number:06d}"):
        return f"part {number} of the unfinished run names an unexpected file ({name!r})"
    path = work / name
    if not path.is_file():
        return f"{name} of the unfinished run is missing"
    if "sha256" not in part or "bytes" not in part:
        return f"{name} of the unfinished run has no recorded size and hash (an older bertkit wrote it)"
    size, digest = measure(path)
    if size != part["bytes"]:
        return f"{name} of the unfinished run is damaged ({size:,} bytes where {part['bytes']:,} were written)"
    if digest != part["sha256"]:
        return f"{name} of the unfinished run is damaged (its bytes differ from those written)"
    return None


def measure(path: Path) -> tuple[int, str]:
    """(size, sha256) of a part file."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()
