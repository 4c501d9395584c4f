"""bertkit's exact span decoder against run_qa's top-n x top-n post-processing loop, on the same
seeded random logits over several windows per question (moved here from the benchmark suite).

With n = the window length the loop is exhaustive, so both must pick the same answer; with run_qa's
n = 20 the loop searches a shortlist, so bertkit's best score can only be higher or equal."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.hf_qa import loop_decode
from bertkit.decoding.spans import decode_best_batched, decode_question

MAX_ANSWER = 30


def _context(words: list[str]):
    """The context text and each word's (start, end) characters: one token per word."""
    spans, position = [], 0
    for word in words:
        spans.append((position, position + len(word)))
        position += len(word) + 1
    return " ".join(words), spans


def _questions(n_questions: int = 40, seed: int = 0):
    """Contexts of words split into overlapping windows: [CLS] question [SEP] context part [SEP] padding."""
    rng = np.random.default_rng(seed)
    examples, features, starts, ends = [], [], [], []
    for q in range(n_questions):
        context, spans = _context([f"w{q}x{k}" for k in range(int(rng.integers(20, 160)))])
        examples.append({"id": f"q{q}", "context": context})
        n_question, window, stride = int(rng.integers(3, 12)), int(rng.integers(16, 64)), 8
        first = 0
        while True:
            part = spans[first : first + window]
            offsets = [None] * (1 + n_question + 1) + part + [None] * int(rng.integers(1, 6))
            features.append({"example_id": f"q{q}", "offset_mapping": offsets, "question": q})
            # float32 as a model gives them: both decoders then add the same float32 pairs
            starts.append(rng.normal(size=len(offsets)).astype(np.float32))
            ends.append(rng.normal(size=len(offsets)).astype(np.float32))
            if first + window >= len(spans):
                break
            first += window - stride
    return examples, features, starts, ends


def _bertkit(examples, features, starts, ends):
    windows = [
        {"start_logits": s, "end_logits": e, "offsets": f["offset_mapping"]} for f, s, e in zip(features, starts, ends)
    ]
    return decode_best_batched(
        [ex["context"] for ex in examples], windows, [f["question"] for f in features], MAX_ANSWER
    ), windows


def test_exhaustive_loop_gives_the_same_answers():
    examples, features, starts, ends = _questions()
    assert len(features) > 2 * len(examples)  # several windows per question
    decodings, windows = _bertkit(examples, features, starts, ends)
    longest = max(len(s) for s in starts)
    loop = loop_decode(examples, features, starts, ends, n_best_size=longest, max_answer_length=MAX_ANSWER)
    for q, (example, decoding) in enumerate(zip(examples, decodings)):
        assert decoding.best.text == loop[example["id"]]["text"], example["id"]
        assert decoding.best.score == pytest.approx(float(loop[example["id"]]["score"]), abs=1e-5)
        # the per-question decoder (bertkit's --n-best path) agrees with the batched one
        mine = [w for w, f in zip(windows, features) if f["question"] == q]
        assert decode_question(example["context"], mine, MAX_ANSWER).best.text == decoding.best.text


def test_top20_shortlist_never_beats_the_exact_search():
    examples, features, starts, ends = _questions(seed=1)
    # one question the shortlist gets wrong: its 20 best starts all lie after its 20 best ends
    context, spans = _context([f"t{k}" for k in range(60)])
    examples.append({"id": "trap", "context": context})
    offsets = [None, None] + spans + [None]
    features.append({"example_id": "trap", "offset_mapping": offsets, "question": len(examples) - 1})
    rng = np.random.default_rng(2)
    start, end = rng.normal(size=63).astype(np.float32), rng.normal(size=63).astype(np.float32)
    start[42:62] += 10
    end[2:22] += 10
    starts.append(start)
    ends.append(end)
    decodings, _ = _bertkit(examples, features, starts, ends)
    loop = loop_decode(examples, features, starts, ends, n_best_size=20, max_answer_length=MAX_ANSWER)
    for example, decoding in zip(examples, decodings):
        assert decoding.best.score >= float(loop[example["id"]]["score"]) - 1e-5, example["id"]
    assert loop["trap"]["text"] == "empty" and decodings[-1].best.score > 5
