"""The reranker's measures come from bertkit/metrics/retrieval.py (trec_eval's measures and tie rule):
the same scores in any row order give the same numbers, ties included; they equal pytrec_eval's
(when installed) and hand-computed trec_eval values on a small tied example."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from bertkit.metrics.retrieval import auc
from bertkit.tasks.rerank import RerankTask, ranking_scores

# (query, passage, label, score): q's three passages tie; r's two last tie; s has a copy of one
# passage (labelled 1 and 0, tied), a grade 2 and a passage outside the top 10 with label 1.
ROWS = [
    ("q", "a cat sat", 1, 0.5),
    ("q", "b dog ran", 0, 0.5),
    ("q", "c bird sang", 0, 0.5),
    ("r", "x film", 2, 0.9),
    ("r", "y movie", 1, 0.7),
    ("r", "z book", 0, 0.7),
    ("s", "same text", 1, 0.25),
    ("s", "same text", 0, 0.25),
    ("s", "graded", 2, 0.3),
    *[("s", f"filler {i:02d}", 0, 0.8 - i / 100) for i in range(10)],
    ("s", "late", 1, 0.1),
    ("t", "only one passage", 1, 0.5),  # one passage: not a ranking, left out
    ("u", "nothing", 0, 0.4),  # nothing relevant: left out
    ("u", "relevant", 0, 0.6),
]


def scores_of(rows):
    examples = [{"query": q, "passage": p, "label": label} for q, p, label, _ in rows]
    return ranking_scores(examples, [score for *_, score in rows])


def test_the_rows_order_never_changes_a_measure_ties_included():
    expected = scores_of(ROWS)
    shuffled = random.Random(0)
    for _ in range(30):
        rows = ROWS[:]
        shuffled.shuffle(rows)
        assert scores_of(rows) == expected  # exactly, not approximately
    assert scores_of(ROWS[::-1]) == expected
    assert expected["queries"] == 3


def test_relevant_first_or_last_among_tied_scores_gives_one_number():
    """The regression: bf16 scores tie; nDCG@10 used to be 1.0 with the relevant passage listed first
    and 0.5 with it listed last (ties kept the file's order)."""
    first = [("q", "a cat sat", 1, 0.5), ("q", "b dog ran", 0, 0.5), ("q", "c bird sang", 0, 0.5)]
    for rows in itertools.permutations(first):
        assert scores_of(rows) == scores_of(first)


def test_a_small_tied_example_by_hand():
    """trec_eval ranks ties by docno (here the passage text) descending.
    q: all three tie -> c (0), b (0), a (1): DCG = 1/log2(4) = 0.5, IDCG = 1 -> nDCG 0.5; RR = 1/3.
    r: x (2) at 0.9, then y and z tie -> z (0), y (1): DCG = 2 + 1/log2(4) = 2.5,
       IDCG = 2 + 1/log2(3) = 2.6309298 -> nDCG 0.9502344; RR = 1.
    mean nDCG@10 = 0.7251172, MRR@10 = 0.6666667."""
    got = scores_of(ROWS[:6])
    assert got["ndcg@10"] == pytest.approx((0.5 + 2.5 / (2 + 1 / np.log2(3))) / 2, abs=1e-12)
    assert got["ndcg@10"] == pytest.approx(0.7251172, abs=1e-7)
    assert got["mrr@10"] == pytest.approx((1 / 3 + 1) / 2, abs=1e-12)


def test_grades_unjudged_ranks_and_the_cut_equal_pytrec_eval():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    kept = [row for row in ROWS if row[0] in ("q", "r", "s")]
    qrels, run = {}, {}
    for q, p, label, score in kept:
        key = p if p != "same text" else f"same text\x00{label}"  # the copies, as bertkit numbers them
        qrels.setdefault(q, {})[key] = label
        run.setdefault(q, {})[key] = score
    full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    cut = {q: dict(sorted(s.items(), key=lambda i: (i[1], i[0]), reverse=True)[:10]) for q, s in run.items()}
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)  # recip_rank has no cut
    ours = scores_of(ROWS)
    assert ours["ndcg@10"] == pytest.approx(np.mean([full[q]["ndcg_cut_10"] for q in qrels]), abs=1e-12)
    assert ours["mrr@10"] == pytest.approx(np.mean([rr[q]["recip_rank"] for q in qrels]), abs=1e-12)
    assert rr["s"]["recip_rank"] == 0.0  # not vacuous: s's relevant passages are all outside its top 10


def test_graded_and_binary_measures_by_hand():
    examples = [{"query": "q", "passage": f"p{i}", "label": g} for i, g in enumerate((0, 2, 1))]
    examples += [{"query": "r", "passage": f"p{i}", "label": g} for i, g in enumerate((1, 0))]
    got = ranking_scores(examples, [0.9, 0.5, 0.1, 0.2, 0.8])
    # q: ranked 0, 2, 1 (gains 0, 2, 1); ideal 2, 1, 0. r: ranked 0, 1 (gains 0, 1)
    ndcg_q = (2 / np.log2(3) + 1 / np.log2(4)) / (2 + 1 / np.log2(3))
    ndcg_r = (1 / np.log2(3)) / 1
    assert got["ndcg@10"] == pytest.approx((ndcg_q + ndcg_r) / 2)
    assert got["mrr@10"] == pytest.approx((1 / 2 + 1 / 2) / 2)
    # positives 0.5, 0.1, 0.2 against negatives 0.9, 0.3: one pair of six ordered right; a tie counts half
    assert auc([False, True, True, True, False], [0.9, 0.5, 0.1, 0.2, 0.3]) == pytest.approx(1 / 6)
    assert auc([False, True], [0.4, 0.4]) == pytest.approx(0.5)


def test_soft_labels_count_as_relevant_above_zero():
    examples = [{"query": "q", "passage": p, "label": g} for p, g in (("a", 0.0), ("b", 0.4), ("c", 0.0))]
    got = ranking_scores(examples, [0.9, 0.5, 0.1])
    assert got["mrr@10"] == pytest.approx(0.5)  # b, second, is relevant: its label is above 0
    assert got["ndcg@10"] == pytest.approx((0.4 / np.log2(3)) / 0.4)


def test_the_task_reports_the_same_metrics_in_any_row_order():
    task = RerankTask(options={"grouped": True})
    examples = [{"query": q, "passage": p, "label": float(label)} for q, p, label, _ in ROWS]
    scores = [score for *_, score in ROWS]
    expected = task.metrics(examples, scores)
    order = list(range(len(ROWS)))
    random.Random(1).shuffle(order)
    assert task.metrics([examples[i] for i in order], [scores[i] for i in order]) == expected
    assert {"ndcg@10", "mrr@10", "auc", "accuracy"} <= set(expected)
