"""Exact best-span decoding for extractive QA over overlapping context windows.

A long context is split into several windows (features). Each window gives start/end logits and, per
token, its ``(char_start, char_end)`` in the original context (``None`` for question tokens, special tokens
and padding). We search every legal span exactly, vectorised along the band ``0 <= j - i <
max_answer_length``, instead of the usual top-20 x top-20 shortlist, which can miss the true best pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from bertkit.errors import BertkitError

Offset = tuple[int, int] | None


@dataclass
class SpanAnswer:
    """One candidate answer; ``start``/``end`` are character offsets, ``end`` exclusive.

    ``score`` is the span's logit sum start_logit[i] + end_logit[j]; ``probability`` is
    softmax(start)[i] x softmax(end)[j], each softmax over the context tokens of the window the
    span was read in (``span_probability``): the model's own confidence in that span, which does
    not depend on how many other answers are asked for.
    """

    text: str
    start: int
    end: int
    score: float
    probability: float


@dataclass
class QuestionDecoding:
    """Decoding of one question: ``best`` is ``n_best[0]`` (``None`` when no span is legal)."""

    best: SpanAnswer | None
    n_best: list[SpanAnswer]
    null_score: float
    best_span_score: float


def max_context_masks(offsets_per_window: Sequence[Sequence[Offset]]) -> list[np.ndarray]:
    """Google BERT's "max context" rule: which window each context token counts in.

    A token's score in a window is ``min(#context tokens left, #right) + 0.01 * #context
    tokens``; the token counts only in its best-scoring window (ties: the first one). Tokens
    are matched across windows by their character offsets.
    """
    # Scores are kept as integers (100 * min + n) so that equal scores tie exactly instead of
    # depending on float rounding of 0.01 * n.
    best_window: dict[tuple[int, int], tuple[int, int]] = {}
    for window_index, offsets in enumerate(offsets_per_window):
        context_keys = [tuple(offset) for offset in offsets if offset is not None]
        n_context = len(context_keys)
        for position, key in enumerate(context_keys):
            score = 100 * min(position, n_context - 1 - position) + n_context
            current = best_window.get(key)
            if current is None or score > current[0]:
                best_window[key] = (score, window_index)
    return [
        np.array(
            [offset is not None and best_window[tuple(offset)][1] == window_index for offset in offsets], dtype=bool
        )
        for window_index, offsets in enumerate(offsets_per_window)
    ]


def decode_question(
    context: str,
    windows: Sequence[dict[str, Any]],
    max_answer_length: int = 30,
    n_best: int = 1,
    use_max_context: bool = False,
) -> QuestionDecoding:
    """Find the best ``n_best`` answer spans with distinct texts over all windows of a question.

    Each window is a dict with ``start_logits``, ``end_logits`` and ``offsets``. A span (i, j)
    is legal when both ends are context tokens, ``0 <= j - i < max_answer_length`` and, with
    ``use_max_context``, token i counts in this window under the max-context rule.
    """
    if max_answer_length < 1:
        raise BertkitError(
            f"max_answer_length must be at least 1, got {max_answer_length}",
            hint="pass a positive number of tokens, e.g. 30",
        )
    if n_best < 1:
        raise BertkitError(f"n_best must be at least 1, got {n_best}", hint="pass e.g. 1 or 20")
    if not windows:
        raise ValueError("decode_question needs at least one window")

    start_logits, end_logits, offsets = _read_windows(context, windows)
    # HF run_qa keeps the least confident [CLS] score over the windows as the null score.
    null_score = min(float(s[0] + e[0]) for s, e in zip(start_logits, end_logits))
    max_context = max_context_masks(offsets) if use_max_context else None

    scores, window_ids, start_tokens, end_tokens = [], [], [], []
    for w, (s, e, window_offsets) in enumerate(zip(start_logits, end_logits, offsets)):
        is_context = np.array([o is not None for o in window_offsets], dtype=bool)
        can_start = is_context & max_context[w] if max_context is not None else is_context
        band_scores, i, j = _band_candidates(s, e, can_start, is_context, max_answer_length)
        scores.append(band_scores)
        window_ids.append(np.full(len(i), w))
        start_tokens.append(i)
        end_tokens.append(j)
    all_scores = np.concatenate(scores)
    if all_scores.size == 0:
        return QuestionDecoding(None, [], null_score, float("-inf"))

    candidates = (all_scores, np.concatenate(window_ids), np.concatenate(start_tokens), np.concatenate(end_tokens))
    answers, picked = _top_distinct_answers(context, offsets, candidates, n_best)
    for answer, (w, i, j) in zip(answers, picked):
        is_context = np.array([o is not None for o in offsets[w]], dtype=bool)
        answer.probability = span_probability(
            start_logits[w][is_context], end_logits[w][is_context], start_logits[w][i], end_logits[w][j]
        )
    return QuestionDecoding(answers[0], answers, null_score, answers[0].score)


def span_probability(
    start_context_logits: np.ndarray, end_context_logits: np.ndarray, start_logit: float, end_logit: float
) -> float:
    """softmax(start)[i] x softmax(end)[j] of a span whose ends have these logits, each softmax
    over the window's context tokens (all of them, the max-context rule aside). The one
    definition of an answer's probability, used by both decoders, so an answer's value is the
    same whether 1 or 20 answers are asked for."""
    log_start = float(start_logit) - np.logaddexp.reduce(np.asarray(start_context_logits, dtype=np.float64))
    log_end = float(end_logit) - np.logaddexp.reduce(np.asarray(end_context_logits, dtype=np.float64))
    return float(np.exp(log_start + log_end))


def _read_windows(context: str, windows: Sequence[dict[str, Any]]) -> tuple[list, list, list[list[Offset]]]:
    """Convert and check each window; malformed windows are bugs, so they raise ValueError."""
    start_logits, end_logits, offsets = [], [], []
    for w, window in enumerate(windows):
        # float64 so that a span score is exactly float(s[i]) + float(e[j]), whatever came in.
        s = np.asarray(window["start_logits"], dtype=np.float64)
        e = np.asarray(window["end_logits"], dtype=np.float64)
        window_offsets = list(window["offsets"])
        if s.ndim != 1 or s.shape != e.shape or len(window_offsets) != len(s) or len(s) == 0:
            raise ValueError(
                f"window {w}: start_logits {s.shape}, end_logits {e.shape} and "
                f"{len(window_offsets)} offsets must be non-empty 1-D and of the same length"
            )
        for offset in window_offsets:
            if offset is not None and not 0 <= offset[0] <= offset[1] <= len(context):
                raise ValueError(f"window {w}: offset {offset} lies outside the context ({len(context)} chars)")
        start_logits.append(s)
        end_logits.append(e)
        offsets.append(window_offsets)
    return start_logits, end_logits, offsets


def _band_candidates(
    start_logits: np.ndarray, end_logits: np.ndarray, can_start: np.ndarray, can_end: np.ndarray, max_answer_length: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores and (i, j) of every legal span of one window, ordered by i then length."""
    length = len(start_logits)
    band_width = min(max_answer_length, length)
    # band[i, k] is the span (i, i + k); cells that run past the window stay illegal.
    band = np.zeros((length, band_width))
    legal = np.zeros((length, band_width), dtype=bool)
    for k in range(band_width):
        band[: length - k, k] = start_logits[: length - k] + end_logits[k:]
        legal[: length - k, k] = can_start[: length - k] & can_end[k:]
    i, k = np.nonzero(legal)
    return band[i, k], i, i + k


