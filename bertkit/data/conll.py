"""Readers for token-tagging data: CoNLL column files and JSON/JSONL records.

Both return a list of examples ``{"tokens": [...], "tags": [...]}`` (``"tags"`` is absent
for untagged examples read with ``require_tags=False``, e.g. text to predict on). Tags are
returned exactly as written; checking and converting the tag scheme is left to
``bertkit.decoding.tags`` so these readers also serve non-BIO tag sets.
"""

from __future__ import annotations

import re
from pathlib import Path

from bertkit.data.readers import encodable
from bertkit.errors import BertkitError

DOCSTART_PREFIX = "-DOCSTART-"
_BLANKS = re.compile("[ \t]+")


def read_conll(path: str | Path, require_tags: bool = True) -> list[dict]:
    """Read a CoNLL column file: one token per line, token first, tag last.

    Any number of columns may sit between token and tag (CoNLL-2003 has POS and chunk tags);
    they are ignored. Columns are tab-separated if the first data line contains a tab (then a
    token may contain spaces), otherwise separated by runs of spaces and tabs. Blank lines
    end sentences; ``-DOCSTART-`` lines are skipped and also end a sentence. Every data line
    must have as many columns as the first one. A UTF-8 BOM, CRLF line ends and trailing
    whitespace are tolerated.

    With ``require_tags=False`` a one-column file is read as untagged tokens.
    """
    path = Path(path)
    sentences = _Sentences()
    layout = None  # (column count, tab-separated): the first data line's, which every line must follow
    for line_number, raw_line in enumerate(_read_lines(path), start=1):
        line = raw_line.rstrip()
        if not line.strip() or line.lstrip().startswith(DOCSTART_PREFIX):
            sentences.end(new_document=line.lstrip().startswith(DOCSTART_PREFIX))
            continue
        where = f"{path}:{line_number}"
        layout = layout or _first_layout(line, where, require_tags)
        columns = _split_columns(line, layout[1])
        _check_columns(columns, layout[0], where)
        sentences.add(columns[0], columns[-1], tagged=layout[0] > 1)
    sentences.end()
    if not sentences.found:
        raise BertkitError(
            f"{path}: no sentences found",
            hint="a CoNLL file has one 'token ... tag' line per token and a blank line between sentences",
        )
    return sentences.found


class _Sentences:
    """The sentences read so far and the one being read; -DOCSTART- lines number the documents, so
    that the sentences of one document stay together in --folds."""

    def __init__(self):
        self.found: list[dict] = []
        self.tokens: list[str] = []
        self.tags: list[str] = []
        self.tagged = False
        self.document: int | None = None

    def add(self, token: str, tag: str, tagged: bool) -> None:
        self.tokens.append(token)
        self.tags.append(tag)
        self.tagged = tagged

    def end(self, new_document: bool = False) -> None:
        if self.tokens:
            example: dict = {"tokens": list(self.tokens)}
            if self.tagged:
                example["tags"] = list(self.tags)
            if self.document is not None:
                example["document"] = self.document
            self.found.append(example)
        self.tokens.clear()
        self.tags.clear()
        if new_document:
            self.document = 0 if self.document is None else self.document + 1


def _first_layout(line: str, where: str, require_tags: bool) -> tuple[int, bool]:
    """(column count, tab-separated) of the first data line: tabs if it has one, else runs of spaces."""
    tab_separated = "\t" in line
    column_count = len(_split_columns(line, tab_separated))
    if column_count == 1 and require_tags:
        raise BertkitError(
            f"{where}: only one column ({line.strip()!r}); expected a token and a tag",
            hint="write 'token tag' per line (tag in the last column), separated by spaces or a tab",
        )
    return column_count, tab_separated


def _check_columns(columns: list[str], column_count: int, where: str) -> None:
    if len(columns) != column_count:
        raise BertkitError(
            f"{where}: {len(columns)} columns, but the first data line has {column_count}",
            hint="every token line needs the same columns; check for a missing tag, "
            "a token containing a space, or mixed tabs and spaces",
        )
    if not all(columns[:1] + columns[-1:]):
        raise BertkitError(
            f"{where}: empty token or tag column", hint="remove the stray tab, or fill in the missing value"
        )


def _read_lines(path: Path) -> list[str]:
    try:
        # utf-8-sig drops a BOM; universal newlines turn CRLF into LF. Not splitlines(): it
        # also breaks on characters such as U+2028 or U+0085 that can sit inside a token.
        with path.open(encoding="utf-8-sig") as handle:
            return handle.read().split("\n")
    except FileNotFoundError:
        raise BertkitError(f"{path}: file not found", hint="check the path") from None
    except IsADirectoryError:
        raise BertkitError(f"{path}: is a directory", hint="pass the data file itself") from None
    except UnicodeDecodeError as error:
        raise BertkitError(f"{path}: not valid UTF-8 (byte {error.start})", hint="re-save the file as UTF-8") from None


