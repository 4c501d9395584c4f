"""The probe's classifier: scikit-learn's LogisticRegression on standardised vectors, C chosen on a
stratified held-out part of the training rows, then refit on all of them; the result is folded
into one linear head (``weight``, ``bias``) that acts on raw vectors."""

from __future__ import annotations

import math
import warnings

import numpy as np

from bertkit.errors import BertkitError

C_GRID = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0)
MAX_ITER = 2000


def fit_head(features: np.ndarray, labels: np.ndarray, num_labels: int, holdout: float, seed: int, score) -> tuple:
    """(weight, bias, C, search): C from ``C_GRID`` by ``score(rows, probabilities)`` on a stratified
    held-out part (ties keep the smaller C), then a refit on every row. ``weight``/``bias`` act on
    raw vectors: the standardisation is folded in."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    features = features.astype(np.float64)
    mean, std = features.mean(0), features.std(0)
    std[std < 1e-12] = 1.0  # a constant dimension carries nothing; keep it from dividing by zero
    scaled = (features - mean) / std
    fit_rows, held_rows = train_test_split(
        np.arange(len(labels)), test_size=holdout, stratify=labels, random_state=seed
    )
    search, best_c, best_score = [], None, -math.inf
    for c in C_GRID:
        classifier = _fit(LogisticRegression, c, scaled[fit_rows], labels[fit_rows])
        value = float(score(held_rows, _probabilities(classifier, scaled[held_rows], num_labels)))
        search.append({"C": c, "holdout_score": round(value, 6)})
        if value > best_score:
            best_c, best_score = c, value
    classifier = _fit(LogisticRegression, best_c, scaled, labels)
    weight, bias = full_head(classifier, num_labels)
    weight = weight / std
    return weight, bias - weight @ mean, best_c, search


def _fit(model_class, c: float, x: np.ndarray, y: np.ndarray):
    with warnings.catch_warnings():
        # Rare non-convergence at large C only shifts the held-out score; that score decides.
        warnings.simplefilter("ignore")
        return model_class(C=c, max_iter=MAX_ITER).fit(x, y)


def full_head(classifier, num_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """One row of weights per label. A binary sklearn model has one row w: logits (0, w.x + b) give
    exactly its probabilities under softmax."""
    weight = np.zeros((num_labels, classifier.coef_.shape[1]))
    bias = np.zeros(num_labels)
    if len(classifier.classes_) == 2 and classifier.coef_.shape[0] == 1:
        weight[classifier.classes_[1]], bias[classifier.classes_[1]] = classifier.coef_[0], classifier.intercept_[0]
        return weight, bias
    weight[classifier.classes_] = classifier.coef_
    bias[classifier.classes_] = classifier.intercept_
    return weight, bias


def _probabilities(classifier, x: np.ndarray, num_labels: int) -> np.ndarray:
    full = np.zeros((len(x), num_labels))
    full[:, classifier.classes_] = classifier.predict_proba(x)
    return full


def check_holdout(labels: np.ndarray, holdout: float, names: list) -> None:
    counts = np.bincount(labels, minlength=len(names))
    held = math.ceil(holdout * len(labels))
    if counts.min() < 2 or held < len(names) or len(labels) - held < len(names):
        rare = names[int(counts.argmin())]
        raise BertkitError(
            f"too few training rows to hold out {holdout:.0%} for choosing C ({len(labels)} rows, "
            f"label {rare!r} has {counts.min()})",
            "give at least 2 rows per label and enough rows "
            "that the held-out part has one per label, or change --holdout",
        )
