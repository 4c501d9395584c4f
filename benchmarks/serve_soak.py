"""A soak of `bertkit serve`: clients mixing good and hostile requests, every answer checked.

    python benchmarks/serve_soak.py --model DIR --seconds 60 --clients 8
    python -m benchmarks.serve_soak --url http://127.0.0.1:8000 --seconds 60 [--pid PID]

With --model, a server for DIR is started on a free local port (`python -m bertkit serve`, the
bertkit that PYTHONPATH gives, so an older checkout can be measured the same way) and each good
request's rows are compared with what `bertkit predict DIR` writes for the same texts.
Each client loops until the time is up, sending (in a fixed random order) a good request with
1-3 texts, or one of the hostile bodies below, or a body cut short by hanging up. Good requests
must answer 200 with `bertkit predict`'s rows; hostile ones a 4xx with bertkit's error body;
nothing may answer 500. The server's resident memory is sampled each second (first, peak, last).
`tests/cli/test_serve_soak.py` runs it for 10 s; this runs it as long as asked.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

REPO = Path(__file__).resolve().parent.parent
TEXTS = [f"the film was {w}" for w in ("good", "bad", "great", "awful", "fine", "poor")]
HOSTILE = {
    "lone surrogate": b'{"text": "good \\ud800 film"}',
    "lone surrogate in a list": b'["fine", "good \\udfff film"]',
    "lone surrogate in a key": b'{"te\\ud800xt": "good"}',
    "deep nesting": b"[" * 5000 + b"]" * 5000,
    "deep nesting in an object": b'{"text": ' + b'{"a": ' * 3000 + b"1" + b"}" * 3001,
    "object as text": b'{"text": {"a": 1}}',
    "list as text": b'{"text": ["good"]}',
    "true as text": b'{"text": true}',
    "number as text": b'{"text": 42}',
    "not json": b"{not json",
    "invalid utf-8": b"\xff\xfe\xfd",
    "oversize": b'["' + b"good " * 300_000 + b'"]',  # 1.5 MB, over the default 1 MiB
}
REQUEST_TIMEOUT_S = 30  # a server whose batching loop died answers nothing: counted, not waited for
GOOD_SHARE = 8  # good requests per round of the kinds: most traffic is good, as in real use


def rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def same_row(got: dict, want: dict) -> bool:
    """`bertkit predict`'s row: every field equal, probabilities up to the float noise of being
    padded in another batch."""
    if set(got) != set(want) or any(got[k] != want[k] for k in want if k not in ("score", "probabilities")):
        return False
    return abs(got["score"] - want["score"]) <= 2e-6 and all(
        abs(got["probabilities"][k] - v) <= 2e-6 for k, v in want["probabilities"].items()
    )


def _disconnect(url: str) -> None:
    """Announce a 1,000-byte body, send 10 bytes of it, and hang up."""
    parsed = urlparse(url)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=10) as sock:
        sock.sendall(
            b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n" + b'{"text": "'
        )


def _post(session, body: bytes) -> tuple[int, dict]:
    """(status, JSON body) of POST /predict; status 0 when no answer came (a reset, a timeout)."""
    import httpx

    try:
        response = session.post("/predict", content=body, headers={"content-type": "application/json"})
    except httpx.TransportError as exc:  # counted as a wrong answer; the client goes on
        return 0, {"no answer": f"{type(exc).__name__}: {exc}"}
    try:
        return response.status_code, response.json()
    except ValueError:  # a framework's plain-text error page: kept, and counted as wrong
        return response.status_code, {"not json": response.text[:200]}


def run_soak(
    url: str, texts: list[str], seconds: float = 60, clients: int = 8, pid: int | None = None, seed: int = 0
) -> dict:
    """Returns {"answers": [(kind, sent texts or None, status, body)], "latencies_s": {...},
    "rss_kib": [...], "errors": [...], "disconnects": n}."""
    import httpx

    answers, latencies, lock, stop = [], {"good": [], "hostile": []}, threading.Lock(), time.time() + seconds
    kinds = ["good"] * GOOD_SHARE + list(HOSTILE) + ["disconnect"]
    errors: list[str] = []
    disconnects = [0]

    def client(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        try:
            with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as session:
                while time.time() < stop:
                    kind = rng.choice(kinds)
                    if kind == "disconnect":
                        try:
                            _disconnect(url)
                        except OSError as exc:  # the server refused even that: noted, the client goes on
                            errors.append(f"client {index}: disconnect: {exc}")
                        with lock:
                            disconnects[0] += 1
                        continue
                    sent = rng.sample(texts, rng.randint(1, 3)) if kind == "good" else None
                    body = json.dumps(sent).encode() if sent else HOSTILE[kind]
                    started = time.perf_counter()
                    status, answer = _post(session, body)
                    took = time.perf_counter() - started
                    with lock:
                        answers.append((kind, sent, status, answer))
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
    return {
        "answers": answers,
        "latencies_s": latencies,
        "rss_kib": samples,
        "errors": errors,
        "disconnects": disconnects[0],
        "seconds": seconds,
    }


def wrong_answers(result: dict, want: dict) -> list:
    """(kind, status, body) of every answer breaking the contract: a good request not answered 200
    with predict's rows (``want``: text -> row), a hostile one not a 4xx with {"error", "hint"}."""
    wrong = []
    for kind, sent, status, body in result["answers"]:
        if kind == "good":
            rows = body.get("predictions") if status == 200 else None
            ok = (
                rows is not None
                and [r.get("text") for r in rows] == sent
                and all(same_row(r, want[r["text"]]) for r in rows)
            )
        else:
            ok = 400 <= status < 500 and set(body) == {"error", "hint"}
        if not ok:
            wrong.append((kind, status, body))
    return wrong


