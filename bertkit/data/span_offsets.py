"""Character spans' offsets as the annotation tools count them, made Python's (code points).

Label Studio's and doccano's frontends count JavaScript string offsets: UTF-16 code units, where a
character outside the Basic Multilingual Plane (an emoji, U+1D400 ...) counts two (Label Studio
issues #1347 and #4988; doccano issue #2290, and its annotator's ``Text.codePointLength``, which is
``text.length``). Python counts code points. Before the first such character the two agree; after
it, each offset is off by one per such character ("Paris is" tagged where the span says "Paris").

``--span-offsets`` (ner) is ``utf-16`` or ``code-points``; by default (``auto``):

* a span that carries its own ``text`` (Label Studio writes it) is read the way that gives that
  text: UTF-16 code units first (the tool's count), then code points (a file a script wrote). If
  neither does, the span is refused, naming the task and span. The text is not searched for: it may
  occur several times in the task, and offsets that give another text mean that the export and its
  data disagree (a text edited after it was annotated), so any reading would be a guess.
* a Label Studio span without its text: UTF-16 code units, the tool's count.
* other span files (doccano JSONL, spaCy-style records) do not say what they count: doccano counts
  UTF-16 code units (grapheme clusters in its "count grapheme clusters as one character" mode),
  spaCy and Python scripts count code points. Where the two differ for a span (a character outside
  the BMP before or inside it), the span is refused until ``--span-offsets`` says which.

A unit given with ``--span-offsets`` is still checked against the span's text where it has one.
"""

from __future__ import annotations

import dataclasses

from bertkit.data.word_alignment import Span
from bertkit.errors import BertkitError

AUTO, UTF16, CODE_POINTS = "auto", "utf-16", "code-points"
UNITS = (AUTO, UTF16, CODE_POINTS)
_NAMES = {UTF16: "UTF-16 code units", CODE_POINTS: "characters (code points)"}


def utf16_offset(text: str, offset: int) -> int:
    """A code-point offset into ``text`` as the annotation tools count it (UTF-16 code units)."""
    return offset + sum(1 for char in text[:offset] if ord(char) > 0xFFFF)


def check_units(value: str | None) -> str:
    chosen = value or AUTO
    if chosen not in UNITS:
        raise BertkitError(f"--span-offsets {value!r} is not a unit", f"use one of {', '.join(UNITS)}")
    return chosen


def in_code_points(text: str, spans: list[Span], task: str, unit: str, tool: bool) -> tuple[list[Span], int]:
    """The spans with code-point offsets into ``text``, and how many were moved (read in UTF-16 code
    units where the counts differ). ``tool``: Label Studio's export (UTF-16 where a span has no text)."""
    units = _utf16_map(text)
    read, moved = [], 0
    for span in spans:
        start, end = _reading(text, span, units, task, unit, tool)
        moved += (start, end) != (span.start, span.end)
        read.append(dataclasses.replace(span, start=start, end=end))
    return read, moved


def _utf16_map(text: str) -> dict | None:
    """UTF-16 offset -> code-point offset (None: no character outside the BMP, the counts agree)."""
    if not any(ord(c) > 0xFFFF for c in text):
        return None
    found, unit = {}, 0
    for index, char in enumerate(text):
        found[unit] = index
        unit += 2 if ord(char) > 0xFFFF else 1
    found[unit] = len(text)
    return found


def _reading(text: str, span: Span, units: dict | None, task: str, unit: str, tool: bool) -> tuple[int, int]:
    given = (span.start, span.end)
    readings = {CODE_POINTS: given, UTF16: given if units is None else (units.get(span.start), units.get(span.end))}
    said = span.said if isinstance(span.said, str) and span.said.strip() else None
    if unit != AUTO:
        chosen = readings[unit]
        if None in chosen:
            raise BertkitError(
                f"{task}: span {span.number} [{span.start}, {span.end}, {span.label!r}] does not fall on whole "
                f"characters counted in {_NAMES[unit]} (the text is {len(text)} characters, "
                f"{len(text.encode('utf-16-le')) // 2} UTF-16 code units)",
                "check --span-offsets: the file may count the other way",
            )
        if said is not None and _inside(text, chosen) and not _says(text, chosen, said):
            raise _disagrees(text, span, said, readings, task)
        return chosen
    if said is not None:
        for name in (UTF16, CODE_POINTS):
            if None not in readings[name] and _says(text, readings[name], said):
                return readings[name]
        if not _inside(text, given):
            return given  # outside the text either way: said where spans are checked
        raise _disagrees(text, span, said, readings, task)
    if readings[UTF16] == given:
        return given
    if tool:
        return readings[UTF16] if None not in readings[UTF16] else given
    before = next(c for c in text[: span.end] if ord(c) > 0xFFFF)
    shown = " / ".join(repr(_cut(text, readings[name])) for name in (UTF16, CODE_POINTS))
    raise BertkitError(
        f"{task}: span {span.number} [{span.start}, {span.end}, {span.label!r}] comes after a character outside "
        f"the BMP ({before!r}), where UTF-16 code units (doccano's count) and characters (spaCy-style files) "
        f"give different text ({shown})",
        "say what the file counts: --span-offsets utf-16 (doccano) or --span-offsets code-points",
    )


def _inside(text: str, reading: tuple) -> bool:
    return 0 <= reading[0] < reading[1] <= len(text)


def _says(text: str, reading: tuple, said: str) -> bool:
    covered = text[reading[0] : reading[1]] if _inside(text, reading) else None
    return covered is not None and (covered == said or covered.strip() == said.strip())


def _cut(text: str, reading: tuple) -> str:
    return text[reading[0] : reading[1]] if None not in reading and _inside(text, reading) else "(no text)"


def _disagrees(text: str, span: Span, said: str, readings: dict, task: str) -> BertkitError:
    utf16 = _cut(text, readings[UTF16])
    other = f", counted in UTF-16 code units {utf16!r}" if readings[UTF16] != readings[CODE_POINTS] else ""
    return BertkitError(
        f"{task}: span {span.number} [{span.start}, {span.end}, {span.label!r}] says {said!r}, but the text there "
        f"is {_cut(text, readings[CODE_POINTS])!r}{other}",
        "export the task again (its text may have changed since it was annotated), or fix the span's offsets",
    )
