"""`bertkit predict --ray` against single-process `bertkit predict` on the same Parquet rows, each
in its own process, timed side by side, with the rows compared (ids, labels, scores to 1e-5).

    python -m benchmarks.ray_predict [--rows 20000] [--actors 2] [--model DIR]

The default model is the streaming benchmark's tiny classifier (built here); pass --model for a
real one. The Ray side's wall time includes starting a local cluster and its actors (each imports
torch and loads the model): on one machine Ray costs more than it gives; it is for many machines.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.streaming import REPO, sentences


def timed(command: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{done.stderr[-2000:]}")
    return time.perf_counter() - started, done.stderr


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--model", default=None)
    args = parser.parse_args(argv)
    import pyarrow as pa
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        model = args.model
        if model is None:
            subprocess.run(
                [sys.executable, "-m", "benchmarks.streaming", "--baseline", ".", "--build-models", str(work)],
                check=True,
                cwd=REPO,
                capture_output=True,
            )
            model = str(work / "classifier")
        texts = sentences()
        rows = [{"id": i, "text": texts[i % len(texts)]} for i in range(args.rows)]
        source = work / "rows.parquet"
        pq.write_table(pa.Table.from_pylist(rows), source)
        bertkit = [sys.executable, "-m", "bertkit", "predict", model, "--input", str(source)]
        single_s, _ = timed([*bertkit, "--output", str(work / "single.jsonl")])
        ray_s, log = timed([*bertkit, "--output", str(work / "ray"), "--ray", "--actors", str(args.actors)])
        want = [json.loads(line) for line in (work / "single.jsonl").read_text().splitlines()]
        got = pa.concat_tables(pq.read_table(p) for p in sorted((work / "ray").iterdir())).to_pylist()
        same = [r["id"] for r in got] == [r["id"] for r in want] and all(
            a["label"] == b["label"] and abs(a["score"] - b["score"]) <= 1e-5 for a, b in zip(got, want)
        )
        result = {
            "rows": args.rows,
            "actors": args.actors,
            "single_process_s": round(single_s, 2),
            "single_rows_per_s": round(args.rows / single_s, 1),
            "ray_s": round(ray_s, 2),
            "ray_rows_per_s": round(args.rows / ray_s, 1),
            "ray_line": log.strip().splitlines()[-1],
            "rows_equal_in_order": same,
            "cpus": os.cpu_count(),
        }
        print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
