"""Parse user files into lists of plain dict records: CSV, TSV (GLUE style), JSON, JSONL, text lines.
Which parser reads which file is bertkit/data/formats.py's registry (``formats.read_records``)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from bertkit.errors import BertkitError

DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}  # what a CSV is sniffed for
SNIFF_CHARS, SNIFF_ROWS = 65_536, 50


def read_text(path: Path) -> str:
    """The file's text as UTF-8 (BOM tolerated); a clear error for missing, empty or binary files."""
    if path.is_dir():
        raise BertkitError(f"{path} is a directory", "pass the data file itself")
    if path.exists() and not path.is_file():  # a FIFO or a device: reading could block or never end
        raise BertkitError(f"{path} is not a regular file", "pass the data file itself")
    if not path.is_file():
        raise BertkitError(f"file not found: {path}", "check the path")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BertkitError(
            f"cannot read {path} ({exc.strerror or exc})",
            "check the file's permissions"
            if isinstance(exc, PermissionError)
            else "check the file and the disk it is on",
        ) from exc
    if not raw.strip():
        raise BertkitError(f"file is empty: {path}", "point at a file with data rows")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BertkitError(
            f"{path} is not UTF-8 text (bad byte at offset {exc.start})",
            f"convert it, e.g. `iconv -f latin1 -t utf-8 {path.name}`",
        ) from exc


def text_value(record: dict, field: str | None, row: int | str, source: str) -> str:
    """The text under ``field``: "" when absent or null. Anything but a string (an object, a list,
    a number, true) is refused rather than turned into its Python spelling and classified, and so
    is a string UTF-8 cannot carry (an unpaired surrogate such as "\\ud800", valid in JSON), which
    the tokenizer would fail on later, far from the row that caused it."""
    value = record.get(field) if field is not None else None
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BertkitError(
            f"{source}: row {row}: field {field!r} is {json_kind(value)}, not a string",
            "give every text as a JSON string",
        )
    return encodable(value, f"{source}: row {row}: field {field!r}")


