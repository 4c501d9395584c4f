"""distill --augment's rewritten rows (bertkit/data/augment.py): Tang et al.'s masking, word swaps
and n-gram cuts, deterministic in the seed, never the row itself, no labels carried."""

from __future__ import annotations

import random

from bertkit.data import augment
from bertkit.data.augment import augmented_rows, rewrite

ROWS = [
    {"text": "the film was good and the acting was great", "label": "pos"},
    {"text": "a dull and lifeless plot", "label": "neg"},
    {"text": "ok", "label": "pos"},
]


def test_variants_are_new_distinct_unlabelled_and_seeded():
    made = augmented_rows(ROWS, 5, "[MASK]", seed=1)
    assert made == augmented_rows(ROWS, 5, "[MASK]", seed=1) and made != augmented_rows(ROWS, 5, "[MASK]", seed=2)
    assert all(set(row) == {"text"} for row in made)  # no label: the teacher labels them
    texts = [row["text"] for row in made]
    assert not {r["text"] for r in ROWS} & set(texts) and len(set(texts)) == len(texts)
    vocabulary = {w for r in ROWS for w in r["text"].split()} | {"[MASK]"}
    assert all(set(t.split()) <= vocabulary for t in texts)  # every word is a row's word or the mask
    assert len(made) <= 5 * len(ROWS) and len(made) >= 5 * 2  # the one-word row allows few variants


def test_rewrite_masks_swaps_and_cuts_at_the_papers_rates():
    rng, words = random.Random(0), ["zebra"]
    text = " ".join(f"w{i}" for i in range(20))
    variants = [rewrite(text, rng, "[MASK]", words).split() for _ in range(4000)]
    whole = [v for v in variants if len(v) == 20]  # not cut to an n-gram
    cut = 1 - len(whole) / len(variants)
    assert abs(cut - augment.P_NGRAM) < 0.03 and all(len(v) <= augment.MAX_NGRAM for v in variants if len(v) < 20)
    tokens = [w for v in whole for w in v]
    masked, swapped = tokens.count("[MASK]") / len(tokens), tokens.count("zebra") / len(tokens)
    assert abs(masked - augment.P_MASK) < 0.01 and abs(swapped - augment.P_SWAP) < 0.01


def test_pair_rows_rewrite_both_texts():
    made = augmented_rows([{"text": "a b c d e f", "text_pair": "g h i j k l", "label": "1"}], 4, "[MASK]", seed=3)
    assert made and all(set(row) == {"text", "text_pair"} and row["text"] and row["text_pair"] for row in made)
