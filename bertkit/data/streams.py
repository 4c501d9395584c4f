"""Input for `predict` and `embed` at any size: records read in chunks, never the whole input.

An input is a file, '-' (standard input), a directory or a glob of shards (processed in sorted
order, as one sequence of rows). Each file is read as its format in bertkit/data/formats.py says:
a format with a chunked reader (JSONL, CSV/TSV, text lines; Parquet one record batch at a time)
streams; any other (a .json array, a CoNLL file), or a file a task must see whole (a CoNLL column
file named .txt for ner), is read whole and then handed out in chunks, so its output still streams
and resumes.
Row numbers in messages count from the start of the whole input.
"""

from __future__ import annotations

import glob
import itertools
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from bertkit.data import chunked, formats
from bertkit.errors import BertkitError


@dataclass
class Chunk:
    start: int  # rows before this chunk in the whole input
    records: list  # dicts (or, for a whole-read input or once checked, what the command made of them)
    where: str  # how messages name these rows
    examples: bool = False  # records are already examples (read whole by the task)


class InputStream:
    def __init__(self, spec: str):
        self.spec = spec
        self.stdin = spec == "-"
        self.paths = [] if self.stdin else shard_paths(spec)
        self.rows_read = 0  # rows read so far, for ``estimated_rows``
        self.counted_rows: int | None = None  # the input's rows, when known without a second pass (a file read whole)
        self._bytes_before = 0  # sizes of the shards read to their end
        self._position = None  # where the text shard being read is, in bytes
        self._size: int | None = None  # of all shards, once asked

    @property
    def description(self) -> str:
        return "<stdin>" if self.stdin else (str(self.paths[0]) if len(self.paths) == 1 else self.spec)

    def fingerprint(self) -> list | None:
        """What a resumed run checks it reads the same input as before (None for stdin: unknowable)."""
        if self.stdin:
            return None
        return [[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in self.paths]

    def would_read(self, path: Path) -> str | None:
        """Why a file written at ``path`` is (or, written there, would become) part of this input: one of
        its files, a data file in its directory, or a name its glob matches; None when it is not."""
        if self.stdin:
            return None
        path = Path(os.path.abspath(Path(path).expanduser()))
        resolved = path.resolve()
        if any(resolved == member.resolve() for member in self.paths):
            return "is one of the input's files"
        spec = Path(self.spec).expanduser()
        if spec.is_dir():
            if resolved.parent == spec.resolve() and _format(path) is not None:
                return f"is a data file in the input directory {self.spec}, so it would be read as input"
        elif any(ch in self.spec for ch in "*?[") and not spec.exists():
            pattern = os.path.abspath(os.path.expanduser(self.spec))
            if path.match(pattern) or resolved.match(pattern):
                return f"matches the input pattern {self.spec}, so it would be read as input"
        return None

    def streams(self, path: Path, whole_needed) -> bool:
        fmt = _format(path)
        return fmt is not None and fmt.streams and not (whole_needed and whole_needed(path))

    def estimated_rows(self) -> int | None:
        """The input's rows, estimated from the rows and bytes read so far: for the progress of an
        input whose size in rows only a second pass would tell (text shards; None for others)."""
        if self.stdin or not self.rows_read or not all(_text_stream(p) for p in self.paths):
            return None
        try:
            read = self._bytes_before + (self._position() if self._position else 0)
        except ValueError:  # the shard just closed
            return None
        if self._size is None:
            self._size = sum(path.stat().st_size for path in self.paths)
        return round(self.rows_read * self._size / read) if read else None

    def _follow(self, handle) -> None:
        self._position = handle.buffer.tell  # the decoder's read-ahead: a few KiB past the last row

    def records(self, whole_needed=None, read_whole=None) -> Iterator[tuple[int, object, str, bool]]:
        """(row number from 1, record, where, is_example) for every row of every shard, in order.
        ``whole_needed(path)``: the task must read that file itself; ``read_whole(path)`` does so."""
        if self.stdin:
            yield from ((n, r, "<stdin>", False) for n, r in _stdin_records())
            return
        row = 0
        for path in self.paths:
            if self.streams(path, whole_needed):
                source = _file_records(path, self._follow)
                is_example = False
            else:
                items = (read_whole or formats.read_records)(path)
                self.counted_rows = len(items) if len(self.paths) == 1 else None
                source, is_example = enumerate(items, 1), read_whole is not None
            for _, record in source:
                row += 1
                self.rows_read = row
                yield row, record, str(path), is_example
            self._bytes_before, self._position = self._bytes_before + path.stat().st_size, None

    def chunks(
        self, rows: int | None, skip: int = 0, whole_needed=None, read_whole=None, first: int | None = None
    ) -> Iterator[Chunk]:
        """Chunks of ``rows`` records (None: one chunk of everything), after the first ``skip``.
        ``first``: the first chunk's rows, doubling chunk after chunk up to ``rows`` (``chunk_sizes``),
        so the first rows of a large input come back in seconds; ``skip`` is a chunk boundary."""
        sizes = chunk_sizes(rows, first)
        done = 0
        while skip and rows is not None and done < skip:  # the chunks a resumed run's earlier run wrote
            done += next(sizes)
        size = next(sizes)
        buffer, start, where, is_example = [], skip, self.description, False
        for number, record, path, is_example in self.records(whole_needed, read_whole):
            if number <= skip:
                continue
            if not buffer:
                start = number - 1
                where = path if number == 1 or len(self.paths) > 1 else f"{path} (rows from {number})"
            buffer.append(record)
            if size is not None and len(buffer) >= size:
                yield Chunk(start, buffer, where, is_example)
                buffer, size = [], next(sizes)
        if buffer:
            yield Chunk(start, buffer, where, is_example)

    def total_rows(self, whole_needed=None) -> int | None:
        """Rows known without reading the data: Parquet metadata only (a pre-pass counts the rest)."""
        counted = [] if self.stdin else [_format(p) for p in self.paths]
        if not counted or any(fmt is None or fmt.count_rows is None for fmt in counted):
            return None
        return sum(fmt.count_rows(p) for fmt, p in zip(counted, self.paths))


def chunk_sizes(rows: int | None, first: int | None = None) -> Iterator[int | None]:
    """The rows of each chunk, forever: ``first``, twice that, ... up to ``rows``, then ``rows``.
    The same for every run with the same ``rows`` (a resumed run's chunks are the earlier run's)."""
    size = rows if rows is None or first is None else min(first, rows)
    while True:
        yield size
        if size is not None:
            size = min(size * 2, rows)


def shard_paths(spec: str) -> list[Path]:
    """The files named by a path, a directory (its data files) or a glob, sorted; checked readable."""
    path = Path(spec).expanduser()
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.is_file() and _format(p) is not None)
        if not found:
            raise BertkitError(
                f"{spec} is a directory without data files ({', '.join(formats.suffixes())})",
                "point --input at a file, or a directory of shards",
            )
    elif any(ch in spec for ch in "*?[") and not path.exists():
        found = sorted(Path(p) for p in glob.glob(os.path.expanduser(spec)) if Path(p).is_file())
        if not found:
            raise BertkitError(f"no file matches {spec}", "check the pattern (quote it so the shell leaves it alone)")
    else:
        found = [path]
    for shard in found:
        _check_readable(shard)
    return found


