"""Sentences/s and accuracy of `bertkit predict`'s backends on one model, side by side: torch in
fp32 and at its default precision, onnx / onnx-int8 (after `bertkit export onnx DIR --int8`),
openvino / openvino-int8 (after `bertkit export openvino DIR --int8`), each loaded once, then run
alternately round by round so machine load hits each alike; best round, ratios against torch fp32
(sentence-transformers' reference point) and accuracy deltas.

    python -m benchmarks.backends_speed runs/demo-sst2 --data sst2 [--rounds 3] [--backends ...]
"""

from __future__ import annotations

import argparse
import json
import time

ALL = ("torch-fp32", "torch", "onnx", "onnx-int8", "openvino", "openvino-int8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("--data", default="sst2", help="known dataset (its dev split) or a file with labels")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--backends", default=",".join(ALL))
    args = parser.parse_args()

    from bertkit.api.prediction import Predictor
    from bertkit.data import registry
    from bertkit.options import InferenceOptions
    from bertkit.tasks.base import EVAL

    def load(name: str) -> Predictor:
        backend, precision = ("torch", "no") if name == "torch-fp32" else (name, "auto")
        run = InferenceOptions(batch_size=args.batch_size, precision=precision)
        return Predictor(args.model_dir, run, backend, quiet=True).load()

    predictors = {name: load(name) for name in args.backends.split(",")}
    adapter = next(iter(predictors.values())).adapter
    split = registry.DATASETS[args.data].dev_split if registry.is_known(args.data) else "dev"
    examples = adapter.read(registry.resolve(args.data, split, None, adapter.name), EVAL)
    times = {name: [] for name in predictors}
    rows = {}
    for predictor in predictors.values():
        predictor.predict(examples[:64])  # warm-up: first-call allocations, lazy imports, graph compilation
    for _ in range(args.rounds):
        for name, predictor in predictors.items():
            started = time.perf_counter()
            rows[name] = predictor.predict(examples)
            times[name].append(time.perf_counter() - started)
    result = {"examples": len(examples), "batch_size": args.batch_size, "rounds": args.rounds}
    reference = "torch-fp32" if "torch-fp32" in predictors else next(iter(predictors))
    for name, predictor in predictors.items():
        best = min(times[name])
        entry = {
            "precision": predictor.runtime().get("precision"),
            "sentences_per_s": round(len(examples) / best, 1),
            "best_seconds": round(best, 3),
            "all_seconds": [round(t, 3) for t in times[name]],
        }
        if "label" in examples[0]:
            entry["accuracy"] = round(
                sum(r["label"] == ex["label"] for r, ex in zip(rows[name], examples)) / len(examples), 4
            )
        entry["same_label_as_reference"] = sum(a["label"] == b["label"] for a, b in zip(rows[name], rows[reference]))
        result[name] = entry
    result["reference"] = reference
    result["speedup_vs_reference"] = {
        name: round(result[name]["sentences_per_s"] / result[reference]["sentences_per_s"], 2) for name in predictors
    }
    if "accuracy" in result[reference]:
        result["accuracy_delta_vs_reference"] = {
            name: round(result[name]["accuracy"] - result[reference]["accuracy"], 4) for name in predictors
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