def _top_distinct_answers(
    context: str,
    offsets: list[list[Offset]],
    candidates: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    n_best: int,
) -> tuple[list[SpanAnswer], list[tuple[int, int, int]]]:
    """The ``n_best`` highest-scoring candidates whose texts differ (probabilities left at 0),
    and the (window, start token, end token) each was read from."""
    scores, window_ids, start_tokens, end_tokens = candidates
    total = len(scores)
    # Overlapping windows repeat the same span, so fetch a few spares before de-duplicating and
    # fetch more only when the spares run out.
    fetch = min(total, max(2 * n_best, 8))
    while True:
        if fetch < total:
            picked = np.argpartition(-scores, fetch - 1)[:fetch]
        else:
            picked = np.arange(total)
        # Highest score first; equal scores keep the earlier window / start / length.
        picked = picked[np.lexsort((picked, -scores[picked]))]
        answers: list[SpanAnswer] = []
        where: list[tuple[int, int, int]] = []
        seen_texts: set[str] = set()
        for c in picked:
            start = offsets[window_ids[c]][start_tokens[c]][0]
            end = offsets[window_ids[c]][end_tokens[c]][1]
            text = context[start:end]
            if text in seen_texts:
                continue
            seen_texts.add(text)
            answers.append(SpanAnswer(text, int(start), int(end), float(scores[c]), 0.0))
            where.append((int(window_ids[c]), int(start_tokens[c]), int(end_tokens[c])))
            if len(answers) == n_best:
                return answers, where
        if fetch == total:
            return answers, where
        fetch = min(total, 4 * fetch)


