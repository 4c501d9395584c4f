"""Document context for token tagging (FLERT, Schweter & Akbik 2020): each sentence is encoded with
up to ``context_tokens`` word pieces of the sentences before and after it in the same document,
``[CLS] before sentence after [SEP]``; labels and predictions sit on the sentence's own words only.

Documents are found where the data is read, and each example then carries its neighbours' words
(``example["context"] = [words before, words after]``, at most ``context_tokens`` words a side, as
every word has at least one word piece). So what happens after reading (``predict``'s chunks, the
server's micro-batches mixing requests) cannot change a sentence's context: a document given whole
and the same sentences among others, with their document id, are encoded the same.

Where documents come from: a CoNLL file's ``-DOCSTART-`` sections; the ``document`` field of
records (JSON, JSONL, CSV, Parquet, a Hub dataset, a server request), whose consecutive rows with
one value form a document; raw sentences to predict on (text lines, ``text`` rows) without that
field are one document, in their order. Gold data with no boundary at all is read as sentences
alone, and said so. A document id that comes back after another document is refused.
"""

from __future__ import annotations

from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.tasks.annotated import with_notices
from bertkit.tasks.base import TaskOption
from bertkit.tasks.panels import LONG_TEXT_PANEL

SENTENCE, DOCUMENT = "sentence", "document"
DEFAULT_TOKENS = 64
SPECIAL_TOKENS = 2  # [CLS] ... [SEP] (or <s> ... </s>): what every supported model adds to one text
CONTEXT_OPTIONS = (
    TaskOption(
        "context",
        str,
        "ner: sentence (each sentence alone) or document (FLERT: the word pieces of the sentences around it "
        "in its document as context; -DOCSTART- in CoNLL, a 'document' field in records).",
        ("finetune", "eval", "predict"),
        SENTENCE,
        panel=LONG_TEXT_PANEL,
    ),
    TaskOption(
        "context_tokens",
        int,
        "ner: with --context document, at most this many word pieces of context on each side.",
        ("finetune", "eval", "predict"),
        DEFAULT_TOKENS,
        panel=LONG_TEXT_PANEL,
    ),
)


def check_context_options(options: dict, max_length: int) -> None:
    """Fail on a --context value or size that cannot work at this --max-length."""
    context = options.get("context", SENTENCE)
    if context not in (SENTENCE, DOCUMENT):
        raise BertkitError(f"unknown --context {context!r}", "use --context sentence or --context document")
    tokens = options.get("context_tokens", DEFAULT_TOKENS)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise BertkitError(
            f"--context-tokens {tokens} is invalid", "give the word pieces of context on each side (>= 0), e.g. 64"
        )
    room = max_length - SPECIAL_TOKENS
    if context == DOCUMENT and tokens >= room:
        raise BertkitError(
            f"--context-tokens {tokens} leaves no room for the sentence at --max-length {max_length} "
            f"(one side's context alone would fill its {room} word pieces)",
            f"give --context-tokens below {room} (e.g. {room // 4}), or a larger --max-length",
        )


def uses_documents(options: dict) -> bool:
    return options.get("context", SENTENCE) == DOCUMENT


def context_size(options: dict) -> int:
    return options.get("context_tokens", DEFAULT_TOKENS)


def document_ids(records: list, where: str) -> list:
    """Each record's ``document`` value (None where it has none); a value that cannot name a
    document (a list, a float, true) is refused."""
    ids = []
    for row, record in enumerate(records, 1):
        value = record.get("document") if isinstance(record, dict) else None
        if value is not None and (isinstance(value, bool) or not isinstance(value, (str, int))):
            raise BertkitError(
                f"{where}: row {row}'s 'document' is {value!r}", "give each row's document as a string or an integer"
            )
        ids.append(value)
    return ids


def in_context(examples: list, ids: list, options: dict, where: str, consecutive: bool, marker: str) -> list:
    """The examples, each carrying the words around it in its document (``--context document``);
    untouched otherwise. ``ids``: each example's document (None: none given); ``consecutive``: rows
    without ids are one document (raw sentences), rather than sentences alone (gold data);
    ``marker``: how this format marks documents, for the notice when it marks none."""
    if not uses_documents(options) or not examples:
        return examples
    runs = document_runs(ids, where, consecutive)
    if runs is None:
        said = (
            f"--context document: {where} has no document boundary ({marker}), so each sentence "
            "is read alone, as with --context sentence"
        )
        notice("data", said)
        return with_notices(examples, [said])
    size = context_size(options)
    for start, end in runs:
        for index in range(start, end):
            examples[index]["context"] = [
                _last_words(examples, start, index, size),
                _first_words(examples, index + 1, end, size),
            ]
    return examples


