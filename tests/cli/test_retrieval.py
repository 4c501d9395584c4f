"""Retrieval end to end on the tiny random BERT: `eval --data BEIR_DIR` writes a run file whose
trec_eval scores are the ones it printed; the corpus streamed in chunks gives the search of the whole
matrix; a one-logit cross-encoder reranks the top passages."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bertkit.options import EmbeddingOptions, InferenceOptions

PASSAGES = [
    ("p0", "paris", "john lives in paris"),
    ("p1", "berlin", "mary visited berlin"),
    ("p2", "", "the film was good"),
    ("p3", "", "the plot was bad"),
    ("p4", "london", "he works in london"),
    ("p5", "", "the acting was awful"),
    ("p6", "google", "google is a company"),
]
QUERIES = {"q1": "who lives in paris", "q2": "what did mary visit", "q3": "was the film good", "q4": "what is google"}
QRELS = [("q1", "p0", 1), ("q2", "p1", 2), ("q2", "p4", 1), ("q3", "p2", 1), ("q4", "p6", 1), ("q4", "p9", 0)]


def write_beir(root: Path, qrels=QRELS, passages=PASSAGES + [("p9", "", "the story was fine")]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in passages)
    )
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()))
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in qrels)
    )
    return root


def build_reranker(directory: Path, tiny: Path) -> Path:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    config = BertConfig.from_pretrained(tiny, num_labels=1)
    torch.manual_seed(1)
    BertForSequenceClassification(config).save_pretrained(directory)
    AutoTokenizer.from_pretrained(tiny).save_pretrained(directory)
    return directory


def test_eval_on_a_beir_directory_writes_a_run_trec_eval_scores_alike(tmp_path, tiny_bert, run_cli):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    beir = write_beir(tmp_path / "mini")
    code, out, err = run_cli("eval", tiny_bert, "--data", beir, "--output", tmp_path / "scores.json")
    assert code == 0, err
    report = json.loads((tmp_path / "scores.json").read_text())
    run_file = tmp_path / "run-scores.trec"  # named after --output scores.json
    assert report["run_written_to"] == str(run_file) and "ndcg@10" in out and str(run_file) in out
    lines = run_file.read_text().splitlines()
    assert len(lines) == 4 * len(PASSAGES + [None])  # every query ranks the whole (small) corpus
    run: dict = {}
    for line in lines:
        query, _, passage, _, score, _ = line.split()
        run.setdefault(query, {})[passage] = float(score)
    qrels: dict = {}
    for query, passage, grade in QRELS:
        qrels.setdefault(query, {})[passage] = grade
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.1"}).evaluate(run)
    assert report["metrics"]["ndcg@10"] == pytest.approx(np.mean([t["ndcg_cut_10"] for t in theirs.values()]), abs=1e-6)
    assert report["metrics"]["recall@1"] == pytest.approx(np.mean([t["recall_1"] for t in theirs.values()]), abs=1e-6)
    assert report["queries"] == 4 and report["corpus"] == 8


def test_the_corpus_streamed_in_chunks_equals_the_whole_matrix(tmp_path, tiny_bert):
    from bertkit.api.embedder import Embedder
    from bertkit.api.retrieval import search
    from bertkit.data.beir import corpus_rows
    from bertkit.decoding.ranking import top_k_of_matrix

    beir = write_beir(tmp_path / "mini")
    embedder = Embedder(str(tiny_bert), EmbeddingOptions(precision="no"))
    queries = list(QUERIES.values())
    streamed = search(embedder, queries, beir / "corpus.jsonl", 5, "dot", corpus_chunk=2)
    texts = [text for _, text in corpus_rows(beir / "corpus.jsonl")]
    whole = embedder.vectors(queries) @ embedder.vectors(texts).T
    positions, scores = top_k_of_matrix(whole, 5)
    np.testing.assert_array_equal(streamed[0], positions)
    np.testing.assert_allclose(streamed[1], scores, rtol=1e-5, atol=1e-6)


def test_a_one_logit_cross_encoder_reranks_the_top_passages(tmp_path, tiny_bert, run_cli):
    from bertkit.api.reranker import Reranker

    beir = write_beir(tmp_path / "mini")
    reranker = build_reranker(tmp_path / "reranker", tiny_bert)
    output = tmp_path / "scores.json"
    code, out, err = run_cli(
        *("eval", tiny_bert, "--data", beir, "--output", output),
        *("--rerank", reranker, "--rerank-top", 3, "--precision", "no"),
    )
    assert code == 0, err
    report = json.loads(output.read_text())
    assert report["rerank"] == {"model": str(reranker), "top": 3} and "retriever_metrics" in report
    assert "reranked (top 3)" in out
    lines = (tmp_path / "run-scores.trec").read_text().splitlines()
    assert len(lines) == 4 * 3
    # the run's scores are the reranker's own on (query, passage)
    query, _, passage, _, score, _ = lines[0].split()
    text = dict((i, " ".join(p for p in (t, x) if p)) for i, t, x in PASSAGES)[passage]
    assert float(score) == pytest.approx(
        float(Reranker(str(reranker), InferenceOptions(precision="no")).scores([QUERIES[query]], [text])[0]), abs=1e-4
    )


def read_run(path: Path) -> dict:
    run: dict = {}
    for line in path.read_text().splitlines():
        query, _, passage, _, score, _ = line.split()
        run.setdefault(query, {})[passage] = float(score)
    return run


def test_two_models_evaluated_into_one_folder_keep_their_own_run_files(tmp_path, tiny_bert, run_cli):
    """Each metrics file names its own run file (run-<its name>.trec), whose ranking is its model's own
    search; another model's --output is refused, the same model's rewritten (model_dir.ownership)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from bertkit.api.embedder import Embedder
    from bertkit.api.retrieval import as_run, search
    from bertkit.data.beir import read_beir

    beir = write_beir(tmp_path / "mini")
    other = tmp_path / "other"  # another encoder: other weights, the same tokenizer
    torch.manual_seed(7)
    BertModel(BertConfig.from_pretrained(tiny_bert)).save_pretrained(other)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(other)
    folder = tmp_path / "scores"
    folder.mkdir()
    for model, name in ((tiny_bert, "a"), (other, "b")):
        code, out, err = run_cli(
            "eval", model, "--data", beir, "--output", folder / f"{name}.json", "--precision", "no"
        )
        assert code == 0, err
    for model, name in ((tiny_bert, "a"), (other, "b")):
        report = json.loads((folder / f"{name}.json").read_text())
        assert report["run_written_to"] == str(folder / f"run-{name}.trec")
        embedder = Embedder(str(model), EmbeddingOptions(precision="no"))  # the search, computed again
        expected = as_run(
            read_beir(beir, "test"),
            *search(embedder, list(QUERIES.values()), beir / "corpus.jsonl", 100, "cosine", 10_000),
        )
        written = read_run(folder / f"run-{name}.trec")
        assert {q: sorted(p) for q, p in written.items()} == {q: sorted(p) for q, p in expected.items()}
        for query, scores in expected.items():
            assert written[query] == pytest.approx(scores, abs=1e-6)
    first = (folder / "a.json").read_bytes(), (folder / "run-a.trec").read_bytes()
    code, _, err = run_cli("eval", other, "--data", beir, "--output", folder / "a.json", "--precision", "no")
    assert code == 2 and "holds the scores of another model" in err
    assert ((folder / "a.json").read_bytes(), (folder / "run-a.trec").read_bytes()) == first
    code, _, err = run_cli("eval", tiny_bert, "--data", beir, "--output", folder / "a.json", "--precision", "no")
    assert code == 0, err  # its own results: rewritten


