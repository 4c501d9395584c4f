"""What a model that learned nothing scores: each task's trivial baseline, and whether a model beats it.

A metric means little alone: accuracy 0.68 on MRPC is the majority class, token accuracy 0.83 on
CoNLL is tagging every word ``O``, an F1 of 8 on SQuAD is below picking the sentence that shares
the most words with the question. Each task declares its baseline (``Task.baseline``, from the
gold labels, spans or tokens of its evaluation examples: no second model) with one of the
functions below; ``shortfalls`` compares a model's metrics with it. A baseline is a plain dict,
as bertkit.json and the eval report store it::

    {"name": "majority class", "rule": "always 'equivalent'", "metrics": {"accuracy": 0.68, ...},
     "checked": ["accuracy", "mcc"], "margins": {"mcc": 0.02}, "warns": true}

``metrics``: the baseline's scores (printed beside the model's); ``checked``: those a model must
beat, by more than ``margins`` (0 if absent) where the baseline is chance ("about zero"); lower is
better for the names in ``LOWER_IS_BETTER``. ``warns`` False: a reference only (a distilled
student's teacher). Torch-free: the same numbers after training and in `eval`.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from bertkit.metrics.degenerate import ABOUT_ZERO

NEAR_ZERO_F1 = 0.05  # an F1 (0..1) under this above a baseline of 0 is "about zero" too
LOWER_IS_BETTER = frozenset({"loss", "mlm_loss", "nsp_loss", "perplexity", "mse", "hamming_loss"})
RANDOM_RANKING = "a random ranking of each query's passages (its expected score)"


def record(name: str, rule: str, metrics: dict, checked, margins: dict | None = None, warns: bool = True) -> dict:
    """A baseline as stored: numbers only, rounded as the model's metrics are (6 decimals)."""
    numbers = {k: round(float(v), 6) for k, v in metrics.items() if _is_number(v)}
    checked = [name for name in checked if name in numbers]
    return {
        "name": name,
        "rule": rule,
        "metrics": numbers,
        "checked": checked,
        "margins": {k: v for k, v in (margins or {}).items() if k in checked and v},
        "warns": warns,
    }


def shortfalls(metrics: dict, baseline: dict) -> list[dict]:
    """The checked metrics the model does not beat: ``[{"metric", "value", "baseline"}]`` ([] when
    it beats every one). A tie does not beat a baseline."""
    missed = []
    for name in baseline.get("checked", ()):
        value, base = metrics.get(name), baseline["metrics"].get(name)
        if not (_is_number(value) and _is_number(base)):
            continue
        margin = baseline.get("margins", {}).get(name, 0.0)
        beats = value < base - margin if name in LOWER_IS_BETTER else value > base + margin
        if not beats:
            missed.append({"metric": name, "value": value, "baseline": base})
    return missed


def warning_line(baseline: dict, missed: list[dict]) -> str:
    """What is said (before the causes): which metrics fall short of which baseline."""
    numbers = ", ".join(f"{m['metric']} {m['value']:.4f} vs {m['baseline']:.4f}" for m in missed)
    return f"the model does not beat the {baseline['name']} baseline ({baseline['rule']}): {numbers}"


# --- the baselines, one per kind of task ------------------------------------------------------------
def majority_class(gold: list, labels: list) -> dict:
    """Single-label classification: always the most frequent gold label (accuracy = its share,
    MCC 0); checked: accuracy, and MCC (two labels) within ``ABOUT_ZERO`` of 0."""
    from bertkit.metrics.classification import classification_scores

    majority, _ = Counter(gold).most_common(1)[0]
    ids = {label: i for i, label in enumerate(labels)}
    scores = classification_scores([ids[g] for g in gold], [ids[majority]] * len(gold), len(labels))
    return record("majority-class", f"always {majority!r}", scores, ("accuracy", "mcc"), {"mcc": ABOUT_ZERO})


def constant_mean(gold: list[float]) -> dict:
    """Regression: always the gold mean (Pearson and Spearman 0, the MSE the gold variance: R² 0)."""
    mean = sum(gold) / len(gold)
    scores = {
        "pearson": 0.0,
        "spearman": 0.0,
        "pearson_spearman_mean": 0.0,
        "mse": sum((g - mean) ** 2 for g in gold) / len(gold),
    }
    checked, margins = ("pearson", "spearman", "mse"), {"pearson": ABOUT_ZERO, "spearman": ABOUT_ZERO}
    return record("constant-mean", f"always the mean {mean:.4f}", scores, checked, margins)


