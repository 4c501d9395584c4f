"""`bertkit finetune embedding` and `finetune rerank` end to end on the tiny BERT: the saved
directories load in sentence-transformers (SentenceTransformer, CrossEncoder) and give what
`bertkit embed` / `bertkit predict` give; eval and predict work on them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bertkit.options import RunOptions

PAIRS = [
    ("the film was good", "it was a great movie"),
    ("the plot was bad", "the story was awful"),
    ("john lives in paris", "john lives in france"),
    ("mary visited berlin", "mary went to germany"),
    ("the actor was fine", "the acting was good"),
    ("the film was good", "it was a great movie"),
]
STS = "sentence1,sentence2,score\n" + "".join(
    f"{a},{b},{s}\n"
    for a, b, s in [
        ("the film was good", "it was a great movie", 4.5),
        ("the plot was bad", "john lives in paris", 0.5),
        ("mary visited berlin", "mary went to germany", 4),
        ("the actor was fine", "the story was awful", 1),
    ]
)
QUERIES = [
    ("who lives in paris ?", "john lives in paris .", "mary visited berlin ."),
    ("what was the film ?", "the film was good .", "the city was london ."),
    ("where did mary go ?", "mary went to germany .", "the plot was bad ."),
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def embedding_dir(tiny_bert, tmp_path_factory):
    from bertkit import api
    from bertkit.config import TrainConfig

    root = tmp_path_factory.mktemp("embedding")
    data = write_jsonl(root / "pairs.jsonl", [{"anchor": a, "positive": p} for a, p in PAIRS])
    (root / "sts.csv").write_text(STS)
    api.finetune(
        "embedding",
        RunOptions(data=str(data), eval_data=str(root / "sts.csv"), model=str(tiny_bert), output=str(root / "model")),
        config=TrainConfig(epochs=1, batch_size=4, precision="no", lr=1e-3),
    )
    return root


def test_embedding_directory_loads_in_sentence_transformers_with_bertkit_embeds_vectors(embedding_dir, run_cli):
    st = pytest.importorskip("sentence_transformers")
    texts = embedding_dir / "texts.txt"
    texts.write_text("the film was good\njohn lives in paris\nthe plot was bad , very bad\n")
    out = embedding_dir / "vectors.npy"
    code, _, err = run_cli("embed", embedding_dir / "model", "--input", texts, "--output", out, "--precision", "no")
    assert code == 0, err
    ours = np.load(out)
    theirs = st.SentenceTransformer(str(embedding_dir / "model"), device="cpu").encode(
        texts.read_text().splitlines(), convert_to_numpy=True
    )
    assert ours.shape == theirs.shape == (3, 32)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    # sentence-transformers truncates where bertkit trained: --max-length
    assert st.SentenceTransformer(str(embedding_dir / "model"), device="cpu").get_max_seq_length() == 128


def test_embedding_eval_is_the_spearman_of_the_cosine_and_predict_gives_it(embedding_dir, run_cli):
    code, out, err = run_cli("eval", embedding_dir / "model", "--precision", "no")
    assert code == 0, err
    metrics = json.loads((embedding_dir / "model" / "eval-sts.json").read_text())["metrics"]
    code, out, err = run_cli(
        "predict", embedding_dir / "model", "--input", embedding_dir / "sts.csv", "--precision", "no"
    )
    assert code == 0, err
    cosines = [json.loads(line)["score"] for line in out.splitlines()]
    gold = [4.5, 0.5, 4, 1]
    rank = lambda v: np.argsort(np.argsort(v))  # noqa: E731 (no ties here)
    assert metrics["spearman"] == pytest.approx(float(np.corrcoef(rank(cosines), rank(gold))[0, 1]), abs=1e-4)


@pytest.mark.parametrize("loss", ["bce", "listwise"])
def test_rerank_directory_loads_in_cross_encoder_with_bertkit_predicts_scores(tiny_bert, tmp_path, run_cli, loss):
    st = pytest.importorskip("sentence_transformers")
    rows = [
        {"query": q, "passage": p, "label": label}
        for _ in range(3)
        for q, good, bad in QUERIES
        for p, label in ((good, 1), (bad, 0))
    ]
    data = write_jsonl(tmp_path / "pairs.jsonl", rows)
    out = tmp_path / "model"
    code, stdout, err = run_cli(
        "finetune", "rerank", "--data", data, "--eval-data", data, "--model", tiny_bert, "--output", out,
        "--epochs", 1, "--batch-size", 4, "--precision", "no", "--rerank-loss", loss,
    )  # fmt: skip
    assert code == 0, err
    meta = json.loads((out / "bertkit.json").read_text())
    assert {"ndcg@10", "mrr@10", "auc"} <= set(meta["metrics"])  # grouped by query: the ranking measures
    assert meta["task"]["options"].get("rerank_loss", "bce") == loss
    code, stdout, err = run_cli("predict", out, "--input", data, "--precision", "no")
    assert code == 0, err
    ours = [json.loads(line)["score"] for line in stdout.splitlines()]
    theirs = st.CrossEncoder(str(out), device="cpu").predict([(r["query"], r["passage"]) for r in rows])
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_serve_embeds_with_bertkit_embeds_vectors_and_refuses_what_embed_cannot(embedding_dir, run_cli, trained):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from bertkit.api.prediction import Predictor
    from bertkit.serving.app import create_app

    texts = ["the film was good", "john lives in paris"]
    (embedding_dir / "two.txt").write_text("\n".join(texts) + "\n")
    out = embedding_dir / "two.npy"
    code, _, err = run_cli("embed", embedding_dir / "model", "--input", embedding_dir / "two.txt", "--output", out)
    assert code == 0, err
    with TestClient(create_app(Predictor(str(embedding_dir / "model"), quiet=True).load())) as client:
        answer = client.post("/embed", json={"inputs": [{"text": t} for t in texts]})
        assert answer.status_code == 200, answer.text
        np.testing.assert_allclose(np.array(answer.json()["embeddings"]), np.load(out), atol=1e-5)
        pair = client.post("/embed", json={"text": "a film", "text_pair": "a movie"})
        assert pair.status_code == 422 and "single texts" in pair.json()["error"]
        scored = client.post("/predict", json={"text": "a film", "text_pair": "a movie"})
        assert scored.status_code == 200 and -1 <= scored.json()["predictions"][0]["score"] <= 1
    with TestClient(create_app(Predictor(str(trained("cls")), quiet=True).load())) as client:
        refused = client.post("/embed", json={"text": "a film"})
        assert refused.status_code == 400 and "POST /predict" in refused.json()["hint"]


def test_embedding_directory_exports_to_onnx_and_predicts_the_same_vectors(embedding_dir, run_cli, tmp_path):
    pytest.importorskip("onnxruntime")
    import shutil

    model = tmp_path / "model"
    shutil.copytree(embedding_dir / "model", model)
    code, _, err = run_cli("export", "onnx", model)
    assert code == 0, err
    texts = tmp_path / "texts.txt"
    texts.write_text("the film was good\nmary went to germany\n")
    rows = {}
    for backend in ("torch", "onnx"):
        code, out, err = run_cli("predict", model, "--input", texts, "--backend", backend, "--precision", "no")
        assert code == 0, err
        rows[backend] = [json.loads(line)["embedding"] for line in out.splitlines()]
    np.testing.assert_allclose(rows["onnx"], rows["torch"], atol=1e-5)


def test_an_embedding_directory_with_its_exports_is_replaced_by_overwrite(embedding_dir, tiny_bert, run_cli, tmp_path):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(embedding_dir / "model", model)
    (model / "onnx").mkdir(exist_ok=True)
    (model / "onnx" / "export.json").write_text("{}")
    args = ["finetune", "embedding", "--data", embedding_dir / "pairs.jsonl", "--model", tiny_bert, "--output", model]
    code, _, err = run_cli(*args, "--epochs", 1, "--batch-size", 3, "--cache-batch", 2, "--overwrite")
    assert code == 0, err  # 1_Pooling/, modules.json, ... are bertkit's: replaced, not refused
    assert not (model / "onnx").exists() and (model / "1_Pooling" / "config.json").is_file()
    (model / "1_Pooling" / "notes.txt").write_text("mine")
    code, _, err = run_cli(*args, "--epochs", 1, "--overwrite")
    assert code == 2 and "notes.txt" in err  # a file of the user's inside it is never deleted
    assert (model / "1_Pooling" / "notes.txt").read_text() == "mine"


def test_triplet_loss_trains_end_to_end_through_the_cli(tiny_bert, tmp_path, run_cli):
    rows = [
        {"anchor": a, "positive": p, "negative": PAIRS[(i + 2) % len(PAIRS)][1]} for i, (a, p) in enumerate(PAIRS[:5])
    ]
    data = write_jsonl(tmp_path / "triplets.jsonl", rows)
    (tmp_path / "sts.csv").write_text(STS)
    out = tmp_path / "model"
    code, _, err = run_cli(
        "finetune", "embedding", "--data", data, "--eval-data", tmp_path / "sts.csv", "--model", tiny_bert,
        "--output", out, "--epochs", 2, "--batch-size", 2, "--precision", "no", "--loss", "triplet",
        "--triplet-margin", "1",
    )  # fmt: skip
    assert code == 0, err
    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["task"]["options"]["loss"] == "triplet" and meta["task"]["options"]["triplet_margin"] == 1.0
    assert "spearman" in meta["metrics"]
    assert "TripletLoss" in (out / "README.md").read_text()  # the card says what trained it
    losses = [epoch["train_loss"] for epoch in meta["history"] if "train_loss" in epoch]
    assert losses and all(np.isfinite(losses))


def _card_snippet_answer(directory, tmp_path):
    """The model card's snippet run as printed (MODEL_DIR pointed here): its last printed line."""
    import re
    import subprocess
    import sys

    card = (directory / "README.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)\n```", card, re.S)
    code = re.sub(r"^MODEL_DIR = .*$", f"MODEL_DIR = {json.dumps(str(directory))}", block, count=1, flags=re.M)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_embedding_card_snippet_gives_predicts_vector(embedding_dir, run_cli, tmp_path):
    from bertkit.tasks.embedding import EmbeddingTask

    (tmp_path / "in.jsonl").write_text(json.dumps(EmbeddingTask.card_text.example) + "\n")
    code, out, err = run_cli("predict", embedding_dir / "model", "--input", tmp_path / "in.jsonl", "--precision", "no")
    assert code == 0, err
    np.testing.assert_allclose(
        _card_snippet_answer(embedding_dir / "model", tmp_path), json.loads(out)["embedding"], atol=1e-5
    )


def test_the_rerank_card_snippet_gives_predicts_score(tiny_bert, tmp_path, run_cli):
    from bertkit.tasks.rerank import RerankTask

    rows = [{"query": q, "passage": p, "label": 1} for q, p, _ in QUERIES] + [
        {"query": q, "passage": n, "label": 0} for q, _, n in QUERIES
    ]
    data = write_jsonl(tmp_path / "pairs.jsonl", rows)
    out = tmp_path / "model"
    code, _, err = run_cli("finetune", "rerank", "--data", data, "--model", tiny_bert, "--output", out, "--epochs", 1)
    assert code == 0, err
    (tmp_path / "in.jsonl").write_text(json.dumps(RerankTask.card_text.example) + "\n")
    code, stdout, err = run_cli("predict", out, "--input", tmp_path / "in.jsonl", "--precision", "no")
    assert code == 0, err
    assert _card_snippet_answer(out, tmp_path) == pytest.approx(json.loads(stdout)["score"], abs=1e-5)
