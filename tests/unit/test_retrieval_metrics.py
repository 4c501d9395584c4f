"""Retrieval measures equal trec_eval's (pytrec_eval) on a hand-made qrels/run pair with graded
judgements, ties, unjudged passages and a query without relevant passages; the run file read back
ranks as the measures did; the running top-k equals a full sort of the whole matrix."""

from __future__ import annotations

import numpy as np
import pytest

from bertkit.data.beir import read_run, run_lines
from bertkit.decoding.ranking import RunningTopK, top_k_of_matrix
from bertkit.metrics.retrieval import MEASURES, ranked, retrieval_metrics

QRELS = {
    "q1": {"d1": 1, "d2": 2, "d5": 0, "d9": 1},
    "q2": {"d3": 1},
    "q3": {"d4": 2, "d6": 1, "d7": 1},
    "q4": {"d8": 0},  # judged, nothing relevant
}
RUN = {
    # d1, d2, d3 tie: trec_eval reads them d3, d2, d1; d4 and d10 are unjudged for q1
    "q1": {"d1": 1.0, "d2": 1.0, "d3": 1.0, "d4": 0.5, "d10": 0.25, "d5": 0.2},
    "q2": {f"x{i:02d}": 1 - i / 100 for i in range(15)} | {"d3": 0.5},  # rank 16: outside the MRR cut
    "q3": {"d7": 0.9, "d6": 0.9, "d0": 0.95, "d4": 0.1},
    "q4": {"d8": 3.0, "d1": 2.0},
}


def test_measures_equal_pytrec_eval_on_ties_unjudged_and_grades(tmp_path):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    path = tmp_path / "run-test.trec"
    path.write_text("".join(run_lines(RUN, "bertkit")))
    run = read_run(path)  # what trec_eval reads: the file
    ours = retrieval_metrics(QRELS, {q: [p for p, _ in ranked(scores)] for q, scores in run.items()})
    full = pytrec_eval.RelevanceEvaluator(QRELS, {"ndcg_cut.10", "map_cut.100", "recall.1,10,100"}).evaluate(run)
    cut = {q: dict(ranked(scores)[:10]) for q, scores in run.items()}  # recip_rank has no cut: cut the run
    mrr = pytrec_eval.RelevanceEvaluator(QRELS, {"recip_rank"}).evaluate(cut)
    names = {"ndcg@10": "ndcg_cut_10", "map@100": "map_cut_100", "recall@1": "recall_1", "recall@10": "recall_10"}
    names["recall@100"] = "recall_100"
    for ours_name, theirs in names.items():
        expected = np.mean([full[q][theirs] for q in QRELS])
        assert ours[ours_name] == pytest.approx(expected, abs=1e-12), ours_name
    assert ours["mrr@10"] == pytest.approx(np.mean([mrr[q]["recip_rank"] for q in QRELS]), abs=1e-12)
    assert set(ours) == set(MEASURES)
    # the cases are not vacuous: the tie decides q1's first hit, the cut q2's reciprocal rank
    assert full["q1"]["recall_1"] == 0.0  # d3 (unjudged) first of the three tied
    assert mrr["q2"]["recip_rank"] == 0.0 and full["q2"]["recall_100"] == 1.0


def test_the_run_file_orders_ties_by_id_descending_and_keeps_float32_scores(tmp_path):
    scores = np.float32([0.1, np.nextafter(np.float32(0.1), np.float32(1)), 0.1])
    run = {"q": {"a": float(scores[0]), "b": float(scores[1]), "c": float(scores[2])}}
    path = tmp_path / "run.trec"
    path.write_text("".join(run_lines(run, "t")))
    lines = path.read_text().splitlines()
    assert [line.split()[2] for line in lines] == ["b", "c", "a"]
    assert [line.split()[3] for line in lines] == ["1", "2", "3"]
    back = read_run(path)["q"]
    assert {k: np.float32(v) for k, v in back.items()} == {k: np.float32(v) for k, v in run["q"].items()}


@pytest.mark.parametrize("block", [1, 3, 7, 50])
def test_running_top_k_equals_the_whole_matrix_sorted(block):
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(9, 40)).astype(np.float32)
    scores[:, 10:20] = np.round(scores[:, 10:20], 1)  # many exact ties, some across blocks
    scores[2] = 0.5  # a row of ties only
    top = RunningTopK(9, 12)
    for start in range(0, 40, block):
        top.add(scores[:, start : start + block])
    positions, kept = top.result()
    expected_positions, expected_scores = top_k_of_matrix(scores, 12)
    np.testing.assert_array_equal(positions, expected_positions)
    np.testing.assert_array_equal(kept, expected_scores)
    assert list(positions[2]) == list(range(12))


def test_running_top_k_with_fewer_passages_than_k_keeps_them_all():
    top = RunningTopK(2, 10)
    top.add(np.float32([[0.1, 0.3], [0.2, np.nan]]))
    top.add(np.float32([[0.2], [0.4]]))
    positions, scores = top.result()
    assert positions.tolist() == [[1, 2, 0], [2, 0, 1]]
    assert scores[1, 2] == -np.inf  # a NaN score ranks last
