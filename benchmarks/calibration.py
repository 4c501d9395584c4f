"""Temperature scaling and split-conformal label sets on real data, the issue's protocol: MiniLM
fine-tuned on the first ``--rows`` training rows; the temperature (and the conformal scores) fitted by
`bertkit calibrate` on the next ``--fit-rows`` training rows, which training never saw; every number
measured on the evaluation split, which neither saw: dev for SST-2, MRPC and RTE (GLUE's test labels
are hidden), test for GoEmotions. On it the uncalibrated model (the baseline) and the calibrated one
are scored side by side: ECE (15 bins, top label), Brier, NLL; then `predict --coverage 0.9 / 0.95`
from the stored scores: coverage with its binomial standard error, mean set size, empty and full sets.
ECE and Brier are also computed by scikit-learn (calibration_curve, brier_score_loss) as a cross-check.

Coverage is measured twice: with the scores calibrate stored (held-out training rows) and with
scores from rows exchangeable with the measured ones (`--calibration-data`: dev half A -> half B for
GLUE, dev -> test for GoEmotions), the assumption the guarantee rests on.

GoEmotions runs two ways: ``goemotions``, a 28-way single-label task on the comments that carry one
emotion (84 % of them; the same filter on every split; rows whose label the training rows never had
are left out and counted), which calibrate's one softmax needs; and ``goemotions-multi``, the
multi-label task as it is, whose sets must hold every gold emotion of a comment (no temperature).
Results: benchmarks/results/calibration.json and .md (each dataset's latest run kept).

    flock /tmp/bertkit-heavy.lock python benchmarks/calibration.py --datasets sst2,mrpc,rte --rows 2000
    flock /tmp/bertkit-heavy.lock python benchmarks/calibration.py --datasets goemotions,goemotions-multi --rows 8000
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

from benchmarks.machine import machine  # noqa: E402
from benchmarks.report import cpu_flags  # noqa: E402
from bertkit.metrics import calibration as cal  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
DATASETS = {"sst2": ("cls", "dev"), "mrpc": ("pair", "dev"), "rte": ("pair", "dev"), "goemotions": ("cls", "test")}
COVERAGES = (0.9, 0.95)
PROTOCOL = "fit on held-out training rows, measure on the evaluation split"  # earlier: halves of dev


def split_rows(name: str, split: str, data_dir: Path, every_row: bool = False) -> list[dict]:
    """A split as bertkit reads it (text[, text_pair], label name); GoEmotions: its one-emotion rows
    (``every_row``: every comment, with its tuple of emotions)."""
    from bertkit.data import registry
    from bertkit.tasks import get_task_class
    from bertkit.tasks.base import EVAL, TRAIN

    task = DATASETS[name][0]
    options = {"problem_type": "multi-label"} if name == "goemotions" else {}
    adapter = get_task_class(task)(128, options)
    rows = adapter.read(registry.resolve(name, split, str(data_dir), task), TRAIN if split == "train" else EVAL)
    if name == "goemotions" and not every_row:
        rows = [{**row, "label": row["label"][0]} for row in rows if len(row["label"]) == 1]
    return rows


def write_rows(rows: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
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
        # two labels: the multi-class form is twice the binary one; more: scikit-learn >= 1.7's own multi-class form
        "brier": 2 * float(brier_score_loss(gold, p[:, 1]))
        if p.shape[1] == 2
        else float(brier_score_loss(gold, p, labels=np.arange(p.shape[1]), scale_by_half=False)),
    }


def one_dataset(name: str, args, work: Path) -> dict:
    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.options import CalibrateOptions, InferenceOptions, PredictOptions, RunOptions

    (task, eval_split), model = DATASETS[name], work / f"{name}-model"
    train = split_rows(name, "train", args.data_dir)
    trained_rows, fit_rows = train[: args.rows], train[args.rows : args.rows + args.fit_rows]
    known = {row["label"] for row in trained_rows}
    evaluated = split_rows(name, eval_split, args.data_dir)
    kept_fit, kept_eval = [r for r in fit_rows if r["label"] in known], [r for r in evaluated if r["label"] in known]
    train_file = write_rows(trained_rows, work / f"{name}-train.jsonl")
    fit_file, eval_file = write_rows(kept_fit, work / f"{name}-fit.jsonl"), write_rows(kept_eval, work / "eval.jsonl")
    started = time.perf_counter()
    config = TrainConfig(epochs=args.epochs, lr=args.lr, batch_size=32, seed=args.seed, precision="no")
    run = RunOptions(
        data=str(train_file), eval_data=str(eval_file), model="minilm", output=str(model), threads=args.threads
    )
    trained = api.finetune(task, run, config=config)
    train_seconds = time.perf_counter() - started
    labels = json.loads((model / "bertkit.json").read_text())["task"]["labels"]
    gold = np.array([labels.index(r["label"]) for r in kept_eval])
    inference = InferenceOptions(precision="no", threads=args.threads)

    before = probabilities(api.predict(str(model), PredictOptions(input=str(eval_file)), inference), labels)
    calibrated = work / f"{name}-calibrated"
    shutil.copytree(model, calibrated)
    record = api.calibrate(str(calibrated), CalibrateOptions(data=str(fit_file)), inference)
    after = probabilities(api.predict(str(calibrated), PredictOptions(input=str(eval_file)), inference), labels)
    result = {
        "dataset": name,
        "labels": len(labels),
        "train_rows": trained.train_examples,
        "train_seconds": round(train_seconds, 1),
        "eval_split": eval_split,
        "eval_accuracy": trained.metrics["accuracy"],
        "majority": float(np.bincount(gold).max() / len(gold)),  # the trivial baseline the accuracy must beat
        "fit_rows": len(kept_fit),
        "eval_rows": len(kept_eval),
        "left_out": {"fit": len(fit_rows) - len(kept_fit), "eval": len(evaluated) - len(kept_eval)},
        "temperature": record["temperature"],
        "fit_rows_scores": {"before": record["before"], "after": record["after"]},
        "evaluated": {
            "uncalibrated": {**cal.calibration_scores(before, gold), "sklearn": scores_with_sklearn(before, gold)},
            "calibrated": {**cal.calibration_scores(after, gold), "sklearn": scores_with_sklearn(after, gold)},
        },
        # the reliability diagram's bins on the evaluation split (benchmarks/results/calibration-NAME.png)
        "reliability": {"before": cal.reliability(before, gold), "after": cal.reliability(after, gold)},
        # the scores stored by calibrate (held-out training rows), measured on the evaluation split
        "coverage": coverages(calibrated, labels, kept_eval, None, inference, work),
        # scores from rows exchangeable with the measured ones (what the guarantee assumes)
        "coverage_exchangeable": exchangeable(name, calibrated, labels, kept_eval, known, args, inference, work),
    }
    print(json.dumps({k: v for k, v in result.items() if k != "fit_rows_scores"}, indent=1), flush=True)
    return result


def exchangeable(name, model, labels, kept_eval, known, args, inference, work) -> dict:
    """GoEmotions: the conformal scores from its dev split, the sets measured on test; GLUE (test
    labels hidden): the dev rows shuffled (seed 0) and halved, scores from half A, sets on half B."""
    if name == "goemotions":
        scored_rows = [r for r in split_rows(name, "dev", args.data_dir) if r["label"] in known]
        measured, where = kept_eval, "dev -> test"
    else:
        rows = list(kept_eval)
        random.Random(0).shuffle(rows)
        scored_rows, measured, where = rows[: len(rows) // 2], rows[len(rows) // 2 :], "dev half A -> half B"
    scored = write_rows(scored_rows, work / f"{name}-scored.jsonl")
    return {
        "calibration_rows": len(scored_rows),
        "where": where,
        "sets": coverages(model, labels, measured, scored, inference, work),
    }


def coverages(model, labels, rows, calibration_file, inference, work, multi=False) -> list[dict]:
    """`predict --coverage` at each of COVERAGES on ``rows`` (the stored scores, or those of
    ``calibration_file``): coverage (multi-label: every gold label in the set), sizes, SE."""
    from bertkit import api
    from bertkit.options import CoverageOptions, PredictOptions

    measured = write_rows(rows, work / "measured.jsonl")
    found = []
    for coverage in COVERAGES:
        given = str(calibration_file) if calibration_file is not None else None
        options = PredictOptions(input=str(measured), conformal=CoverageOptions(coverage, given))
        predicted = api.predict(str(model), options, inference)
        sets = np.array([[int(name in row["prediction_set"]) for name in labels] for row in predicted])
        summary = cal.set_summary(sets)
        gold_sets = [row["label"] if multi else (row["label"],) for row in rows]
        summary["coverage"] = round(
            float(np.mean([all(s[labels.index(g)] for g in gold) for s, gold in zip(sets, gold_sets)])), 6
        )
        summary["standard_error"] = round(math.sqrt(coverage * (1 - coverage) / len(rows)), 4)
        summary["target"] = coverage
        summary["quantile"] = predicted.prediction_sets["quantile"]
        found.append(summary)
    return found


def multi_label_goemotions(args, work: Path) -> dict:
    """GoEmotions as it is (1 to 5 emotions a comment): a multi-label model on the first ``--rows``
    training comments; conformal scores from the whole dev split, sets measured on the whole test
    split; a set covers a comment when it holds every one of its gold emotions."""
    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.options import InferenceOptions, RunOptions

    def rows_of(split):
        return [{**row, "label": list(row["label"])} for row in split_rows("goemotions", split, args.data_dir, True)]

    dev, test = rows_of("dev"), rows_of("test")
    write_rows(dev, work / "ml-dev.jsonl")
    model = work / "goemotions-multi"
    started = time.perf_counter()
    # the known dataset: its 28 names whatever the first rows hold, its dev split for the metrics
    run = RunOptions(
        data="goemotions", data_dir=str(args.data_dir), model="minilm", output=str(model), threads=args.threads
    )
    config = TrainConfig(
        epochs=args.epochs, lr=args.lr, batch_size=32, seed=args.seed, precision="no", max_train_samples=args.rows
    )
    trained = api.finetune("cls", run, config=config)
    labels = json.loads((model / "bertkit.json").read_text())["task"]["labels"]
    inference = InferenceOptions(precision="no", threads=args.threads)
    sets = coverages(model, labels, test, work / "ml-dev.jsonl", inference, work, multi=True)
    result = {
        "dataset": "goemotions-multi",
        "labels": len(labels),
        "train_rows": trained.train_examples,
        "train_seconds": round(time.perf_counter() - started, 1),
        "dev_metrics": {k: trained.metrics[k] for k in ("micro_f1", "macro_f1") if k in trained.metrics},
        "baselines": trained.baselines,
        "calibration_rows": len(dev),
        "test_rows": len(test),
        "sets": sets,
    }
    print(json.dumps(result, indent=1, default=str), flush=True)
    return result


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        "# Calibration: temperature scaling and split-conformal sets (MiniLM)",
        "",
        "Commands (run under `flock /tmp/bertkit-heavy.lock`; the tables keep each dataset's latest run):",
        "",
        *(f"- `{run['command']}` ({run['machine']['date']})" for run in report.get("earlier_runs", [])),
        f"- `{report['command']}` ({report['machine']['date']})",
        "",
        f"- latest: {m['date']}; {m['cpu_model']} ({cpu_flags(m)}), {m['usable_cores']} cores, torch threads "
        f"{report['threads']}; torch {m['torch']}, transformers {m['transformers']}; commit {m['git_commit'][:10]}",
        f"- MiniLM fine-tuned on the first N training rows ({report['epochs']} epochs, lr {report['lr']}, seed "
        f"{report['seed']}, fp32); the temperature and the conformal scores fitted (`bertkit calibrate`) on the next "
        "training rows, never trained on; every number below on the evaluation split, seen by neither. GoEmotions: "
        "its one-emotion comments as a 28-way single-label task (rows of a label absent from training left out).",
        "",
        "| data | labels | train / fit / eval rows | T | ECE before | ECE after | Brier before | Brier after "
        "| NLL before | NLL after | accuracy | majority class |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    single = [r for r in report["results"] if "evaluated" in r]
    for r in single:
        u, c = r["evaluated"]["uncalibrated"], r["evaluated"]["calibrated"]
        lines.append(
            f"| {r['dataset']} ({r['eval_split']}) | {r['labels']} | {r['train_rows']:,} / {r['fit_rows']:,} / "
            f"{r['eval_rows']:,} | {r['temperature']:.3f} | {u['ece']:.4f} | {c['ece']:.4f} | {u['brier']:.4f} | "
            f"{c['brier']:.4f} | {u['nll']:.4f} | {c['nll']:.4f} | {c['accuracy']:.4f} | {r['majority']:.4f} |"
        )
    lines += [
        "",
        "scikit-learn's ECE (calibration_curve) and Brier (brier_score_loss) agree with these to the 6 decimals "
        "recorded (in calibration.json). Reliability diagrams on the evaluation split, before and after: "
        + ", ".join(f"[{r['dataset']}](calibration-{r['dataset']}.png)" for r in single if "reliability" in r)
        + ".",
        "",
        "Split-conformal sets (`predict --coverage`), two sources of conformal scores: the held-out training rows "
        "calibrate stored (measured on the evaluation split), and rows exchangeable with the measured ones "
        "(`--calibration-data`; GLUE: dev half A -> half B; GoEmotions: dev -> test), which is what the guarantee "
        "assumes.",
        "",
        "| data | target | stored scores: coverage (SE) | mean size | full sets | exchangeable: rows | coverage (SE) "
        "| mean size | empty | full |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in single:
        other = r["coverage_exchangeable"]
        for s, x in zip(r["coverage"], other["sets"]):
            lines.append(
                f"| {r['dataset']} | {s['target']} | {s['coverage']:.4f} ({s['standard_error']:.4f}) | "
                f"{s['mean_set_size']:.3f} | {s['full_rate']:.1%} | {other['calibration_rows']:,} ({other['where']}) | "
                f"{x['coverage']:.4f} ({x['standard_error']:.4f}) | {x['mean_set_size']:.3f} | {x['empty_rate']:.1%} | "
                f"{x['full_rate']:.1%} |"
            )
    for r in (r for r in report["results"] if "evaluated" not in r):
        f1 = ", ".join(f"{k} {v:.4f}" for k, v in r["dev_metrics"].items())
        lines += [
            "",
            f"{r['dataset']}: {r['labels']} labels, {r['train_rows']:,} training comments (dev {f1}); conformal "
            f"scores from the {r['calibration_rows']:,} dev comments, sets on the {r['test_rows']:,} test comments; "
            "a set covers a comment when it holds every one of its gold emotions.",
            "",
            "| target | coverage (SE) | mean set size | empty sets | full sets |",
            "|---|---|---|---|---|",
            *(
                f"| {s['target']} | {s['coverage']:.4f} ({s['standard_error']:.4f}) | {s['mean_set_size']:.3f} | "
                f"{s['empty_rate']:.1%} | {s['full_rate']:.1%} |"
                for s in r["sets"]
            ),
        ]
    return "\n".join(lines) + "\n"


def draw_figures(report: dict) -> None:
    """Each single-label dataset's reliability diagram on its evaluation split, before and after T."""
    from bertkit.reporting.figures import draw_reliability

    for r in report["results"]:
        if "reliability" in r:
            u, c = r["evaluated"]["uncalibrated"], r["evaluated"]["calibrated"]
            table = {"reliability": r["reliability"], "before": u, "after": c, "bins": cal.BINS}
            table.update(examples=r["eval_rows"], temperature=r["temperature"])
            draw_reliability(table, RESULTS / f"calibration-{r['dataset']}.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="sst2,mrpc,rte", help="also: goemotions, goemotions-multi")
    parser.add_argument("--rows", type=int, default=2000, help="training rows (the first N)")
    parser.add_argument("--fit-rows", type=int, default=500, help="the next N training rows, for calibrate")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data-dir", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--markdown-only", action="store_true", help="redraw calibration.md from calibration.json")
    args = parser.parse_args()
    if args.markdown_only:
        report = json.loads((RESULTS / "calibration.json").read_text())
        draw_figures(report)
        (RESULTS / "calibration.md").write_text(markdown(report))
        return
    work = Path(tempfile.mkdtemp(prefix="bertkit-calibration-"))
    try:
        results = [
            multi_label_goemotions(args, work) if name == "goemotions-multi" else one_dataset(name, args, work)
            for name in args.datasets.split(",")
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {
        "command": "python benchmarks/calibration.py " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "protocol": PROTOCOL,
        **{k: getattr(args, k) for k in ("rows", "fit_rows", "epochs", "lr", "seed", "threads")},
        "results": results,
    }
    RESULTS.mkdir(exist_ok=True)
    kept = RESULTS / "calibration.json"  # a run of some datasets keeps the others' latest results
    if kept.is_file() and json.loads(kept.read_text()).get("protocol") == PROTOCOL:
        done = {r["dataset"] for r in results}
        earlier = json.loads(kept.read_text())
        results[:0] = [r for r in earlier["results"] if r["dataset"] not in done]
        report["earlier_runs"] = earlier.get("earlier_runs", []) + [
            {k: earlier[k] for k in ("command", "machine")} | {"datasets": [r["dataset"] for r in earlier["results"]]}
        ]
    (RESULTS / "calibration.json").write_text(json.dumps(report, indent=1) + "\n")
    draw_figures(report)
    (RESULTS / "calibration.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
