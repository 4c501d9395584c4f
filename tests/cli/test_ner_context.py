"""ner --context document end to end: finetune records it in bertkit.json, eval and predict use it,
and a document's sentences get the same encoding and the same predictions whether the document
arrives whole (a text file of its sentences, a server request) or among other documents' sentences
with document ids, in one chunk or many, alone or micro-batched with another request."""

from __future__ import annotations

import json

import pytest

from bertkit.api.prediction import Predictor
from bertkit.options import RunOptions

DOC_A = ["john lives in paris", "mary visited berlin .", "obama works in london"]
DOC_B = ["google met john in france", "the city is berlin"]
TAGS = {"john": "B-PER", "mary": "B-PER", "obama": "B-PER", "google": "B-ORG"}
PLACES = {"paris", "berlin", "london", "france"}


def conll(documents) -> str:
    blocks = []
    for document in documents:
        blocks.append("-DOCSTART- O\n\n")
        for sentence in document:
            tags = [TAGS.get(w, "B-LOC" if w in PLACES else "O") for w in sentence.split()]
            blocks.append("".join(f"{w} {t}\n" for w, t in zip(sentence.split(), tags)) + "\n")
    return "".join(blocks)


@pytest.fixture(scope="module")
def model(tiny_bert, tmp_path_factory):
    from bertkit import api
    from bertkit.config import TrainConfig

    root = tmp_path_factory.mktemp("ner-context")
    data = root / "train.conll"
    data.write_text(conll([DOC_A, DOC_B] * 4))
    config = TrainConfig(
        epochs=2, batch_size=4, max_length=64, lr=1e-3, task_options={"context": "document", "context_tokens": 8}
    )
    api.finetune("ner", RunOptions(data=str(data), model=str(tiny_bert), output=str(root / "model")), config=config)
    return root / "model"


def rows(run_cli, *args) -> list[dict]:
    code, out, err = run_cli(*args)
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_the_context_is_recorded_and_eval_uses_it(model, run_cli, tmp_path):
    task = json.loads((model / "bertkit.json").read_text())["task"]
    assert task["options"]["context"] == "document" and task["options"]["context_tokens"] == 8
    data = tmp_path / "dev.conll"
    data.write_text(conll([DOC_B, DOC_A]))
    code, out, err = run_cli("eval", model, "--data", data, "--output", tmp_path / "eval.json")
    assert code == 0, err
    report = json.loads((tmp_path / "eval.json").read_text())
    assert report["preprocessing"]["sentences_with_context"] == 5


def test_a_document_whole_or_among_others_with_ids_is_predicted_the_same(model, run_cli, tmp_path):
    whole = tmp_path / "a.txt"
    whole.write_text("\n".join(DOC_A) + "\n")
    mixed = tmp_path / "mixed.jsonl"
    records = [{"text": t, "document": "b"} for t in DOC_B] + [{"text": t, "document": "a"} for t in DOC_A]
    mixed.write_text("".join(json.dumps(r) + "\n" for r in records))
    alone = rows(run_cli, "predict", model, "--input", whole)
    among = rows(run_cli, "predict", model, "--input", mixed)[len(DOC_B) :]
    assert [r["tags"] for r in alone] == [r["tags"] for r in among]
    assert all("context" not in r for r in alone)
    chunked = tmp_path / "out.jsonl"  # predict's chunks never cut a document: one chunk in document mode
    code, _, err = run_cli("predict", model, "--input", mixed, "--output", chunked, "--chunk-rows", "1")
    assert code == 0, err
    written = [json.loads(line) for line in chunked.read_text().splitlines()]
    assert [r["tags"] for r in written[len(DOC_B) :]] == [r["tags"] for r in alone]


def test_the_encoding_is_the_same_and_requests_batched_together_keep_their_own_documents(model):
    predictor = Predictor(str(model)).load()
    request_a = predictor.examples(list(DOC_A))  # a request of sentences: one document, in order
    request_b = predictor.examples([{"text": t, "document": 7} for t in DOC_B] + [{"text": DOC_A[0], "document": 8}])
    with_ids = predictor.examples([{"text": t, "document": "x"} for t in DOC_A])

    def encoded(examples):
        return [f["input_ids"] for f in predictor.adapter.preprocess(examples, predictor.tokenizer, train=False)]

    assert encoded(request_a) == encoded(with_ids)
    sentence = predictor.adapter.with_options({"context": "sentence"})
    alone = [f["input_ids"] for f in sentence.preprocess(request_a, predictor.tokenizer, train=False)]
    assert all(len(c) > len(s) for c, s in zip(encoded(request_a), alone))  # the context is really there
    # the last sentence of request_b is DOC_A[0] alone in its document: no context from request_a
    assert encoded(request_b)[-1] == alone[0]
    merged = predictor.predict(request_a + request_b)  # the server's micro-batch of two requests
    assert merged == predictor.predict(request_a) + predictor.predict(request_b)


def test_the_server_answers_a_document_as_predict_does(model, run_cli, tmp_path):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from bertkit.serving.app import create_app

    whole = tmp_path / "a.txt"
    whole.write_text("\n".join(DOC_A) + "\n")
    expected = [r["tags"] for r in rows(run_cli, "predict", model, "--input", whole)]
    with TestClient(create_app(Predictor(str(model), quiet=True).load())) as client:
        answer = client.post("/predict", json={"inputs": DOC_A})
        assert answer.status_code == 200, answer.text
        assert [r["tags"] for r in answer.json()["predictions"]] == expected
        named = [{"text": t, "document": d} for t, d in zip(DOC_A + DOC_B[:1], [1, 1, 1, 2])]
        answer = client.post("/predict", json={"inputs": named})
        assert [r["tags"] for r in answer.json()["predictions"][:3]] == expected
        back = client.post("/predict", json={"inputs": [{"text": t, "document": d} for t, d in zip(DOC_A, "aba")]})
        assert back.status_code == 422 and "document 'a' comes back at row 3" in back.text
