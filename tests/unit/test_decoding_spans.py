"""Exact span decoding: hand-worked cases plus a brute-force cross-check on random layouts."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from bertkit.decoding.spans import decode_question, max_context_masks
from bertkit.errors import BertkitError

CONTEXT = "alpha beta gamma delta"
ALPHA, BETA, GAMMA, DELTA = (0, 5), (6, 10), (11, 16), (17, 22)


def window(start_logits, end_logits, offsets):
    return {
        "start_logits": np.array(start_logits, dtype=float),
        "end_logits": np.array(end_logits, dtype=float),
        "offsets": offsets,
    }


def test_best_span_can_come_from_the_second_window():
    # Window A best: alpha..beta = 1 + 1 = 2. Window B best: delta..delta = 3 + 2 = 5.
    a = window([0, 0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 1, 0, 0], [None, None, None, ALPHA, BETA, GAMMA, None])
    b = window([0, 0, 0, 0, 3, 0], [0, 0, 0, 0, 2, 0], [None, None, None, GAMMA, DELTA, None])
    result = decode_question(CONTEXT, [a, b])
    assert (result.best.text, result.best.start, result.best.end) == ("delta", 17, 22)
    assert result.best.score == 5.0 and result.best_span_score == 5.0


def test_end_before_start_is_never_used():
    # Context tokens 1..4. Legal: (1,1)=-10, (2,2)=0, (3,3)=5, (3,4)=5+1=6, (4,4)=1, ...
    # The illegal (i=3, j=1) would score 5 + 10 = 15.
    w = window([0, -20, 0, 5, 0], [0, 10, 0, 0, 1], [None, ALPHA, BETA, GAMMA, DELTA])
    result = decode_question(CONTEXT, [w])
    assert result.best.text == "gamma delta" and result.best.score == 6.0


def test_answer_length_limit_in_tokens():
    # (1,4) = 4 + 4 = 8 needs 4 tokens; within 3 tokens the best is (1,3) = 4 + 1 = 5.
    w = window([0, 4, 0, 0, 0], [0, 0, 0, 1, 4], [None, ALPHA, BETA, GAMMA, DELTA])
    assert decode_question(CONTEXT, [w], max_answer_length=3).best.text == "alpha beta gamma"
    assert decode_question(CONTEXT, [w], max_answer_length=4).best.score == 8.0
    # Length 1 leaves single tokens only: alpha 4+0, delta 0+4 tie; the earlier one is kept.
    assert decode_question(CONTEXT, [w], max_answer_length=1).best.text == "alpha"


def test_only_context_tokens_can_start_or_end_an_answer():
    # [CLS] (100 + 100) and a question token (50 + 50) dwarf the context spans; best legal
    # span is beta..beta = 1 + 1 = 2.
    w = window([100, 50, 0, 0, 1, 0], [100, 50, 0, 0, 1, 0], [None, None, None, ALPHA, BETA, None])
    result = decode_question(CONTEXT, [w])
    assert result.best.text == "beta" and result.best.score == 2.0
    assert result.null_score == 200.0


def test_null_score_is_the_minimum_cls_score_over_windows():
    # [CLS] scores: 1 + 2 = 3 and -1 + 0.5 = -0.5, so the null score is -0.5.
    a = window([1, 0, 0], [2, 0, 0], [None, ALPHA, None])
    b = window([-1, 0, 0], [0.5, 0, 0], [None, BETA, None])
    assert decode_question(CONTEXT, [a, b]).null_score == -0.5


def test_n_best_drops_repeated_texts_and_probabilities_sum_to_one():
    # Window A: gamma = 2 + 1 = 3, beta gamma = -10 + 1 = -9, beta = -20.
    # Window B: gamma = 1 + 1 = 2 (same text as A's, dropped), gamma delta = 1 + 0 = 1,
    #           delta = 0.5 + 0 = 0.5.
    a = window([0, -10, 2, 0], [0, -10, 1, 0], [None, BETA, GAMMA, None])
    b = window([0, 1, 0.5, 0], [0, 1, 0, 0], [None, GAMMA, DELTA, None])
    result = decode_question(CONTEXT, [a, b], n_best=3)
    assert [(x.text, x.score) for x in result.n_best] == [("gamma", 3.0), ("gamma delta", 1.0), ("delta", 0.5)]
    # Each answer's probability is softmax(start) x softmax(end) over its own window's context
    # tokens, not a softmax over the answers returned:
    # gamma (A): starts [-10, 2], ends [-10, 1] -> 1/(1+e^-12) x 1/(1+e^-11) = 0.999977.
    # gamma delta (B): starts [1, 0.5], ends [1, 0] -> 1/(1+e^-0.5) x 1/(1+e) = 0.622459 x 0.268941.
    # delta (B): 1/(1+e^0.5) x 1/(1+e) = 0.377541 x 0.268941.
    assert [x.probability for x in result.n_best] == pytest.approx(
        [0.999977, 0.622459 * 0.268941, 0.377541 * 0.268941], abs=1e-6
    )
    assert result.best is result.n_best[0]
    # Asking for more than exists returns every distinct text once (5 of them here).
    assert len(decode_question(CONTEXT, [a, b], n_best=50).n_best) == 5


def test_char_offsets_map_back_into_the_context():
    context = "Hello, world-wide web!"
    # Sub-word tokens: Hello | , | world | - | wide | web | !
    offsets = [None, (0, 5), (5, 6), (7, 12), (12, 13), (13, 17), (18, 21), (21, 22), None]
    w = window([0, 0, 0, 3, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 3, 0, 0, 0], offsets)
    result = decode_question(context, [w], n_best=4)
    best = result.best
    assert (best.text, best.start, best.end) == ("world-wide", 7, 17)
    for answer in result.n_best:
        assert answer.text == context[answer.start : answer.end]


def test_no_legal_span_gives_no_answer():
    w = window([1, 2, 3], [1, 2, 3], [None, None, None])
    result = decode_question(CONTEXT, [w])
    assert result.best is None and result.n_best == []
    assert result.best_span_score == -math.inf and result.null_score == 2.0


def test_bad_arguments():
    w = window([0, 1], [0, 1], [None, ALPHA])
    with pytest.raises(BertkitError):
        decode_question(CONTEXT, [w], max_answer_length=0)
    with pytest.raises(BertkitError):
        decode_question(CONTEXT, [w], n_best=0)
    with pytest.raises(ValueError):
        decode_question(CONTEXT, [window([0, 1], [0, 1], [None])])


# Six context tokens t0..t5; window A holds t0..t3, window B holds t2..t5.
T = [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9), (10, 11)]
SIX_TOKENS = "a b c d e f"
A_OFFSETS = [None, T[0], T[1], T[2], T[3], None]
B_OFFSETS = [None, T[2], T[3], T[4], T[5], None]


def test_max_context_picks_the_window_where_the_token_is_most_central():
    # t2: A position 2 of 4 -> min(2, 1) + 0.04 = 1.04; B position 0 -> 0.04. A wins.
    # t3: A position 3 -> min(3, 0) + 0.04 = 0.04; B position 1 -> min(1, 2) + 0.04. B wins.
    mask_a, mask_b = max_context_masks([A_OFFSETS, B_OFFSETS])
    assert mask_a.tolist() == [False, True, True, True, False, False]
    assert mask_b.tolist() == [False, False, True, True, True, False]


def test_max_context_ties_and_window_size():
    # Identical windows tie everywhere: the first window keeps every token.
    first, second = max_context_masks([A_OFFSETS, A_OFFSETS])
    assert first.tolist() == [False, True, True, True, True, False] and not second.any()
    # t1 is as central in [t0 t1 t2] (min(1, 1) + 0.03) as in [t0 t1 t2 t3] (min(1, 2) + 0.04):
    # the 0.01 * length term alone gives it to the longer window. t0 (0.03 vs 0.04) and
    # t2 (0.03 vs 1.04) go there too.
    short, long = max_context_masks([[T[0], T[1], T[2]], [T[0], T[1], T[2], T[3]]])
    assert not short.any() and long.all()


def test_max_context_restricts_where_answers_start():
    # A puts a start logit of 10 on t3, its edge token: without the rule (t3, t3) = 10 wins.
    # With it t3 may only start in B: (t3, t4) = 1 + 0.5 = 1.5 beats every other start (0).
    a = window([0, 0, 0, 0, 10, 0], [0] * 6, A_OFFSETS)
    b = window([0, 0, 1, 0, 0, 0], [0, 0, 0, 0.5, 0, 0], B_OFFSETS)
    assert decode_question(SIX_TOKENS, [a, b]).best.score == 10.0
    result = decode_question(SIX_TOKENS, [a, b], use_max_context=True)
    assert (result.best.text, result.best.score) == ("d e", 1.5)


# ---- brute-force cross-check --------------------------------------------------------------


def _random_question(rng: np.random.Generator):
    """A context of sub-word tokens cut into overlapping windows, Google-BERT style."""
    words = [str(rng.choice(["ab", "cd", "ef", "ghi", "x"])) for _ in range(rng.integers(1, 12))]
    context = " ".join(words)
    tokens, cursor = [], 0
    for word in words:
        cut = int(rng.integers(1, len(word) + 1))  # word split into 1 or 2 sub-words
        tokens += [(cursor, cursor + cut)] + ([(cursor + cut, cursor + len(word))] if cut < len(word) else [])
        cursor += len(word) + 1
    span_length = int(rng.integers(1, 7))
    stride = int(rng.integers(1, span_length + 1))
    spans, start = [], 0
    while True:
        length = min(span_length, len(tokens) - start)
        spans.append((start, length))
        if start + length == len(tokens):
            break
        start += stride
    dtype = np.float32 if rng.integers(0, 2) else np.float64
    windows = []
    for start, length in spans:
        n_question, n_pad = int(rng.integers(1, 4)), int(rng.integers(0, 3))
        offsets = [None] * (n_question + 2) + tokens[start : start + length] + [None] + [None] * n_pad
        windows.append(
            window(rng.normal(size=len(offsets)).astype(dtype), rng.normal(size=len(offsets)).astype(dtype), offsets)
        )
        windows[-1]["doc_span"] = (start, length, n_question + 2)
    return context, windows


def _google_is_max_context(spans, span_index, position):
    """Google BERT's _check_is_max_context over (start, length) doc spans."""
    best_score, best_index = None, None
    for index, (start, length, _) in enumerate(spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return best_index == span_index


def _brute_force(context, windows, max_answer_length, n_best, use_max_context):
    spans = [w["doc_span"] for w in windows]
    candidates = []
    for w, win in enumerate(windows):
        offsets = win["offsets"]
        for i in range(len(offsets)):
            for j in range(i, min(len(offsets), i + max_answer_length)):
                if offsets[i] is None or offsets[j] is None:
                    continue
                start, _, first_context = spans[w]
                if use_max_context and not _google_is_max_context(spans, w, start + i - first_context):
                    continue
                score = float(win["start_logits"][i]) + float(win["end_logits"][j])
                candidates.append((score, context[offsets[i][0] : offsets[j][1]]))
    candidates.sort(key=lambda c: -c[0])
    best, seen = [], set()
    for score, text in candidates:
        if text not in seen:
            seen.add(text)
            best.append((text, score))
    return best[:n_best]


def test_decode_question_matches_brute_force_on_random_layouts():
    rng = np.random.default_rng(1234)
    for _ in range(200):
        context, windows = _random_question(rng)
        max_answer_length = int(rng.integers(1, 7))
        n_best = int(rng.integers(1, 6))
        use_max_context = bool(rng.integers(0, 2))
        expected = _brute_force(context, windows, max_answer_length, n_best, use_max_context)
        result = decode_question(context, windows, max_answer_length, n_best, use_max_context)
        assert [(a.text, a.score) for a in result.n_best] == expected
        assert result.best_span_score == expected[0][1]
        for answer in result.n_best:
            assert 0 < answer.probability <= 1
            assert answer.text == context[answer.start : answer.end]


def test_many_windows_repeating_one_answer_force_a_wider_fetch():
    # "ab" scores about 20 in each of 12 identical windows, so the first fetch (8 candidates)
    # holds only "ab"; the next two distinct texts must still be found.
    rng = np.random.default_rng(7)
    context = "ab cd ef gh"
    tokens = [(0, 2), (3, 5), (6, 8), (9, 11)]
    windows = []
    for _ in range(12):
        start, end = rng.normal(size=6), rng.normal(size=6)
        start[1] += 10.0
        end[1] += 10.0
        windows.append(window(start, end, [None] + tokens + [None]))
        windows[-1]["doc_span"] = (0, 4, 1)
    result = decode_question(context, windows, n_best=3)
    expected = _brute_force(context, windows, 30, 3, False)
    assert [(a.text, a.score) for a in result.n_best] == expected
    assert result.best.text == "ab" and len({a.text for a in result.n_best}) == 3


def test_batched_best_span_matches_the_per_question_decoder():
    """decode_best_batched is the same exact search, vectorised across questions and windows."""
    from bertkit.decoding.spans import decode_best_batched

    rng = np.random.default_rng(7)
    contexts, windows, owner, expected = [], [], [], []
    for q in range(60):
        context = " ".join(f"w{q}x{t}" for t in range(40))
        word_offsets = [(m.start(), m.end()) for m in re.finditer(r"\S+", context)]
        mine = []
        for start in range(0, 40, 25):  # overlapping windows over the words
            chunk = word_offsets[start : start + 30]
            offsets = [None, None, None] + chunk + [None]  # [CLS] question [SEP] ... [SEP]
            window = {
                "start_logits": rng.normal(size=len(offsets)) * 3,
                "end_logits": rng.normal(size=len(offsets)) * 3,
                "offsets": offsets,
            }
            mine.append(window)
            windows.append(window)
            owner.append(q)
        contexts.append(context)
        expected.append(decode_question(context, mine, max_answer_length=7))
    got = decode_best_batched(contexts, windows, owner, max_answer_length=7)
    for slow, fast in zip(expected, got):
        assert (fast.best.start, fast.best.end, fast.best.text) == (slow.best.start, slow.best.end, slow.best.text)
        assert fast.best_span_score == pytest.approx(slow.best_span_score)
        assert fast.null_score == pytest.approx(slow.null_score)
        assert 0 < fast.best.probability <= 1 and fast.best.probability == slow.best.probability


def test_an_answers_probability_does_not_depend_on_n_best():
    rng = np.random.default_rng(5)
    for _ in range(100):
        context, windows = _random_question(rng)
        by_n_best = [decode_question(context, windows, 5, n) for n in (1, 3, 20)]
        assert len({(d.best.text, d.best.probability) for d in by_n_best}) == 1
        shared = by_n_best[1].n_best
        assert [(a.text, a.probability) for a in by_n_best[2].n_best[: len(shared)]] == [
            (a.text, a.probability) for a in shared
        ]
