"""BIO tag schemes, repair of predicted tags, entity spans and raw-text word splitting.

bertkit works in IOB2 internally (every entity starts with ``B-``). Gold data in IOB1 (the
original CoNLL-2003 ``eng.*`` files, where ``B-`` only separates two adjacent entities of the
same type) is converted on load, and model predictions are repaired before they are turned
into entities, so every consumer sees one scheme.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from bertkit.errors import BertkitError

OUTSIDE = "O"


def _split_tag(tag: str) -> tuple[str, str | None]:
    """``"B-PER"`` -> ``("B", "PER")``, ``"O"`` -> ``("O", None)``; the type may contain '-'."""
    if tag == OUTSIDE:
        return OUTSIDE, None
    prefix, _, entity_type = tag.partition("-")
    return prefix, entity_type


def _is_bio_tag(tag: object) -> bool:
    if tag == OUTSIDE:
        return True
    if not isinstance(tag, str):
        return False
    prefix, entity_type = _split_tag(tag)
    return prefix in ("B", "I") and bool(entity_type) and not any(c.isspace() for c in tag)


def validate_bio(tag_sequences: Iterable[Sequence[str]], source: str) -> None:
    """Raise BertkitError at the first tag that is not ``O``, ``B-TYPE`` or ``I-TYPE``.

    Only the shape of each tag is checked; an ``I-`` that starts an entity is legal here
    because it is how IOB1 files are written (see ``detect_scheme``).
    """
    for sentence_index, tags in enumerate(tag_sequences):
        for token_index, tag in enumerate(tags):
            if not _is_bio_tag(tag):
                raise BertkitError(
                    f"{source}: sentence {sentence_index + 1}, token {token_index + 1}: "
                    f"tag {tag!r} is not O, B-TYPE or I-TYPE",
                    hint="token tagging needs BIO tags such as B-PER, I-PER and O; "
                    "convert BIOES/BILOU or bare type labels to BIO first",
                )


def detect_scheme(tag_sequences: Iterable[Sequence[str]]) -> str:
    """Return ``"IOB1"`` if some entity starts with ``I-``, else ``"IOB2"``.

    An ``I-X`` starts an entity when it is first in the sentence or follows ``O`` or a tag of
    another type. In IOB2 that never happens; in IOB1 it is the normal way to start an entity,
    so a single occurrence is decisive. (Model predictions can also contain such tags; use
    ``repair_bio`` for those, not this function.)
    """
    for tags in tag_sequences:
        if any(_starts_with_inside(tags, i) for i in range(len(tags))):
            return "IOB1"
    return "IOB2"


def _starts_with_inside(tags: Sequence[str], index: int) -> bool:
    """True when ``tags[index]`` is an ``I-X`` that does not continue an entity of type X."""
    prefix, entity_type = _split_tag(tags[index])
    if prefix != "I" or not entity_type:
        return False
    if index == 0:
        return True
    previous_prefix, previous_type = _split_tag(tags[index - 1])
    return previous_prefix == OUTSIDE or previous_type != entity_type


def repair_bio(tags: Sequence[str]) -> list[str]:
    """Make predicted tags valid IOB2: an orphan ``I-X`` becomes ``B-X``.

    Rule: an ``I-X`` that does not continue an entity of type X -- first in the sentence,
    after ``O``, or after a ``B-``/``I-`` tag of another type -- starts a new entity of type X.
    This is the conlleval convention, so the entities read from the repaired tags are exactly
    the ones conlleval (and seqeval's default mode) would count. ``B-`` and ``O`` tags are
    never changed, and neither is anything that is not a BIO tag.

    Example: ``["I-PER", "I-PER", "O", "I-LOC", "I-ORG"]`` ->
    ``["B-PER", "I-PER", "O", "B-LOC", "B-ORG"]``.
    """
    repaired = list(tags)
    for index in range(len(repaired)):
        # Look at the original tags: the decision depends on the type, which repair keeps.
        if _starts_with_inside(tags, index):
            repaired[index] = "B-" + _split_tag(tags[index])[1]
    return repaired


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """Convert one sentence of IOB1 tags to IOB2.

    In IOB1 an entity starts with ``I-`` unless it directly follows an entity of the same type
    (then ``B-``). Rewriting every entity-starting ``I-X`` as ``B-X`` is the conversion, which
    is the same rule ``repair_bio`` applies to predictions.
    """
    return repair_bio(tags)


def iob2_to_iob1(tags: Sequence[str]) -> list[str]:
    """Convert one sentence of valid IOB2 tags to IOB1: an entity starts with ``I-X`` unless it
    directly follows an entity of the same type, where it keeps ``B-X``. Inverse of
    ``iob1_to_iob2`` on valid IOB1; the entities (as conlleval reads them) are unchanged."""
    written = list(tags)
    for index, tag in enumerate(tags):
        prefix, entity_type = _split_tag(tag)
        follows_same_type = index > 0 and _split_tag(tags[index - 1])[1] == entity_type
        if prefix == "B" and not follows_same_type:
            written[index] = "I-" + entity_type
    return written


def input_scheme(tags: Sequence[str] | None) -> str:
    """The scheme of one sentence's input tags: ``"IOB1"`` when they are BIO tags with an entity
    starting with ``I-`` (see ``detect_scheme``), else ``"IOB2"`` (also for no or non-BIO tags)."""
    if not tags or not all(_is_bio_tag(tag) for tag in tags):
        return "IOB2"
    return detect_scheme([tags])


def tags_as_written(predicted: Sequence[str], scheme: str = "IOB2") -> list[str]:
    """The tags ``predict`` writes for one sentence: the predictions repaired to valid IOB2
    (``repair_bio``), converted to IOB1 when the sentence's input tags are IOB1, so that
    conlleval on (input file, predict's tags) compares like with like. Token accuracy is counted
    on exactly these tags (bertkit.metrics.tagging)."""
    repaired = repair_bio(predicted)
    return iob2_to_iob1(repaired) if scheme == "IOB1" else repaired


def entity_spans(
    words: Sequence[str],
    tags: Sequence[str],
    word_offsets: Sequence[tuple[int, int]] | None = None,
    text: str | None = None,
) -> list[dict]:
    """Group IOB2 tags into entities.

    Each entity is ``{"type", "start_word", "end_word" (exclusive), "text"}``. With
    ``word_offsets`` (the ``(start, end)`` character span of each word in ``text``) it also has
    character ``start``/``end`` and ``text`` is exactly ``text[start:end]``, so the original
    spacing and punctuation inside the entity are kept; without them ``text`` is the words
    joined by single spaces. An orphan ``I-X`` starts a new entity, as in ``repair_bio``.
    """
    if len(words) != len(tags):
        raise ValueError(f"{len(words)} words but {len(tags)} tags")
    if word_offsets is not None:
        if text is None:
            raise ValueError("word_offsets need the text they point into")
        if len(word_offsets) != len(words):
            raise ValueError(f"{len(words)} words but {len(word_offsets)} word offsets")

    spans: list[dict] = []
    for start_word, end_word, entity_type in _entity_ranges(repair_bio(tags)):
        span: dict = {"type": entity_type, "start_word": start_word, "end_word": end_word}
        if word_offsets is not None:
            start, end = word_offsets[start_word][0], word_offsets[end_word - 1][1]
            span.update(text=text[start:end], start=start, end=end)
        else:
            span["text"] = " ".join(words[start_word:end_word])
        spans.append(span)
    return spans


def _entity_ranges(iob2_tags: Sequence[str]) -> list[tuple[int, int, str]]:
    """``(start, end_exclusive, type)`` for each entity in valid IOB2 tags."""
    ranges: list[tuple[int, int, str]] = []
    open_start: int | None = None
    open_type: str | None = None
    for index, tag in enumerate(list(iob2_tags) + [OUTSIDE]):  # the sentinel closes the last one
        prefix, entity_type = _split_tag(tag)
        if prefix == "I" and entity_type == open_type:
            continue
        if open_start is not None:
            ranges.append((open_start, index, open_type))
            open_start = open_type = None
        if prefix in ("B", "I"):
            open_start, open_type = index, entity_type
    return ranges


# Word splitting for raw text, following the CoNLL-2003 (Penn Treebank style) tokenization so
# a model fine-tuned on CoNLL sees familiar words: clitics are split ("Germany's" -> "Germany"
# "'s", "don't" -> "do" "n't") so that an entity never swallows them; abbreviations keep their
# period ("U.S.", "Corp.", the initial in "George W. Bush") but a sentence-final period after
# an ordinary word or number is its own token. Known trade-off: an initial or listed
# abbreviation at the very end of a sentence keeps the sentence's period ("Plan B."), which is
# also how the CoNLL files write "U.S." at the end of a sentence.
_APOSTROPHE = "['\u2019]"  # typographic apostrophes are common in raw text
_CLITIC = r"(?:s|re|ve|ll|d|m)"
_ABBREVIATIONS = (
    "Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|Inc|Corp|Co|Ltd|Bros|vs|Gen|Col|Lt|Sgt|Capt|Gov|Sen|Rep|Rev|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|Calif|Fla"
)
# Inside a word: hyphens ("York-based", "1996-08-28"), apostrophes other than clitics
# ("O'Brien"), periods followed by a word character ("3.5", "www.example.com") and
# digit-separating commas, colons and slashes ("47,600", "10:30", "1/2").
_JOINER = rf"(?:-|{_APOSTROPHE}(?!(?i:{_CLITIC})\b)|\.(?=\w)|(?<=\d)[,:/](?=\d))"
_WORD_PATTERN = re.compile(
    "|".join(
        [
            rf"\w+?(?=(?i:n{_APOSTROPHE}t)\b)",  # the "do" of "don't"
            rf"(?i:n{_APOSTROPHE}t)\b",
            rf"(?<=\w){_APOSTROPHE}(?i:{_CLITIC})\b",  # "'s", "'re", ...
            r"(?<!\w)(?:[^\W\d_]{1,3}\.)+[^\W\d_]{1,3}\.?(?!\w)",  # "U.S.", "a.m.", "Ph.D."
            rf"(?<!\w)(?:{_ABBREVIATIONS}|[A-Z])\.",  # "Corp.", initials
            rf"\w+(?:{_JOINER}\w+)*",
            r"(?P<punct>[^\w\s])(?P=punct)*",  # one token per run: "--", "...", but "?!" is two
        ]
    )
)


def split_words(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Split raw text into CoNLL-style words and their ``(start, end)`` character offsets.

    ``text[start:end]`` is always the word itself; whitespace is never part of a word.
    """
    words: list[str] = []
    offsets: list[tuple[int, int]] = []
    for match in _WORD_PATTERN.finditer(text):
        words.append(match.group())
        offsets.append(match.span())
    return words, offsets
