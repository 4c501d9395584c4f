"""Temperature scaling and split-conformal label sets on real data: MiniLM fine-tuned on SST-2 and
MRPC, its dev rows shuffled (seed 0) and cut in two halves. `bertkit calibrate` fits the temperature
on half A (and stores A's conformal scores); on half B, never seen by the fit, the uncalibrated model
(the baseline) and the calibrated one are scored side by side: ECE (15 bins, top label), Brier, NLL;
then `predict --coverage 0.9 / 0.95` from the stored scores: coverage on B with its binomial standard
error, mean set size, empty and full sets. ECE and Brier are also computed by scikit-learn
(calibration_curve, brier_score_loss) as a cross-check. Results: benchmarks/results/calibration.json
and .md.

    flock /tmp/bertkit-heavy.lock python benchmarks/calibration.py --rows 2000 --epochs 2 --threads 2
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.report import cpu_flags  # noqa: E402
from benchmarks.run import machine  # noqa: E402
from bertkit.metrics import calibration as cal  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
DATASETS = {"sst2": "cls", "mrpc": "pair"}
COVERAGES = (0.9, 0.95)


def dev_rows(name: str, data_dir: Path) -> list[dict]:
    """The dev split as {text[, text_pair], label id} (MRPC's quotes are text, not CSV quoting)."""
    lines = (data_dir / name / "dev.tsv").read_text(encoding="utf-8-sig").splitlines()[1:]
    if name == "sst2":
        return [{"text": t.strip(), "label": int(y)} for t, y in (line.rsplit("\t", 1) for line in lines)]
    rows = []
    for line in lines:
        quality, _, _, first, second = line.split("\t")
        rows.append({"text": first, "text_pair": second, "label": int(quality)})
    return rows


def write_half(rows: list[dict], labels: list[str], path: Path) -> Path:
    path.write_text("".join(json.dumps({**r, "label": labels[r["label"]]}) + "\n" for r in rows))
    return path


def probabilities(rows: list[dict], labels: list[str]) -> np.ndarray:
    return np.array([[row["probabilities"][name] for name in labels] for row in rows])


def scores_with_sklearn(p: np.ndarray, gold: np.ndarray) -> dict:
    from sklearn.calibration import calibration_curve
    from sklearn.metrics import brier_score_loss

    top, correct = p.max(1), (p.argmax(1) == gold).astype(int)
    accuracy, confidence = calibration_curve(correct, top, n_bins=15, strategy="uniform")
    counts = np.bincount(np.searchsorted(np.linspace(0, 1, 16)[1:-1], top, side="right"), minlength=15)
    counts = counts[counts > 0]
    return {
        "ece": float((counts / counts.sum() * np.abs(accuracy - confidence)).sum()),
        "brier": 2 * float(brier_score_loss(gold, p[:, 1])),  # two labels: the multi-class form is twice it
    }


def one_dataset(name: str, args, work: Path) -> dict:
    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.options import CalibrateOptions, CoverageOptions, InferenceOptions, PredictOptions, RunOptions

    task, model = DATASETS[name], work / f"{name}-model"
    started = time.perf_counter()
    config = TrainConfig(
        epochs=args.epochs, lr=args.lr, batch_size=32, max_train_samples=args.rows, seed=args.seed, precision="no"
    )
    run = RunOptions(data=name, data_dir=str(args.data_dir), model="minilm", output=str(model), threads=args.threads)
    trained = api.finetune(task, run, config=config)
    train_seconds = time.perf_counter() - started
    labels = json.loads((model / "bertkit.json").read_text())["task"]["labels"]
    rows = dev_rows(name, args.data_dir)
    random.Random(0).shuffle(rows)
    fit_rows, held_rows = rows[: len(rows) // 2], rows[len(rows) // 2 :]
    fit_file, held_file = (
        write_half(fit_rows, labels, work / "A.jsonl"),
        write_half(held_rows, labels, work / "B.jsonl"),
    )
    gold = np.array([r["label"] for r in held_rows])
    inference = InferenceOptions(precision="no", threads=args.threads)

    before = probabilities(api.predict(str(model), PredictOptions(input=str(held_file)), inference), labels)
    calibrated = work / f"{name}-calibrated"
    shutil.copytree(model, calibrated)
    record = api.calibrate(str(calibrated), CalibrateOptions(data=str(fit_file)), inference)
    after = probabilities(api.predict(str(calibrated), PredictOptions(input=str(held_file)), inference), labels)
    result = {
        "dataset": name,
        "train_rows": trained.train_examples,
        "train_seconds": round(train_seconds, 1),
        "dev_accuracy": trained.metrics["accuracy"],
        "fit_rows": len(fit_rows),
        "held_out_rows": len(held_rows),
        "temperature": record["temperature"],
        "fit_half": {"before": record["before"], "after": record["after"]},
        "held_out": {
            "uncalibrated": {**cal.calibration_scores(before, gold), "sklearn": scores_with_sklearn(before, gold)},
            "calibrated": {**cal.calibration_scores(after, gold), "sklearn": scores_with_sklearn(after, gold)},
        },
        "coverage": [],
    }
    for coverage in COVERAGES:
        options = PredictOptions(input=str(held_file), conformal=CoverageOptions(coverage))
        predicted = api.predict(str(calibrated), options, inference)
        sets = np.array([[int(name_ in row["prediction_set"]) for name_ in labels] for row in predicted])
        summary = cal.set_summary(sets, gold)
        summary["standard_error"] = round(math.sqrt(coverage * (1 - coverage) / len(gold)), 4)
        summary["target"] = coverage
        summary["quantile"] = predicted.prediction_sets["quantile"]
        result["coverage"].append(summary)
    print(json.dumps({k: v for k, v in result.items() if k != "fit_half"}, indent=1), flush=True)
    return result


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        "# Calibration: temperature scaling and split-conformal sets (MiniLM)",
        "",
        "Commands (run under `flock /tmp/bertkit-heavy.lock`, one dataset each; the table keeps each dataset's "
        "latest run):",
        "",
        *(f"- `{run['command']}` ({run['machine']['date']})" for run in report.get("earlier_runs", [])),
        f"- `{report['command']}` ({report['machine']['date']})",
        "",
        f"- {m['date']}; {m['cpu_model']} ({cpu_flags(m)}), {m['usable_cores']} cores, torch threads "
        f"{report['threads']}; torch {m['torch']}, transformers {m['transformers']}; commit {m['git_commit'][:10]}",
        f"- MiniLM fine-tuned on the first {report['rows']} training rows, {report['epochs']} epoch(s), lr "
        f"{report['lr']}, seed {report['seed']}, fp32; dev shuffled (seed 0) and halved: the temperature and the "
        "conformal scores from half A (`bertkit calibrate`), every number below on half B.",
        "",
        "| data | rows A / B | T | ECE before | ECE after | Brier before | Brier after | NLL before | NLL after "
        "| accuracy |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        u, c = r["held_out"]["uncalibrated"], r["held_out"]["calibrated"]
        lines.append(
            f"| {r['dataset']} | {r['fit_rows']} / {r['held_out_rows']} | {r['temperature']:.3f} | {u['ece']:.4f} | "
            f"{c['ece']:.4f} | {u['brier']:.4f} | {c['brier']:.4f} | {u['nll']:.4f} | {c['nll']:.4f} | "
            f"{c['accuracy']:.4f} |"
        )
    lines += [
        "",
        "scikit-learn's ECE (calibration_curve) and 2 x brier_score_loss agree with these to the 6 decimals recorded "
        "(in calibration.json).",
        "",
        "| data | target | coverage on B (SE) | mean set size | empty sets | full sets |",
        "|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        for s in r["coverage"]:
            lines.append(
                f"| {r['dataset']} | {s['target']} | {s['coverage']:.4f} ({s['standard_error']:.4f}) | "
                f"{s['mean_set_size']:.3f} | {s['empty_rate']:.1%} | {s['full_rate']:.1%} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="sst2,mrpc")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data-dir", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--markdown-only", action="store_true", help="redraw calibration.md from calibration.json")
    args = parser.parse_args()
    if args.markdown_only:
        (RESULTS / "calibration.md").write_text(markdown(json.loads((RESULTS / "calibration.json").read_text())))
        return
    work = Path(tempfile.mkdtemp(prefix="bertkit-calibration-"))
    try:
        results = [one_dataset(name, args, work) for name in args.datasets.split(",")]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {
        "command": "python benchmarks/calibration.py " + " ".join(sys.argv[1:]),
        "machine": machine(),
        **{k: getattr(args, k) for k in ("rows", "epochs", "lr", "seed", "threads")},
        "results": results,
    }
    RESULTS.mkdir(exist_ok=True)
    kept = RESULTS / "calibration.json"  # a run of some datasets keeps the others' latest results
    if kept.is_file():
        done = {r["dataset"] for r in results}
        earlier = json.loads(kept.read_text())
        results[:0] = [r for r in earlier["results"] if r["dataset"] not in done]
        report["earlier_runs"] = earlier.get("earlier_runs", []) + [
            {k: earlier[k] for k in ("command", "machine")} | {"datasets": [r["dataset"] for r in earlier["results"]]}
        ]
    (RESULTS / "calibration.json").write_text(json.dumps(report, indent=1) + "\n")
    (RESULTS / "calibration.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
