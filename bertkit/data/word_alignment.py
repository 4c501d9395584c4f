"""Character spans (an annotation tool's entities) made into one BIO tag per word.

Words: the text's whitespace-separated pieces, cut further only where a span starts or ends at a
word boundary inside a piece (a boundary of ``split_words``: ``Paris.`` -> ``Paris`` ``.`` when
``Paris`` is an entity). So a text made by joining words with spaces (a CoNLL sentence exported to
Label Studio) gives back exactly those words, and raw text keeps punctuation off its entities.

A span whose ends do not fall on word ends (``Par`` of ``Paris``) is aligned by the policy
``--span-alignment``: ``expand`` (the default) takes every word it touches, ``contract`` only the
words wholly inside it (none: the span is dropped), ``strict`` refuses it. Either way it is
counted. Overlapping spans and spans outside the text are errors that name the task and span.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bertkit.decoding.tags import split_words
from bertkit.errors import BertkitError

ALIGNMENTS = ("expand", "contract", "strict")
_PIECE = re.compile(r"\S+")


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    label: str
    number: int  # 1-based, in the task's own order: how messages name it
    said: str | None = None  # the text the tool says the span covers (Label Studio's ``text``), if any


@dataclass
class Alignment:
    """What aligning spans to words did, summed over the tasks read."""

    moved: int = 0  # spans whose ends were moved to word ends (expand, contract)
    dropped: int = 0  # spans with no word wholly inside them (contract)
    examples: list = field(default_factory=list)  # a few (task, span text) shown in the notice

    def notices(self, policy: str) -> list[str]:
        shown = "; ".join(self.examples[:3])
        said = []
        if self.moved:
            how = "widened to the whole words they cut" if policy == "expand" else "narrowed to the words inside them"
            said.append(f"{self.moved} span(s) did not start or end at a word boundary and were {how} (e.g. {shown})")
        if self.dropped:
            said.append(f"{self.dropped} span(s) held no whole word and were dropped (--span-alignment contract)")
        return said


def check_alignment(value: str | None) -> str:
    policy = value or "expand"
    if policy not in ALIGNMENTS:
        raise BertkitError(f"--span-alignment {value!r} is not a policy", f"use one of {', '.join(ALIGNMENTS)}")
    return policy


def words_and_tags(text: str, spans: list[Span], task: str, policy: str, seen: Alignment) -> tuple[list, list]:
    """The text's words and one IOB2 tag per word, from character ``spans``."""
    spans = _checked(text, spans, task)
    words = _words(text, spans)
    tags = ["O"] * len(words)
    owner: dict[int, Span] = {}
    for span in spans:
        chosen = _aligned(words, span, text, task, policy, seen)
        if not chosen:
            continue
        for index in chosen:
            if index in owner:
                raise BertkitError(
                    f"{task}: spans {owner[index].number} and {span.number} take the same word "
                    f"{text[words[index][0] : words[index][1]]!r} once aligned to words ({policy})",
                    "give each word to one entity, or pass --span-alignment contract",
                )
            owner[index] = span
        tags[chosen[0]] = f"B-{span.label}"
        for index in chosen[1:]:
            tags[index] = f"I-{span.label}"
    return [text[start:end] for start, end in words], tags


def _checked(text: str, spans: list[Span], task: str) -> list[Span]:
    """Spans inside the text, trimmed of surrounding whitespace, sorted, and not overlapping."""
    trimmed = []
    for span in spans:
        if not 0 <= span.start < span.end <= len(text):
            raise BertkitError(
                f"{task}: span {span.number} [{span.start}, {span.end}, {span.label!r}] is outside the text "
                f"(characters 0 to {len(text)})",
                "export the annotations again from the tool, or fix the offsets",
            )
        covered = text[span.start : span.end]
        start = span.start + len(covered) - len(covered.lstrip())
        end = span.end - (len(covered) - len(covered.rstrip()))
        if start >= end:
            raise BertkitError(
                f"{task}: span {span.number} [{span.start}, {span.end}, {span.label!r}] covers only whitespace",
                "remove that span in the annotation tool",
            )
        trimmed.append(Span(start, end, span.label, span.number))
    trimmed.sort(key=lambda s: (s.start, s.end))
    for before, after in zip(trimmed, trimmed[1:]):
        if after.start < before.end:
            raise BertkitError(
                f"{task}: spans {before.number} ({text[before.start : before.end]!r}, {before.label}) and "
                f"{after.number} ({text[after.start : after.end]!r}, {after.label}) overlap",
                "a word takes one tag: keep one of the overlapping spans",
            )
    return trimmed


def _words(text: str, spans: list[Span]) -> list[tuple[int, int]]:
    """Whitespace pieces, cut at the span ends that are word boundaries inside a piece."""
    boundaries = {b for start, end in split_words(text)[1] for b in (start, end)}
    cuts = {b for span in spans for b in (span.start, span.end) if b in boundaries}
    words = []
    for piece in _PIECE.finditer(text):
        start = piece.start()
        for cut in sorted(c for c in cuts if piece.start() < c < piece.end()):
            words.append((start, cut))
            start = cut
        words.append((start, piece.end()))
    return words


def _aligned(words, span: Span, text: str, task: str, policy: str, seen: Alignment) -> list[int]:
    touched = [i for i, (start, end) in enumerate(words) if start < span.end and end > span.start]
    inside = [i for i in touched if words[i][0] >= span.start and words[i][1] <= span.end]
    if touched == inside:
        return touched
    shown = f"{task}: {text[span.start : span.end]!r}"
    if policy == "strict":
        around = " ".join(text[words[i][0] : words[i][1]] for i in touched)
        raise BertkitError(
            f"{task}: span {span.number} {text[span.start : span.end]!r} ({span.label}) cuts a word ({around!r})",
            "fix the span in the annotation tool, or pass --span-alignment expand (or contract)",
        )
    if len(seen.examples) < 3:  # the notice shows a few
        seen.examples.append(shown)
    chosen = touched if policy == "expand" else inside
    if chosen:
        seen.moved += 1
    else:
        seen.dropped += 1
    return chosen