def summary(result: dict, want: dict | None = None) -> dict:
    def percentile(values, q):
        values = sorted(values)
        return round(1000 * values[min(len(values) - 1, int(q * len(values)))], 1) if values else None

    statuses: dict = {}
    for _, _, status, _ in result["answers"]:
        statuses[status] = statuses.get(status, 0) + 1
    good = [a for a in result["answers"] if a[0] == "good"]
    rss = result["rss_kib"]
    stats = {
        "seconds": result["seconds"],
        "requests": len(result["answers"]),
        "good_requests": len(good),
        "good_200": sum(a[2] == 200 for a in good),
        "disconnects": result["disconnects"],
        "statuses": dict(sorted(statuses.items())),
        "good_p50_ms": percentile(result["latencies_s"]["good"], 0.5),
        "good_p99_ms": percentile(result["latencies_s"]["good"], 0.99),
        "rss_first_kib": rss[0] if rss else None,
        "rss_peak_kib": max(rss) if rss else None,
        "rss_last_kib": rss[-1] if rss else None,
        "client_errors": result["errors"],
    }
    if want is not None:
        wrong = wrong_answers(result, want)
        stats["wrong_answers"] = len(wrong)
        stats["wrong_examples"] = [f"{kind}: {status} {json.dumps(body)[:160]}" for kind, status, body in wrong[:3]]
    return stats


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _env() -> dict:
    """PYTHONPATH's bertkit (this checkout's by default); the commands run outside the checkout,
    since `python -m` would put the working directory's bertkit first."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    env.setdefault("PYTHONPATH", str(REPO))
    return env


def start_server(model_dir, console, *options, startup_s: float = 180) -> tuple[subprocess.Popen, str]:
    """`bertkit serve model_dir` on a free local port, its console into the open file ``console``
    (not a pipe the access log could fill); returns (process, url) once /health answers."""
    import httpx

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bertkit", "serve", str(model_dir), "--port", str(port), *map(str, options)],
        env=_env(),
        cwd=tempfile.gettempdir(),
        stdout=console,
        stderr=subprocess.STDOUT,
    )
    url, deadline = f"http://127.0.0.1:{port}", time.time() + startup_s
    while True:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.time() > deadline:
            process.kill()
            raise RuntimeError(f"the server did not start (exit {process.poll()}); see its console")
        time.sleep(0.5)


def predict_rows(model_dir, texts: list[str]) -> dict:
    """text -> the row `bertkit predict` writes for it."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
        done = subprocess.run(
            [sys.executable, "-m", "bertkit", "predict", str(model_dir), "--input", str(Path(tmp) / "in.jsonl")],
            env=_env(),
            cwd=tmp,
            capture_output=True,
            text=True,
            check=True,
        )
    return {row["text"]: row for row in map(json.loads, done.stdout.splitlines())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--model", help="a cls model directory: start a server for it and check every row")
    target.add_argument("--url", help="a running server (rows are then checked for shape only)")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--pid", type=int, help="with --url: the server's process id, to sample its memory")
    args = parser.parse_args()
    if args.url:
        print(json.dumps(summary(run_soak(args.url, TEXTS, args.seconds, args.clients, args.pid)), indent=1))
        return
    want = predict_rows(args.model, TEXTS)
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as console:
        process, url = start_server(args.model, console)
        try:
            result = run_soak(url, TEXTS, args.seconds, args.clients, process.pid)
        finally:
            process.terminate()
            process.wait(timeout=30)
    log = Path(console.name).read_text(errors="replace")
    stats = summary(result, want)
    stats["server_log"] = {"lines": log.count("\n"), "tracebacks": log.count("Traceback"), "file": console.name}
    print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main()
