"""Regression and multi-label scores pinned to hand-computed values, to scikit-learn / scipy, and
STS-B's Pearson to the benchmark's own Perl scorer (correlation.pl)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from conftest import DATA_DIR

from bertkit.metrics.multi_label import decide, multi_label_scores, tune_thresholds
from bertkit.metrics.regression import regression_scores


def test_regression_by_hand():
    # gold 1, 2, 3; predicted 1, 3, 2: means 2 and 2; deviations (-1, 0, 1) and (-1, 1, 0)
    # cov = (1 + 0 + 0) / 3 = 1/3, var = 2/3 each: Pearson = (1/3) / (2/3) = 0.5
    # ranks equal the values, so Spearman = 0.5 too; MSE = (0 + 1 + 1) / 3
    scores = regression_scores([1, 2, 3], [1, 3, 2])
    assert scores["pearson"] == pytest.approx(0.5) and scores["spearman"] == pytest.approx(0.5)
    assert scores["pearson_spearman_mean"] == pytest.approx(0.5) and scores["mse"] == pytest.approx(2 / 3)


def test_spearman_averages_tied_ranks_as_scipy():
    from scipy.stats import pearsonr, spearmanr

    rng = np.random.default_rng(0)
    gold = rng.integers(0, 6, 200).astype(float)  # many ties, as STS-B's 0-5 scores
    predicted = gold + rng.normal(0, 1.5, 200)
    predicted[:20] = 2.0  # ties in the predictions too
    scores = regression_scores(gold.tolist(), predicted.tolist())
    assert scores["spearman"] == pytest.approx(spearmanr(gold, predicted).statistic, abs=1e-12)
    assert scores["pearson"] == pytest.approx(pearsonr(gold, predicted).statistic, abs=1e-12)


def test_a_constant_prediction_scores_zero_not_nan():
    scores = regression_scores([1.0, 2.0, 3.0], [2.0, 2.0, 2.0])
    assert scores["pearson"] == 0.0 and scores["spearman"] == 0.0 and scores["mse"] == pytest.approx(2 / 3)


@pytest.mark.skipif(shutil.which("perl") is None, reason="perl is not installed")
def test_pearson_is_the_sts_benchmarks_own_scorer(tmp_path):
    script = DATA_DIR / "stsb" / "correlation.pl"
    gold_file = DATA_DIR / "stsb" / "sts-dev.csv"
    if not script.is_file() or not gold_file.is_file():
        pytest.skip("the STS benchmark files are not in the data directory")
    gold = [float(line.split("\t")[4]) for line in gold_file.read_text(encoding="utf-8").split("\n") if line.strip()]
    rng = np.random.default_rng(1)
    predicted = [g + rng.normal(0, 1.0) for g in gold]
    (tmp_path / "system.txt").write_text("".join(f"{p:.6f}\n" for p in predicted))
    printed = subprocess.run(
        ["perl", str(script), str(gold_file), str(tmp_path / "system.txt")], capture_output=True, text=True, check=True
    ).stdout
    assert printed.startswith("Pearson: ")
    ours = regression_scores(gold, [round(p, 6) for p in predicted])["pearson"]
    assert round(ours, 5) == pytest.approx(float(printed.split()[1]), abs=1e-5)


GOLD = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 0]])
PREDICTED = np.array([[1, 0, 0], [0, 1, 1], [1, 0, 0], [0, 0, 0]])


def test_multi_label_by_hand():
    # per label (TP, FP, FN): a (2, 0, 0) -> F1 1; b (1, 0, 1) -> P 1, R 1/2, F1 2/3; c (0, 1, 1) -> 0
    # micro: TP 3, FP 1, FN 2 -> P 3/4, R 3/5, F1 6/9 = 2/3
    # macro (1 + 2/3 + 0) / 3 = 5/9; weighted by support (2, 2, 1): (2 + 4/3 + 0) / 5 = 2/3
    # subset accuracy: only row 4 (empty, empty) is exact -> 1/4
    # example F1: 2*1/(2+1), 2*1/(1+2), 2*1/(2+1), empty-empty 1 -> (2/3 * 3 + 1) / 4 = 3/4
    # hamming loss: 3 wrong of 12 decisions
    scores = multi_label_scores(GOLD, PREDICTED, ["a", "b", "c"])
    assert scores["micro_precision"] == pytest.approx(3 / 4) and scores["micro_recall"] == pytest.approx(3 / 5)
    assert scores["micro_f1"] == pytest.approx(2 / 3) and scores["macro_f1"] == pytest.approx(5 / 9)
    assert scores["weighted_f1"] == pytest.approx(2 / 3) and scores["subset_accuracy"] == pytest.approx(1 / 4)
    assert scores["example_f1"] == pytest.approx(3 / 4) and scores["hamming_loss"] == pytest.approx(3 / 12)
    assert scores["per_label"]["b"] == {
        "precision": 1.0,
        "recall": 0.5,
        "f1": pytest.approx(2 / 3, abs=1e-6),
        "support": 2,
    }
    assert scores["per_label"]["c"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}


def test_multi_label_agrees_with_scikit_learn_on_random_sets():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(3)
    gold, predicted = rng.integers(0, 2, (300, 7)), rng.integers(0, 2, (300, 7))
    scores = multi_label_scores(gold, predicted, list("abcdefg"))
    for average in ("micro", "macro", "weighted"):
        assert scores[f"{average}_f1"] == pytest.approx(f1_score(gold, predicted, average=average, zero_division=0))
    assert scores["example_f1"] == pytest.approx(f1_score(gold, predicted, average="samples", zero_division=1))


def test_thresholds_decide_and_tune():
    probabilities = np.array([[0.9, 0.3], [0.2, 0.35], [0.6, 0.1]])
    gold = np.array([[1, 1], [0, 1], [1, 0]])
    assert decide(probabilities, 0.5).tolist() == [[1, 0], [0, 0], [1, 0]]
    assert decide(probabilities, [0.5, 0.25]).tolist() == [[1, 1], [0, 1], [1, 0]]
    # every threshold in (0.2, 0.3] gets all four gold labels and no wrong one: micro F1 1; of those
    # the grid's nearest to 0.5 is 0.3 (0.3 >= 0.3 counts)
    tuned = tune_thresholds(gold, probabilities)
    assert tuned == {"threshold": 0.3, "micro_f1": 1.0}
    # per label: label 0 is perfect for any threshold in (0.2, 0.6] -> 0.5 (nearest 0.5); label 1 in (0.1, 0.3] -> 0.3
    per_label = tune_thresholds(gold, probabilities, per_label=True)
    assert per_label["thresholds"] == [0.5, 0.3] and per_label["micro_f1"] == 1.0
    # a label without gold positives keeps 0.5
    assert (
        tune_thresholds(np.array([[1, 0], [0, 0]]), np.array([[0.7, 0.9], [0.1, 0.8]]), per_label=True)["thresholds"][1]
        == 0.5
    )
