"""Sentence pairs for next-sentence prediction, made as BERT made them (Devlin et al. 2019, and
Google's create_pretraining_data.py), from documents of tokenized sentences (rows).

How a document becomes pairs: its sentences are gathered, in order, into a chunk until the chunk
reaches the token budget (``--max-length`` less the pair's special tokens) or the document ends.
Segment A is the chunk's first 1..n-1 sentences (the cut is drawn at random). Segment B is, with
probability 1/2, the rest of the chunk (the actual next sentences, label ``IS_NEXT``); otherwise
(``RANDOM_NEXT``) sentences from a random start in another, randomly drawn document, taken until
they fill what A left of the budget - and the chunk's sentences after A go back to start the next
chunk, so no text is skipped. A chunk of one sentence takes its actual next B from the sentences
that follow it. Where no actual next exists (a document's last sentence alone) B must be random;
for every two such pairs, a later pair drawn random is made an actual next, so the labels stay 50/50. A pair
longer than the budget is cut one token at a time from the longer segment, as Google's
``truncate_seq_pair`` does, but always A at its front and B at its back (Google draws the end): the
junction stays, so an actual next B starts with the very token that follows A.

Everything is drawn from one ``random.Random(seed)``: the same documents and seed give the same
pairs. A random B never comes from A's own document, so it is never A's own next sentence.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

IS_NEXT, RANDOM_NEXT = 0, 1  # transformers' next_sentence_label: 0 = B follows A, 1 = B is random


@dataclass(frozen=True)
class Pair:
    a: list  # token ids of segment A
    b: list  # token ids of segment B
    label: int  # IS_NEXT or RANDOM_NEXT
    document: int  # A's document
    b_document: int  # B's document (A's own for IS_NEXT)
    truncated: bool  # tokens were cut to fit the budget


def build_pairs(documents: list[list[list[int]]], budget: int, seed: int) -> list[Pair]:
    """Pairs from ``documents`` (each a list of sentences, each a list of token ids), every pair at
    most ``budget`` tokens (A and B together). At least two documents must hold text."""
    documents = [[sentence for sentence in document if sentence] for document in documents]
    if sum(1 for document in documents if document) < 2:
        raise ValueError("next-sentence pairs need at least two documents with text")
    if budget < 2:
        raise ValueError("a pair needs a budget of at least two tokens (one for A, one for B)")
    builder = _Builder(documents, budget, seed)
    return [pair for index in range(len(documents)) for pair in builder.document_pairs(index)]


class _Builder:
    def __init__(self, documents: list, budget: int, seed: int):
        self.documents, self.budget, self.rng = documents, budget, random.Random(seed)
        self.with_text = [i for i, document in enumerate(documents) if document]
        self.forced_random = 0  # random pairs that had to be random, not yet paid back

    def document_pairs(self, index: int) -> list[Pair]:
        document, pairs, chunk, length, i = self.documents[index], [], [], 0, 0
        while i < len(document):
            chunk.append(i)
            length += len(document[i])
            if i == len(document) - 1 or length >= self.budget:
                pair, i = self.pair(index, chunk)
                pairs.append(pair)
                chunk, length = [], 0
            i += 1
        return pairs

    def pair(self, index: int, chunk: list[int]) -> tuple[Pair, int]:
        """(the pair made from the chunk's sentences, the last sentence of the document it used)."""
        document, last = self.documents[index], chunk[-1]
        cut = self.rng.randint(1, len(chunk) - 1) if len(chunk) > 1 else 1
        a = [token for j in chunk[:cut] for token in document[j]]
        room = max(1, self.budget - len(a))
        if self.is_random(can_follow=len(chunk) > 1 or last + 1 < len(document)):
            b_document, b = self.random_segment(index, room)
            label, last = RANDOM_NEXT, chunk[cut - 1]  # the chunk's sentences after A start the next chunk
        elif len(chunk) > 1:
            b_document, b, label = index, [token for j in chunk[cut:] for token in document[j]], IS_NEXT
        else:  # one sentence: its actual next ones follow it in the document
            b, last = self.following(document, last, room)
            b_document, label = index, IS_NEXT
        a, b, truncated = truncate_pair(a, b, self.budget)
        return Pair(a, b, label, index, b_document, truncated), last

    def is_random(self, can_follow: bool) -> bool:
        if not can_follow:
            self.forced_random += 1
            return True
        random_b = self.rng.random() < 0.5
        # Turning a drawn RANDOM_NEXT into IS_NEXT moves the difference by 2, a forced one by 1:
        # every second forced random pair pays back one draw.
        if random_b and self.forced_random >= 2:
            self.forced_random -= 2
            return False
        return random_b

    def random_segment(self, index: int, room: int) -> tuple[int, list]:
        """(another document, sentences from a random start in it, until ``room`` tokens are filled)."""
        others = [i for i in self.with_text if i != index]
        chosen = others[self.rng.randrange(len(others))]
        document = self.documents[chosen]
        b = []
        for sentence in document[self.rng.randrange(len(document)) :]:
            b += sentence
            if len(b) >= room:
                break
        return chosen, b

    @staticmethod
    def following(document: list, last: int, room: int) -> tuple[list, int]:
        """(the sentences after ``last`` until ``room`` tokens are filled, the last one taken)."""
        b, j = [], last + 1
        while j < len(document) and len(b) < room:
            b += document[j]
            j += 1
        return b, j - 1


def truncate_pair(a: list, b: list, budget: int) -> tuple[list, list, bool]:
    """(A, B, whether tokens were cut): the longer segment loses one token at a time until both fit
    in ``budget``; A from its front, B from its back, so the junction is kept: an actual next B still
    starts with the token that follows A's last one."""
    if len(a) + len(b) <= budget:
        return a, b, False
    a, b = deque(a), deque(b)
    while len(a) + len(b) > budget:
        if len(a) > len(b):
            a.popleft()
        else:
            b.pop()
    return list(a), list(b), True
