"""Every input format bertkit reads, each declared once, as spaCy registers its readers: the
suffixes that name it, how the whole file becomes records, how it streams in chunks (or None: it
is read whole, then handed out in chunks), whether it is UTF-8 text, and how Ray Data reads it.

Training and evaluation (``read_records``, the tasks' read paths), `predict`/`embed` streaming
(bertkit/data/streams.py), Hub-dataset file detection and ``--ray`` inputs all ask this registry,
so a format trains, evaluates and predicts alike, and a new format is one ``register`` call. A
file without a suffix is sniffed from its text (JSON, JSON Lines or text lines); a suffix no
format declares is refused, naming the formats there are. OUTPUT suffixes (embeddings' .npy/.npz,
predict's --output) are the writers' own (bertkit/data/sinks.py, bertkit/api/embedding.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

from bertkit.data import chunked, conll, parquet, readers
from bertkit.errors import BertkitError


@dataclass(frozen=True)
class Layout:
    """How a delimited file is read where its own header does not say: a known dataset's column
    names for a headerless file (with trailing fields allowed), ``--delimiter``."""

    headerless: tuple | None = None
    extra_fields: bool = False
    delimiter: str | None = None


@dataclass(frozen=True)
class Format:
    name: str  # how messages name it
    suffixes: tuple  # lower-case, with the dot; the first is the format's own
    parse_text: Callable | None = None  # (text, source, Layout) -> records: a text format's whole-file reader
    read_whole: Callable | None = None  # (path) -> records: the whole-file reader of a format read from its path
    read_chunks: Callable | None = None  # (path, opened) -> (row number, record)...; None: read whole
    text: bool = True  # UTF-8 text (read_text's checks; a byte position tells a stream's progress)
    typed: bool = False  # values keep their types: lists (tokens, tags), numbers, objects
    count_rows: Callable | None = None  # (path) -> rows, from metadata without reading the data
    ray_read: Callable | None = None  # (ray.data, paths, format) -> a Ray Dataset; None: not for --ray

    @property
    def suffix(self) -> str:
        return self.suffixes[0]

    @property
    def streams(self) -> bool:
        return self.read_chunks is not None

    def read(self, path: Path, layout: Layout = Layout(), source: str | None = None) -> list[dict]:
        """The whole file's records (at least one)."""
        source = source or str(path)
        if self.parse_text is not None:
            return _parse(self, readers.read_text(path), source, layout)
        records = self.read_whole(path)
        if not records:
            raise BertkitError(f"{source} has no data rows", "a header line alone is not enough")
        return records

    def describe(self) -> str:
        return f"{self.name} ({', '.join(self.suffixes)})"


FORMATS: dict[str, Format] = {}  # suffix -> its format
# files a `datasets` dataset directory may hold and `datasets` reads (bertkit never alone)
DATASET_ONLY_SUFFIXES = (".arrow", ".gz", ".zip")


def register(fmt: Format) -> Format:
    for suffix in fmt.suffixes:
        if suffix != suffix.lower() or not suffix.startswith(".") or suffix in FORMATS:
            raise ValueError(f"{fmt.name}: suffix {suffix!r} is not a new lower-case '.suffix'")
        FORMATS[suffix] = fmt
    return fmt


def lookup(suffix: str | None) -> Format | None:
    return FORMATS.get((suffix or "").lower())


def formats() -> list[Format]:
    return list(dict.fromkeys(FORMATS.values()))


def suffixes(which: Callable[[Format], bool] | None = None) -> tuple:
    """Every registered suffix (of the formats ``which`` accepts), in registration order."""
    return tuple(suffix for suffix, fmt in FORMATS.items() if which is None or which(fmt))


def known() -> str:
    return ", ".join(fmt.describe() for fmt in formats())


def of(path: Path, suffix: str | None = None) -> Format | None:
    """The format of a file (``suffix``: what it is read as instead of its own suffix); None for a
    file without a suffix (its text is sniffed). An unknown suffix is a user error."""
    suffix = (suffix if suffix is not None else Path(path).suffix).lower()
    if not suffix:
        return None
    fmt = FORMATS.get(suffix)
    if fmt is None:
        raise BertkitError(f"{path}: unknown input format {suffix!r}", f"bertkit reads {known()}")
    return fmt


def sniff(text: str) -> Format:
    """The format of a text without a suffix (standard input, a file named ``data``)."""
    head = text.lstrip()[:1]
    if head == "[":
        return JSON
    if head == "{":
        return JSON if text.strip().count("\n") == 0 or text.lstrip().startswith('{"data"') else JSONL
    return TEXT_LINES


