"""Official SQuAD v1.1 / v2.0 exact-match and F1, and the v2 no-answer threshold search.

The formulas follow the official evaluation scripts (evaluate-v1.1.py and evaluate-v2.0.py)
exactly, so that numbers are comparable with published results. The two scripts differ where
an answer normalises to nothing (``"."``, ``"the"``): v1.1 keeps such gold answers and gives
them F1 0; v2.0 drops them, scores an empty gold list (an unanswerable question) against the
single gold answer ``""``, and gives F1 1 when both sides are empty. ``squad_scores`` is v1.1,
``squad_v2_scores`` is v2.0.
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
    """1.0 when the normalised strings are equal, else 0.0 (the same in both scripts).

    v1.1: ``return (normalize_answer(prediction) == normalize_answer(ground_truth))``
    v2.0: ``return int(normalize_answer(a_gold) == normalize_answer(a_pred))``
    """
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    """Token-level F1 between the normalised strings, as evaluate-v2.0.py's ``compute_f1``.

    When either side normalises to nothing the v2 script returns 1 iff both do::

        if len(gold_toks) == 0 or len(pred_toks) == 0:
            # If either is no-answer, then F1 is 1 if they agree, 0 otherwise
            return int(gold_toks == pred_toks)
    """
    prediction_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not prediction_tokens or not gold_tokens:
        return float(prediction_tokens == gold_tokens)
    return _token_f1(prediction_tokens, gold_tokens)


def f1_v1(prediction: str, gold: str) -> float:
    """Token-level F1 as evaluate-v1.1.py's ``f1_score``: no special case for empty answers, so
    a side that normalises to nothing shares no token and scores 0::

        common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
        num_same = sum(common.values())
        if num_same == 0:
            return 0
    """
    return _token_f1(normalize_answer(prediction).split(), normalize_answer(gold).split())


def _token_f1(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    # Both scripts: precision = num_same / len(pred), recall = num_same / len(gold), harmonic mean.
    common = collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions: dict[str, str], golds: dict[str, list[str]]) -> dict[str, float]:
    """SQuAD v1.1: ``exact_match`` and ``f1`` in percent over the questions in ``golds``.

    As evaluate-v1.1.py: each question takes its best score over ALL its gold answers, those
    that normalise to nothing included (``metric_max_over_ground_truths``, which takes
    ``max(scores_for_ground_truths)``), with ``exact_match_score`` and ``f1_score`` (``f1_v1``);
    a question missing from ``predictions`` scores 0 (``total += 1`` comes before the
    ``'Unanswered question ... will receive score 0.'`` ``continue``). A question without gold
    answers cannot be scored by v1.1 (the script fails on ``max([])``): use ``squad_v2_scores``.
    """
    unanswerable = next((qid for qid, answers in golds.items() if not answers), None)
    if unanswerable is not None:
        raise BertkitError(
            f"question {unanswerable!r} has no gold answer, which SQuAD v1.1 cannot score",
            hint="score data with unanswerable questions as SQuAD v2.0",
        )
    exact, f1_scores = _raw_scores(predictions, golds, list, f1_v1)
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
    exact, f1_scores = _raw_scores(predictions, golds, _scorable_golds, f1)
    result: dict = {"exact": _percent(exact, golds), "f1": _percent(f1_scores, golds), "total": len(golds)}
    has_answer = [qid for qid, answers in golds.items() if answers]
    no_answer = [qid for qid, answers in golds.items() if not answers]
    for prefix, qids in (("HasAns", has_answer), ("NoAns", no_answer)):
        if qids:
            result.update(
                {
                    f"{prefix}_exact": _percent(exact, qids),
                    f"{prefix}_f1": _percent(f1_scores, qids),
                    f"{prefix}_total": len(qids),
                }
            )
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
    dict score 0 at every threshold. As in the script, a question answering "" scores 1 iff it
    has no gold answer, and a no-answer question answering a non-empty text scores 0 (even a
    text such as "the" that normalises to nothing).
    """
    _check_golds(golds)
    # For each thresholdable question: its diff and how much the score changes when it answers
    # text instead of "". The per-question scores are those of the v2 script's find_best_thresh:
    #     cur_score = num_no_ans                      # "" everywhere: 1 per no-answer question
    #     if qid_to_has_ans[qid]: diff = scores[qid]  # its raw score against the gold answers
    #     else:
    #       if preds[qid]: diff = -1                  # any non-empty text is wrong
    #       else: diff = 0
    gain_at_diff: list[tuple[float, float]] = []
    total_if_all_null = 0.0
    for qid, answers in golds.items():
        if qid not in null_minus_best or qid not in predictions:
            continue
        text = predictions[qid]
        score_null = 0.0 if answers else 1.0
        if answers:
            score_text = max(scorer(text, g) for g in _scorable_golds(answers))
        else:
            score_text = 0.0 if text else 1.0
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


def _raw_scores(
    predictions: dict[str, str],
    golds: dict[str, list[str]],
    gold_texts_of: Callable[[list[str]], list[str]],
    f1_of: Callable[[str, str], float],
) -> tuple[dict, dict]:
    """Per question: the best exact match and F1 over the gold texts ``gold_texts_of`` keeps
    (0 when not predicted)."""
    _check_golds(golds)
    exact: dict[str, float] = {}
    f1_scores: dict[str, float] = {}
    for qid, answers in golds.items():
        if qid not in predictions:
            exact[qid] = f1_scores[qid] = 0.0
            continue
        gold_texts = gold_texts_of(answers)
        exact[qid] = max(exact_match(predictions[qid], g) for g in gold_texts)
        f1_scores[qid] = max(f1_of(predictions[qid], g) for g in gold_texts)
    return exact, f1_scores


def _scorable_golds(answers: list[str]) -> list[str]:
    """Gold texts as evaluate-v2.0.py's ``get_raw_scores`` keeps them::

    gold_answers = [a['text'] for a in qa['answers'] if normalize_answer(a['text'])]
    if not gold_answers:
      # For unanswerable questions, only correct answer is empty string
      gold_answers = ['']
    """
    return [a for a in answers if normalize_answer(a)] or [""]


def _percent(scores: dict[str, float], qids: Iterable[str]) -> float:
    qids = list(qids)
    return 100.0 * sum(scores[qid] for qid in qids) / len(qids)


def _just_below(value: float) -> float:
    """The largest float strictly below ``value``, so ``diff > t`` holds for every diff."""
    return math.nextafter(value, -math.inf)


def _check_golds(golds: dict[str, list[str]]) -> None:
    if not golds:
        raise BertkitError(
            "there are no gold answers to score against", hint="check that the evaluation split is not empty"
        )