def encodable(value: str, where: str) -> str:
    """``value`` if UTF-8 can carry it. JSON's \\u escapes can spell an unpaired surrogate, which
    Python keeps in a str and the tokenizer or the JSON writer fails on later, far from its row."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        at = f"{value[exc.start]!r} at character {exc.start}"
        raise BertkitError(
            f"{where} holds an unpaired UTF-16 surrogate ({at})",
            "send valid Unicode text (a surrogate must come in a high+low pair)",
        ) from exc
    return value


def json_kind(value) -> str:
    """How a JSON value is named in messages: "an object", "a list", "a number"..."""
    if isinstance(value, bool):
        return "true/false"
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number"}.get(
        type(value), f"a {type(value).__name__}"
    )


def id_value(record: dict, row: int | str, source: str, field: str = "id"):
    """The record's id (None when absent or null), given back in the command's output: a string
    (UTF-8-encodable, as text_value checks) or a number; an object, a list or true is refused."""
    value = record.get(field)
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    return text_value(record, field, row, source)


def parse_json(text: str, unique_keys: bool = False):
    """json.loads, strict where Python's is lenient or fails oddly, each case reported as invalid
    JSON (so one line for a file, a 400 for the server): nesting too deep for Python's parser
    (RecursionError), NaN and Infinity (not JSON, and a row echoing them could not be written
    back as JSON), numbers that overflow to inf, integers over Python's 4300-digit limit.
    ``unique_keys``: an object naming a key twice is invalid too (a settings file, where JSON's
    last-wins would silently drop one of the two values)."""
    if text.startswith("\ufeff"):  # as json.loads says it
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    try:
        # one decoder each: json.loads with hooks builds a new one per call (2.5x slower)
        return (_UNIQUE_KEYS_DECODER if unique_keys else _DECODER).decode(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # raised by the two hooks below, or int() past its digit limit
        message = str(exc) if isinstance(exc, _NotJson) else "an integer with too many digits"
        raise json.JSONDecodeError(message, text, 0) from None


class _NotJson(ValueError):
    pass


def _not_json_constant(name: str):
    raise _NotJson(f"{name} is not a JSON value")


def _finite_float(spelling: str) -> float:
    value = float(spelling)
    if math.isinf(value):
        raise _NotJson(f"the number {spelling[:20]} is out of range")
    return value


def _unique_keys(pairs: list) -> dict:
    keys = [key for key, _ in pairs]
    twice = next((key for key in keys if keys.count(key) > 1), None)
    if twice is not None:
        raise _NotJson(f"the key {twice!r} is given twice")
    return dict(pairs)


_DECODER = json.JSONDecoder(parse_constant=_not_json_constant, parse_float=_finite_float)
_UNIQUE_KEYS_DECODER = json.JSONDecoder(
    parse_constant=_not_json_constant, parse_float=_finite_float, object_pairs_hook=_unique_keys
)


def split_lines(text: str) -> list[str]:
    """Lines split at \\n only (a trailing \\r dropped): str.splitlines would also split at U+2028,
    U+2029, U+0085, form feed and vertical tab, turning one row into two."""
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]


def jsonl_records(text: str, source: str) -> list[dict]:
    records = []
    for number, line in enumerate(split_lines(text), 1):
        if not line.strip():
            continue
        try:
            record = parse_json(line)
        except json.JSONDecodeError as exc:
            raise BertkitError(f"{source}:{number}: invalid JSON ({exc.msg})", "one JSON object per line") from exc
        if not isinstance(record, dict):
            raise BertkitError(f"{source}:{number}: expected a JSON object", "one JSON object per line")
        records.append(record)
    return records


def json_records(text: str, source: str) -> list[dict]:
    try:
        data = parse_json(text)
    except json.JSONDecodeError as exc:
        raise BertkitError(
            f"{source}: invalid JSON at line {exc.lineno} ({exc.msg})", "check the file's syntax"
        ) from exc
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    elif isinstance(data, dict):
        data = [data]  # a single record, e.g. one line on stdin
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise BertkitError(f'{source}: expected a list of objects (or {{"data": [...]}})', "or use JSONL")
    return data


def sniff_delimiter(text: str) -> str:
    """The field separator of a CSV (comma, semicolon, tab or pipe): the one that splits the first
    rows into the same number (> 1) of fields, comma first; comma when none does."""
    sample = text[:SNIFF_CHARS]
    if len(text) > SNIFF_CHARS:
        sample = sample[: sample.rfind("\n") + 1] or sample  # no half row
    widths = {}
    for delimiter in DELIMITERS:
        try:
            rows = [row for row in csv.reader(io.StringIO(sample), delimiter=delimiter) if any(f.strip() for f in row)]
        except csv.Error:
            continue
        counts = {len(row) for row in rows[:SNIFF_ROWS]}
        if len(counts) == 1 and next(iter(counts)) > 1:
            widths[delimiter] = next(iter(counts))
    if "," in widths or not widths:
        return ","
    return max(widths, key=widths.get)


def delimiter_name(delimiter: str) -> str:
    return DELIMITERS.get(delimiter, repr(delimiter))


def check_delimiter(value: str | None) -> str | None:
    """``--delimiter``: one character (``tab`` or ``\\t`` for a TAB); None: sniffed."""
    if value is None:
        return None
    named = {name: char for char, name in DELIMITERS.items()} | {"\\t": "\t"}
    char = named.get(value.strip().lower(), value)
    if len(char) != 1 or char in '"\r\n' or char.isalnum():
        raise BertkitError(
            f"--delimiter {value!r} is not one separator character", "e.g. --delimiter ';' (or comma, tab, pipe)"
        )
    return char


def delimited_records(
    text: str,
    source: str,
    tsv: bool = False,
    headerless: tuple | None = None,
    extra_fields: bool = False,
    delimiter: str | None = None,
) -> list[dict]:
    """Records of a CSV (its separator sniffed unless ``delimiter`` forces one) or, ``tsv``, a TSV."""
    forced = delimiter is not None
    if tsv and not forced:
        # GLUE files carry unbalanced quotes, so quote handling must be off.
        delimiter, reader = "\t", csv.reader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE)
    else:
        delimiter = delimiter or sniff_delimiter(text)
        reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    rows = list(reader)
    header = list(headerless) if headerless else [name.strip() for name in rows[0]]
    if not headerless:
        check_header(header, delimiter, forced, source)
    body = rows if headerless else rows[1:]
    records = []
    for number, row in enumerate(body, 1 if headerless else 2):
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if extra_fields and len(row) > len(header):
            row = row[: len(header)]  # e.g. the STS benchmark's per-sentence source columns on some rows
        if len(row) != len(header):
            raise BertkitError(
                f"{source}:{number}: {len(row)} fields where the header has {len(header)}",
                "fix that line (TSV is read with quoting off, as GLUE ships it)",
            )
        records.append(dict(zip(header, row)))
    return records


def check_header(header: list[str], delimiter: str, forced: bool, source: str) -> None:
    """A header read as ONE column that holds another separator (``text;label``): the file is split
    at something else than it was read with; said here, not as a missing column further on."""
    if len(header) != 1:
        return
    other = next((d for d in DELIMITERS if d != delimiter and d in header[0]), None)
    if other is None:
        return
    how = "as --delimiter says" if forced else "the separator that fits its first rows best"
    raise BertkitError(
        f"{source}: the header {header[0][:60]!r} reads as one column with {delimiter_name(delimiter)} "
        f"separators ({how}), yet it holds {delimiter_name(other)}s",
        f"pass --delimiter {other!r}"
        if forced
        else f"give every line the header's number of {other!r}-separated fields (quote a field that holds {other!r})",
    )


def line_records(text: str) -> list[dict]:
    """One record per line: ``text``, and ``text_pair`` after a TAB."""
    records = []
    for line in split_lines(text):
        if "\t" in line:
            first, second = line.split("\t", 1)
            records.append({"text": first, "text_pair": second})
        else:
            records.append({"text": line})
    while records and not any(v.strip() for v in records[-1].values()):
        records.pop()  # trailing blank lines are not rows
    return records


def pick_column(
    columns: list[str],
    explicit: str | None,
    candidates: tuple,
    role: str,
    flag: str | None,
    source: str,
    required: bool = True,
    delimiter_flag: str | None = None,
) -> str | None:
    """The column holding ``role``: the explicit one, else the single known candidate present.
    ``flag`` is the option that names it, None where the command has no such option (eval, predict);
    ``delimiter_flag`` the option that forces a CSV's separator, where the command has one."""
    if explicit:
        if explicit not in columns:
            raise BertkitError(
                f"{source}: no column {explicit!r}" + (f" for {flag}" if flag else f" ({role})"),
                f"columns found: {', '.join(columns)}",
            )
        return explicit
    found = [name for name in candidates if name in columns]
    if len(found) == 1:
        return found[0]
    if not required and not found:
        return None
    problem = f"{'ambiguous' if found else 'missing'} {role} column"
    hint = f"name it with {flag} COLUMN" if flag else f"name the {role} column one of: {', '.join(candidates)}"
    # a header split at the wrong separator (`text;label;note, free` read at its comma): naming a
    # column would not help, the right separator would
    held = next((d for d in DELIMITERS if any(d in name for name in columns)), None)
    if held is not None and not found:
        problem += f"; a column name holds a {delimiter_name(held)}: the file may be split at the wrong separator"
        hint = f"pass {delimiter_flag} {held!r}" if delimiter_flag else "separate the file's fields with commas"
    raise BertkitError(f"{source}: {problem} (found columns: {', '.join(columns)})", hint)
