"""Temperature scaling, ECE, Brier and split-conformal sets (bertkit/metrics/calibration.py), each
checked against an independent computation: scikit-learn's calibration_curve, brier_score_loss and
temperature method, crepes' conformal classifier, and the temperature that made synthetic logits."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from bertkit.metrics import calibration as cal

pytestmark = pytest.mark.unit


def synthetic(rows: int, classes: int, temperature: float, seed: int):
    """(logits, gold): gold drawn from softmax(true logits), the logits shown ``temperature`` times
    sharper, so the temperature that calibrates them is ``temperature``."""
    rng = np.random.default_rng(seed)
    true = rng.normal(0.0, 2.0, size=(rows, classes))
    p = cal.scaled(true, 1.0)
    gold = np.array([rng.choice(classes, p=row) for row in p])
    return true * temperature, gold


def test_a_fitted_temperature_recovers_the_one_that_made_over_confident_logits():
    logits, gold = synthetic(20_000, 4, 2.5, seed=0)
    fitted = cal.fit_temperature(logits, gold)
    assert fitted == pytest.approx(2.5, rel=0.04)
    assert cal.nll(logits, gold, fitted) < cal.nll(logits, gold, 1.0) - 0.05


def test_a_shift_per_row_fits_the_same_temperature_as_the_logits():
    logits, gold = synthetic(2_000, 3, 1.7, seed=1)
    shifted = cal.log_softmax(logits) + np.random.default_rng(2).normal(size=(2_000, 1)) * 5
    assert cal.fit_temperature(shifted, gold) == pytest.approx(cal.fit_temperature(logits, gold), rel=1e-5)


def test_the_temperature_is_scikit_learns_temperature_method_on_the_same_logits():
    if not hasattr(__import__("sklearn.calibration").calibration, "_TemperatureScaling"):
        pytest.skip("scikit-learn < 1.8 has no temperature method (make test-min runs at its floor, 1.6)")
    from sklearn.base import BaseEstimator, ClassifierMixin
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.frozen import FrozenEstimator

    class Logits(ClassifierMixin, BaseEstimator):  # a classifier whose decision_function is its input
        def fit(self, x, y):
            self.classes_ = np.arange(x.shape[1])
            return self

        def decision_function(self, x):
            return np.asarray(x)

        def predict(self, x):
            return np.asarray(x).argmax(1)

    logits, gold = synthetic(3_000, 3, 0.6, seed=3)  # under-confident too
    calibrated = CalibratedClassifierCV(
        FrozenEstimator(Logits().fit(logits, gold)), method="temperature", ensemble=False
    )
    calibrated.fit(logits, gold)
    theirs = 1.0 / float(calibrated.calibrated_classifiers_[0].calibrators[0].beta_)
    assert cal.fit_temperature(logits, gold) == pytest.approx(theirs, rel=1e-4)
    np.testing.assert_allclose(
        cal.scaled(logits, cal.fit_temperature(logits, gold)), calibrated.predict_proba(logits), atol=1e-5
    )


def test_scaling_never_changes_the_argmax():
    logits, _ = synthetic(500, 5, 1.0, seed=4)
    for temperature in (0.1, 0.5, 3.0, 50.0):
        assert (cal.scaled(logits, temperature).argmax(1) == logits.argmax(1)).all()


def test_ece_is_the_binned_gap_of_scikit_learns_calibration_curve():
    from sklearn.calibration import calibration_curve

    logits, gold = synthetic(5_000, 2, 3.0, seed=5)
    p = cal.scaled(logits, 1.0)
    top, correct = p.max(1), (p.argmax(1) == gold).astype(int)
    accuracy, confidence = calibration_curve(correct, top, n_bins=15, strategy="uniform")
    # calibration_curve's bins are [lo, hi) by np.searchsorted(edges[1:-1], p, side="right"); ours
    # (lo, hi]: the same bins for continuous probabilities; counts as it counts them
    edges = np.linspace(0, 1, 16)
    counts = np.bincount(np.searchsorted(edges[1:-1], top, side="right"), minlength=15)
    counts = counts[counts > 0]
    theirs = float((counts / counts.sum() * np.abs(accuracy - confidence)).sum())
    assert cal.expected_calibration_error(p, gold) == pytest.approx(theirs, abs=1e-9)
    assert cal.expected_calibration_error(p, gold) > 0.05  # over-confident by 3x: clearly off


def test_ece_by_hand_on_four_rows():
    p = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.45, 0.55]])
    gold = np.array([0, 1, 1, 0])
    # bins: 0.9 -> (13/15, 14/15]; 0.8 -> (11/15, 12/15]; 0.7 -> (10/15, 11/15]; 0.55 -> (8/15, 9/15]
    expected = (abs(1 - 0.9) + abs(0 - 0.8) + abs(1 - 0.7) + abs(0 - 0.55)) / 4
    assert cal.expected_calibration_error(p, gold) == pytest.approx(expected)


def test_brier_is_twice_scikit_learns_binary_brier_and_its_multiclass_form():
    from sklearn.metrics import brier_score_loss

    logits, gold = synthetic(1_000, 2, 2.0, seed=6)
    p = cal.scaled(logits, 1.0)
    assert cal.brier_score(p, gold) == pytest.approx(2 * brier_score_loss(gold, p[:, 1]))
    logits, gold = synthetic(1_000, 4, 2.0, seed=7)
    p = cal.scaled(logits, 1.0)
    if "scale_by_half" not in inspect.signature(brier_score_loss).parameters:
        pytest.skip("scikit-learn < 1.7 has no multiclass Brier score (make test-min runs at its floor, 1.6)")
    assert cal.brier_score(p, gold) == pytest.approx(brier_score_loss(gold, p, scale_by_half=False))


def test_temperature_scaling_lowers_ece_and_brier_on_held_out_rows():
    logits, gold = synthetic(6_000, 3, 2.5, seed=8)
    fitted = cal.fit_temperature(logits[:3000], gold[:3000])
    before = cal.calibration_scores(cal.scaled(logits[3000:], 1.0), gold[3000:])
    after = cal.calibration_scores(cal.scaled(logits[3000:], fitted), gold[3000:])
    assert after["ece"] < before["ece"] / 3 and after["brier"] < before["brier"]
    assert after["accuracy"] == before["accuracy"]


def test_the_conformal_quantile_is_the_n_plus_one_corrected_rank():
    scores = np.arange(1, 11) / 10.0  # n = 10
    assert cal.conformal_quantile(scores, 0.9) == pytest.approx(1.0)  # ceil(11 * 0.9) = 10th
    assert cal.conformal_quantile(scores, 0.8) == pytest.approx(0.9)  # ceil(8.8) = 9th
    assert cal.conformal_quantile(scores, 0.95) == float("inf")  # ceil(10.45) = 11 > n: every label


@pytest.mark.parametrize("coverage", [0.8, 0.9, 0.95])
def test_conformal_sets_cover_held_out_rows_and_equal_crepes_unsmoothed_sets(coverage):
    logits, gold = synthetic(4_000, 5, 1.5, seed=9)
    p = cal.scaled(logits, 1.0)
    scores = cal.nonconformity(p[:1000], gold[:1000])
    sets = cal.prediction_sets(p[1000:], cal.conformal_quantile(scores, coverage))
    summary = cal.set_summary(sets, gold[1000:])
    # coverage >= target up to the binomial error of 3,000 rows (3 standard errors)
    assert summary["coverage"] >= coverage - 3 * np.sqrt(coverage * (1 - coverage) / 3000)
    assert summary["coverage"] <= coverage + 0.03  # and not by the trivial full set
    assert 1 <= summary["mean_set_size"] < 5
    crepes = pytest.importorskip("crepes")  # an extra (bertkit[quality]); make test-min installs none
    theirs = crepes.ConformalClassifier().fit(scores).predict_set(1.0 - p[1000:], confidence=coverage, smoothing=False)
    assert (theirs == sets).all()


def test_set_summary_counts_empty_and_full_sets():
    sets = np.array([[0, 0, 0], [1, 1, 1], [1, 0, 0], [1, 1, 0]])
    summary = cal.set_summary(sets, np.array([0, 1, 1, 1]))
    assert summary == {"rows": 4, "mean_set_size": 1.5, "empty_rate": 0.25, "full_rate": 0.25, "coverage": 0.5}


def test_reliability_bins_hold_every_row_once_and_zero_falls_in_the_first():
    p = np.array([[1.0, 0.0], [0.5, 0.5], [0.6, 0.4]])
    table = cal.reliability(p, [0, 1, 0])
    assert sum(row["count"] for row in table) == 3
    assert table[-1]["upper"] == 1.0 and table[-1]["count"] == 1


def test_for_two_labels_the_sets_do_not_depend_on_the_temperature():
    """docs/calibration.md: fitting T on the rows whose scores are stored bends nothing for two
    labels, since 1 - p(gold) keeps the margin's order at any T."""
    logits, gold = synthetic(3_000, 2, 2.0, seed=10)
    sets = []
    for temperature in (1.0, 0.4, 3.0):
        p = cal.scaled(logits, temperature)
        quantile = cal.conformal_quantile(cal.nonconformity(p[:1000], gold[:1000]), 0.9)
        sets.append(cal.prediction_sets(p[1000:], quantile))
    assert (sets[0] == sets[1]).all() and (sets[0] == sets[2]).all()


