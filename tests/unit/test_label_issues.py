"""bertkit/metrics/label_issues.py is cleanlab, called as it is: its flags, scores and noise
estimates equal cleanlab's own functions on the same probabilities, for one class per row, a set
of classes per row and a tag per word; Datalab's near-duplicates with other labels are found."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cleanlab")  # an extra (bertkit[quality]); make test-min installs none

from bertkit.metrics.label_issues import MULTI, SINGLE, TOKENS, data_issues, label_issues


def noisy_probabilities(rows: int, classes: int, seed: int):
    """Confident probabilities of the true class; 10% of the given labels differ from it."""
    rng = np.random.default_rng(seed)
    true = rng.integers(0, classes, rows)
    probabilities = rng.dirichlet(np.ones(classes) * 0.3, rows) * 0.3
    probabilities[np.arange(rows), true] += 0.7
    given = true.copy()
    flipped = rng.choice(rows, rows // 10, replace=False)
    given[flipped] = (true[flipped] + 1) % classes
    return given, probabilities, set(flipped.tolist())


def test_one_class_per_row_is_cleanlabs_confident_learning():
    from cleanlab.count import estimate_joint
    from cleanlab.filter import find_label_issues
    from cleanlab.rank import get_label_quality_scores

    given, probabilities, flipped = noisy_probabilities(400, 3, 0)
    found = label_issues(SINGLE, given.tolist(), probabilities)
    assert found.flagged.tolist() == find_label_issues(given, probabilities, n_jobs=1).tolist()
    assert found.quality == pytest.approx(get_label_quality_scores(given, probabilities))
    assert found.noise_rate == pytest.approx(1 - np.trace(estimate_joint(given, probabilities)))
    flagged = set(np.flatnonzero(found.flagged).tolist())
    assert len(flagged & flipped) >= 0.8 * len(flipped) and len(flagged - flipped) <= 0.1 * len(flagged)
    assert found.noise_rate == pytest.approx(0.1, abs=0.02)


def test_a_set_of_classes_per_row_is_cleanlabs_multi_label_api():
    from cleanlab.multilabel_classification.filter import find_label_issues
    from cleanlab.multilabel_classification.rank import get_label_quality_scores

    rng = np.random.default_rng(1)
    truth = rng.random((300, 4)) < 0.3
    probabilities = np.where(truth, 0.9, 0.1) + rng.normal(0, 0.03, truth.shape)
    given_matrix = truth.copy()
    given_matrix[:20, 0] = ~given_matrix[:20, 0]  # 20 rows with one wrong label
    given = [np.flatnonzero(row).tolist() for row in given_matrix]
    found = label_issues(MULTI, given, np.clip(probabilities, 0.01, 0.99))
    assert found.flagged.tolist() == find_label_issues(given, np.clip(probabilities, 0.01, 0.99), n_jobs=1).tolist()
    assert found.quality == pytest.approx(get_label_quality_scores(given, np.clip(probabilities, 0.01, 0.99)))
    assert found.flagged[:20].sum() >= 14 and found.flagged[20:].sum() <= 4


def test_a_tag_per_word_is_cleanlabs_token_classification_api():
    from cleanlab.token_classification.filter import find_label_issues
    from cleanlab.token_classification.rank import get_label_quality_scores

    rng = np.random.default_rng(2)
    labels, probabilities = [], []
    for _ in range(60):
        words = int(rng.integers(3, 9))
        tags = rng.integers(0, 3, words)
        p = np.full((words, 3), 0.05)
        p[np.arange(words), tags] = 0.9
        labels.append(tags.tolist())
        probabilities.append(p)
    labels[7][1] = (labels[7][1] + 1) % 3  # one wrong tag
    found = label_issues(TOKENS, labels, probabilities)
    assert sorted((s, w) for s, words in found.words.items() for w in words) == sorted(
        find_label_issues(labels, probabilities, n_jobs=1)
    )
    assert found.quality == pytest.approx(get_label_quality_scores(labels, probabilities)[0])
    assert found.words == {7: [1]} and np.flatnonzero(found.flagged).tolist() == [7]


def test_datalab_reports_near_duplicates_with_other_labels_and_outliers():
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(200, 8))
    vectors[11] = vectors[10] + 1e-6  # the same row twice, labelled differently
    vectors[21] = vectors[20] + 1e-6  # twice, the same label: not a label problem
    labels = ["a" if i % 2 else "b" for i in range(200)]
    labels[20] = labels[21]
    found = data_issues(vectors, labels)
    assert [10, 11] in found["near_duplicates"] and [20, 21] not in found["near_duplicates"]
    assert isinstance(found["outliers"], list)
    assert found["skipped"] == {}


@pytest.mark.parametrize("rows", [2, 4, 8])
def test_datalab_on_fewer_rows_than_its_ten_neighbours_still_runs_both_checks(rows):
    """Datalab's k (10) must be below the number of rows, else its checks fail and get_issues raises."""
    rng = np.random.default_rng(rows)
    vectors = rng.normal(size=(rows, 8))
    vectors[1] = vectors[0] + 1e-6  # a near-duplicate with another label
    found = data_issues(vectors, ["a" if i % 2 else "b" for i in range(rows)])
    assert found["skipped"] == {} and [0, 1] in found["near_duplicates"]
    assert all(0 <= row < rows for row in found["outliers"])


def test_one_row_has_no_neighbour_and_both_checks_are_skipped_with_the_reason():
    found = data_issues(np.ones((1, 8)), ["a"])
    assert found["near_duplicates"] is None and found["outliers"] is None
    assert set(found["skipped"]) == {"near_duplicate", "outlier"}
    assert "1 row(s)" in found["skipped"]["outlier"] and "at least 2" in found["skipped"]["outlier"]
