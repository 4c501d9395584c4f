"""SQuAD metrics against the official scripts' formulas, on hand-worked cases."""

from __future__ import annotations

import collections
import re
import string

import numpy as np
import pytest

from bertkit.errors import BertkitError
from bertkit.metrics.squad import (
    best_null_threshold,
    exact_match,
    f1,
    f1_v1,
    normalize_answer,
    squad_scores,
    squad_v2_scores,
)


# The official SQuAD v1.1 evaluate script's functions, verbatim apart from formatting.
def official_normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def official_f1_score(prediction, ground_truth):
    prediction_tokens = official_normalize_answer(prediction).split()
    ground_truth_tokens = official_normalize_answer(ground_truth).split()
    common = collections.Counter(prediction_tokens) & collections.Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def official_exact_match_score(prediction, ground_truth):
    return official_normalize_answer(prediction) == official_normalize_answer(ground_truth)


def official_metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    scores_for_ground_truths = []
    for ground_truth in ground_truths:
        score = metric_fn(prediction, ground_truth)
        scores_for_ground_truths.append(score)
    return max(scores_for_ground_truths)


def official_evaluate(dataset, predictions):
    """evaluate-v1.1.py's evaluate(), verbatim apart from printing."""
    f1 = exact_match = total = 0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    continue
                ground_truths = list(map(lambda x: x["text"], qa["answers"]))
                prediction = predictions[qa["id"]]
                exact_match += official_metric_max_over_ground_truths(
                    official_exact_match_score, prediction, ground_truths
                )
                f1 += official_metric_max_over_ground_truths(official_f1_score, prediction, ground_truths)
    exact_match = 100.0 * exact_match / total
    f1 = 100.0 * f1 / total
    return {"exact_match": exact_match, "f1": f1}


def as_dataset(golds):
    return [
        {"paragraphs": [{"qas": [{"id": q, "answers": [{"text": t} for t in texts]} for q, texts in golds.items()]}]}
    ]


TRICKY = [
    "The Eiffel Tower!",
    "eiffel   tower",
    "An apple a day",
    "the-end",
    "Theater",
    "Denver Broncos",
    "the Broncos",
    "in 1990 and 1991",
    "1990",
    "U.S.A.",
    "usa",
    "dog dog cat",
    "dog cat cat",
    "l'état",
    "banana",
    "A  B\tC\nthe",
]


def test_normalize_answer_cases():
    assert normalize_answer("The  Quick, brown FOX!") == "quick brown fox"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("banana Theater") == "banana theater"  # only whole words go
    # Punctuation goes before articles, so "the-end" becomes "theend" and keeps its "the".
    assert normalize_answer("the-end") == "theend"
    for s in TRICKY:
        assert normalize_answer(s) == official_normalize_answer(s)


def test_exact_match_and_f1_by_hand():
    assert exact_match("The Eiffel Tower!", "eiffel tower") == 1.0
    assert exact_match("Eiffel", "eiffel tower") == 0.0
    # [big red dog] vs [red dog barked]: 2 shared, P = R = 2/3, F1 = 2/3.
    assert f1("the big red dog", "a red dog barked") == pytest.approx(2 / 3)
    # [red] vs [big red dog]: P = 1, R = 1/3, F1 = 2 * 1/3 / (4/3) = 0.5.
    assert f1("red", "big red dog") == pytest.approx(0.5)
    # Counts are clipped: {dog: 2, cat: 1} & {dog: 1, cat: 2} = 2 shared, F1 = 2/3.
    assert f1("dog dog cat", "dog cat cat") == pytest.approx(2 / 3)
    assert f1("green", "blue") == 0.0


def test_f1_agrees_with_the_official_v11_script_when_both_sides_have_tokens():
    for prediction in TRICKY:
        for gold in TRICKY:
            if normalize_answer(prediction) and normalize_answer(gold):
                assert f1(prediction, gold) == official_f1_score(prediction, gold)


