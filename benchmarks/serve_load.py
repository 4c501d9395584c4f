"""Concurrent load against a running `bertkit serve`: N clients x M requests, every answer kept.

    python -m benchmarks.serve_load http://127.0.0.1:8000 texts.txt --clients 8 --requests 50

Prints requests/s, inputs/s and latency percentiles; `tests/cli/test_serve.py` uses ``run_load`` too.
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time


def run_load(
    url: str, texts: list[str], clients: int = 8, requests: int = 50, max_inputs: int = 3, seed: int = 0
) -> dict:
    """Each client sends ``requests`` POST /predict with 1..max_inputs random texts, one at a time.
    Returns ``{"answers": [(texts, status, rows)], "latencies_s": [...], "seconds": wall}``."""
    import httpx

    answers, latencies, lock = [], [], threading.Lock()
    errors = []

    def client(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        try:
            with httpx.Client(base_url=url, timeout=120) as session:
                for _ in range(requests):
                    batch = [rng.choice(texts) for _ in range(rng.randint(1, max_inputs))]
                    started = time.perf_counter()
                    response = session.post("/predict", json={"inputs": [{"text": t} for t in batch]})
                    elapsed = time.perf_counter() - started
                    body = response.json()
                    with lock:
                        latencies.append(elapsed)
                        answers.append((batch, response.status_code, body.get("predictions")))
        except Exception as exc:  # reported, not swallowed: the caller checks errors
            with lock:
                errors.append(repr(exc))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"answers": answers, "latencies_s": latencies, "seconds": time.perf_counter() - started, "errors": errors}


def summary(result: dict) -> dict:
    latencies = sorted(result["latencies_s"])

    def percentile(p: float) -> float:
        return round(1000 * latencies[min(len(latencies) - 1, int(round(p / 100 * (len(latencies) - 1))))], 2)

    inputs = sum(len(texts) for texts, _, _ in result["answers"])
    return {
        "requests": len(latencies),
        "inputs": inputs,
        "seconds": round(result["seconds"], 3),
        "requests_per_s": round(len(latencies) / result["seconds"], 1),
        "inputs_per_s": round(inputs / result["seconds"], 1),
        "latency_ms": {
            "p50": percentile(50),
            "p90": percentile(90),
            "p99": percentile(99),
            "max": round(1000 * latencies[-1], 2),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("texts", help="a text file, one input per line")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--max-inputs", type=int, default=3)
    args = parser.parse_args()
    with open(args.texts, encoding="utf-8") as handle:
        texts = [line.rstrip("\n") for line in handle if line.strip()]
    result = run_load(args.url, texts, args.clients, args.requests, args.max_inputs)
    bad = [a for a in result["answers"] if a[1] != 200 or len(a[2] or []) != len(a[0])]
    print(json.dumps({**summary(result), "failed": len(bad), "errors": result["errors"]}, indent=2))


if __name__ == "__main__":
    main()
