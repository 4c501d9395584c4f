"""A model that predicts one thing for everything: said, not reported as fine.

Accuracy 0.685 on MRPC looks like a model; MCC 0.0 with every pair given the same label is the
majority-class baseline. Too little data or too few steps for the learning rate often end there.
``degenerate`` looks at what a model predicted on its evaluation data (the rows ``predict``
writes: a label, a label set, a score or a tag sequence per example) and at its metrics, and
returns a verdict when one answer covers almost every example, the scores hardly vary, or MCC or
the correlation is about zero. Torch-free: the same check runs after training and in `eval`.
"""

from __future__ import annotations

import math
from collections import Counter

ONE_ANSWER_SHARE = 0.95  # one answer for at least this share of the examples...
MIN_EXAMPLES = 10  # ...of at least this many (a handful of examples proves nothing)
FLAT_SCORES = 0.1  # predicted scores' spread under this share of the gold scores' spread
ABOUT_ZERO = 0.02  # |MCC| or |correlation| under this
ZERO_METRICS = ("mcc", "pearson", "spearman")


def answers(rows: list[dict]) -> tuple[str, list]:
    """(``label``, ``score`` or ``tags``, the answer per row) of ``predict``-style rows; a label
    set (multi-label) is one answer; a tag sequence counts its entities' presence."""
    if not rows:
        return "label", []
    first = rows[0]
    if "label" in first:
        return "label", [row["label"] for row in rows]
    if "labels" in first:
        return "label", [", ".join(sorted(map(str, row["labels"]))) or "(none)" for row in rows]
    if "tags" in first:
        return "tags", [tag for row in rows for tag in row["tags"]]
    if isinstance(first.get("score"), (int, float)):
        return "score", [float(row["score"]) for row in rows]
    return "other", []


def gold_answers(rows: list[dict], examples: list[dict]) -> list | None:
    """The gold answers in ``answers``' kinds: the rows' ``gold_label`` (a label set joined as
    ``answers`` joins it), or the examples' word tags."""
    if rows and "gold_label" in rows[0]:
        gold = [row["gold_label"] for row in rows]
        return [", ".join(sorted(map(str, g))) or "(none)" if isinstance(g, list) else g for g in gold]
    if rows and "tags" in rows[0] and all(isinstance(ex.get("tags"), list) for ex in examples):
        return [tag for ex in examples for tag in ex.get("file_tags", ex["tags"])]  # as the rows write them
    return None


def degenerate(rows: list[dict], gold: list | None = None, metrics: dict | None = None) -> dict | None:
    """A verdict (``kind``, ``text``, the numbers) when the predictions in ``rows`` are degenerate,
    else None. ``gold``: the gold answers (the same kinds as ``answers`` gives; labels for the
    baseline, scores for their spread)."""
    kind, predicted = answers(rows)
    metrics = metrics or {}
    verdict = None
    if kind in ("label", "tags") and len(predicted) >= MIN_EXAMPLES:
        verdict = _one_answer(kind, predicted, gold)
    elif kind == "score" and len(rows) >= MIN_EXAMPLES:
        verdict = _flat_scores(predicted, gold)
    if verdict is None and len(rows) >= MIN_EXAMPLES:
        verdict = _about_zero(metrics)
    if verdict is not None:
        zeros = [f"{name} {metrics[name]:.4f}" for name in ZERO_METRICS if _is_number(metrics.get(name))]
        verdict["text"] += "".join(f"; {zero}" for zero in zeros)
    return verdict


def _one_answer(kind: str, predicted: list, gold: list | None) -> dict | None:
    value, count = Counter(predicted).most_common(1)[0]
    share = count / len(predicted)
    gold_share = sum(g == value for g in gold) / len(gold) if gold else None
    if share < ONE_ANSWER_SHARE or (gold_share is not None and gold_share >= ONE_ANSWER_SHARE):
        return None  # varied answers, or data where one answer is the truth almost everywhere
    unit = "words" if kind == "tags" else "examples"
    text = f"the model predicts {value!r} for {share:.0%} of the {len(predicted):,} {unit}"
    baseline = {"answer": value}
    if gold_share is not None:
        baseline["accuracy"] = round(gold_share, 4)
        text += f": the 'always {value}' baseline (accuracy {gold_share:.4f})"
    return {"kind": "one_answer", "text": text, "answer": value, "share": round(share, 4), "baseline": baseline}


def _flat_scores(predicted: list[float], gold: list | None) -> dict | None:
    spread = _std(predicted)
    numbers = [float(g) for g in gold or () if _is_number(g)]
    gold_spread = _std(numbers) if len(numbers) > 1 else None
    if gold_spread is None or gold_spread == 0 or spread >= FLAT_SCORES * gold_spread:
        return None
    low, high = min(predicted), max(predicted)
    mean = sum(numbers) / len(numbers)
    text = (
        f"the model's scores hardly vary: all lie in {low:.2f}-{high:.2f} while the gold scores spread "
        f"{gold_spread:.2f} around {mean:.2f}: about the 'always the mean' baseline"
    )
    return {
        "kind": "flat_scores",
        "text": text,
        "range": [round(low, 4), round(high, 4)],
        "baseline": {"answer": round(mean, 4)},
    }


def _about_zero(metrics: dict) -> dict | None:
    found = {name: metrics[name] for name in ZERO_METRICS if _is_number(metrics.get(name))}
    if found and all(abs(value) < ABOUT_ZERO for value in found.values()):
        names = " and ".join(found)
        return {"kind": "no_correlation", "text": f"the model's {names} is about zero: no better than chance"}
    return None


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _std(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def warning_text(verdict: dict, command: str = "finetune") -> str:
    """The one line a person reads, with the likely causes and what to change: this run's flags
    (finetune), or those of the run that trained it (eval)."""
    if command == "finetune":
        causes = "likely too little data or too few steps for this learning rate (see --epochs, --lr)"
    else:
        causes = (
            "likely trained on too little data or too few steps for its learning rate "
            "(see `bertkit finetune --epochs, --lr`)"
        )
    return f"warning: {verdict['text']}; {causes}"
