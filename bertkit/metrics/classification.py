"""Classification scores from label indices (numpy + scikit-learn, nothing fetched at run time)."""

from __future__ import annotations

import warnings

import numpy as np


def classification_scores(gold: list[int], predicted: list[int], num_labels: int) -> dict:
    """Accuracy always; binary F1 (positive = label 1) and Matthews correlation for two labels,
    macro F1 for more."""
    from sklearn.metrics import f1_score, matthews_corrcoef

    gold_array, predicted_array = np.asarray(gold), np.asarray(predicted)
    scores = {"accuracy": float((gold_array == predicted_array).mean())}
    if num_labels == 2:
        scores["f1"] = float(f1_score(gold_array, predicted_array, pos_label=1, zero_division=0))
        with warnings.catch_warnings():  # one class on both sides (a tiny fold): 0, sklearn's convention, said
            warnings.simplefilter("ignore", UserWarning)  # on stderr in the middle of bertkit's own output
            scores["mcc"] = float(matthews_corrcoef(gold_array, predicted_array))
    else:
        scores["macro_f1"] = float(f1_score(gold_array, predicted_array, average="macro", zero_division=0))
    return scores


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)
