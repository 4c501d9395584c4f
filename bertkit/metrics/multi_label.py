"""Multi-label scores, decisions and threshold tuning (numpy + scikit-learn).

``gold`` and ``predicted`` are (examples x labels) 0/1 arrays. Micro F1 pools every (example,
label) decision; macro averages the labels' F1 (a label never gold nor predicted scores 0, as
scikit-learn's ``zero_division=0``); weighted averages them by support. Subset accuracy is the
share of examples whose whole label set is right; example F1 is the mean over examples of
``2|G & P| / (|G| + |P|)``, 1.0 for an example with no gold and no predicted label
(scikit-learn's ``f1_score(average="samples", zero_division=1)``).
"""

from __future__ import annotations

import numpy as np

THRESHOLD_GRID = np.round(np.arange(0.05, 0.951, 0.05), 2)  # 0.05 .. 0.95


def multi_label_scores(gold: np.ndarray, predicted: np.ndarray, label_names: list) -> dict:
    from sklearn.metrics import f1_score, hamming_loss, precision_recall_fscore_support

    gold, predicted = np.asarray(gold, dtype=np.int64), np.asarray(predicted, dtype=np.int64)
    precision, recall, f1, support = precision_recall_fscore_support(gold, predicted, average=None, zero_division=0)
    micro = precision_recall_fscore_support(gold, predicted, average="micro", zero_division=0)
    return {
        "micro_f1": float(micro[2]),
        "macro_f1": float(f1.mean()),
        "weighted_f1": float(f1_score(gold, predicted, average="weighted", zero_division=0)),
        "micro_precision": float(micro[0]),
        "micro_recall": float(micro[1]),
        "subset_accuracy": float((gold == predicted).all(axis=1).mean()),
        "example_f1": float(f1_score(gold, predicted, average="samples", zero_division=1)),
        "hamming_loss": float(hamming_loss(gold, predicted)),
        "per_label": {
            name: {
                "precision": round(float(p), 6),
                "recall": round(float(r), 6),
                "f1": round(float(f), 6),
                "support": int(s),
            }
            for name, p, r, f, s in zip(label_names, precision, recall, f1, support)
        },
    }


def decide(probabilities: np.ndarray, thresholds) -> np.ndarray:
    """1 where a label's probability reaches its threshold (one for all, or one per label)."""
    return (np.asarray(probabilities) >= np.asarray(thresholds, dtype=np.float64)).astype(np.int64)


def tune_thresholds(gold: np.ndarray, probabilities: np.ndarray, per_label: bool = False) -> dict:
    """The grid threshold that maximises micro F1 (``{"threshold", "micro_f1"}``), or per label
    the one that maximises that label's F1 (``{"thresholds", "micro_f1"}``; a label without gold
    positives keeps 0.5). Ties go to the threshold nearest 0.5, the untuned default."""
    gold, probabilities = np.asarray(gold, dtype=np.int64), np.asarray(probabilities, dtype=np.float64)
    order = sorted(THRESHOLD_GRID, key=lambda t: abs(t - 0.5))  # max() keeps the first of equals
    if not per_label:
        best = max(order, key=lambda t: _micro_f1(gold, decide(probabilities, t)))
        return {"threshold": float(best), "micro_f1": _micro_f1(gold, decide(probabilities, best))}
    chosen = []
    for j in range(gold.shape[1]):
        if gold[:, j].sum() == 0:
            chosen.append(0.5)
            continue
        chosen.append(float(max(order, key=lambda t: _f1(gold[:, j], (probabilities[:, j] >= t).astype(np.int64)))))
    return {"thresholds": chosen, "micro_f1": _micro_f1(gold, decide(probabilities, np.asarray(chosen)))}


def _micro_f1(gold: np.ndarray, predicted: np.ndarray) -> float:
    return _f1(gold.ravel(), predicted.ravel())


def _f1(gold: np.ndarray, predicted: np.ndarray) -> float:
    true_positives = int((gold & predicted).sum())
    total = int(gold.sum() + predicted.sum())
    return 2 * true_positives / total if total else 0.0
