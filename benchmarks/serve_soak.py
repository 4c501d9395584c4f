"""A soak of `bertkit serve`: clients mixing good and hostile requests, every answer checked.

    python -m benchmarks.serve_soak http://127.0.0.1:8000 --seconds 60 --clients 8 [--pid PID]

Each client loops until the time is up, sending (in a fixed random order) a good request with
1-3 texts, or one of the hostile bodies below. Good requests must answer 200 with one row per
text; hostile ones a 4xx with bertkit's error body; nothing may answer 500. With --pid, the
server's resident memory is sampled each second (peak and growth). `tests/test_serve.py` runs
it for a few seconds; this runs it as long as asked.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import threading
import time
from urllib.parse import urlparse

HOSTILE = {
    "lone surrogate": b'{"text": "good \\ud800 film"}',
    "deep nesting": b"[" * 5000 + b"]" * 5000,
    "object as text": b'{"text": {"a": 1}}',
    "list as text": b'{"text": ["good"]}',
    "true as text": b'{"text": true}',
    "not json": b"{not json",
    "invalid utf-8": b"\xff\xfe\xfd",
    "oversize": b'["' + b"good " * 300_000 + b'"]',
}


def rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _disconnect(url: str) -> None:
    """Announce a 1,000-byte body, send 10 bytes of it, and hang up."""
    parsed = urlparse(url)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=10) as sock:
        sock.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n" + b'{"text": "')


def run_soak(url: str, texts: list[str], seconds: float = 60, clients: int = 8, pid: int | None = None,
             seed: int = 0) -> dict:
    """Returns {"answers": [(kind, sent texts or None, status, body)], "latencies_s": {...}, "rss_kib": [...]}."""
    import httpx

    answers, latencies, lock, stop = [], {"good": [], "hostile": []}, threading.Lock(), time.time() + seconds
    kinds = ["good"] * 6 + list(HOSTILE) + ["disconnect"]
    errors: list[str] = []

    def client(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        try:
            with httpx.Client(base_url=url, timeout=120) as session:
                while time.time() < stop:
                    kind = rng.choice(kinds)
                    started = time.perf_counter()
                    if kind == "disconnect":
                        _disconnect(url)
                        continue
                    sent = rng.sample(texts, rng.randint(1, 3)) if kind == "good" else None
                    body = json.dumps(sent).encode() if sent else HOSTILE[kind]
                    response = session.post("/predict", content=body, headers={"content-type": "application/json"})
                    took = time.perf_counter() - started
                    with lock:
                        answers.append((kind, sent, response.status_code, response.json()))
                        latencies["good" if kind == "good" else "hostile"].append(took)
        except Exception as exc:  # noqa: BLE001 (reported, and fails the soak)
            errors.append(f"client {index}: {type(exc).__name__}: {exc}")

    samples: list[int] = []
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        if pid:
            samples.append(rss_kib(pid))
        time.sleep(1)
    for thread in threads:
        thread.join()
    return {"answers": answers, "latencies_s": latencies, "rss_kib": samples, "errors": errors, "seconds": seconds}


def summary(result: dict) -> dict:
    def percentile(values, q):
        values = sorted(values)
        return round(1000 * values[min(len(values) - 1, int(q * len(values)))], 1) if values else None

    statuses: dict = {}
    for _, _, status, _ in result["answers"]:
        statuses[status] = statuses.get(status, 0) + 1
    rss = result["rss_kib"]
    return {"requests": len(result["answers"]), "statuses": dict(sorted(statuses.items())),
            "good_p50_ms": percentile(result["latencies_s"]["good"], 0.5),
            "good_p99_ms": percentile(result["latencies_s"]["good"], 0.99),
            "rss_first_kib": rss[0] if rss else None, "rss_peak_kib": max(rss) if rss else None,
            "rss_last_kib": rss[-1] if rss else None, "client_errors": result["errors"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("url")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--pid", type=int, help="the server's process id, to sample its memory")
    args = parser.parse_args()
    texts = [f"the film was {w}" for w in ("good", "bad", "great", "awful", "fine", "poor")]
    print(json.dumps(summary(run_soak(args.url, texts, args.seconds, args.clients, args.pid)), indent=1))


if __name__ == "__main__":
    main()
