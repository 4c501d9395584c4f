"""A short soak of `bertkit serve` inside `make test`: a real server (a subprocess on a free local
port, the shared tiny cls model), 8 clients for 10 s mixing good requests with hostile ones (lone
surrogates, deep nesting, wrong types, oversize bodies, clients hanging up mid-body). Every good
request must answer 200 with exactly `bertkit predict`'s rows, no request 500, memory flat, and
the server's console one line per event, no traceback. `python benchmarks/serve_soak.py --model
DIR --seconds 60` is the long one.
"""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

from benchmarks.serve_soak import TEXTS, rss_kib, run_soak, start_server, summary  # noqa: E402
from bertkit.options import PredictOptions

SOAK_S = 10
RSS_GROWTH_KIB = 150_000  # far above noise (allocator arenas, tokenizer caches), far below a leak's growth


def test_soak_mixed_good_and_hostile_clients(trained, tmp_path):
    import httpx

    from bertkit import api

    model = trained("cls")
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    want = {row["text"]: row for row in api.predict(str(model), PredictOptions(input=str(tmp_path / "in.jsonl")))}
    with (tmp_path / "console.txt").open("w") as console:
        process, url = start_server(model, console)
        try:
            httpx.post(url + "/predict", json=TEXTS, timeout=120)  # warm: first-call allocations are not growth
            start_rss = rss_kib(process.pid)
            result = run_soak(url, TEXTS, seconds=SOAK_S, clients=8, pid=process.pid)
            time.sleep(0.5)  # the last hang-ups reach the log
        finally:
            process.terminate()
            process.wait(timeout=30)
    stats = summary(result, want)
    print(f"\nserve soak (tiny model, {SOAK_S} s, 8 clients): {json.dumps(stats)}")
    assert result["errors"] == [] and stats["good_requests"] > 20 and stats["requests"] > 50, stats
    assert stats["wrong_answers"] == 0, stats["wrong_examples"]
    assert 500 not in stats["statuses"] and stats["good_200"] == stats["good_requests"], stats
    assert stats["rss_peak_kib"] < start_rss + RSS_GROWTH_KIB, stats
    log = (tmp_path / "console.txt").read_text()
    assert "Traceback" not in log, log[-3000:]
    # one access-log line per request (the warm-up's too), a client that hung up included: its line says so
    assert log.count('"POST /predict"') == stats["requests"] + 1 + stats["disconnects"]
    assert log.count(" (the client went away after ") == stats["disconnects"]
