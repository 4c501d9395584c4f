"""The best k passages per query over a corpus seen block by block: memory is (queries x k) whatever
the corpus's size, never the whole (queries x passages) matrix.

Which k is kept is exact and does not depend on the block sizes: a higher score first, and among
equal scores the passage seen first (the lower corpus position), as a full sort of the whole
matrix would keep them (``top_k_of_matrix``, the reference in the tests).
"""

from __future__ import annotations

import numpy as np


class RunningTopK:
    def __init__(self, queries: int, k: int):
        if k < 1:
            raise ValueError("k must be >= 1")
        self.k = k
        self.scores = np.empty((queries, 0), dtype=np.float32)
        self.positions = np.empty((queries, 0), dtype=np.int64)
        self.seen = 0  # passages so far: the next block's first corpus position

    def add(self, block: np.ndarray) -> None:
        """``block``: (queries, passages) scores of the next passages in corpus order."""
        block = np.nan_to_num(np.asarray(block, dtype=np.float32), nan=-np.inf)  # a NaN never ranks
        positions = np.broadcast_to(np.arange(self.seen, self.seen + block.shape[1], dtype=np.int64), block.shape)
        self.seen += block.shape[1]
        scores = np.concatenate([self.scores, block], axis=1)  # columns stay in corpus order
        positions = np.concatenate([self.positions, positions], axis=1)
        keep = min(self.k, scores.shape[1])
        if keep == scores.shape[1]:
            self.scores, self.positions = scores, positions
            return
        chosen = _first_best(scores, keep)
        self.scores = scores[chosen].reshape(len(scores), keep)
        self.positions = positions[chosen].reshape(len(scores), keep)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(positions, scores), each (queries, min(k, passages seen)), best first."""
        order = np.lexsort((self.positions, -self.scores), axis=-1)
        return np.take_along_axis(self.positions, order, -1), np.take_along_axis(self.scores, order, -1)


def _first_best(scores: np.ndarray, keep: int) -> np.ndarray:
    """A mask with exactly ``keep`` True per row: every score above the row's keep-th best, then
    the earliest columns among those equal to it (columns are in corpus order)."""
    threshold = -np.partition(-scores, keep - 1, axis=1)[:, keep - 1 : keep]
    above = scores > threshold
    tied = scores == threshold
    room = keep - above.sum(axis=1, keepdims=True)
    return above | (tied & (np.cumsum(tied, axis=1) <= room))


def top_k_of_matrix(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference: the whole matrix sorted (score descending, then position)."""
    positions = np.broadcast_to(np.arange(scores.shape[1]), scores.shape)
    order = np.lexsort((positions, -scores), axis=-1)[:, :k]
    return order, np.take_along_axis(scores, order, -1)
