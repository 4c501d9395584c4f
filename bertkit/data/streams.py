"""Input for `predict` and `embed` at any size: records read in chunks, never the whole input.

An input is a file, '-' (standard input), a directory or a glob of shards (processed in sorted
order, as one sequence of rows). JSONL, CSV/TSV, text lines and Parquet (pyarrow, one record
batch at a time) stream; a .json array, or a file a task must see whole (a CoNLL column file for
ner), is read whole and then handed out in chunks, so its output still streams and resumes.
Row numbers in messages count from the start of the whole input.
"""

from __future__ import annotations

import csv
import glob
import itertools
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from bertkit.data import readers
from bertkit.errors import BertkitError

STREAMED = (".jsonl", ".csv", ".tsv", ".txt", ".parquet")
TEXT_STREAMED = (".jsonl", ".csv", ".tsv", ".txt")
SHARD_SUFFIXES = (".parquet", ".jsonl", ".json", ".csv", ".tsv", ".txt")


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
            if resolved.parent == spec.resolve() and _suffix(path) in SHARD_SUFFIXES:
                return f"is a data file in the input directory {self.spec}, so it would be read as input"
        elif any(ch in self.spec for ch in "*?[") and not spec.exists():
            pattern = os.path.abspath(os.path.expanduser(self.spec))
            if path.match(pattern) or resolved.match(pattern):
                return f"matches the input pattern {self.spec}, so it would be read as input"
        return None

    def streams(self, path: Path, whole_needed) -> bool:
        return _suffix(path) in STREAMED and not (whole_needed and whole_needed(path))

    def estimated_rows(self) -> int | None:
        """The input's rows, estimated from the rows and bytes read so far: for the progress of an
        input whose size in rows only a second pass would tell (text shards; None for others)."""
        if self.stdin or not self.rows_read or any(_suffix(p) not in TEXT_STREAMED for p in self.paths):
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
                items = (read_whole or readers.read_records)(path)
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
        if self.stdin or any(_suffix(p) != ".parquet" for p in self.paths):
            return None
        import pyarrow.parquet as pq

        return sum(pq.ParquetFile(p).metadata.num_rows for p in self.paths)


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
        found = sorted(p for p in path.iterdir() if p.is_file() and _suffix(p) in SHARD_SUFFIXES)
        if not found:
            raise BertkitError(
                f"{spec} is a directory without data files ({', '.join(SHARD_SUFFIXES)})",
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


def _suffix(path: Path) -> str:
    return path.suffix.lower()


def _file_records(path: Path, opened=None) -> Iterator[tuple[int, dict]]:
    """``opened(handle)``: called with a text file's handle once it is open."""
    suffix, count = _suffix(path), 0
    source = _parquet(path) if suffix == ".parquet" else _text_records(path, suffix, opened)
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


def _parquet(path: Path) -> Iterator[tuple[int, dict]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        batches = pq.ParquetFile(path).iter_batches(batch_size=4096)
        number = 0
        for batch in batches:
            for record in batch.to_pylist():
                number += 1
                yield number, record
    except (pa.ArrowException, OSError) as exc:
        raise BertkitError(f"{path} is not a readable Parquet file ({exc})", "check the file") from exc


def _lines(handle, path: str, located: bool = False) -> Iterator[tuple[int, str]]:
    """Lines split at \\n only (readers.split_lines' rule), a trailing \\r dropped. ``located``:
    ``path`` is a file that can be read again to find the line of a bad byte (the decoder reads
    ahead in blocks, so the line reached when it fails is not the line of the byte)."""
    try:
        for number, line in enumerate(handle, 1):
            line = line[:-1] if line.endswith("\n") else line
            yield number, line[:-1] if line.endswith("\r") else line
    except UnicodeDecodeError as exc:
        bad = _bad_line(Path(path)) if located else None
        raise BertkitError(
            f"{path} is not UTF-8 text" + (f" (bad byte on line {bad})" if bad else ""),
            f"convert it, e.g. `iconv -f latin1 -t utf-8 {Path(path).name}`",
        ) from exc


def _bad_line(path: Path) -> int | None:
    """The first line that is not UTF-8 (a character never spans a \\n, so line by line is exact)."""
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                return number
    return None


def _text_records(path: Path, suffix: str, opened=None) -> Iterator[tuple[int, dict]]:
    with open(path, encoding="utf-8-sig", newline="") as handle:
        if opened:
            opened(handle)
        yield from _parse_lines(_lines(handle, str(path), located=True), suffix, str(path))


def _stdin_records() -> Iterator[tuple[int, dict]]:
    try:  # newline="": lines end at \n only, as readers.split_lines has it
        stream = open(sys.stdin.fileno(), encoding="utf-8-sig", newline="", closefd=False)
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation: a stand-in stdin (tests, notebooks)
        stream = sys.stdin
    lines, held = _lines(stream, "<stdin>"), []
    for item in lines:  # the first line with text tells the format
        held.append(item)
        if item[1].strip():
            break
    else:
        raise BertkitError("<stdin>: no inputs", "pipe at least one row into the command")
    head = held[-1][1].lstrip()
    if head[:1] == "[" or head.startswith('{"data"'):  # one JSON document: it can only be parsed whole
        text = "\n".join([*(line for _, line in held), *(line for _, line in lines)])
        yield from enumerate(readers.parse_records(text, ".json", "<stdin>"), 1)
        return
    yield from _parse_lines(itertools.chain(held, lines), ".jsonl" if head[:1] == "{" else ".txt", "<stdin>")


def _parse_lines(lines, suffix: str, where: str) -> Iterator[tuple[int, dict]]:
    if suffix == ".jsonl":
        for number, line in lines:
            if line.strip():
                yield number, _json_object(line, number, where)
    elif suffix in (".csv", ".tsv"):
        yield from _delimited(lines, suffix, where)
    else:
        blanks: list = []  # held back: trailing blank lines are not rows
        for number, line in lines:
            first, tab, second = line.partition("\t")
            record = {"text": first, "text_pair": second} if tab else {"text": line}
            if not line.strip():
                blanks.append((number, record))
                continue
            yield from blanks
            blanks = []
            yield number, record


def _json_object(line: str, number: int, where: str) -> dict:
    try:
        record = readers.parse_json(line)
    except json.JSONDecodeError as exc:
        raise BertkitError(f"{where}:{number}: invalid JSON ({exc.msg})", "one JSON object per line") from exc
    if not isinstance(record, dict):
        raise BertkitError(f"{where}:{number}: expected a JSON object", "one JSON object per line")
    return record


def _delimited(lines, suffix: str, where: str) -> Iterator[tuple[int, dict]]:
    numbered = iter(lines)
    texts = (line + "\n" for _, line in numbered)  # the csv module keeps newlines inside quoted fields
    if suffix == ".tsv":
        reader, delimiter = csv.reader(texts, delimiter="\t", quoting=csv.QUOTE_NONE), "\t"
    else:  # a .csv's separator is sniffed from its first rows, as training's reader does
        head = list(itertools.islice(texts, readers.SNIFF_ROWS + 1))
        delimiter = readers.sniff_delimiter("".join(head))
        reader = csv.reader(itertools.chain(head, texts), delimiter=delimiter)
    header = None
    for row in reader:
        if header is None:
            header = [name.strip() for name in row]
            readers.check_header(header, delimiter, forced=False, source=where)
            continue
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        number = reader.line_num
        if len(row) != len(header):
            raise BertkitError(
                f"{where}:{number}: {len(row)} fields where the header has {len(header)}",
                "fix that line (TSV is read with quoting off, as GLUE ships it)",
            )
        yield number, dict(zip(header, row))
