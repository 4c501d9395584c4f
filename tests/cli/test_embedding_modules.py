"""`finetune embedding` keeps its base's sentence-transformers module list: a base ending in Normalize
(all-MiniLM-L6-v2's layout) gives a directory whose SentenceTransformer(DIR).encode returns unit
vectors, as the base's did, equal to `bertkit embed DIR --normalize`; a module with weights that
bertkit does not train (Dense) is dropped and said."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from bertkit.options import RunOptions

PAIRS = [
    ("the film was good", "it was a great movie"),
    ("the plot was bad", "the story was awful"),
    ("john lives in paris", "john lives in france"),
    ("mary visited berlin", "mary went to germany"),
]
TEXTS = ["the film was good", "john lives in paris", "the plot was bad , very bad"]
TRANSFORMER = {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}
POOLING = {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}


def sentence_transformers_base(tiny, root, last: dict):
    """The tiny BERT as a sentence-transformers directory: Transformer, mean Pooling, then ``last``."""
    base = root / "base"
    shutil.copytree(tiny, base)
    (base / "modules.json").write_text(json.dumps([TRANSFORMER, POOLING, last]))
    (base / "1_Pooling").mkdir()
    (base / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True})
    )
    return base


def finetuned(base, root):
    from bertkit import api
    from bertkit.config import TrainConfig

    data = root / "pairs.jsonl"
    data.write_text("".join(json.dumps({"anchor": a, "positive": p}) + "\n" for a, p in PAIRS))
    config = TrainConfig(epochs=1, batch_size=4, precision="no", lr=1e-3)
    api.finetune("embedding", RunOptions(data=str(data), model=str(base), output=str(root / "model")), config=config)
    return root / "model"


def test_a_base_that_normalises_gives_a_directory_that_normalises(tiny_bert, tmp_path, run_cli):
    st = pytest.importorskip("sentence_transformers")
    from bertkit import events

    normalize = {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
    base = sentence_transformers_base(tiny_bert, tmp_path, normalize)
    before = st.SentenceTransformer(str(base), device="cpu").encode(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(before, axis=1), 1, atol=1e-5)  # the base gives unit vectors
    said = []
    with events.listening(lambda event: said.append(event.text)):
        model = finetuned(base, tmp_path)
    assert any("kept" in text and "Normalize" in text for text in said), said
    types = [entry["type"].rsplit(".", 1)[-1] for entry in json.loads((model / "modules.json").read_text())]
    assert types == ["Transformer", "Pooling", "Normalize"]
    theirs = st.SentenceTransformer(str(model), device="cpu").encode(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(theirs, axis=1), 1, atol=1e-5)
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    out = tmp_path / "vectors.npy"
    code, _, err = run_cli("embed", model, "--input", texts, "--output", out, "--normalize", "--precision", "no")
    assert code == 0, err
    np.testing.assert_allclose(np.load(out), theirs, atol=1e-5)
    # the raw vectors bertkit trained, unnormalised: the same directions
    code, _, err = run_cli("embed", model, "--input", texts, "--output", out, "--precision", "no")
    assert code == 0, err
    raw = np.load(out)
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), theirs, atol=1e-5)
    # bertkit owns what it wrote: --overwrite replaces the directory (2_Normalize is bertkit's)
    from bertkit.model_dir.ownership import strangers

    assert strangers(model) == []


def test_a_module_with_weights_bertkit_did_not_train_is_dropped_and_said(tiny_bert, tmp_path):
    from bertkit import events

    dense = {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    base = sentence_transformers_base(tiny_bert, tmp_path, dense)
    said = []
    with events.listening(lambda event: said.append(event.text)):
        model = finetuned(base, tmp_path)
    assert any("dropped" in text and "2_Dense (Dense)" in text for text in said), said
    types = [entry["type"].rsplit(".", 1)[-1] for entry in json.loads((model / "modules.json").read_text())]
    assert types == ["Transformer", "Pooling"] and not (model / "2_Dense").exists()


def test_lora_on_an_embedding_model_adapts_the_bare_encoders_layers(tiny_bert, tmp_path, run_cli):
    """An embedding model is the bare encoder (AutoModel): --lora finds its query and value layers
    (named without a task model's prefix), and the merged directory embeds as sentence-transformers."""
    pytest.importorskip("peft")
    st = pytest.importorskip("sentence_transformers")
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"anchor": a, "positive": p}) + "\n" for a, p in PAIRS))
    model = tmp_path / "model"
    code, _, err = run_cli(
        *("finetune", "embedding", "--data", data, "--model", tiny_bert, "--output", model),
        *("--epochs", 1, "--batch-size", 4, "--lora", 4, "--lr", 1e-3, "--precision", "no"),
    )
    assert code == 0, err
    lora = json.loads((model / "bertkit.json").read_text())["lora"]
    assert lora["targets"] == ["query", "value"] and lora["adapted_layers"] == 4  # 2 layers x (query, value)
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    out = tmp_path / "vectors.npy"
    code, _, err = run_cli("embed", model, "--input", texts, "--output", out, "--precision", "no")
    assert code == 0, err
    theirs = st.SentenceTransformer(str(model), device="cpu").encode(TEXTS)
    np.testing.assert_allclose(np.load(out), theirs, atol=1e-5)
