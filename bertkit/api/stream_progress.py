"""The progress line of a long stream (predict, embed): one stderr line per chunk, so a log or a
scheduler sees the work move, with an ETA from a known or estimated total."""

from __future__ import annotations

import sys
import time

from bertkit.data.streams import InputStream


class Progress:
    """One stderr line per chunk: rows done, rows per second and, with a known or estimated total
    (the ``stream``'s, from the bytes read so far: '~' marks it), an ETA."""

    def __init__(self, label: str, total: int | None, quiet: bool, stream: InputStream | None = None):
        self.label, self.total, self.quiet, self.stream = label, total, quiet, stream
        self.started, self.first = time.perf_counter(), 0

    def start(self, done: int) -> None:
        self.started, self.first = time.perf_counter(), done

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def update(self, done: int, last: bool = False) -> None:
        """``last``: the input ends with this chunk, so its rows are the total when none was known."""
        if last and self.total is None:
            self.total = done
        if self.quiet:
            return
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


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