def document_runs(ids: list, where: str, consecutive: bool) -> list[tuple[int, int]] | None:
    """``[start, end)`` of each document; None when there is no boundary at all (every id None and
    not ``consecutive``). A row without an id among rows with ids, or an id that comes back after
    another document began, is an error: a document's sentences are consecutive."""
    given = [row for row, value in enumerate(ids) if value is not None]
    if not given:
        return [(0, len(ids))] if consecutive else None
    if len(given) < len(ids):
        row = next(row for row, value in enumerate(ids) if value is None) + 1
        raise BertkitError(
            f"{where}: row {row} has no document id while other rows have one",
            "give every row a 'document' (consecutive rows of one document share it), or give none",
        )
    runs, finished, start = [], set(), 0
    for row in range(1, len(ids) + 1):
        if row == len(ids) or ids[row] != ids[start]:
            finished.add(ids[start])
            runs.append((start, row))
            if row < len(ids) and ids[row] in finished:
                raise BertkitError(
                    f"{where}: document {ids[row]!r} comes back at row {row + 1}, after document "
                    f"{ids[row - 1]!r} began",
                    "keep each document's sentences together and in order (sort the rows by document)",
                )
            start = row
    return runs


def _last_words(examples: list, start: int, index: int, size: int) -> list:
    words: list = []
    for before in range(index - 1, start - 1, -1):
        if len(words) >= size:
            break
        words[:0] = examples[before]["tokens"]
    return words[-size:] if size else []


def _first_words(examples: list, index: int, end: int, size: int) -> list:
    words: list = []
    for after in range(index, end):
        if len(words) >= size:
            break
        words.extend(examples[after]["tokens"])
    return words[:size]


def context_pieces(tokenizer, examples: list, size: int) -> list:
    """Per example, (word pieces before, word pieces after): the last ``size`` pieces of the words
    before it, the first ``size`` of those after (None for an example without context)."""
    sides = [side for ex in examples if "context" in ex for side in ex["context"]]
    words = [side for side in sides if side]
    encoded = tokenizer(words, is_split_into_words=True, add_special_tokens=False, verbose=False) if words else {}
    found = iter(encoded.get("input_ids", []))
    pieces = iter([list(next(found)) if side else [] for side in sides])
    result = []
    for example in examples:
        if "context" not in example:
            result.append(None)
            continue
        before, after = next(pieces), next(pieces)
        result.append((before[len(before) - size :] if size else [], after[:size]))
    return result


def with_context(feature: dict, encoding, pieces: tuple, max_length: int) -> bool:
    """Insert the context ``pieces`` (before, after) around the sentence of the one-window ``feature``
    of ``encoding`` (word_windows.EncodedWords), in the room the sentence leaves at ``max_length``; the
    sentence's ``first_tokens`` move with it. The sentence comes first: a side gets less when the
    room is short, and half the room when both want more. Returns whether any context was added."""
    (before, after), prefix, suffix = pieces, len(encoding.prefix), len(encoding.suffix)
    ids = feature["input_ids"]
    take_before, take_after = share(max_length - len(ids), len(before), len(after))
    if not take_before and not take_after:
        return False
    before, after = before[len(before) - take_before :], after[:take_after]
    end = len(ids) - suffix
    feature["input_ids"] = ids[:prefix] + before + ids[prefix:end] + after + ids[end:]
    types = feature.get("token_type_ids")
    if types is not None:
        segment = types[prefix] if prefix < len(types) else 0  # the sentence's own segment
        feature["token_type_ids"] = (
            types[:prefix] + [segment] * take_before + types[prefix:end] + [segment] * take_after + types[end:]
        )
    feature["first_tokens"] = [position + take_before for position in feature["first_tokens"]]
    return True


def share(room: int, before: int, after: int) -> tuple[int, int]:
    """Pieces of context taken (before, after) in ``room``: all when they fit, else each side at
    least half the room, what one side leaves going to the other."""
    if room <= 0:
        return 0, 0
    if before + after <= room:
        return before, after
    take_before = min(before, max(room // 2, room - after))
    return take_before, min(after, room - take_before)
