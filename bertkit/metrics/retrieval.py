"""Retrieval measures as trec_eval computes them (pytrec_eval is the reference in the tests).

Every measure reads a query's passages in trec_eval's order (score descending, ties broken by the
passage id descending: ``ranked``, which the run files of bertkit.data.beir follow too), counts a
passage relevant when its grade is >= 1 (trec_eval's -l 1; an unjudged passage is not relevant) and
averages over the queries of the qrels:

- ``ndcg@10``: trec_eval's ndcg_cut.10, gain = the grade, discount log2(rank + 1), the ideal ranking
  built from every judged passage of the query;
- ``mrr@10``: trec_eval's recip_rank on the run cut to its first 10 passages;
- ``map@100``: map_cut.100, the precision at each relevant passage in the first 100, over all the
  query's relevant passages;
- ``recall@k``: recall.k, relevant passages in the first k over all the query's relevant passages
  (0 for a query with none).

The reranker (bertkit/tasks/rerank.py) scores its query,passage,label rows here too
(``reranking_metrics``), and its AUC is ``auc``: one home per measure, one tie rule.
"""

from __future__ import annotations

import math

import numpy as np

MEASURES = ("ndcg@10", "mrr@10", "map@100", "recall@1", "recall@10", "recall@100")
MAIN = "ndcg@10"


def ranked(scores: dict[str, float]) -> list[tuple[str, float]]:
    """A query's passages in trec_eval's order: score descending, ties by passage id descending."""
    return sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)


def query_measures(judged: dict[str, float], order: list[str], level: float = 1) -> dict[str, float]:
    """The measures of one query: ``judged`` its qrels (passage -> grade), ``order`` its passages
    ranked; a passage is relevant when its grade is >= ``level`` (trec_eval's -l)."""
    relevant = {p for p, grade in judged.items() if grade >= level}
    hits = [p in relevant for p in order]
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:10]
    idcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal))
    dcg = sum(max(judged.get(p, 0), 0) / math.log2(rank + 2) for rank, p in enumerate(order[:10]))
    first = next((rank for rank, hit in enumerate(hits[:10]) if hit), None)
    found, precision_sum = 0, 0.0
    for rank, hit in enumerate(hits[:100]):
        if hit:
            found += 1
            precision_sum += found / (rank + 1)
    total = len(relevant)
    return {
        "ndcg@10": dcg / idcg if idcg else 0.0,
        "mrr@10": 1.0 / (first + 1) if first is not None else 0.0,
        "map@100": precision_sum / total if total else 0.0,
        **{f"recall@{k}": sum(hits[:k]) / total if total else 0.0 for k in (1, 10, 100)},
    }


def retrieval_metrics(qrels: dict[str, dict[str, int]], run: dict[str, list[str]]) -> dict[str, float]:
    """The mean of every measure over the queries of ``qrels``; ``run``: query -> passages ranked
    (a judged query the run lacks scores 0, as trec_eval -c would have it; bertkit searches every one)."""
    per_query = [query_measures(judged, run.get(query, [])) for query, judged in qrels.items()]
    return {name: sum(q[name] for q in per_query) / len(per_query) for name in MEASURES}


def reranking_metrics(
    qrels: dict[str, dict[str, float]], run: dict[str, dict[str, float]], level: float = 1
) -> dict[str, float]:
    """A reranker's nDCG@10 and MRR@10: ``run`` the scores of each query's judged passages, ranked
    by ``ranked`` (so rows in another order give the same numbers, ties included), averaged over
    the queries of ``qrels``; ``level``: the grade a relevant passage has at least."""
    per_query = [query_measures(judged, [p for p, _ in ranked(run[q])], level) for q, judged in qrels.items()]
    return {name: float(np.mean([m[name] for m in per_query])) for name in ("ndcg@10", "mrr@10")}


def auc(relevant: list[bool], scores: list[float]) -> float:
    """The area under the ROC curve: the Mann-Whitney statistic over average ranks (ties count half,
    so the rows' order never matters)."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    values = np.asarray(scores)[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and values[end + 1] == values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    positives = np.asarray(relevant)
    n_pos, n_neg = positives.sum(), (~positives).sum()
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