def test_a_pointwise_reranker_saved_as_an_adapter_reranks_as_predict_scores(tmp_path, tiny_bert, run_cli):
    """`finetune rerank --lora R --save-adapter` writes adapters over the base; --rerank loads them as
    eval and predict do (its adapters merged over the base), and the run's scores are predict's."""
    pytest.importorskip("peft")
    rows = [
        {"query": q, "passage": p, "label": int(p.startswith("john"))}
        for q in QUERIES.values()
        for p in ("john lives in paris", "the plot was bad")
    ]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows * 2))
    adapter = tmp_path / "adapter"
    code, _, err = run_cli(
        *("finetune", "rerank", "--data", data, "--model", tiny_bert, "--output", adapter, "--epochs", 1),
        *("--lora", 4, "--save-adapter", "--precision", "no"),
    )
    assert code == 0, err
    assert (adapter / "adapter_model.safetensors").is_file() and not (adapter / "model.safetensors").exists()
    beir = write_beir(tmp_path / "mini")
    output = tmp_path / "scores.json"
    code, out, err = run_cli(
        *("eval", tiny_bert, "--data", beir, "--output", output, "--precision", "no"),
        *("--rerank", adapter, "--rerank-top", 3),
    )
    assert code == 0, err
    run = read_run(tmp_path / "run-scores.trec")
    texts = {i: " ".join(p for p in (t, x) if p) for i, t, x in PASSAGES + [("p9", "", "the story was fine")]}
    pairs = [(query, passage) for query, passages in run.items() for passage in passages]
    asked = tmp_path / "asked.jsonl"
    asked.write_text("".join(json.dumps({"query": QUERIES[q], "passage": texts[p]}) + "\n" for q, p in pairs))
    code, stdout, err = run_cli("predict", adapter, "--input", asked, "--precision", "no")
    assert code == 0, err
    predicted = [json.loads(line)["score"] for line in stdout.splitlines()]  # predict: the logit's sigmoid
    assert [1 / (1 + np.exp(-run[q][p])) for q, p in pairs] == pytest.approx(predicted, abs=1e-4)
