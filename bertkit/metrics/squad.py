"""Official SQuAD v1.1 / v2.0 exact-match and F1, and the v2 no-answer threshold search.

The formulas follow the official evaluation scripts so that numbers are comparable with
published results. An empty gold list means "unanswerable" (SQuAD v2); such a question is
scored against the single gold answer ``""``, as the v2 script does.
"""

from __future__ import annotations

import collections
import math
import re
import string
from typing import Callable, Iterable

from bertkit.errors import BertkitError

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """Lower-case, drop punctuation and English articles, collapse whitespace (official)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCTUATION)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised strings are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    """Token-level F1 between the normalised strings.

    When either side normalises to nothing the v2 rule applies (1.0 iff both are empty); the
    v1.1 script would return 0.0 there, which only differs for golds like "the" that v2 drops.
    """
    prediction_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not prediction_tokens or not gold_tokens:
        return float(prediction_tokens == gold_tokens)
    common = collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions: dict[str, str], golds: dict[str, list[str]]) -> dict[str, float]:
    """SQuAD v1.1: ``exact_match`` and ``f1`` in percent over the questions in ``golds``.

    Each question takes its best score over its gold answers; a question missing from
    ``predictions`` scores 0 (as in the v1.1 script).
    """
    exact, f1_scores = _raw_scores(predictions, golds)
    return {"exact_match": _percent(exact, golds), "f1": _percent(f1_scores, golds)}


def squad_v2_scores(
    predictions: dict[str, str],
    golds: dict[str, list[str]],
    null_minus_best: dict[str, float] | None = None,
    best_texts: dict[str, str] | None = None,
) -> dict:
    """SQuAD v2.0, with the official script's keys.

    ``exact``, ``f1`` (percent) and ``total`` score ``predictions`` as given, i.e. at the threshold
    the model predicted with; ``HasAns_*`` / ``NoAns_*`` split them by whether the question has a
    gold answer. With ``null_minus_best`` (null score minus best span score, the script's
    ``na_prob``) and ``best_texts`` (each question's best non-null answer), the best-threshold
    search adds ``best_exact``, ``best_exact_thresh``, ``best_f1`` and ``best_f1_thresh``: the
    scores when a question answers "" iff its diff exceeds the threshold (see
    ``best_null_threshold`` for the two ways it is more careful than the script). Unlike the
    script, which leaves them out of the total, missing predictions score 0.
    """
    exact, f1_scores = _raw_scores(predictions, golds)
    result: dict = {"exact": _percent(exact, golds), "f1": _percent(f1_scores, golds), "total": len(golds)}
    has_answer = [qid for qid, answers in golds.items() if answers]
    no_answer = [qid for qid, answers in golds.items() if not answers]
    for prefix, qids in (("HasAns", has_answer), ("NoAns", no_answer)):
        if qids:
            result.update({f"{prefix}_exact": _percent(exact, qids), f"{prefix}_f1": _percent(f1_scores, qids),
                           f"{prefix}_total": len(qids)})
    if null_minus_best is not None:
        texts = best_texts if best_texts is not None else predictions
        for name, scorer in (("exact", exact_match), ("f1", f1)):
            threshold, best = best_null_threshold(null_minus_best, texts, golds, scorer)
            result[f"best_{name}"], result[f"best_{name}_thresh"] = best, threshold
    return result


def best_null_threshold(
    null_minus_best: dict[str, float],
    predictions: dict[str, str],
    golds: dict[str, list[str]],
    scorer: Callable[[str, str], float] = f1,
) -> tuple[float, float]:
    """Threshold ``t`` maximising the score (F1, or ``scorer``) when a question answers "" iff its
    diff exceeds ``t``.

    ``null_minus_best[qid]`` is null_score - best_span_score and ``predictions[qid]`` the best
    non-null text. Returns ``(t, score_percent)`` like the v2 script's ``find_best_thresh``, with
    two fixes: questions with equal diffs switch together (the script can stop inside such a
    group), and when answering "" everywhere is best, ``t`` lies just below the smallest diff
    rather than at 0.0 (which is only right for probabilities). Questions missing from either
    dict score 0 at every threshold.
    """
    _check_golds(golds)
    # For each thresholdable question: its diff and how much the score changes when it answers
    # text instead of "" (for a no-answer question that gain is usually -1).
    gain_at_diff: list[tuple[float, float]] = []
    total_if_all_null = 0.0
    for qid, answers in golds.items():
        if qid not in null_minus_best or qid not in predictions:
            continue
        gold_texts = _scorable_golds(answers)
        score_null = max(scorer("", g) for g in gold_texts)
        score_text = max(scorer(predictions[qid], g) for g in gold_texts)
        total_if_all_null += score_null
        gain_at_diff.append((float(null_minus_best[qid]), score_text - score_null))
    if not gain_at_diff:
        raise BertkitError(
            "no question has both a null-score difference and a prediction",
            hint="check that the question ids of the predictions match the dataset",
        )

    gain_at_diff.sort()
    best_total = current_total = total_if_all_null
    best_threshold = float(_just_below(gain_at_diff[0][0]))
    for index, (diff, gain) in enumerate(gain_at_diff):
        current_total += gain
        is_last_of_group = index + 1 == len(gain_at_diff) or gain_at_diff[index + 1][0] != diff
        if is_last_of_group and current_total > best_total:
            best_total, best_threshold = current_total, diff
    return best_threshold, 100.0 * best_total / len(golds)


def _raw_scores(predictions: dict[str, str], golds: dict[str, list[str]]) -> tuple[dict, dict]:
    """Per question: the best exact match and F1 over its gold answers (0 when not predicted)."""
    _check_golds(golds)
    exact: dict[str, float] = {}
    f1_scores: dict[str, float] = {}
    for qid, answers in golds.items():
        if qid not in predictions:
            exact[qid] = f1_scores[qid] = 0.0
            continue
        gold_texts = _scorable_golds(answers)
        exact[qid] = max(exact_match(predictions[qid], g) for g in gold_texts)
        f1_scores[qid] = max(f1(predictions[qid], g) for g in gold_texts)
    return exact, f1_scores


def _scorable_golds(answers: list[str]) -> list[str]:
    """Gold texts as the v2 script scores them: drop those that normalise to nothing."""
    return [a for a in answers if normalize_answer(a)] or [""]


def _percent(scores: dict[str, float], qids: Iterable[str]) -> float:
    qids = list(qids)
    return 100.0 * sum(scores[qid] for qid in qids) / len(qids)


def _just_below(value: float) -> float:
    """The largest float strictly below ``value``, so ``diff > t`` holds for every diff."""
    return math.nextafter(value, -math.inf)


def _check_golds(golds: dict[str, list[str]]) -> None:
    if not golds:
        raise BertkitError("there are no gold answers to score against",
                           hint="check that the evaluation split is not empty")
