"""The server's isolation, in process (starlette's TestClient, no socket): hostile JSON values,
rows a task cannot encode, a batch that fails, a bug. tests/cli/test_serve.py runs the real server."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from bertkit.serving.app import create_app  # noqa: E402
from bertkit.serving.batcher import MicroBatcher  # noqa: E402

BIG_INT = "9" * 5000


@pytest.fixture(scope="module")
def clients(trained):
    """task -> a TestClient on that task's tiny model (its batcher started)."""
    from bertkit.api.prediction import Predictor

    opened, stack = {}, []

    def get(task: str) -> TestClient:
        if task not in opened:
            client = TestClient(
                create_app(Predictor(str(trained(task)), quiet=True).load()), raise_server_exceptions=False
            )
            stack.append(client.__enter__())
            opened[task] = client
        return opened[task]

    yield get
    for client in stack:
        client.__exit__(None, None, None)


@pytest.mark.parametrize(
    "task, body, status, fragment",
    [
        ("cls", b'{"text": "good", "id": NaN}', 400, "NaN is not a JSON value"),
        ("cls", b'{"text": -Infinity}', 400, "-Infinity is not a JSON value"),
        ("cls", b'{"text": "good", "id": 1e999}', 400, "1e999 is out of range"),
        ("cls", f'{{"text": "good", "id": {BIG_INT}}}'.encode(), 400, "too many digits"),
        ("cls", b'{"a":' * 100_000, 400, "nested too deeply"),
        ("cls", b"null", 422, "got null"),
        ("cls", b'[{"text": "good"}, null]', 422, "input 2 is null"),
        ("cls", b'{"text": 3}', 422, "row 1: field 'text' is a number, not a string"),
        ("cls", b'{"text": "good", "id": "\\ud800"}', 422, "row 1: field 'id' holds an unpaired UTF-16 surrogate"),
        ("pair", b'{"text": "good", "text_pair": "\\udc00"}', 422, "row 1: field 'text_pair' holds an unpaired"),
        ("ner", b'{"tokens": ["john", "\\ud800"]}', 422, "record 0: token 1 holds an unpaired UTF-16 surrogate"),
        ("ner", b'{"tokens": ["john"], "id": {"a": 1}}', 422, "row 1: field 'id' is an object"),
        ("qa", b'{"question": "who ?", "context": "john .", "id": "\\ud800"}', 422, "field 'id' holds an unpaired"),
        ("qa", b'{"question": "who ?", "context": "john .", "id": [1]}', 422, "row 1: field 'id' is a list"),
    ],
)
def test_hostile_values_are_a_4xx_naming_the_row(clients, task, body, status, fragment):
    response = clients(task).post("/predict", content=body)
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error", "hint"} and response.json()["hint"]
    assert fragment in response.json()["error"]


def test_a_utf8_bom_is_tolerated_as_in_files(clients):
    response = clients("cls").post("/predict", content=b'\xef\xbb\xbf{"text": "the film was good", "id": 7}')
    assert response.status_code == 200
    assert response.json()["predictions"][0]["id"] == 7


@pytest.mark.parametrize(
    "method, path, status",
    [
        ("GET", "/nope", 404),
        ("GET", "/predict", 405),
        ("PUT", "/health", 405),
        ("DELETE", "/info", 405),
        ("OPTIONS", "/predict", 405),
    ],
)
def test_framework_errors_carry_bertkits_body(clients, method, path, status):
    response = clients("cls").request(method, path)
    assert response.status_code == status
    assert set(response.json()) == {"error", "hint"} and response.json()["hint"]


def test_a_failing_batch_is_rerun_request_by_request():
    """Should validation miss a row that breaks the model, the batch it shared fails; each of its
    requests is then run alone, so only the culprit gets the error."""

    def run(examples):
        if "poison" in examples:
            raise ValueError("cannot encode poison")
        return [text.upper() for text in examples]

    async def scenario():
        batcher = MicroBatcher(run, max_rows=64, max_wait_s=0.05)
        batcher.start()
        requests = [[f"good {n}", f"fine {n}"] for n in range(20)]
        requests.insert(7, ["poison"])
        answers = await asyncio.gather(*(batcher.submit(r) for r in requests), return_exceptions=True)
        await batcher.stop()
        return requests, answers, batcher.stats

    requests, answers, stats = asyncio.run(scenario())
    bad = answers.pop(7)
    requests.pop(7)
    assert isinstance(bad, ValueError) and "poison" in str(bad)
    assert answers == [[text.upper() for text in request] for request in requests]
    assert stats["largest_batch_requests"] > 1  # the culprit did share a batch with good requests


class BrokenPredictor:
    model_dir, task, backend = "broken", "cls", "torch"

    def examples(self, records):
        raise RuntimeError("a bug")

    def predict(self, examples):
        return examples

    def info(self):
        return {}


def test_a_bug_is_a_500_body_one_traceback_and_its_access_line(caplog):
    caplog.set_level(logging.INFO, logger="bertkit.serve")
    with TestClient(create_app(BrokenPredictor()), raise_server_exceptions=False) as client:
        response = client.post("/predict", content=json.dumps({"text": "good"}))
    assert response.status_code == 500
    assert response.json() == {"error": "internal error (RuntimeError)", "hint": "the server log has the traceback"}
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1 and "a bug" in str(tracebacks[0].exc_info[1])
    assert any('"POST /predict" 500 rows=0' in r.getMessage() for r in caplog.records)
