"""Text formats read a line at a time (streamed): numbered lines become numbered records, never the
whole file in memory. Each parser takes (line number, line) pairs and the name messages use, so
standard input reads through the same ones. What suffix has which parser: bertkit/data/formats.py."""

from __future__ import annotations

import csv
import itertools
import json
from functools import partial
from pathlib import Path
from typing import Callable, Iterator

from bertkit.data import readers
from bertkit.errors import BertkitError

Rows = Iterator[tuple[int, dict]]


def text_file(parse: Callable, **options) -> Callable:
    """The chunked reader of a text format whose lines ``parse`` reads: (path, opened) -> rows, where
    ``opened(handle)`` is called once the file is open (for the progress of a stream)."""
    return partial(_text_records, parse=parse, options=options)


def _text_records(path: Path, opened=None, parse=None, options=None) -> Rows:
    with open(path, encoding="utf-8-sig", newline="") as handle:
        if opened:
            opened(handle)
        yield from parse(lines(handle, str(path), located=True), str(path), **(options or {}))


def lines(handle, path: str, located: bool = False) -> Iterator[tuple[int, str]]:
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


def jsonl_rows(numbered, where: str) -> Rows:
    """JSON Lines: one object per line, blank lines skipped."""
    for number, line in numbered:
        if line.strip():
            yield number, json_object(line, number, where)


def line_rows(numbered, where: str) -> Rows:
    """Text lines: ``text`` (``text_pair`` after a TAB); trailing blank lines are not rows."""
    blanks: list = []  # held back until a line with text follows
    for number, line in numbered:
        first, tab, second = line.partition("\t")
        record = {"text": first, "text_pair": second} if tab else {"text": line}
        if not line.strip():
            blanks.append((number, record))
            continue
        yield from blanks
        blanks = []
        yield number, record


def json_object(line: str, number: int, where: str) -> dict:
    try:
        record = readers.parse_json(line)
    except json.JSONDecodeError as exc:
        raise BertkitError(f"{where}:{number}: invalid JSON ({exc.msg})", "one JSON object per line") from exc
    if not isinstance(record, dict):
        raise BertkitError(f"{where}:{number}: expected a JSON object", "one JSON object per line")
    return record


def delimited_rows(numbered, where: str, tsv: bool = False) -> Rows:
    """CSV (its separator sniffed from the first rows, as training's reader does) or TSV (quoting off)."""
    texts = (line + "\n" for _, line in numbered)  # the csv module keeps newlines inside quoted fields
    if tsv:
        reader, delimiter = csv.reader(texts, delimiter="\t", quoting=csv.QUOTE_NONE), "\t"
    else:
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
