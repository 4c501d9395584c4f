"""Peak memory and throughput of `bertkit predict` and `bertkit embed` as the input grows: this
code's streaming path against a baseline checkout (the landed in-memory path), side by side in
one run, each command in its own process.

    python -m benchmarks.streaming --baseline /path/to/old/checkout [--sizes 10000,100000,1000000]
                                   [--baseline-sizes 10000,100000] [--out benchmarks/results/streaming.md]

The model is tests/tiny_models' 2-layer, 32-wide BERT (fine-tuned 1 epoch on 64 rows for predict),
as in the issue's measurement: the point is what grows with the input, not the model's speed.
Input: SST-2 train sentences (BERTKIT_DATA_DIR) repeated to the size, as JSONL with ids. One
thread per process (OMP_NUM_THREADS=1). Peak RSS is the process's own (os.wait4's ru_maxrss).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bertkit.options import RunOptions

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("BERTKIT_DATA_DIR", REPO.parent / "shared" / "data"))


def sentences() -> list[str]:
    with open(DATA / "sst2" / "train.tsv", newline="") as handle:
        return [row["sentence"] for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)]


def write_input(path: Path, rows: int, texts: list[str]) -> None:
    with open(path, "w") as handle:
        for i, text in zip(range(rows), itertools.cycle(texts)):
            handle.write(json.dumps({"id": i, "text": text}) + "\n")


def models(root: Path) -> tuple[Path, Path]:
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import build_tiny_bert

    from bertkit import api
    from bertkit.config import TrainConfig

    encoder = build_tiny_bert(root / "encoder")
    train = root / "train.jsonl"
    with open(train, "w") as handle:
        for i in range(64):
            handle.write(json.dumps({"text": "a good film" if i % 2 else "a bad plot", "label": i % 2}) + "\n")
    classifier = root / "classifier"
    api.finetune(
        "cls",
        RunOptions(data=str(train), model=str(encoder), output=str(classifier)),
        config=TrainConfig(epochs=1, batch_size=16),
    )
    return encoder, classifier


def measure(command: list[str], pythonpath: Path) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(pythonpath)}
    started = time.perf_counter()
    # cwd elsewhere: `python -m` puts the working directory before PYTHONPATH on sys.path
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tempfile.gettempdir()
    )
    err = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if status != 0:
        return {"error": err.decode()[-300:]}
    return {"wall_s": round(wall, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", required=True, help="a checkout of the code to compare with (its repo root)")
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--baseline-sizes", default="10000,100000", help="the in-memory path needs ~6 KB a row")
    parser.add_argument("--sides", default="streaming,baseline")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="rounds per size, the sides alternating in each; the table shows each side's median wall time",
    )
    parser.add_argument("--out", default=None)
    parser.add_argument("--build-models", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.build_models:  # in a child: this process stays small, and a child's peak RSS counts from its fork
        models(Path(args.build_models))
        return
    texts, results = sentences(), []
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        subprocess.run(
            [sys.executable, "-m", "benchmarks.streaming", "--baseline", ".", "--build-models", str(work)],
            check=True,
            cwd=REPO,
            capture_output=True,
        )
        encoder, classifier = work / "encoder", work / "classifier"
        for rows in map(int, args.sizes.split(",")):
            source = work / f"in-{rows}.jsonl"
            write_input(source, rows, texts)
            for round_, (command, model, suffix) in itertools.product(
                range(args.rounds), (("predict", classifier, ".jsonl"), ("embed", encoder, ".npy"))
            ):
                sides = (("streaming", REPO), ("baseline", Path(args.baseline).resolve()))
                for side, root in sides if round_ % 2 == 0 else sides[::-1]:  # neither side always goes first
                    if side not in args.sides or (
                        side == "baseline" and str(rows) not in args.baseline_sizes.split(",")
                    ):
                        continue
                    output = work / f"out-{side}-{command}{suffix}"
                    measured = measure(
                        [
                            sys.executable,
                            "-m",
                            "bertkit",
                            command,
                            str(model),
                            "--input",
                            str(source),
                            "--output",
                            str(output),
                        ],
                        root,
                    )
                    measured.update(rows=rows, side=side, command=command, round=round_)
                    if "wall_s" in measured:
                        measured["rows_per_s"] = round(rows / measured["wall_s"], 1)
                    print(json.dumps(measured), file=sys.stderr, flush=True)
                    results.append(measured)
                    output.unlink(missing_ok=True)
            source.unlink()
    print(table(results))
    if args.out:
        Path(args.out).write_text(table(results) + "\n\n```json\n" + json.dumps(results, indent=1) + "\n```\n")


def table(results: list[dict]) -> str:
    lines = [
        "| command | rows | streaming peak RSS MB | streaming rows/s | baseline peak RSS MB | baseline rows/s |"
        " throughput ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    keyed = {}
    for key in {(r["command"], r["rows"], r["side"]) for r in results}:  # the median round by wall time
        runs = sorted(
            (r for r in results if (r["command"], r["rows"], r["side"]) == key),
            key=lambda r: r.get("wall_s", float("inf")),
        )
        keyed[key] = runs[len(runs) // 2]
    for command, rows in sorted({(r["command"], r["rows"]) for r in results}):
        new, old = keyed.get((command, rows, "streaming"), {}), keyed.get((command, rows, "baseline"), {})
        ratio = f"{new['rows_per_s'] / old['rows_per_s']:.2f}x" if "rows_per_s" in new and "rows_per_s" in old else ""
        lines.append(
            f"| {command} | {rows:,} | {new.get('peak_rss_mb', new.get('error', ''))} | "
            f"{new.get('rows_per_s', '')} | {old.get('peak_rss_mb', old.get('error', '-'))} | "
            f"{old.get('rows_per_s', '-')} | {ratio} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