def per_label_majority(gold: list[list[int]], labels: list) -> dict:
    """Multi-label: each label predicted for every example when most examples have it, else for
    none (the empty set, on most data); checked: micro F1 (by more than ``NEAR_ZERO_F1`` when 0)."""
    import numpy as np

    from bertkit.metrics.multi_label import multi_label_scores

    matrix = np.asarray(gold, dtype=np.int64).reshape(-1, len(labels))
    majority = (matrix.mean(axis=0) > 0.5).astype(np.int64)
    scores = multi_label_scores(matrix, np.tile(majority, (len(matrix), 1)), labels)
    chosen = [label for label, on in zip(labels, majority) if on]
    rule = f"always {{{', '.join(map(str, chosen))}}}" if chosen else "always no label"
    margins = {"micro_f1": NEAR_ZERO_F1} if scores["micro_f1"] == 0 else {}
    return record("per-label-majority", rule, scores, ("micro_f1",), margins)


def always_outside(gold_tags: list[list[str]]) -> dict:
    """Tagging: every word ``O`` (token accuracy = the share of ``O`` words, entity F1 0); checked:
    token accuracy, and entity F1 above ``NEAR_ZERO_F1``."""
    from bertkit.metrics.tagging import tagging_scores

    scores = tagging_scores(gold_tags, [["O"] * len(tags) for tags in gold_tags])
    return record("always-O", "every word tagged O", scores, ("token_accuracy", "f1"), {"f1": NEAR_ZERO_F1})


_WORD = re.compile(r"\w+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_COMMON = frozenset("a an the of in on at to for by with from and or is was are were be what which who whom whose "
                    "when where why how did does do that this it its as".split())  # fmt: skip


def trivial_spans(examples: list[dict], v2: bool) -> dict:
    """Question answering: the best (by F1) of a few rules that read no model: the context's first
    sentence; the context sentence sharing the most words with the question (the first of equals);
    for SQuAD v2 data, no answer to any question. Scored by the SQuAD scripts (exact_match / f1,
    or v2's exact / f1, percent); checked: both."""
    from bertkit.metrics.squad import squad_scores, squad_v2_scores

    golds = {str(i): [a["text"] for a in ex["answers"]] for i, ex in enumerate(examples)}
    rules = {
        "the context's first sentence": [_sentences(ex["context"])[0] for ex in examples],
        "the context sentence sharing the most words with the question": [_closest(ex) for ex in examples],
    }
    if v2:
        rules["no answer to any question"] = [""] * len(examples)
    scored = {}
    for rule, answers in rules.items():
        predictions = {str(i): answer for i, answer in enumerate(answers)}
        scored[rule] = squad_v2_scores(predictions, golds) if v2 else squad_scores(predictions, golds)
    best = max(scored, key=lambda rule: scored[rule]["f1"])  # max keeps the first of equals
    others = "; ".join(f"{rule}: F1 {s['f1']:.2f}" for rule, s in scored.items() if rule != best)
    scores = {k: v for k, v in scored[best].items() if k in ("exact", "exact_match", "f1")}
    return record("trivial-span", f"{best}; the best of the rules tried (also {others})", scores, list(scores))


def _sentences(context: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(context.strip()) if s] or [context]


def _closest(example: dict) -> str:
    asked = {w for w in _WORD.findall(example["question"].lower()) if w not in _COMMON}
    sentences = _sentences(example["context"])
    return max(sentences, key=lambda s: len(asked & set(_WORD.findall(s.lower()))))


