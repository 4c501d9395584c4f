"""Entity-level scores for token tagging, checked against counts worked out by hand."""

from __future__ import annotations

import random

import pytest
from seqeval.metrics import f1_score, precision_score, recall_score

from bertkit.errors import BertkitError
from bertkit.metrics.tagging import tagging_scores

GOLD = [
    ["B-PER", "I-PER", "O", "B-LOC", "O"],  # PER[0:2], LOC[3:4]
    ["B-ORG", "I-ORG", "I-ORG", "O", "B-MISC"],  # ORG[0:3], MISC[4:5]
    ["O", "O"],
]
PRED = [
    ["B-PER", "I-PER", "O", "B-ORG", "O"],  # PER[0:2] right; ORG[3:4] wrong type
    ["B-ORG", "I-ORG", "O", "O", "B-MISC"],  # ORG[0:2] wrong end; MISC[4:5] right
    ["B-LOC", "O"],  # LOC[0:1] spurious
]


def test_scores_by_hand():
    scores = tagging_scores(GOLD, PRED)
    # 4 gold entities, 5 predicted, 2 correct (PER, MISC):
    # precision 2/5 = 0.4, recall 2/4 = 0.5, f1 = 2 * 0.4 * 0.5 / 0.9 = 4/9.
    assert scores["precision"] == pytest.approx(0.4)
    assert scores["recall"] == pytest.approx(0.5)
    assert scores["f1"] == pytest.approx(4 / 9)
    # 12 tokens; wrong: B-ORG for B-LOC, O for I-ORG, B-LOC for O -> 9/12.
    assert scores["token_accuracy"] == pytest.approx(0.75)
    assert scores["per_type"] == {
        "PER": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1},
        "MISC": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1},
        # LOC: 1 gold, 1 predicted (the spurious one), 0 correct.
        "LOC": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1},
        # ORG: 1 gold, 2 predicted, 0 correct.
        "ORG": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1},
    }


def test_results_are_plain_python_numbers():
    scores = tagging_scores(GOLD, PRED, strict=True)
    for key in ("precision", "recall", "f1", "token_accuracy"):
        assert type(scores[key]) is float
    for row in scores["per_type"].values():
        assert [type(row[k]) for k in ("precision", "recall", "f1", "support")] == [
            float, float, float, int,
        ]  # fmt: skip


def test_strict_and_default_differ_on_a_prediction_starting_with_inside():
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]  # PER[0:2], LOC[3:4]
    pred = [["I-PER", "I-PER", "O", "B-LOC"]]

    # Default: the orphan I-PER is repaired to B-PER (conlleval's reading) -> 2 of 2 right.
    default = tagging_scores(gold, pred)
    assert (default["precision"], default["recall"], default["f1"]) == (1.0, 1.0, 1.0)

    # Strict IOB2: an entity must start with B-, so only LOC is predicted. precision 1/1,
    # recall 1/2, f1 = 2 * 1 * 0.5 / 1.5 = 2/3; PER has no prediction left.
    strict = tagging_scores(gold, pred, strict=True)
    assert strict["precision"] == pytest.approx(1.0)
    assert strict["recall"] == pytest.approx(0.5)
    assert strict["f1"] == pytest.approx(2 / 3)
    assert strict["per_type"]["PER"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}

    # Token accuracy counts the tags predict writes (repaired, as conlleval on its output would) in
    # both modes: B-PER I-PER O B-LOC -> 4/4.
    assert default["token_accuracy"] == strict["token_accuracy"] == 1.0


def test_strict_drops_an_inside_tag_that_changes_type():
    gold = [["B-PER", "B-LOC"]]
    pred = [["B-PER", "I-LOC"]]
    assert tagging_scores(gold, pred)["f1"] == 1.0  # default: PER, then LOC
    # Strict: PER only -> precision 1/1, recall 1/2, f1 2/3.
    assert tagging_scores(gold, pred, strict=True)["f1"] == pytest.approx(2 / 3)


def test_iob1_gold_is_converted_so_strict_mode_keeps_its_entities():
    gold = [["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]]  # IOB1: PER[0:2], LOC[3:4], LOC[4:5]
    pred = [["B-PER", "I-PER", "O", "B-LOC", "B-LOC"]]
    assert tagging_scores(gold, pred, strict=True)["f1"] == 1.0


def test_default_mode_matches_seqeval_conlleval_mode_on_raw_predictions():
    # Repairing must not change what conlleval would report; check on random tag soup.
    rng = random.Random(13)
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG"]
    gold = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(200)]
    gold = [["B" + t[1:] if t.startswith("I") and (i == 0 or s[i - 1][2:] != t[2:]) else t
             for i, t in enumerate(s)] for s in gold]  # fmt: skip
    pred = [[rng.choice(tags) for _ in sentence] for sentence in gold]
    scores = tagging_scores(gold, pred)
    assert scores["precision"] == pytest.approx(precision_score(gold, pred))
    assert scores["recall"] == pytest.approx(recall_score(gold, pred))
    assert scores["f1"] == pytest.approx(f1_score(gold, pred))


def test_no_entities_anywhere_scores_zero_without_warnings(recwarn):
    scores = tagging_scores([["O", "O"]], [["O", "O"]], strict=True)
    assert scores == {
        "precision": 0.0, "recall": 0.0, "f1": 0.0, "token_accuracy": 1.0, "per_type": {},
    }  # fmt: skip
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_misaligned_input_is_a_caller_bug():
    with pytest.raises(ValueError, match="2 gold sentences but 1 predicted"):
        tagging_scores([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="sentence 1: 2 gold tags but 1 predicted"):
        tagging_scores([["O"], ["O", "O"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match="no sentences"):
        tagging_scores([], [])


def test_non_bio_prediction_is_reported():
    with pytest.raises(BertkitError, match="predicted tags: sentence 1, token 2"):
        tagging_scores([["O", "B-PER"]], [["O", "S-PER"]])