def read_records(
    path: Path,
    headerless: tuple | None = None,
    suffix: str | None = None,
    extra_fields: bool = False,
    delimiter: str | None = None,
) -> list[dict]:
    """Records from a data file, read as its format says (a file without a suffix: sniffed). A known
    dataset's layout may override the suffix (the STS benchmark's .csv files are TAB-separated)
    and, for headerless files, allow trailing fields beyond its named columns (dropped).
    ``delimiter``: a CSV/TSV's field separator, forced (``--delimiter``); default: sniffed for .csv."""
    path = Path(path)
    layout = Layout(headerless, extra_fields, delimiter)
    fmt = of(path, suffix)
    if fmt is None:
        text = readers.read_text(path)
        return _parse(sniff(text), text, str(path), layout)
    return fmt.read(path, layout)


def parse_records(
    text: str,
    suffix: str,
    source: str,
    headerless: tuple | None = None,
    extra_fields: bool = False,
    delimiter: str | None = None,
) -> list[dict]:
    """Records from text already read, as the format of ``suffix`` parses it (sniffed for a suffix
    of no text format: "", a CoNLL file's)."""
    fmt = lookup(suffix)
    if fmt is None or fmt.parse_text is None:
        fmt = sniff(text)
    return _parse(fmt, text, source, Layout(headerless, extra_fields, delimiter))


def _parse(fmt: Format, text: str, source: str, layout: Layout) -> list[dict]:
    records = fmt.parse_text(text, source, layout)
    if not records:
        raise BertkitError(f"{source} has no data rows", "a header line alone is not enough")
    return records


# --- the formats ------------------------------------------------------------------------------------
def _ray_json(data, paths, fmt: Format, lines: bool = False):  # pyarrow's reader (a .json array whole)
    return data.read_json(paths, lines=lines)


def _ray_delimited(data, paths, fmt: Format, delimiter: str = ","):
    import pyarrow.csv as pacsv

    options = pacsv.ParseOptions(delimiter=delimiter)
    return data.read_csv(paths, parse_options=options, file_extensions=[s[1:] for s in fmt.suffixes])


def _delimited(text: str, source: str, layout: Layout, tsv: bool = False) -> list[dict]:
    return readers.delimited_records(text, source, tsv, layout.headerless, layout.extra_fields, layout.delimiter)


PARQUET = register(
    Format(
        "Parquet",
        (".parquet",),
        read_whole=parquet.read_records,
        read_chunks=parquet.batches,
        text=False,
        typed=True,
        count_rows=parquet.count_rows,
        ray_read=lambda data, paths, fmt: data.read_parquet(paths),
    )
)
JSONL = register(
    Format(
        "JSON Lines",
        (".jsonl",),
        parse_text=lambda text, source, layout: readers.jsonl_records(text, source),
        read_chunks=chunked.text_file(chunked.jsonl_rows),
        typed=True,
        ray_read=partial(_ray_json, lines=True),
    )
)
JSON = register(
    Format(
        "JSON",  # a list of objects, {"data": [...]} (SQuAD's articles), or one object
        (".json",),
        parse_text=lambda text, source, layout: readers.json_records(text, source),
        typed=True,
        ray_read=_ray_json,
    )
)
CSV = register(
    Format(
        "CSV",
        (".csv",),
        parse_text=_delimited,
        read_chunks=chunked.text_file(chunked.delimited_rows),
        ray_read=_ray_delimited,
    )
)
TSV = register(
    Format(
        "TSV",
        (".tsv",),
        parse_text=partial(_delimited, tsv=True),
        read_chunks=chunked.text_file(chunked.delimited_rows, tsv=True),
        ray_read=partial(_ray_delimited, delimiter="\t"),
    )
)
TEXT_LINES = register(
    Format(
        "text lines",  # a CoNLL column file too, where the ner task finds one
        (".txt",),
        parse_text=lambda text, source, layout: readers.line_records(text),
        read_chunks=chunked.text_file(chunked.line_rows),
        ray_read=lambda data, paths, fmt: data.read_text(paths, drop_empty_lines=True),
    )
)
CONLL = register(
    Format(
        "CoNLL",  # one 'token ... tag' line per word: records of tokens (and tags) per sentence
        # .train/.testa/.testb: the CoNLL-2002/2003 shared tasks' own file names (eng.train, esp.testa)
        (".conll", ".bio", ".iob", ".iob2", ".train", ".testa", ".testb"),
        read_whole=partial(conll.read_conll, require_tags=False),
    )
)
JSON_FAMILY = (JSON, JSONL)  # what a SQuAD file may be: nested articles or flat question records
