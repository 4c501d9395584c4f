"""Sentences/s of `bertkit predict` backends on one model: torch, onnx, onnx-int8 (after
`bertkit export onnx DIR --int8`), run alternately so machine load hits each alike.

    python -m benchmarks.onnx_speed runs/demo-sst2 --data sst2 [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("--data", default="sst2", help="known dataset (its dev split) or a file with labels")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    from bertkit.data import registry
    from bertkit.api.prediction import Predictor
    from bertkit.tasks.base import EVAL

    predictors = {b: Predictor(args.model_dir, backend=b, batch_size=args.batch_size, quiet=True).load()
                  for b in ("torch", "onnx", "onnx-int8")}
    adapter = predictors["torch"].adapter
    split = registry.DATASETS[args.data].dev_split if registry.is_known(args.data) else "dev"
    examples = adapter.read(registry.resolve(args.data, split, None, adapter.name), EVAL)
    times = {b: [] for b in predictors}
    rows = {}
    for backend, predictor in predictors.items():
        predictor.predict(examples[:64])  # warm-up: first-call allocations, lazy imports
    for _ in range(args.rounds):
        for backend, predictor in predictors.items():
            started = time.perf_counter()
            rows[backend] = predictor.predict(examples)
            times[backend].append(time.perf_counter() - started)
    result = {"examples": len(examples), "batch_size": args.batch_size, "rounds": args.rounds}
    for backend in predictors:
        best = min(times[backend])
        entry = {"sentences_per_s": round(len(examples) / best, 1), "best_seconds": round(best, 3),
                 "all_seconds": [round(t, 3) for t in times[backend]]}
        if "label" in examples[0]:
            entry["accuracy"] = round(sum(r["label"] == ex["label"] for r, ex in zip(rows[backend], examples))
                                      / len(examples), 4)
        entry["same_label_as_torch"] = sum(a["label"] == b["label"] for a, b in zip(rows[backend], rows["torch"]))
        result[backend] = entry
    result["speedup_vs_torch"] = {b: round(result[b]["sentences_per_s"] / result["torch"]["sentences_per_s"], 2)
                                  for b in ("onnx", "onnx-int8")}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
