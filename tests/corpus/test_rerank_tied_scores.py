"""A regression case: a reranker whose scores tie (bf16 scores often do) reported nDCG@10 by the
evaluation file's row order, higher with the relevant passages listed first than last (0.5353 vs
0.4582 on one model where pytrec_eval gave 0.4977 for both). Now `bertkit eval` gives one number
for both files: trec_eval's tie rule (bertkit/metrics/retrieval.py)."""

from __future__ import annotations

import json
import shutil

import pytest

QUERIES = [
    ("who lives in paris ?", "a. john lives in paris .", ("b. mary visited berlin .", "c. the film was good .")),
    ("what was the film ?", "a. the film was good .", ("b. the city was london .", "c. the plot was bad .")),
]


def rows(relevant_first: bool) -> str:
    lines = []
    for query, good, bad in QUERIES:
        group = [(good, 1), *((p, 0) for p in bad)]
        for passage, label in group if relevant_first else group[::-1]:
            lines.append(json.dumps({"query": query, "passage": passage, "label": label}) + "\n")
    return "".join(lines)


def test_tied_scores_give_one_ndcg_whatever_the_rows_order(tiny_bert, tmp_path, run_cli):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file, save_file

    (tmp_path / "train.jsonl").write_text(rows(True))
    model = tmp_path / "model"
    code, _, err = run_cli(
        "finetune", "rerank", "--data", tmp_path / "train.jsonl", "--model", tiny_bert, "--output", model,
        "--epochs", 1, "--batch-size", 3, "--precision", "no",
    )  # fmt: skip
    assert code == 0, err
    tied = tmp_path / "tied"
    shutil.copytree(model, tied)
    weights = load_file(tied / "model.safetensors")
    head = [k for k in weights if k.startswith("classifier.")]
    assert head, sorted(weights)
    for key in head:  # every pair gets sigmoid(0) = 0.5: every score ties
        weights[key] = torch.zeros_like(weights[key])
    save_file(weights, tied / "model.safetensors", metadata={"format": "pt"})

    results = {}
    for order in ("first", "last"):
        data = tmp_path / f"relevant-{order}.jsonl"
        data.write_text(rows(order == "first"))
        out = tmp_path / f"scores-{order}.json"
        code, _, err = run_cli("eval", tied, "--data", data, "--output", out, "--precision", "no")
        assert code == 0, err
        results[order] = json.loads(out.read_text())["metrics"]
    assert results["first"]["ndcg@10"] == results["last"]["ndcg@10"]
    assert results["first"]["mrr@10"] == results["last"]["mrr@10"]
    # trec_eval: ties by passage text descending, c, b, a: the relevant "a." third -> DCG 1/log2(4) = 0.5
    assert results["first"]["ndcg@10"] == pytest.approx(0.5)
    assert results["first"]["mrr@10"] == pytest.approx(1 / 3)
