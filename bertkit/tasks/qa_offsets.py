"""Character <-> token offsets in QA windows: where an answer's tokens are (training targets) and
the exact characters a predicted span covers (answers without edge whitespace)."""

from __future__ import annotations


def answer_tokens(offsets: list, answer: dict) -> tuple[int, int]:
    """First and last token of the answer in one window, or (0, 0) ([CLS]) when it is not fully inside."""
    start_char, end_char = answer["start"], answer["start"] + len(answer["text"])
    context = [t for t, o in enumerate(offsets) if o is not None]
    if not context or offsets[context[0]][0] > start_char or offsets[context[-1]][1] < end_char:
        return 0, 0
    start = max(t for t in context if offsets[t][0] <= start_char)
    end = min(t for t in context if t >= start and offsets[t][1] >= end_char)
    return start, end


def without_spaces(offset, context: str) -> tuple[int, int]:
    """A token's character span without surrounding whitespace: SentencePiece tokenizers without
    a whitespace pre-split (DeBERTa-v2/v3) count the space before a word as part of its token, which
    would put a leading space into answers."""
    start, end = offset
    if start < end and (context[start].isspace() or context[end - 1].isspace()):
        while start < end and context[start].isspace():
            start += 1
        while end > start and context[end - 1].isspace():
            end -= 1
    return start, end


def stripped_answer(text: str, start: int) -> dict:
    """An answer without edge whitespace: a span may begin or end on a whitespace-only token (a
    double space or newline in byte-level BPE), whose characters are all space."""
    lead = len(text) - len(text.lstrip())
    text = text.strip()
    return {"answer": text, "start": start + lead, "end": start + lead + len(text)}