def test_empty_answers_follow_the_v2_rule():
    assert f1("", "") == 1.0 and exact_match("", "") == 1.0
    assert f1("the", "") == 1.0  # "the" normalises to nothing, i.e. "no answer"
    assert f1("x", "") == 0.0 and f1("", "x") == 0.0


def test_squad_scores_v1_takes_the_best_gold_and_counts_missing_as_zero():
    golds = {"q1": ["Denver Broncos", "the Broncos"], "q2": ["1990"], "q3": ["red dog"]}
    predictions = {"q1": "Broncos", "q2": "in 1990 and 1991", "unknown": "ignored"}
    # q1: "broncos" == normalised "the Broncos" -> EM 1, F1 1.
    # q2: [in 1990 and 1991] vs [1990]: P = 1/4, R = 1, F1 = 0.5 / 1.25 = 0.4; EM 0.
    # q3: no prediction -> 0.
    scores = squad_scores(predictions, golds)
    assert scores == pytest.approx({"exact_match": 100 / 3, "f1": 100 * 1.4 / 3})


def test_squad_scores_v2_reports_has_and_no_answer_parts():
    golds = {"a": ["blue"], "b": [], "c": [], "d": ["the"]}
    predictions = {"a": "blue", "b": "", "c": "green", "d": "cat"}
    # a: 1/1. b: "" vs "" -> 1/1. c: "green" vs "" -> 0/0.
    # d: has an answer, but "the" normalises to nothing, so (as in the v2 script) it is scored
    #    against "" and "cat" gets 0/0.
    scores = squad_v2_scores(predictions, golds)
    assert scores == pytest.approx(
        {
            "exact": 50.0,
            "f1": 50.0,
            "total": 4,
            "HasAns_exact": 50.0,
            "HasAns_f1": 50.0,
            "HasAns_total": 2,
            "NoAns_exact": 50.0,
            "NoAns_f1": 50.0,
            "NoAns_total": 2,
        }
    )
    with pytest.raises(BertkitError, match="'b' has no gold answer, which SQuAD v1.1 cannot score"):
        squad_scores(predictions, golds)  # the v1.1 script fails on max([]) there


# Golds that normalise to "" ("." is among the gold answers of 3 SQuAD v1.1 dev questions).
DOT_GOLDS = {"q1": ["Denver Broncos", "."], "q2": ["."], "q3": ["the cat", "."]}
DOT_PREDICTIONS = {"q1": ".", "q2": "the", "q3": "cat"}


def test_v11_keeps_golds_that_normalise_to_nothing():
    # v1.1 keeps "." as a gold answer: normalised it is "", and so are "." and "the".
    # q1 ".": EM max(0, 1) = 1; F1: no tokens on the prediction side -> num_same 0 -> 0.
    # q2 "the": EM "" == "" -> 1; F1 0 (again num_same 0).
    # q3 "cat": "the cat" normalises to "cat" -> EM 1, F1 1.
    # EM 3/3 = 100, F1 1/3. (The v2 rule would drop "." and give EM 2/3, F1 2/3.)
    scores = squad_scores(DOT_PREDICTIONS, DOT_GOLDS)
    assert scores == pytest.approx({"exact_match": 100.0, "f1": 100 / 3})
    assert scores == pytest.approx(official_evaluate(as_dataset(DOT_GOLDS), DOT_PREDICTIONS))
    assert f1_v1(".", ".") == 0.0 and f1_v1("the", ".") == 0.0 and f1(".", ".") == 1.0


def test_v2_drops_golds_that_normalise_to_nothing():
    golds = {**DOT_GOLDS, "q4": []}
    predictions = {**DOT_PREDICTIONS, "q4": ""}
    # v2 keeps only golds that normalise to something, else [""]:
    # q1 "." vs ["Denver Broncos"]: EM 0; F1: pred has no tokens, gold has -> int(False) = 0.
    # q2 "the" vs [""]: EM 1, F1 1 (both empty). q3 "cat": 1, 1. q4 "" vs [""]: 1, 1.
    scores = squad_v2_scores(predictions, golds)
    assert scores == pytest.approx(
        {
            "exact": 75.0,
            "f1": 75.0,
            "total": 4,
            "HasAns_exact": 200 / 3,
            "HasAns_f1": 200 / 3,
            "HasAns_total": 3,
            "NoAns_exact": 100.0,
            "NoAns_f1": 100.0,
            "NoAns_total": 1,
        }
    )


