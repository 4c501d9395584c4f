"""The contrastive pairs of --recipe setfit (bertkit/tasks/few_shot.py), torch-free: how many, how
balanced, never a row with itself, one list per seed; and the checks of the labelled rows."""

from __future__ import annotations

from collections import Counter

import pytest

from bertkit.errors import BertkitError
from bertkit.tasks.few_shot import check_problem_type, check_rows, contrastive_pairs, recipe_of

LABELS = ["pos", "neg", "pos", "neu", "neg", "pos", "neu", "neg", "pos"]


@pytest.mark.parametrize("per_row", [1, 2, 5, 8, 20])
def test_every_row_anchors_its_pairs_half_positive_half_negative(per_row):
    pairs = contrastive_pairs(LABELS, per_row, seed=3)
    assert len(pairs) == per_row * len(LABELS)
    anchored = Counter(p.first for p in pairs)
    assert set(anchored.values()) == {per_row}
    for row in range(len(LABELS)):
        mine = [p for p in pairs if p.first == row]
        assert sum(p.similarity == 1.0 for p in mine) == (per_row + 1) // 2
        assert sum(p.similarity == 0.0 for p in mine) == per_row // 2


def test_targets_say_whether_the_labels_match_and_no_row_meets_itself():
    pairs = contrastive_pairs(LABELS, 12, seed=0)
    assert all(p.first != p.second for p in pairs)
    for p in pairs:
        assert p.similarity == (1.0 if LABELS[p.first] == LABELS[p.second] else 0.0)


def test_partners_are_spread_before_any_repeats():
    # row 0 ("pos") has 3 other "pos" rows: 6 positives take each of them exactly twice
    pairs = [p for p in contrastive_pairs(LABELS, 12, seed=1) if p.first == 0 and p.similarity == 1.0]
    assert Counter(p.second for p in pairs) == {2: 2, 5: 2, 8: 2}


def test_the_same_seed_gives_the_same_pairs_another_seed_others():
    assert contrastive_pairs(LABELS, 6, seed=7) == contrastive_pairs(LABELS, 6, seed=7)
    assert contrastive_pairs(LABELS, 6, seed=7) != contrastive_pairs(LABELS, 6, seed=8)


def test_two_rows_per_label_is_enough():
    pairs = contrastive_pairs(["a", "a", "b", "b"], 4, seed=0)
    assert {(p.first, p.second) for p in pairs if p.similarity == 1.0} == {(0, 1), (1, 0), (2, 3), (3, 2)}


@pytest.mark.parametrize(
    "labels, fragment",
    [
        (["a", "a", "a"], "at least 2 labels; the training data has only 'a'"),
        (["a", "a", "b"], "at least 2 rows of every label (a positive pair); 'b' has 1"),
        (["a", "b", "c", "c"], "'a', 'b' have 1"),
    ],
)
def test_rows_that_cannot_make_pairs_are_refused(labels, fragment):
    with pytest.raises(BertkitError) as caught:
        check_rows(labels, sorted(set(labels)))
    assert fragment in caught.value.message


def test_options_are_checked():
    assert recipe_of({}) == "finetune" and recipe_of({"recipe": "SetFit", "pairs_per_example": 1}) == "setfit"
    for options, fragment in [
        ({"recipe": "contrastive"}, "unknown --recipe"),
        ({"recipe": "setfit", "pairs_per_example": 0}, "at least 1"),
        ({"pairs_per_example": 4}, "only with --recipe setfit"),
    ]:
        with pytest.raises(BertkitError) as caught:
            recipe_of(options)
        assert fragment in caught.value.message
    check_problem_type(None)
    check_problem_type("single-label")
    with pytest.raises(BertkitError):
        check_problem_type("regression")
