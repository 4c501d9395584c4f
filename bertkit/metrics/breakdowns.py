"""Per-class and per-bucket breakdowns of one evaluation, small enough to keep in JSON.

Tasks return them from ``Task.breakdown``; they are what the figures draw: a confusion matrix
(cls/pair), per-entity-type precision/recall/F1 (ner, already in the metrics), EM/F1 by gold
answer length and by the question's first word (qa), F1 and gold count per label (multi-label
classification, ``per_label``) and predicted against gold values with their correlations
(regression, ``scatter``). Computed from the examples and the task's predictions; numpy only.
They are stored in bertkit.json, so floats are rounded (4 decimals) and a value JSON cannot hold
(NaN, infinity: e.g. the correlation of constant predictions) is stored as null.
"""

from __future__ import annotations

import numpy as np

from bertkit.metrics.squad import exact_match, f1_v1
from bertkit.metrics.squad import f1 as f1_v2

QUESTION_WORDS = ("what", "who", "when", "where", "which", "why", "how")
# Gold answer length in words: SQuAD answers are mostly 1-3 words, with a long tail.
LENGTH_BUCKETS = ((1, 1, "1"), (2, 2, "2"), (3, 3, "3"), (4, 5, "4-5"), (6, 10, "6-10"), (11, 10**9, ">10"))


def confusion(labels: list, gold: list, predicted: list) -> dict:
    """Rows: gold label; columns: predicted label; both in the model's label order."""
    index = {label: i for i, label in enumerate(labels)}
    matrix = np.zeros((len(labels), len(labels)), dtype=np.int64)
    np.add.at(matrix, ([index[g] for g in gold], [index[p] for p in predicted]), 1)
    return {"kind": "confusion", "labels": list(labels), "matrix": matrix.tolist()}


def per_label(labels: list, per_label_scores: dict) -> dict:
    """F1 and support (gold count) per label from ``{name: {"precision", "recall", "f1", "support"}}``,
    sorted by F1, best first (ties keep the model's label order); F1 rounded to 4 decimals. Only the
    model's labels are kept (an average row such as "macro avg" is dropped); a label the scores lack
    gets F1 0 and support 0."""
    rows = [
        (
            str(name),
            _round(per_label_scores.get(name, {}).get("f1", 0.0)) or 0.0,
            int(per_label_scores.get(name, {}).get("support", 0)),
        )
        for name in labels
    ]
    rows.sort(key=lambda row: -row[1])  # stable: equal F1 stays in label order
    return {
        "kind": "per_label",
        "labels": [r[0] for r in rows],
        "f1": [r[1] for r in rows],
        "support": [r[2] for r in rows],
    }


def scatter(gold: list, predicted: list, scores: dict) -> dict:
    """Gold and predicted values (every example, in data order) with the Pearson and Spearman
    correlations from ``scores``, all rounded to 4 decimals; a non-finite one becomes None."""
    if len(gold) != len(predicted):
        raise ValueError(f"scatter: {len(gold)} gold values but {len(predicted)} predictions")
    return {
        "kind": "scatter",
        "gold": [_round(v) for v in gold],
        "predicted": [_round(v) for v in predicted],
        "pearson": _round(scores.get("pearson")),
        "spearman": _round(scores.get("spearman")),
    }


def _round(value, digits: int = 4):
    """A float rounded for JSON; None for a missing or non-finite value (strict JSON has no NaN)."""
    if value is None:
        return None
    value = float(value)
    return round(value, digits) if np.isfinite(value) else None


def qa_buckets(examples: list[dict], answers: list[str], version_2: bool = False) -> dict:
    """EM and F1 (percent, best over gold answers, official normalisation) per bucket, with the
    F1 of the script the overall score follows (v1.1's or v2.0's, which differ on answers that
    normalise to nothing). A question without gold answers (SQuAD v2) goes to the length bucket "none"."""
    span_f1 = f1_v2 if version_2 else f1_v1
    by_length: dict = {}
    by_word: dict = {}
    for example, answer in zip(examples, answers):
        golds = [a["text"] for a in example.get("answers", [])] or [""]
        em = max(exact_match(answer, g) for g in golds)
        f1 = max(span_f1(answer, g) for g in golds)
        _add(by_length, answer_length_bucket(golds[0] if example.get("answers") else None), em, f1)
        _add(by_word, question_word(example["question"]), em, f1)
    order = [name for _, _, name in LENGTH_BUCKETS] + ["none"]
    return {
        "kind": "qa_buckets",
        "by_answer_length": {k: _mean(by_length[k]) for k in order if k in by_length},
        "by_first_word": {k: _mean(v) for k, v in sorted(by_word.items(), key=lambda kv: -kv[1][0])},
    }


def answer_length_bucket(answer: str | None) -> str:
    if answer is None:
        return "none"
    words = len(answer.split())
    return next(name for low, high, name in LENGTH_BUCKETS if low <= max(words, 1) <= high)


def question_word(question: str) -> str:
    """The question's wh-word if it starts with one (what/who/...), else "other"."""
    words = question.lower().replace("?", " ").split()
    first = words[0].strip("\"'(,.") if words else ""
    return first if first in QUESTION_WORDS else "other"


def _add(buckets: dict, key: str, em: float, f1: float) -> None:
    count, em_sum, f1_sum = buckets.get(key, (0, 0.0, 0.0))
    buckets[key] = (count + 1, em_sum + em, f1_sum + f1)


def _mean(bucket: tuple) -> dict:
    count, em_sum, f1_sum = bucket
    return {"count": count, "exact_match": round(100 * em_sum / count, 2), "f1": round(100 * f1_sum / count, 2)}