def _check_readable(path: Path) -> None:
    if path.exists() and not path.is_file():
        raise BertkitError(f"{path} is not a regular file", "pass the data file itself")
    if not path.is_file():
        raise BertkitError(f"file not found: {path}", "check the path")
    if not os.access(path, os.R_OK):
        raise BertkitError(f"cannot read {path} (Permission denied)", "check the file's permissions")


def _format(path: Path) -> formats.Format | None:
    return formats.lookup(path.suffix)


def _text_stream(path: Path) -> bool:
    fmt = _format(path)
    return fmt is not None and fmt.text and fmt.streams


def _file_records(path: Path, opened=None) -> Iterator[tuple[int, dict]]:
    """``opened(handle)``: called with a text file's handle once it is open."""
    count, source = 0, _format(path).read_chunks(path, opened)
    try:
        for count, (number, record) in enumerate(source, 1):
            yield number, record
    except OSError as exc:  # a permission refused, a device error, /proc/self/mem
        raise BertkitError(
            f"cannot read {path} ({exc.strerror or exc})",
            "check the file's permissions"
            if isinstance(exc, PermissionError)
            else "check the file and the disk it is on",
        ) from exc
    if count == 0 and not _has_text(path):
        raise BertkitError(f"file is empty: {path}", "point at a file with data rows")
    if count == 0:
        raise BertkitError(f"{path} has no data rows", "a header line alone is not enough")


def _has_text(path: Path) -> bool:
    with open(path, "rb") as handle:  # only reached when no row was found: blank lines, or a header
        return any(block.strip() for block in iter(lambda: handle.read(1 << 20), b""))


def _stdin_records() -> Iterator[tuple[int, dict]]:
    try:  # newline="": lines end at \n only, as readers.split_lines has it
        stream = open(sys.stdin.fileno(), encoding="utf-8-sig", newline="", closefd=False)
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation: a stand-in stdin (tests, notebooks)
        stream = sys.stdin
    lines, held = chunked.lines(stream, "<stdin>"), []
    for item in lines:  # the first line with text tells the format
        held.append(item)
        if item[1].strip():
            break
    else:
        raise BertkitError("<stdin>: no inputs", "pipe at least one row into the command")
    head = held[-1][1].lstrip()
    if head[:1] == "[" or head.startswith('{"data"'):  # one JSON document: it can only be parsed whole
        text = "\n".join([*(line for _, line in held), *(line for _, line in lines)])
        yield from enumerate(formats.parse_records(text, formats.JSON.suffix, "<stdin>"), 1)
        return
    parse = chunked.jsonl_rows if head[:1] == "{" else chunked.line_rows
    yield from parse(itertools.chain(held, lines), "<stdin>")
