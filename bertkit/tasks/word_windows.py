"""Sub-word encoding of pre-split words, and overlapping windows over WORDS for long sentences.

A sentence is encoded once, with the model's special tokens and no truncation. The sub-words of
one word are contiguous, so the window over words ``[start, end)`` is: the special tokens before
the first word, the sub-words of those words, the special tokens after the last word. Windows
never cut a word, every word lies in at least one window, and each word is *owned* by exactly one
window: the one where it has the most context (see ``owners``). Labels (training) and predictions
(inference) are taken from the owner window only, at the word's first sub-word.
"""

from __future__ import annotations

from dataclasses import dataclass

INFINITE = 1 << 30


@dataclass
class EncodedWords:
    input_ids: list[int]
    token_type_ids: list[int] | None
    prefix: list[int]  # positions of the special tokens before the first word
    suffix: list[int]  # positions of the special tokens after the last word
    word_tokens: list[list[int]]  # positions of each word's sub-words ([] for a word with none)


def encode_words(tokenizer, sentences: list[list[str]]) -> tuple[list[EncodedWords], int]:
    """Encode word lists; returns the encodings and how many words had no sub-word at all.

    Some words vanish in the tokenizer (a lone soft hyphen or zero-width space is removed by
    BERT's normaliser). Such a word is encoded as the unknown token instead, so it still has a
    position to carry a label and a prediction; if the tokenizer has no unknown token the word
    keeps no position and the task tags it ``O``.
    """
    encoded = tokenizer(sentences, is_split_into_words=True, verbose=False)
    types = encoded.get("token_type_ids")
    result, vanished = [], 0
    for index, words in enumerate(sentences):
        ids, type_ids, word_ids = encoded["input_ids"][index], types[index] if types else None, encoded.word_ids(index)
        present = {w for w in word_ids if w is not None}
        if len(present) < len(words):
            vanished += len(words) - len(present)
            if tokenizer.unk_token:
                fixed = [word if i in present else tokenizer.unk_token for i, word in enumerate(words)]
                single = tokenizer(fixed, is_split_into_words=True, verbose=False)
                ids, type_ids, word_ids = single["input_ids"], single.get("token_type_ids"), single.word_ids()
        result.append(_layout(ids, type_ids, word_ids, len(words)))
    return result, vanished


def _layout(ids, type_ids, word_ids, word_count) -> EncodedWords:
    word_tokens: list[list[int]] = [[] for _ in range(word_count)]
    prefix, suffix = [], []
    for position, word in enumerate(word_ids):
        if word is not None:
            word_tokens[word].append(position)
        elif any(tokens for tokens in word_tokens):
            suffix.append(position)
        else:
            prefix.append(position)
    return EncodedWords(list(ids), list(type_ids) if type_ids is not None else None, prefix, suffix, word_tokens)


def plan_windows(token_counts: list[int], budget: int, overlap: int | None = None) -> list[tuple[int, int]]:
    """Word ranges ``[start, end)`` covering all words, each with at most ``budget`` sub-words.

    A word with more than ``budget`` sub-words counts as ``budget`` (its tail sub-words are cut;
    only the first one is labelled). Consecutive windows share ``overlap`` words, at most half of
    the window so windows always advance; ``None`` means half a window.
    """
    counts = [min(count, budget) for count in token_counts]
    windows, start, total = [], 0, len(counts)
    while True:
        end, used = start, 0
        while end < total and used + counts[end] <= budget:
            used += counts[end]
            end += 1
        windows.append((start, end))
        if end >= total:
            return windows
        size = end - start
        start = end - (size // 2 if overlap is None else min(overlap, size // 2))


def owners(windows: list[tuple[int, int]], word_count: int) -> list[int]:
    """For each word, the index of the window where it has the most context.

    A word's context in a window is the smaller of the words before and after it inside the
    window, where a side that reaches the sentence boundary counts as unlimited (no window could
    offer more there). Ties go to the earlier window.
    """
    best = [(-1, 0)] * word_count
    for index, (start, end) in enumerate(windows):
        for word in range(start, end):
            left = word - start if start > 0 else INFINITE
            right = end - 1 - word if end < word_count else INFINITE
            if min(left, right) > best[word][0]:
                best[word] = (min(left, right), index)
    return [window for _, window in best]


def window_features(encoding: EncodedWords, max_length: int, overlap: int | None = None) -> list[dict]:
    """One model input per window: ``input_ids``, ``token_type_ids``, and the owned ``words`` with
    the in-window position of each one's first sub-word (``first_tokens``)."""
    budget = max(1, max_length - len(encoding.prefix) - len(encoding.suffix))
    windows = plan_windows([len(tokens) for tokens in encoding.word_tokens], budget, overlap)
    owner = owners(windows, len(encoding.word_tokens))
    features = []
    for index, (start, end) in enumerate(windows):
        positions, words, first_tokens = list(encoding.prefix), [], []
        for word in range(start, end):
            tokens = encoding.word_tokens[word][:budget]
            if tokens and owner[word] == index:
                words.append(word)
                first_tokens.append(len(positions))
            positions.extend(tokens)
        positions.extend(encoding.suffix)
        feature = {
            "input_ids": [encoding.input_ids[p] for p in positions],
            "words": words,
            "first_tokens": first_tokens,
        }
        if encoding.token_type_ids is not None:
            feature["token_type_ids"] = [encoding.token_type_ids[p] for p in positions]
        features.append(feature)
    return features