def random_ranking(examples: list[dict]) -> dict:
    """Reranking: the expected nDCG@10 and MRR@10 of a random order of each query's passages (exact,
    over the queries ``rank.ranking_scores`` scores: more than one passage, one relevant), AUC 0.5,
    and the accuracy of the majority decision (relevant or not at 0.5). The rows carry no retriever
    order to compare with (and the reranker's scores never depend on the rows' order). Checked:
    AUC (by more than ``ABOUT_ZERO``), nDCG@10, MRR@10."""
    groups: dict = {}
    for ex in examples:
        groups.setdefault(ex["query"], []).append(float(ex["label"]))
    scored = [grades for grades in groups.values() if len(grades) > 1 and max(grades) > 0]
    relevant = [float(ex["label"]) > 0 for ex in examples]
    share = sum(relevant) / len(relevant) if relevant else 0.0
    scores = {"accuracy": max(share, 1 - share)}
    if any(relevant) and not all(relevant):
        scores["auc"] = 0.5
    if scored:
        level = min(g for grades in scored for g in grades if g > 0)
        scores["ndcg@10"] = sum(_expected_ndcg(grades) for grades in scored) / len(scored)
        scores["mrr@10"] = sum(_expected_mrr(len(grades), sum(g >= level for g in grades)) for grades in scored)
        scores["mrr@10"] /= len(scored)
    return record("random-ranking", RANDOM_RANKING, scores, ("auc", "ndcg@10", "mrr@10"), {"auc": ABOUT_ZERO})


def _expected_ndcg(grades: list[float], cut: int = 10) -> float:
    """Every position holds each passage equally often: E[DCG] = the mean gain times the discounts."""
    gains = [max(g, 0.0) for g in grades]
    discounts = [1 / math.log2(rank + 2) for rank in range(min(cut, len(gains)))]
    ideal = sum(g * d for g, d in zip(sorted(gains, reverse=True), discounts))
    return (sum(gains) / len(gains)) * sum(discounts) / ideal if ideal else 0.0


def _expected_mrr(passages: int, relevant: int, cut: int = 10) -> float:
    """E[1 / the first relevant rank] (0 past ``cut``): P(first at r) = C(n - r, m - 1) / C(n, m)."""
    if relevant == 0:
        return 0.0
    total = math.comb(passages, relevant)
    return sum(math.comb(passages - r, relevant - 1) / total / r for r in range(1, min(cut, passages) + 1))


def unigram(token_ids: list[list[int]]) -> dict:
    """Masked LM: the loss (nats per token) of predicting every masked token from the tokens'
    frequencies in the evaluation text itself (its unigram entropy: a little flattering to the
    baseline, which has seen the answers' counts); checked: the loss."""
    counts = Counter(token for ids in token_ids for token in ids)
    total = sum(counts.values())
    entropy = -sum(c / total * math.log(c / total) for c in counts.values()) if total else 0.0
    scores = {"loss": entropy, "perplexity": math.exp(entropy)}
    return record("unigram", "each masked token predicted from the text's token frequencies", scores, ("loss",))


def unigram_and_chance(token_ids: list[list[int]], next_labels: list[int]) -> dict:
    """BERT pre-training: ``unigram`` for the masked tokens, and for next-sentence prediction the
    majority of the pairs' labels (chance: half are random) and the entropy of their shares as its
    loss; checked: the MLM loss, and NSP accuracy by more than ``ABOUT_ZERO``."""
    masked = unigram(token_ids)["metrics"]["loss"]
    counts = Counter(next_labels)
    shares = [c / len(next_labels) for c in counts.values()]
    nsp_loss = -sum(p * math.log(p) for p in shares)
    scores = {
        "loss": masked + nsp_loss,
        "mlm_loss": masked,
        "perplexity": math.exp(masked),
        "nsp_loss": nsp_loss,
        "nsp_accuracy": max(shares),
    }
    rule = "masked tokens from the text's token frequencies; next sentence: the majority answer (chance)"
    return record("unigram-and-chance", rule, scores, ("mlm_loss", "nsp_accuracy"), {"nsp_accuracy": ABOUT_ZERO})


def starting_model(before: dict, main_metric: str) -> dict:
    """The model before training, scored on the same evaluation data (zero-shot: tasks that ask
    for it, ``Task.evaluate_before_training``); checked: the main metric."""
    return record("starting-model", "the model before training, zero-shot", before, (main_metric,))


def reference(name: str, rule: str, metrics: dict) -> dict:
    """A score to read the model's against that warns of nothing (a distilled student's teacher)."""
    return record(name, rule, metrics, (), warns=False)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
