"""Regression (STS-B) and multi-label (GoEmotions): bertkit against the HF Trainer, same data, model
and budget, each run in its own process (benchmarks/run.py's run_isolated).

    python -m benchmarks.problems [--only stsb,goemotions] [--sides hf,bertkit] [--stsb-train 2000]
                                  [--go-train 4000] [--go-eval 2000] [--epochs 2] [--lr 1e-4] [--out FILE]

The HF side is transformers' examples/pytorch/text-classification/run_classification.py recipe:
``problem_type="regression"`` with one output (MSE), ``"multi_label_classification"`` with
multi-hot float labels (BCE), predictions at 0.5, dynamic padding, length-grouped batches, fp32.
bertkit runs its defaults plus the named options. Multi-label scores are given for both sides at
0.5 and at the one threshold that maximises micro-F1 on the same dev rows (bertkit tunes and
stores it; the HF side gets the same search on its probabilities), with the F1 of the labels
rarest in the training rows, where class weights should show.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from benchmarks.run import run_isolated
from bertkit.options import RunOptions

DATA = os.environ.get("BERTKIT_DATA_DIR", "/work/shared/data")
RARE: list = []  # set by main(): the GoEmotions labels rarest in the training rows


def rows(name: str, split: str, limit: int | None) -> list[dict]:
    """The examples bertkit reads (its registry and readers), so both sides see the same rows."""
    from benchmarks.hf_sequence import bertkit_rows

    return bertkit_rows(name, split, limit, "pair" if name == "stsb" else "cls")


def bertkit_side(name: str, n_train: int, n_eval: int | None, hp: dict, options: dict, rare: list = ()) -> dict:
    RARE[:] = rare  # a spawned process starts without main()'s globals
    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.options import EvalOptions, InferenceOptions

    task = "pair" if name == "stsb" else "cls"
    config = TrainConfig(
        epochs=hp["epochs"],
        lr=hp["lr"],
        batch_size=32,
        max_length=128,
        max_train_samples=n_train,
        max_eval_samples=n_eval,
        precision="no",
        seed=42,
        task_options=dict(options),
    )
    with tempfile.TemporaryDirectory() as out:
        result = api.finetune(
            task, RunOptions(data=name, data_dir=DATA, model="minilm", output=os.path.join(out, "model")), config=config
        )
        tuned = at_half = None
        if name == "goemotions":  # the same model on the same dev rows at 0.5; result.metrics are at the tuned one
            report = api.evaluate(
                os.path.join(out, "model"),
                EvalOptions(
                    data=name,
                    data_dir=DATA,
                    max_eval_samples=n_eval,
                    task_options={"threshold": 0.5},
                    store_threshold=False,
                ),
                InferenceOptions(precision="no"),
            )
            at_half, tuned = report["metrics"], (report.get("tuned_not_stored") or report["tuned"])["threshold"]
    shown = " ".join(f"{k}={v}" for k, v in options.items()) or "(defaults)"
    return {
        "side": f"bertkit {shown}",
        "metrics": _summary(name, at_half or result.metrics),
        "tuned": _summary(name, result.metrics) if tuned is not None else None,
        "train_seconds": result.throughput["train_seconds"],
        "tuned_threshold": tuned,
    }


def _summary(name: str, metrics: dict) -> dict:
    """The float metrics, plus for multi-label the F1 of the labels rarest in the training rows."""
    summary = {k: v for k, v in metrics.items() if isinstance(v, float)}
    if name == "goemotions":
        per_label = metrics["per_label"]
        summary["rare_f1"] = {label: per_label[label]["f1"] for label in RARE}
        summary["rare_mean_f1"] = sum(summary["rare_f1"].values()) / len(RARE)
    return summary


def hf_side(name: str, n_train: int, n_eval: int | None, hp: dict, rare: list = ()) -> dict:
    RARE[:] = rare
    from benchmarks import hf_sequence
    from bertkit.data.registry import DATASETS
    from bertkit.models import resolve_model

    kind, labels = ("regression", None) if name == "stsb" else ("multi-label", list(DATASETS[name].label_names))
    hp = {"epochs": hp["epochs"], "batch_size": 32, "lr": hp["lr"], "warmup": 0.1, "weight_decay": 0.01, "seed": 42}
    result = hf_sequence.run(
        "hf_best",
        kind,
        rows(name, "train", n_train),
        rows(name, "dev", n_eval),
        labels,
        str(resolve_model("minilm")),
        hp,
    )
    metrics = result["metrics"]
    if name == "stsb":
        return {
            "side": "HF Trainer (run_classification recipe)",
            "metrics": metrics,
            "train_seconds": result["train_seconds"],
        }
    return {
        "side": "HF Trainer (run_classification recipe)",
        "metrics": _summary(name, metrics["at_half"]),
        "tuned": _summary(name, metrics),
        "tuned_threshold": metrics["threshold"],
        "train_seconds": result["train_seconds"],
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="stsb,goemotions")
    parser.add_argument("--stsb-train", type=int, default=2000)
    parser.add_argument("--go-train", type=int, default=4000)
    parser.add_argument("--go-eval", type=int, default=2000)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--sides", default="hf,bertkit", help="hf, bertkit or both")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    hp = {"epochs": args.epochs, "lr": args.lr}
    plans = {
        "stsb": (
            args.stsb_train,
            None,
            [{"problem_type": "regression"}, {"problem_type": "regression", "scale_targets": True}],
        ),
        "goemotions": (args.go_train, args.go_eval, [{}, {"class_weights": "auto"}]),
    }
    if "goemotions" in args.only:
        RARE[:] = rarest_labels(args.go_train, 5)
    results = []
    for name in args.only.split(","):
        n_train, n_eval, variants = plans[name]
        runs = [run_isolated(hf_side, name, n_train, n_eval, hp, rare=list(RARE))] if "hf" in args.sides else []
        if "bertkit" in args.sides:
            runs += [
                run_isolated(bertkit_side, name, n_train, n_eval, hp, options, rare=list(RARE)) for options in variants
            ]
        for run in runs:
            run["dataset"] = name
            print(json.dumps(run), file=sys.stderr, flush=True)
        results += runs
    print(table(results))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(results, handle, indent=1)


def rarest_labels(n_train: int, count: int) -> list:
    from collections import Counter

    seen = Counter(label for row in rows("goemotions", "train", n_train) for label in row["label"])
    from bertkit.data.registry import DATASETS

    return sorted(DATASETS["goemotions"].label_names, key=lambda name: (seen[name], name))[:count]


def table(results: list) -> str:
    lines = ["| data | side | at 0.5 (multi-label) | at the dev-tuned threshold | train s |", "|---|---|---|---|---|"]
    for run in results:
        if "error" in run:
            lines.append(f"| {run['dataset']} | {run.get('side', '?')} | error: {run['error'][:80]} | | |")
            continue
        keys = ("pearson", "spearman", "mse") if run["dataset"] == "stsb" else ("micro_f1", "macro_f1", "rare_mean_f1")
        shown = [", ".join(f"{k} {m[k]:.4f}" for k in keys if k in m) for m in (run["metrics"], run.get("tuned") or {})]
        if run.get("tuned_threshold") is not None:
            shown[1] += f" (threshold {run['tuned_threshold']})"
        lines.append(f"| {run['dataset']} | {run['side']} | {shown[0]} | {shown[1]} | {run['train_seconds']:.0f} |")
    if RARE:
        lines.append(
            f"\nrare_mean_f1: mean F1 of the {len(RARE)} labels rarest in the training rows ({', '.join(RARE)})"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
