"""Regression scores: Pearson and Spearman correlation (GLUE's STS-B reports both; their mean is
its score) and the mean squared error. numpy only.

Pearson is the STS benchmark's own ``correlation.pl``: a weighted Pearson whose weights are all
100, i.e. the plain ``cov(x, y) / sqrt(var(x) var(y))`` with population (1/n) moments; Spearman
is Pearson of the average ranks (ties share the mean of their ranks, as scipy's spearmanr).
"""

from __future__ import annotations

import numpy as np


def regression_scores(gold: list[float], predicted: list[float]) -> dict:
    y, x = np.asarray(gold, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    pearson, spearman = correlation(x, y), correlation(_ranks(x), _ranks(y))
    return {
        "pearson": pearson,
        "spearman": spearman,
        "pearson_spearman_mean": (pearson + spearman) / 2,
        "mse": float(np.mean((x - y) ** 2)),
    }


def correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r; 0.0 when either side is constant. A constant prediction carries no ranking
    information (the Perl scorer divides by zero there), and a number keeps the JSON valid and
    the best-model choice working: an untrained head that predicts one value scores 0."""
    dx, dy = x - x.mean(), y - y.mean()
    denominator = np.sqrt((dx * dx).mean() * (dy * dy).mean())
    return float((dx * dy).mean() / denominator) if denominator > 0 else 0.0


def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties given the mean of the ranks they span."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.arange(1, len(values) + 1)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]


def round_score(value: float) -> float:
    """A predicted number as written for users: 4 decimals (STS-B's gold has at most 3)."""
    return round(float(value), 4)
