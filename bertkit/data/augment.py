"""New training text from the labelled rows, for a teacher to label (`bertkit distill --augment N`).

Tang et al. (2019, "Distilling Task-Specific Knowledge from BERT into Simple Neural Networks",
section 3.3) make a small labelled set large enough to distil by rewriting each sentence word by
word: with probability ``p_mask`` a word becomes the mask token, with ``p_pos`` another word of the
same part of speech, and then, with probability ``p_ng``, only an n-gram (n from 1 to 5) of the
result is kept; ``N`` variants per sentence (they used p_mask = p_pos = 0.1, p_ng = 0.25, N = 20).
The teacher's soft targets label the variants, so a variant need not keep its row's gold label.
Here the same-part-of-speech swap takes a word of the training text at random, as often as it
occurs there (no tagger is installed): a rougher stand-in, said as such in docs/distillation.md.
Torch-free and deterministic in the seed.
"""

from __future__ import annotations

import random

TEXT_FIELDS = ("text", "text_pair")  # what cls and pair rows read; every other field is dropped
P_MASK, P_SWAP, P_NGRAM, MAX_NGRAM = 0.1, 0.1, 0.25, 5


def augmented_rows(rows: list[dict], n: int, mask_token: str, seed: int) -> list[dict]:
    """``n`` variants of each row's text fields (no labels), distinct from the row and each other
    where the row allows it; in row order."""
    rng = random.Random(seed)
    words = [w for row in rows for field in TEXT_FIELDS if isinstance(row.get(field), str) for w in row[field].split()]
    found = []
    for row in rows:
        texts = {field: row[field] for field in TEXT_FIELDS if isinstance(row.get(field), str)}
        seen = {tuple(texts.values())}
        for _ in range(n * 3):  # a short row has few distinct variants: stop trying after 3n draws
            variant = {field: rewrite(text, rng, mask_token, words) for field, text in texts.items()}
            key = tuple(variant.values())
            if key not in seen and all(variant.values()):
                seen.add(key)
                found.append(variant)
            if len(seen) > n:
                break
    return found


def rewrite(text: str, rng: random.Random, mask_token: str, words: list[str]) -> str:
    """One variant of ``text``: words masked or swapped, then maybe cut to an n-gram."""
    out = []
    for word in text.split():
        draw = rng.random()
        if draw < P_MASK:
            out.append(mask_token)
        elif draw < P_MASK + P_SWAP and words:
            out.append(rng.choice(words))
        else:
            out.append(word)
    if len(out) > 1 and rng.random() < P_NGRAM:
        size = rng.randint(1, min(MAX_NGRAM, len(out)))
        start = rng.randint(0, len(out) - size)
        out = out[start : start + size]
    return " ".join(out)