def decode_best_batched(
    contexts: Sequence[str],
    windows: Sequence[dict[str, Any]],
    question_of_window: Sequence[int],
    max_answer_length: int = 30,
) -> list[QuestionDecoding]:
    """The single best span of every question at once, exact: the same search as ``decode_question(...,
    n_best=1)`` but vectorised over all windows of all questions, so the cost is a few numpy passes over one
    (windows x tokens) array instead of Python work per question. ``probability`` is ``span_probability`` in
    the winning window, as in ``decode_question``. A window may give ``context_range`` = (first, last + 1)
    context token, which spares scanning its offsets."""
    # long: one vectorised search in three passes (scores, best span per window, best window per question)
    # whose arrays each later pass reads; split up, every piece would take and return eight of them
    lengths = np.array([len(w["start_logits"]) for w in windows])
    longest = int(lengths.max())
    columns = np.arange(longest)[None, :]
    inside = columns < lengths[:, None]
    raw_starts = np.zeros((len(windows), longest), dtype=np.float32)
    raw_ends = np.zeros_like(raw_starts)
    raw_starts[inside] = np.concatenate([w["start_logits"] for w in windows])
    raw_ends[inside] = np.concatenate([w["end_logits"] for w in windows])
    ranges = np.array([w.get("context_range") or _context_range(w["offsets"]) for w in windows]).reshape(-1, 2)
    is_context = (columns >= ranges[:, :1]) & (columns < ranges[:, 1:])
    starts = np.where(is_context, raw_starts, -np.inf)
    ends = np.where(is_context, raw_ends, -np.inf)
    null_scores = raw_starts[:, 0] + raw_ends[:, 0]

    # For each end j the best start is the max of the starts over [j - width + 1, j]: a sliding
    # window maximum, built by doubling in ~log2(width) passes instead of one pass per length.
    width = min(max_answer_length, longest)
    span_scores = _sliding_max(starts, width) + ends
    best_end = span_scores.argmax(axis=1)  # the earliest end on ties
    rows = np.arange(len(windows))
    best = span_scores[rows, best_end]
    candidates = best_end[:, None] - width + 1 + np.arange(width)[None, :]
    candidate_scores = np.where(candidates >= 0, starts[rows[:, None], np.maximum(candidates, 0)], -np.inf)
    best_start = candidates[rows, candidate_scores.argmax(axis=1)]  # the earliest start on ties

    # Per question: the best window (the earliest on ties) and the least confident null score.
    questions = np.asarray(question_of_window)
    order = np.lexsort((rows, -best, questions))
    bounds = np.searchsorted(questions[order], np.arange(len(contexts) + 1))
    present = bounds[1:] > bounds[:-1]
    winners = np.where(present, order[np.minimum(bounds[:-1], len(order) - 1)], -1)
    null_per_question = np.full(len(contexts), np.inf)
    if present.any():
        null_per_question[present] = np.minimum.reduceat(null_scores[order], bounds[:-1][present])
    result = []
    for context, w, null_score in zip(contexts, winners.tolist(), null_per_question.tolist()):
        if w < 0 or not np.isfinite(best[w]):
            result.append(QuestionDecoding(None, [], null_score, float("-inf")))
            continue
        i, j = int(best_start[w]), int(best_end[w])
        start, end = windows[w]["offsets"][i][0], windows[w]["offsets"][j][1]
        window_starts = np.asarray(windows[w]["start_logits"], dtype=np.float64)
        window_ends = np.asarray(windows[w]["end_logits"], dtype=np.float64)
        first, last = ranges[w]
        score = float(window_starts[i]) + float(window_ends[j])
        probability = span_probability(
            window_starts[first:last], window_ends[first:last], window_starts[i], window_ends[j]
        )
        answer = SpanAnswer(context[start:end], int(start), int(end), score, probability)
        result.append(QuestionDecoding(answer, [answer], null_score, score))
    return result


def _context_range(offsets: Sequence[Offset | None]) -> tuple[int, int]:
    tokens = [t for t, o in enumerate(offsets) if o is not None]
    return (tokens[0], tokens[-1] + 1) if tokens else (0, 0)


def _sliding_max(values: np.ndarray, width: int) -> np.ndarray:
    """result[:, j] = max(values[:, max(0, j - width + 1) : j + 1]) for every row."""
    result, span = values, 1
    while span < width:
        step = min(span, width - span)  # grow the covered window from span to span + step
        shifted = np.full_like(result, -np.inf)
        shifted[:, step:] = result[:, :-step]
        result = np.maximum(result, shifted)
        span += step
    return result