def _split_columns(line: str, tab_separated: bool) -> list[str]:
    if tab_separated:
        return [column.strip() for column in line.split("\t")]
    # Only ASCII blanks separate: a no-break space can be part of a token ("10\u00a0000").
    return _BLANKS.split(line.strip(" \t"))


def read_tagged_records(
    records: list[dict], source: str, label_names: list[str] | None = None, require_tags: bool = True
) -> list[dict]:
    """Turn JSON/JSONL records with ``tokens`` and ``tags`` into examples.

    Tags are read from ``tags`` or, failing that, ``ner_tags`` (the Hugging Face conll2003
    field). They may be strings, or integer class ids that ``label_names`` maps to strings.
    With ``require_tags=False`` records without tags are accepted and come back without a
    ``"tags"`` key. ``source`` names the data in error messages (usually the file path);
    records are named by their 0-based index in the list.
    """
    examples: list[dict] = []
    for index, record in enumerate(records):
        where = f"{source}: record {index}"
        if not isinstance(record, dict):
            raise BertkitError(
                f"{where} is a {type(record).__name__}, not an object",
                hint='each record must look like {"tokens": [...], "tags": [...]}',
            )
        tokens = _read_tokens(record, where)
        example: dict = {"tokens": tokens}
        tag_key = "tags" if "tags" in record else "ner_tags" if "ner_tags" in record else None
        if tag_key is None:
            if require_tags:
                raise BertkitError(
                    f"{where} has no 'tags' (or 'ner_tags') field",
                    hint='add one tag per token, e.g. "tags": ["B-PER", "O"]',
                )
        else:
            example["tags"] = _read_tags(record[tag_key], tag_key, len(tokens), where, label_names)
        examples.append(example)

    if not examples:
        raise BertkitError(f"{source}: no records", hint="the file holds no examples")
    return examples


def _read_tokens(record: dict, where: str) -> list[str]:
    tokens = record.get("tokens")
    if tokens is None:
        raise BertkitError(f"{where} has no 'tokens' field", hint="give each record a list of words under 'tokens'")
    if isinstance(tokens, str) or not isinstance(tokens, list):
        raise BertkitError(
            f"{where}: 'tokens' must be a list of words, got {type(tokens).__name__}",
            hint='split the text into words, e.g. "tokens": ["John", "lives", "here"]',
        )
    if not tokens:
        raise BertkitError(f"{where} has an empty token list", hint="drop the record, or give it at least one token")
    for position, token in enumerate(tokens):
        # A whitespace-only token yields no subwords, so its tag could never be predicted.
        if not isinstance(token, str) or not token.strip():
            raise BertkitError(
                f"{where}: token {position} is {token!r}; tokens must be non-blank strings",
                hint="remove empty or whitespace tokens (and their tags)",
            )
        encodable(token, f"{where}: token {position}")
    return list(tokens)


def _read_tags(tags: object, key: str, token_count: int, where: str, label_names: list[str] | None) -> list[str]:
    if isinstance(tags, str) or not isinstance(tags, list):
        raise BertkitError(f"{where}: '{key}' must be a list, got {type(tags).__name__}", hint="give one tag per token")
    if len(tags) != token_count:
        raise BertkitError(
            f"{where}: {token_count} tokens but {len(tags)} {key}", hint="give exactly one tag per token"
        )
    return [_tag_name(tag, position, where, label_names) for position, tag in enumerate(tags)]


def _tag_name(tag: object, position: int, where: str, label_names: list[str] | None) -> str:
    if isinstance(tag, str) and tag:
        return tag
    # bool is an int subclass, but True/False as a tag is a mistake, not class id 1/0.
    if isinstance(tag, int) and not isinstance(tag, bool):
        if label_names is None:
            raise BertkitError(
                f"{where}: tag {position} is the number {tag}, but no label names are known",
                hint="pass the label names (index -> tag, e.g. O, B-PER, I-PER, ...) or write the tags as strings",
            )
        if not 0 <= tag < len(label_names):
            raise BertkitError(
                f"{where}: tag {position} is {tag}, outside the {len(label_names)} label names",
                hint="check that the label names match the dataset's tag ids",
            )
        return label_names[tag]
    raise BertkitError(
        f"{where}: tag {position} is {tag!r}; tags must be strings or integer ids",
        hint='write tags like "B-PER" or "O"',
    )