def test_v11_matches_the_official_script_on_random_cases():
    rng = np.random.default_rng(11)
    texts = ["red dog", "the dog", ".", "the", "a red dog .", "dog", ""]
    for _ in range(200):
        n = int(rng.integers(1, 6))
        golds = {f"q{i}": [str(t) for t in rng.choice(texts[:5], int(rng.integers(1, 4)))] for i in range(n)}
        predictions = {q: str(rng.choice(texts)) for q in golds if rng.random() < 0.9}
        assert squad_scores(predictions, golds) == pytest.approx(official_evaluate(as_dataset(golds), predictions))


def test_squad_scores_needs_golds():
    with pytest.raises(BertkitError):
        squad_scores({"a": "x"}, {})


def _answer_with_threshold(threshold, null_minus_best, predictions):
    return {q: ("" if null_minus_best[q] > threshold else text) for q, text in predictions.items()}


def test_best_null_threshold_by_hand():
    golds = {"q1": ["paris"], "q2": [], "q3": ["blue whale"], "q4": []}
    predictions = {"q1": "paris", "q2": "london", "q3": "whale", "q4": "rome"}
    diffs = {"q1": -3.0, "q2": 2.0, "q3": -2.0, "q4": -1.0}
    # All "" scores q2 + q4 = 2. Sweeping diffs upwards, each question switches to its text:
    # q1 (-3): +1 -> 3; q3 (-2): +2/3 ([whale] vs [blue whale]) -> 3.667; q4 (-1): -1 -> 2.667;
    # q2 (2): -1 -> 1.667. Best: t = -2.0 with F1 = 3.667 / 4 = 91.667%.
    threshold, best_f1 = best_null_threshold(diffs, predictions, golds)
    assert threshold == -2.0 and best_f1 == pytest.approx(100 * (2 + 5 / 3) / 4)
    answered = _answer_with_threshold(threshold, diffs, predictions)
    assert squad_v2_scores(answered, golds)["f1"] == pytest.approx(best_f1)


def test_best_null_threshold_moves_equal_diffs_together_and_can_answer_nothing():
    # Both diffs are 1.0: answering both gives 1 + 0, answering neither 0 + 1. Answering only
    # "a" (what the official script's per-question sweep would report) is not reachable.
    golds, predictions = {"a": ["x"], "b": []}, {"a": "x", "b": "y"}
    threshold, best_f1 = best_null_threshold({"a": 1.0, "b": 1.0}, predictions, golds)
    assert threshold < 1.0 and best_f1 == 50.0
    # Every text is wrong: the best is to answer nothing, with t below the smallest diff.
    threshold, best_f1 = best_null_threshold({"a": 0.5, "b": -4.0}, {"a": "z", "b": "y"}, golds)
    assert threshold < -4.0 and best_f1 == 50.0


def test_best_null_threshold_is_the_best_over_all_cut_points():
    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(1, 8))
        golds = {f"q{i}": ([] if rng.random() < 0.4 else ["red dog"]) for i in range(n)}
        predictions = {q: str(rng.choice(["red dog", "dog", "cat"])) for q in golds}
        diffs = {q: float(rng.integers(-3, 4)) for q in golds}  # integers: ties are common
        threshold, best_f1 = best_null_threshold(diffs, predictions, golds)
        achieved = squad_v2_scores(_answer_with_threshold(threshold, diffs, predictions), golds)
        assert achieved["f1"] == pytest.approx(best_f1)
        for cut in [min(diffs.values()) - 1.0, *diffs.values()]:
            answered = _answer_with_threshold(cut, diffs, predictions)
            assert squad_v2_scores(answered, golds)["f1"] <= best_f1 + 1e-9
