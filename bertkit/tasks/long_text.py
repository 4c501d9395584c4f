"""Texts longer than a window, for cls and pair (``--long-text``): torch-free.

* ``truncate`` (the default): the tokenizer cuts the row at --max-length (pairs: longest first).
* ``head-tail``: a long text keeps its first ``head`` and last ``room - head`` tokens (Sun et al.
  2019, "How to Fine-Tune BERT for Text Classification": head 128 + tail 382 was their best).
* ``windows``: a long text becomes overlapping windows, ``stride`` tokens shared by neighbours (as
  HF's ``stride`` and `bertkit embed --stride`); each window is a feature trained with its row's
  label, and ``pool_windows`` combines the windows' logits into the row's.

For a pair only the second text is read this way; the first text is repeated in each window and
cut to half the window's room at most, so the second always has room (said when it happens).
The special tokens come from the tokenizer's own layout (``Template``), so a row that fits is
encoded exactly as ``tokenizer(text, text_pair)`` encodes it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from bertkit.errors import BertkitError
from bertkit.tasks.base import TaskOption
from bertkit.tasks.panels import LONG_TEXT_PANEL

TRUNCATE, HEAD_TAIL, WINDOWS = "truncate", "head-tail", "windows"
STRATEGIES = (TRUNCATE, HEAD_TAIL, WINDOWS)
POOLINGS = ("mean", "max")

LONG_TEXT_OPTIONS = (
    TaskOption(
        "long_text",
        str,
        "cls/pair: how a text longer than --max-length is read: truncate (its first tokens), head-tail "
        "(its first --head-tokens and its last tokens) or windows (overlapping windows, each trained "
        "with the row's label, their logits combined per row); pair: the second text only. Stored.",
        ("finetune",),
        TRUNCATE,
        panel=LONG_TEXT_PANEL,
    ),
    TaskOption(
        "head_tokens",
        int,
        "--long-text head-tail: tokens kept from the start of a long text, the rest of the window "
        "from its end (default: a quarter of the room, as Sun et al.'s 128 of 510).",
        ("finetune",),
        panel=LONG_TEXT_PANEL,
    ),
    TaskOption(
        "stride",
        int,
        "--long-text windows: tokens shared by consecutive windows (the overlap; default: a quarter "
        "of the window's room; below the room).",
        ("finetune",),
        panel=LONG_TEXT_PANEL,
    ),
    TaskOption(
        "window_pooling",
        str,
        "--long-text windows: how the windows' logits become the row's: mean (default) or max.",
        ("finetune", "eval", "predict"),
        panel=LONG_TEXT_PANEL,
    ),
)
# each option that only one strategy reads, and that strategy
_BELONGS = {"head_tokens": HEAD_TAIL, "stride": WINDOWS, "window_pooling": WINDOWS}


def strategy(options: dict) -> str:
    return options.get("long_text", TRUNCATE)


def check_long_text_options(options: dict, max_length: int, training: bool) -> None:
    """What can be checked without a tokenizer, before any data is read: finetune's choice
    (``training``), or the stored one with eval's and predict's --window-pooling. The limits that
    depend on the special tokens are checked by ``encode_rows``."""
    how = strategy(options)
    if how not in STRATEGIES:
        raise BertkitError(f"unknown --long-text {how!r}", f"use one of {', '.join(STRATEGIES)}")
    pooling = options.get("window_pooling")
    if pooling is not None and pooling not in POOLINGS:
        raise BertkitError(f"unknown --window-pooling {pooling!r}", f"use one of {', '.join(POOLINGS)}")
    for name, owner in _BELONGS.items():
        if options.get(name) is not None and how != owner:
            flag = "--" + name.replace("_", "-")
            if not training:  # eval, predict: the model was trained otherwise; only the flag can go
                raise BertkitError(
                    f"{flag} applies to models trained with --long-text {owner}; this one reads long texts by {how}",
                    f"drop {flag}",
                )
            raise BertkitError(
                f"{flag} applies to --long-text {owner} only, and this run reads long texts by {how}",
                f"add --long-text {owner}, or drop {flag}",
            )
    for name in ("head_tokens", "stride"):
        value = options.get(name)
        if value is not None and not 0 <= int(value) < max_length:
            raise BertkitError(
                f"--{name.replace('_', '-')} {value} must be at least 0 and below --max-length {max_length}",
                f"give a smaller --{name.replace('_', '-')}, or raise --max-length",
            )


@dataclass(frozen=True)
class Template:
    """Where a tokenizer puts its special tokens around one text or two (``prefix A middle B suffix``)
    and the segment id of each part (None: the tokenizer gives no token_type_ids)."""

    prefix: tuple
    middle: tuple
    suffix: tuple
    types: tuple | None  # segment id of prefix, A, middle, B, suffix

    def build(self, first: list, second: list | None = None) -> tuple[list, list | None]:
        parts = [self.prefix, first] + ([self.middle, second] if second is not None else []) + [self.suffix]
        ids = [token for part in parts for token in part]
        if self.types is None:
            return ids, None
        kinds = [0, 1, 2, 3, 4] if second is not None else [0, 1, 4]
        return ids, [self.types[k] for part, k in zip(parts, kinds) for _ in part]


def template_of(tokenizer, pair: bool) -> Template:
    """The layout read off one tiny encoding: its special tokens split it into one or two runs of text."""
    encoded = tokenizer("a", "b" if pair else None, return_special_tokens_mask=True)
    ids, special = encoded["input_ids"], encoded["special_tokens_mask"]
    runs, start = [], None
    for i, flag in enumerate([*special, 1]):
        if not flag and start is None:
            start = i
        elif flag and start is not None:
            runs.append((start, i))
            start = None
    if len(runs) != (2 if pair else 1):
        raise BertkitError(
            "this tokenizer's special tokens are not laid out around the text(s) as bertkit expects",
            "train with --long-text truncate",
        )
    bounds = [0, runs[0][0], runs[0][1]] + ([runs[1][0], runs[1][1]] if pair else []) + [len(ids)]
    segments = [tuple(ids[a:b]) for a, b in zip(bounds, bounds[1:])]
    prefix, suffix = segments[0], segments[-1]
    middle = segments[2] if pair else ()
    types = None
    if "token_type_ids" in encoded:
        given = encoded["token_type_ids"]
        firsts = [given[a] if a < b else 0 for a, b in zip(bounds, bounds[1:])]
        types = tuple(firsts) if pair else (firsts[0], firsts[1], 0, 0, firsts[2])
    return Template(prefix, middle, suffix, types)


def window_spans(length: int, room: int, stride: int) -> list[tuple[int, int]]:
    """(start, end) of each window over ``length`` tokens: ``room`` long, ``stride`` shared by
    neighbours; the last one ends at the text's end (shorter, as HF's overflowing windows)."""
    spans, start = [], 0
    while True:
        spans.append((start, min(start + room, length)))
        if start + room >= length:
            return spans
        start += room - stride


def head_tail(ids: list, room: int, head: int) -> list:
    return ids if len(ids) <= room else ids[:head] + ids[len(ids) - (room - head) :]


@dataclass
class Encoded:
    features: list  # one per window (one per row unless windows), with example_index
    stats: dict
    notices: list


def encode_rows(tokenizer, texts: list, pairs: list | None, max_length: int, options: dict) -> Encoded:
    """The features of ``texts`` (and ``pairs``) as ``options["long_text"]`` reads long ones."""
    how = strategy(options)
    if how == TRUNCATE:
        return _truncated_rows(tokenizer, texts, pairs, max_length)
    template = template_of(tokenizer, pairs is not None)
    room = max_length - tokenizer.num_special_tokens_to_add(pair=pairs is not None)
    first_cap = room // 2 if pairs is not None else 0  # the first text of a pair keeps at most this
    least = room - first_cap  # the least room the (second) text ever has
    _check_room(options, how, room, least, max_length, pairs is not None)
    firsts = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
    seconds = tokenizer(pairs, add_special_tokens=False, verbose=False)["input_ids"] if pairs is not None else None
    features, cut_firsts, long_rows = [], 0, 0
    for index, first in enumerate(firsts):
        if seconds is None:
            fixed, text, text_room = None, first, room
        else:
            cut_firsts += len(first) > first_cap
            fixed = first[:first_cap]
            text, text_room = seconds[index], room - len(fixed)
        long_rows += len(text) > text_room
        if how == HEAD_TAIL:
            head = options["head_tokens"] if options.get("head_tokens") is not None else text_room // 4
            pieces = [head_tail(text, text_room, head)]
        else:
            stride = options["stride"] if options.get("stride") is not None else least // 4
            pieces = [text[a:b] for a, b in window_spans(len(text), text_room, stride)]
        cut = (len(text) > text_room and how == HEAD_TAIL) or (fixed is not None and len(first) > first_cap)
        for piece in pieces:
            ids, types = template.build(fixed, piece) if fixed is not None else template.build(piece)
            feature = {"input_ids": ids, "example_index": index, "truncated": cut}
            if types is not None:
                feature["token_type_ids"] = types
            features.append(feature)
    return _said(how, features, len(firsts), long_rows, cut_firsts, room, first_cap, options, least)


def _check_room(options: dict, how: str, room: int, least: int, max_length: int, pair: bool) -> None:
    """The limits that need the tokenizer's special tokens: a stride below the window's room, a head
    within it (pairs: within the least room the second text has, half the window's)."""
    where = "the second text of a pair has at least" if pair else "a window of --max-length holds"
    name = "stride" if how == WINDOWS else "head_tokens"
    value = options.get(name)
    too_big = value is not None and (value >= least if how == WINDOWS else value > least)
    if least < 2 or too_big:
        flag = "--" + name.replace("_", "-")
        raise BertkitError(
            f"{flag} {value} must be {'below' if how == WINDOWS else 'at most'} the {least} text tokens "
            f"{where} (--max-length {max_length}, {room} tokens of room)",
            f"lower {flag} or raise --max-length",
        )


def _said(how, features, rows, long_rows, cut_firsts, room, first_cap, options, least) -> Encoded:
    """The stats and the notices of one encoding (the api tells them: api/evaluation.py, predict's rows)."""
    stats = {"truncated": sum(1 for f in _firsts_of_rows(features) if f["truncated"])}
    notices = []
    if long_rows and how == HEAD_TAIL:
        given = options.get("head_tokens")
        head = f"{given}" if given is not None else "a quarter of the room's"
        unit = "second texts of pairs" if first_cap else "texts"
        notices.append(
            f"{long_rows} of {rows} {unit} were longer than the window's room and were read head-tail "
            f"({head} tokens from their start, the rest of the room from their end)"
        )
    if how == WINDOWS:
        stats["windows"] = len(features)
        stats["windowed"] = long_rows
        if long_rows:
            stride = options.get("stride", least // 4)
            notices.append(
                f"{long_rows} of {rows} texts were longer than a window and were read as overlapping windows "
                f"({len(features)} windows for {rows} rows, {stride} tokens shared; logits combined by "
                f"{options.get('window_pooling') or 'mean'})"
            )
    if cut_firsts:
        notices.append(
            f"{cut_firsts} of {rows} first texts of pairs were cut to {first_cap} tokens (half the window's "
            f"room), to leave the second text room"
        )
    return Encoded(features, stats, notices)


def _firsts_of_rows(features):
    seen = set()
    for feature in features:
        if feature["example_index"] not in seen:
            seen.add(feature["example_index"])
            yield feature


def _truncated_rows(tokenizer, texts: list, pairs: list | None, max_length: int) -> Encoded:
    """The tokenizer's own truncation at ``max_length`` (pairs: longest first), and which rows lost
    tokens: only rows that came out at exactly max_length can have, and only those are tokenized
    again, untruncated, to tell."""
    encoded = tokenizer(texts, pairs, truncation=True, max_length=max_length)
    full = [i for i, ids in enumerate(encoded["input_ids"]) if len(ids) >= max_length]
    lost = set()
    if full:
        lengths = tokenizer(
            [texts[i] for i in full], [pairs[i] for i in full] if pairs else None, truncation=False, verbose=False
        )["input_ids"]
        lost = {i for i, ids in zip(full, lengths) if len(ids) > max_length}
    features = []
    for i, ids in enumerate(encoded["input_ids"]):
        feature = {"input_ids": ids, "example_index": i, "truncated": i in lost}
        if "token_type_ids" in encoded:
            feature["token_type_ids"] = encoded["token_type_ids"][i]
        features.append(feature)
    notices = []
    if lost:
        unit = "text pairs" if pairs else "texts"
        notices.append(f"{len(lost)} of {len(texts)} {unit} were truncated to {max_length} tokens")
    return Encoded(features, {"truncated": len(lost)}, notices)


def pool_windows(logits: np.ndarray, example_index: list, rows: int, how: str = "mean") -> tuple[np.ndarray, list]:
    """Each row's logits from its windows' (features x outputs): their mean or their element-wise max;
    and how many windows each row had. Every row must have at least one window."""
    index = np.asarray(example_index, dtype=np.int64)
    counts = np.bincount(index, minlength=rows)
    logits = np.asarray(logits, dtype=np.float64)
    if how == "max":
        pooled = np.full((rows, *logits.shape[1:]), -np.inf)
        np.maximum.at(pooled, index, logits)
    else:
        pooled = np.zeros((rows, *logits.shape[1:]))
        np.add.at(pooled, index, logits)
        pooled /= counts.reshape(-1, *([1] * (logits.ndim - 1)))
    return pooled, counts.tolist()


def long_text_card(card, options: dict):
    """The model card's limitation line for a model that reads long texts otherwise than by
    truncation: the card's plain-transformers snippet truncates, so it agrees with `bertkit predict`
    only on texts that fit one window."""
    how = strategy(options)
    if how == TRUNCATE:
        return card
    read = (
        "their first and last tokens (head-tail)"
        if how == HEAD_TAIL
        else f"overlapping windows whose logits are combined by {options.get('window_pooling') or 'mean'}"
    )
    return replace(
        card,
        limitations=f"Texts longer than $max_length tokens are read as {read} by `bertkit predict`, "
        "`bertkit serve` and the exported backends; the snippet above truncates them, so it agrees "
        "with them only on texts that fit.",
    )
