"""`bertkit serve` over real HTTP: a server in a subprocess on a free local port, a tiny model."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest
from conftest import REPO

from bertkit.options import RunOptions

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from test_cli_classification import FILLER, NEGATIVE, POSITIVE, write_sentiment_csv  # noqa: E402

from benchmarks.serve_load import run_load, summary  # noqa: E402
from bertkit.options import PredictOptions  # noqa: E402

STARTUP_S = 180  # torch + transformers imports on 2 busy cores


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def cls_model(tmp_path_factory, tiny_bert):
    from bertkit import api
    from bertkit.config import TrainConfig

    root = tmp_path_factory.mktemp("serve")
    write_sentiment_csv(root / "train.csv", 64, seed=1)
    api.finetune(
        "cls",
        RunOptions(data=str(root / "train.csv"), model=str(tiny_bert), output=str(root / "model")),
        config=TrainConfig(epochs=1, lr=1e-3, batch_size=16),
    )
    return root / "model"


@pytest.fixture(scope="module")
def served(cls_model, tmp_path_factory):
    """(url, server process, its console log file): the log goes to a file, not a pipe that the
    access log could fill."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    log = tmp_path_factory.mktemp("serve-log") / "console.txt"
    console = log.open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bertkit",
            "serve",
            str(cls_model),
            "--port",
            str(port),
            "--max-inputs",
            "8",
            "--max-request-bytes",
            "4000",
            "--batch-size",
            "32",
            "--max-wait-ms",
            "10",
        ],
        env=env,
        stdout=console,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + STARTUP_S
    while True:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.time() > deadline:
            process.kill()
            pytest.fail(f"server did not start: {log.read_text()}")
        time.sleep(0.5)
    yield url, process, log
    process.terminate()
    process.wait(timeout=30)
    console.close()


@pytest.fixture(scope="module")
def server(served):
    return served[0]


def expected_rows(model_dir, texts, tmp_path):
    from bertkit import api

    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return {row["text"]: row for row in api.predict(str(model_dir), PredictOptions(input=str(tmp_path / "in.jsonl")))}


# A served batch in arrival order that is mostly padding runs packed (engine/packed_inference.py),
# predict's length-sorted batches padded: the same numbers up to the precision's rounding (fp32:
# 1e-7; bf16, auto's choice on CPUs with bf16 units: 2e-4 measured on MiniLM).
ROUNDING = 1e-3


def same_row(got: dict, want: dict) -> bool:
    """Same text; probabilities equal up to rounding; the same label unless predict's top two tie
    within that rounding."""
    probabilities = sorted(want["probabilities"].values(), reverse=True)
    tied = len(probabilities) > 1 and probabilities[0] - probabilities[1] <= 2 * ROUNDING
    return (
        got["text"] == want["text"]
        and (got["label"] == want["label"] or tied)
        and all(abs(got["probabilities"][k] - v) <= ROUNDING for k, v in want["probabilities"].items())
    )


def test_only_the_server_packs_its_mostly_padded_batches(cls_model):
    """serve batches rows in arrival order and packs those mostly padding (engine/packed_inference.py);
    predict, eval and select never pack, so they agree with one another to the bit."""
    from bertkit.api.prediction import Predictor
    from bertkit.api.serving import served_predictor
    from bertkit.options import CoverageOptions, InferenceOptions

    served = served_predictor(str(cls_model), InferenceOptions(), "torch", CoverageOptions())
    assert served.engine.pack_padded is True
    assert Predictor(str(cls_model), quiet=True).load().engine.pack_padded is False


def test_health_and_info(server):
    health = httpx.get(server + "/health").json()
    assert health["status"] == "ok"
    info = httpx.get(server + "/info").json()
    assert info["task"] == "cls" and info["labels"] == ["neg", "pos"] and info["backend"] == "torch"
    assert info["limits"]["max_inputs"] == 8 and info["limits"]["max_request_bytes"] == 4000
    assert {"torch", "transformers", "bertkit"} <= set(info["versions"])