def test_a_fit_on_rows_the_model_gets_all_right_warns_and_an_ordinary_fit_does_not():
    """Its own training rows, most often: the NLL falls as T does, so the fit sharpens toward 0/1."""
    from bertkit.metrics.calibration import calibration_record

    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, 200)
    right = np.where(gold[:, None] == np.arange(2), 0.8, 0.2)  # every row right, at 0.8
    record = calibration_record(right, gold)
    assert record["temperature"] < 0.1 and "predicts every calibration row right" in record["warnings"][0]
    noisy = right.copy()
    noisy[:40] = noisy[:40, ::-1]  # 40 rows wrong: an ordinary over-confident model
    assert calibration_record(noisy, gold)["warnings"] == []


def test_multi_label_sets_hold_every_gold_label_at_the_rate_asked():
    rng = np.random.default_rng(11)
    rows, labels = 6_000, 6
    truth = rng.random((rows, labels)) < 0.25  # each label on a quarter of the rows, some rows with none
    p = np.clip(np.where(truth, rng.beta(5, 2, truth.shape), rng.beta(2, 5, truth.shape)), 1e-6, 1 - 1e-6)
    gold = [np.flatnonzero(t).tolist() for t in truth]
    scores = cal.set_nonconformity(p[:2000], gold[:2000])
    # the score is the largest 1 - p over the gold labels: a row's set holds them all exactly when it is <= q
    by_hand = [max((1 - p[row, g] for g in gold[row]), default=0.0) for row in range(2000)]
    np.testing.assert_array_equal(scores, np.sort(by_hand))
    assert scores[0] == 0.0  # a row with no gold label is covered by any set
    for coverage in (0.8, 0.9):
        sets = cal.prediction_sets(p[2000:], cal.conformal_quantile(scores, coverage))
        covered = np.mean([all(s[g] for g in labels_) for s, labels_ in zip(sets, gold[2000:])])
        assert coverage - 3 * np.sqrt(coverage * (1 - coverage) / 4000) <= covered <= coverage + 0.03
        # a label-by-label view (each true label covered at the rate) would be weaker: the joint one is asked
        assert np.mean([s[g] for s, labels_ in zip(sets, gold[2000:]) for g in labels_]) >= covered
