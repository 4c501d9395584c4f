"""Whether the model behind an audit learned anything: its suggestions (out-of-fold, or held-out
with --model) scored against the given labels beside the task's trivial baseline
(bertkit/metrics/baselines.py: the majority class, the per-label majority, every word O).

Confident learning trusts the probabilities it is given: a model at the majority-class baseline
still "flags" rows (those of the minority class, mostly), and that ranking says nothing about the
labels. The check is recorded in every audit's summary, and when the model does not beat the
baseline a warning says so on the console, in summary.json and in the ranked files' summary."""

from __future__ import annotations

import numpy as np

from bertkit.metrics.baselines import always_outside, majority_class, per_label_majority, shortfalls
from bertkit.metrics.label_issues import MULTI, SINGLE, TOKENS

SHOWN = {SINGLE: ("accuracy", "mcc", "f1", "macro_f1"), MULTI: ("micro_f1",), TOKENS: ("f1", "token_accuracy")}


def model_check(scored) -> dict:
    """{"of": what was scored, "metrics": the model's, "baseline": {name, rule, metrics},
    "beats_baseline": bool, "warning": a line when it does not (else None)}."""
    metrics, baseline = _scores(scored)
    missed = shortfalls(metrics, baseline)
    shown = {name: round(float(metrics[name]), 6) for name in SHOWN[scored.kind] if name in metrics}
    kept = {name: baseline["metrics"][name] for name in SHOWN[scored.kind] if name in baseline["metrics"]}
    of = "out-of-fold" if scored.source.get("kind") in ("folds", "audit --folds") else "held-out (--model)"
    check = {
        "of": f"the model's {of} predictions against the given labels",
        "metrics": shown,
        "baseline": {"name": baseline["name"], "rule": baseline["rule"], "metrics": kept},
        "beats_baseline": not missed,
        "warning": None,
    }
    if missed:
        numbers = ", ".join(f"{m['metric']} {m['value']:.4f} vs {m['baseline']:.4f}" for m in missed)
        check["warning"] = (
            f"the flags come from a model no better than the {baseline['name']} baseline ({baseline['rule']}; "
            f"{of} {numbers}): its probabilities say little about which labels are wrong, so read the "
            "ranking as noise until a model that learned the task (more epochs or rows, another lr) is audited"
        )
    return check


def _scores(scored) -> tuple[dict, dict]:
    labels = scored.adapter.labels
    if scored.kind == TOKENS:
        from bertkit.metrics.tagging import tagging_scores

        gold = [list(ex["tags"]) for ex in scored.examples]
        return tagging_scores(gold, [list(tags) for tags in scored.suggested]), always_outside(gold)
    if scored.kind == MULTI:
        from bertkit.metrics.multi_label import multi_label_scores

        gold, predicted = _multi_hot(scored.given, len(labels)), _multi_hot(_ids(scored.suggested, labels), len(labels))
        return multi_label_scores(gold, predicted, labels), per_label_majority(gold.tolist(), labels)
    from bertkit.metrics.classification import classification_scores

    predicted = [labels.index(label) for label in scored.suggested]
    metrics = classification_scores(list(scored.given), predicted, len(labels))
    return metrics, majority_class([labels[g] for g in scored.given], labels)


def _ids(suggested: list, labels: list) -> list:
    return [[labels.index(label) for label in row] for row in suggested]


def _multi_hot(rows: list, width: int) -> np.ndarray:
    matrix = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        matrix[i, list(row)] = 1
    return matrix