def test_predict_one_and_many_match_bertkit_predict(server, cls_model, tmp_path):
    texts = ["the plot was awful", "a great great film", "it was poor"]
    want = expected_rows(cls_model, texts, tmp_path)
    one = httpx.post(server + "/predict", json={"text": texts[0]})
    assert one.status_code == 200 and len(one.json()["predictions"]) == 1
    assert same_row(one.json()["predictions"][0], want[texts[0]])
    # a list of strings (text-file lines) and {"inputs": [...]} of objects answer the same rows, in order
    many = httpx.post(server + "/predict", json=texts).json()["predictions"]
    inputs = httpx.post(server + "/predict", json={"inputs": [{"text": t} for t in texts]}).json()["predictions"]
    assert [r["text"] for r in many] == texts == [r["text"] for r in inputs]
    assert all(same_row(r, want[r["text"]]) for r in many + inputs)


@pytest.mark.parametrize(
    "body, status, fragment",
    [
        (b"{not json", 400, "not valid UTF-8 JSON"),
        (b"\xff\xfe", 400, "not valid UTF-8 JSON"),
        (json.dumps({"review_txt": "good"}).encode(), 422, "missing text column"),
        (json.dumps({"text": ""}).encode(), 422, "empty text"),
        (json.dumps({"text": "\u200b\u00ad"}).encode(), 422, "empty text"),  # nothing visible: nothing to score
        (json.dumps([]).encode(), 422, "no inputs"),
        (json.dumps(42).encode(), 422, "expected an object"),
        (json.dumps([1, 2]).encode(), 422, "input 1 is a number"),
        (json.dumps(["good"] * 9).encode(), 413, "9 inputs in one request, the limit is 8"),
        (json.dumps(["good " * 1000]).encode(), 413, "over the limit of 4000"),
        (b"[" * 1900, 400, "nested too deeply"),  # Python's parser gives up at 1,000 levels
        (b'{"text": "good \\ud800 film"}', 422, "row 1: field 'text' holds an unpaired UTF-16 surrogate"),
        (json.dumps({"text": {"a": 1}}).encode(), 422, "row 1: field 'text' is an object, not a string"),
        (json.dumps([{"text": "good"}, {"text": ["x"]}]).encode(), 422, "row 2: field 'text' is a list"),
        (json.dumps({"text": True}).encode(), 422, "field 'text' is true/false"),
        (b'{"te\\ud800xt": "good"}', 422, "missing text column (found columns: te\\ud800xt)"),  # quoted, not a 500
    ],
)
def test_bad_requests_get_clear_4xx(server, body, status, fragment):
    response = httpx.post(server + "/predict", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    error = response.json()
    assert fragment in error["error"] and error["hint"]


def test_wrong_method_and_path_answer_bertkits_error_body(server):
    for response, status in ((httpx.get(server + "/predict"), 405), (httpx.get(server + "/nope"), 404)):
        assert response.status_code == status
        assert set(response.json()) == {"error", "hint"} and response.json()["hint"]


def test_a_bad_row_fails_only_its_own_request(server, cls_model, tmp_path):
    """One request that cannot be encoded among 20 good ones sent at the same moment: the good ones
    share batches with it and must all answer 200 with exactly `bertkit predict`'s rows."""
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"the film was {w} {n}" for n in range(1, 5) for w in ("good", "bad", "great", "awful", "fine")]
    want = expected_rows(cls_model, texts, tmp_path)
    bodies = [json.dumps({"text": t}).encode() for t in texts]
    bodies.insert(7, b'{"text": "good \\ud800 film"}')
    with ThreadPoolExecutor(len(bodies)) as pool, httpx.Client(base_url=server, timeout=120) as session:
        responses = list(pool.map(lambda b: session.post("/predict", content=b), bodies))
    bad = responses.pop(7)
    assert bad.status_code == 422 and "surrogate" in bad.json()["error"]
    assert [r.status_code for r in responses] == [200] * 20
    assert all(same_row(r.json()["predictions"][0], want[t]) for r, t in zip(responses, texts))


def test_every_request_is_one_log_line_and_a_disconnect_is_no_traceback(served):
    url, _, log = served
    from benchmarks.serve_soak import _disconnect

    _disconnect(url)
    httpx.post(url + "/predict", json={"text": "a good film"})
    time.sleep(0.5)
    console = log.read_text()
    assert "Traceback" not in console, console[-3000:]
    gone = [line for line in console.splitlines() if "went away" in line]
    assert len(gone) == 1 and '"POST /predict" 400 rows=0' in gone[0], console[-3000:]
    assert gone[0].endswith("(the client went away after 10 bytes of its body)")
    assert any('"POST /predict" 200 rows=1' in line and line.rstrip().endswith("ms") for line in console.splitlines())


def test_what_serve_decided_is_said_before_it_serves(served):
    """The backend auto chose, the precision and the threads are on the console when the server says
    it is ready, not when it stops (a server's output is a log: nothing is said after the work)."""
    _, _, log = served
    lines = log.read_text().splitlines()
    ready = next(i for i, line in enumerate(lines) if line.startswith("serving "))
    before = "\n".join(lines[:ready])
    assert "--backend auto: torch: nothing exported" in before and "precision: " in before, lines[: ready + 1]


def test_ids_are_given_back_as_bertkit_predict_does(server, cls_model, tmp_path):
    rows = [{"id": "r1", "text": "a good film"}, {"text": "a bad film"}, {"id": 7, "text": "fine"}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    from bertkit import api

    want = list(api.predict(str(cls_model), PredictOptions(input=str(tmp_path / "in.jsonl"))))
    got = httpx.post(server + "/predict", json={"inputs": rows}).json()["predictions"]
    assert [r.get("id") for r in got] == [r.get("id") for r in want] == ["r1", None, 7]
    assert list(got[0]) == list(want[0]) and list(want[0])[0] == "id"  # first, as in QA's rows
    bad = httpx.post(server + "/predict", content=b'{"id": "\\ud800", "text": "good"}')
    assert bad.status_code == 422 and "field 'id' holds an unpaired UTF-16 surrogate" in bad.json()["error"]


def test_concurrent_load_every_answer_checked(server, cls_model, tmp_path):
    import random

    rng = random.Random(3)
    texts = sorted(
        {" ".join(rng.sample(FILLER, rng.randint(1, 6)) + [rng.choice(POSITIVE + NEGATIVE)]) for _ in range(60)}
    )
    want = expected_rows(cls_model, texts, tmp_path)
    before = httpx.get(server + "/health").json()
    result = run_load(server, texts, clients=8, requests=50, max_inputs=3)
    assert result["errors"] == []
    assert len(result["answers"]) == 400
    for sent, status, rows in result["answers"]:
        assert status == 200
        assert [r["text"] for r in rows] == sent  # each request gets exactly its own rows, in order
        assert all(same_row(r, want[r["text"]]) for r in rows)
    after = httpx.get(server + "/health").json()
    served, batches = after["requests"] - before["requests"], after["batches"] - before["batches"]
    assert served == 400
    assert batches < served and after["largest_batch_requests"] > 1  # concurrent requests were batched
    stats = summary(result)
    print(f"\nserve load (tiny model): {json.dumps(stats)}, {batches} model batches for {served} requests")


def test_serve_refuses_busy_port_and_bad_dir_in_one_line(cls_model, run_cli, tmp_path):
    from conftest import assert_user_error

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert_user_error(run_cli("serve", cls_model, "--port", port), f"cannot listen on 127.0.0.1:{port}")
    assert_user_error(run_cli("serve", tmp_path / "missing", "--port", _free_port()), "model directory not found")
    assert_user_error(run_cli("serve", cls_model, "--backend", "tpu", "--port", _free_port()), "unknown --backend")
