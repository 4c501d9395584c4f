"""Finding injected label errors: `bertkit audit --folds K` on SST-2 rows with a known share of labels
flipped (a seeded draw), against the baselines in the same run, on the same out-of-fold probabilities.

* bertkit audit: the rows cleanlab flags (confident learning, prune_by_noise_rate);
* cleanlab by hand: ``cleanlab.filter.find_label_issues`` called here on the out-of-fold file the
  audit's folds wrote (equal to the audit's flags, since the audit calls it);
* disagreement: the rows whose out-of-fold prediction differs from the given label;
* loss: the same number of rows as the audit flags, those with the highest out-of-fold loss
  (-log p(given label));
* random: the same number of rows drawn at random: its expected precision is the flip rate
  (reported as the mean of 1,000 seeded draws).

Precision and recall are against the flipped rows. Also listed: the estimated noise rate, and the
out-of-fold accuracy against the given labels beside the majority-class baseline.

``--retrain``: then the same recipe trains three models, on the noisy rows, on the noisy rows minus
the audit's flagged ones, and on the clean rows (no label flipped), each scored on the dev split
(SST-2: the 872 rows of dev.tsv; MRPC: the 408 pairs of dev.tsv) after its last epoch.
``--dataset mrpc``: the same on MRPC's first ``--rows`` training pairs.

    flock /tmp/bertkit-heavy.lock python -m benchmarks.audit_noisy_sst2 [--dataset sst2] [--rows 2000]
        [--flip 0.1] [--folds 5] [--epochs 2] [--seed 0] [--retrain] [--name NAME]

Writes benchmarks/results/<name>.{json,md} (default audit_noisy_sst2 / audit_noisy_mrpc).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
MODEL, LR, BATCH = "minilm", 1e-4, 32
MAX_LENGTHS = {"sst2": 64, "mrpc": 128}  # MRPC: two sentences of about 22 words each
NAMES = {"sst2": "SST-2", "mrpc": "MRPC"}


def data_dir() -> Path:
    return Path(os.environ.get("BERTKIT_DATA_DIR", "../shared/data")).resolve()


HEADERS = {"sst2": "sentence\tlabel", "mrpc": "sentence1\tsentence2\tlabel"}
TASKS = {"sst2": "cls", "mrpc": "pair"}


def read_split(dataset: str, split: str) -> list[tuple]:
    """(text, ..., label) rows of a split: SST-2's sentence and label, MRPC's two strings and quality."""
    lines = (data_dir() / dataset / f"{split}.tsv").read_text(encoding="utf-8-sig").splitlines()[1:]
    if dataset == "sst2":
        return [(text.strip(), label) for text, label in (line.rsplit("\t", 1) for line in lines)]
    return [(first.strip(), second.strip(), label) for label, _, _, first, second in (ln.split("\t") for ln in lines)]


def noisy_rows(rows: int, flip: float, seed: int, dataset: str = "sst2") -> tuple[list[tuple], set[int]]:
    """The first ``rows`` training rows, ``flip`` of their labels flipped (a seeded draw); the
    flipped rows' indexes (0-based)."""
    data = read_split(dataset, "train")[:rows]
    flipped = set(np.random.default_rng(seed).choice(len(data), int(round(flip * len(data))), replace=False).tolist())
    noisy = [(*row[:-1], ("1" if row[-1] == "0" else "0") if i in flipped else row[-1]) for i, row in enumerate(data)]
    return noisy, flipped


def write_rows(path: Path, dataset: str, rows: list[tuple]) -> Path:
    path.write_text(HEADERS[dataset] + "\n" + "".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    return path


def retrained(work: Path, args, noisy: list[tuple], flagged: set[int], flipped: set[int]) -> dict:
    """Dev accuracy of the same recipe trained on the noisy rows, the noisy rows minus the flagged
    ones, and the clean rows (after the last epoch: the dev split chooses nothing)."""
    from bertkit import api
    from bertkit.options import RunOptions, TrainConfig

    clean = [(*row[:-1], ("1" if row[-1] == "0" else "0") if i in flipped else row[-1]) for i, row in enumerate(noisy)]
    sets = {
        "noisy": noisy,
        "noisy_minus_flagged": [row for i, row in enumerate(noisy) if i not in flagged],
        "clean": clean,
    }
    dev = write_rows(work / "dev.tsv", args.dataset, read_split(args.dataset, "dev"))
    found = {}
    for name, rows in sets.items():
        data = write_rows(work / f"{name}.tsv", args.dataset, rows)
        run = RunOptions(data=str(data), eval_data=str(dev), model=args.model, output=str(work / f"model-{name}"))
        config = TrainConfig(epochs=args.epochs, lr=LR, batch_size=BATCH, max_length=MAX_LENGTHS[args.dataset], seed=42)
        started = time.perf_counter()
        result = api.finetune(TASKS[args.dataset], run, config)
        last = [h["metrics"] for h in result.history if "accuracy" in h.get("metrics", {})][-1]
        found[name] = {
            "train_rows": len(rows),
            "flipped_left": {"noisy": len(flipped), "noisy_minus_flagged": len(flipped - flagged)}.get(name, 0),
            "dev_accuracy_last_epoch": round(last["accuracy"], 4),
            "dev_accuracy_kept_model": round(result.metrics["accuracy"], 4),
            "dev_rows": result.eval_examples,
            "seconds": round(time.perf_counter() - started, 1),
        }
    return found


def scores(chosen: set[int], flipped: set[int]) -> dict:
    hits = len(chosen & flipped)
    return {
        "flagged": len(chosen),
        "precision": round(hits / len(chosen), 4) if chosen else None,
        "recall": round(hits / len(flipped), 4),
    }


def baselines(oof_file: Path, flagged: int, flipped: set[int], seed: int) -> dict:
    """The hand-run cleanlab, disagreement, loss and random rankings on the out-of-fold file."""
    from cleanlab.filter import find_label_issues

    rows = [json.loads(line) for line in oof_file.read_text().splitlines()]
    labels = sorted(rows[0]["probabilities"])
    probabilities = np.asarray([[row["probabilities"][name] for name in labels] for row in rows])
    given = np.asarray([labels.index(row["gold_label"]) for row in rows])
    by_hand = set(np.flatnonzero(find_label_issues(given, probabilities, n_jobs=1)).tolist())
    disagree = {i for i, row in enumerate(rows) if row["label"] != row["gold_label"]}
    loss = -np.log(np.clip(probabilities[np.arange(len(rows)), given], 1e-12, None))
    by_loss = set(np.argsort(-loss, kind="stable")[:flagged].tolist())
    rng = np.random.default_rng(seed)
    draws = [len(set(rng.choice(len(rows), flagged, replace=False).tolist()) & flipped) for _ in range(1000)]
    accuracy = float(np.mean(probabilities.argmax(1) == given))
    return {
        "cleanlab_by_hand": {**scores(by_hand, flipped), "rows": sorted(by_hand)},
        "disagreement": scores(disagree, flipped),
        "loss_top_k": scores(by_loss, flipped),
        "random_same_count": {
            "flagged": flagged,
            "precision": round(float(np.mean(draws)) / flagged, 4) if flagged else None,
            "recall": round(float(np.mean(draws)) / len(flipped), 4),
        },
        "oof_accuracy_vs_given": round(accuracy, 4),
        "majority_class_accuracy_vs_given": round(float(np.bincount(given).max() / len(given)), 4),
    }


def run(args) -> dict:
    from benchmarks.machine import machine
    from bertkit import api
    from bertkit.options import AuditOptions, TrainConfig

    work = Path(tempfile.mkdtemp(prefix="bertkit-audit-bench-"))
    noisy, flipped = noisy_rows(args.rows, args.flip, args.seed, args.dataset)
    data = write_rows(work / "noisy.tsv", args.dataset, noisy)
    task = TASKS[args.dataset]
    options = AuditOptions(
        data=str(data), output=str(work / "audit"), folds=args.folds, task=task, model=args.model, data_issues=True
    )
    config = TrainConfig(epochs=args.epochs, lr=LR, batch_size=BATCH, max_length=MAX_LENGTHS[args.dataset], seed=42)
    started = time.perf_counter()
    result = api.audit(options, config)
    seconds = time.perf_counter() - started
    ranked = [json.loads(line) for line in (work / "audit" / "ranked.jsonl").read_text().splitlines()]
    audit_rows = {row["row"] - 1 for row in ranked if row["issue"]}
    compared = baselines(work / "audit" / "model" / "oof-predictions.jsonl", len(audit_rows), flipped, args.seed)
    same = compared["cleanlab_by_hand"].pop("rows") == sorted(audit_rows)
    # flagged rows whose label was NOT flipped: the real data's own suspects (SST-2 has label errors)
    fields = ("row", *(("text",) if task == "cls" else ("text", "text_pair")), "given", "suggested", "quality")
    suspects = [
        {k: row[k] for k in fields if k in row} for row in ranked if row["issue"] and row["row"] - 1 not in flipped
    ][:10]
    command = (
        f"flock /tmp/bertkit-heavy.lock python -m benchmarks.audit_noisy_sst2 --dataset {args.dataset} "
        f"--rows {args.rows} --flip {args.flip} --folds {args.folds} --epochs {args.epochs} --seed {args.seed}"
        + (" --retrain" if args.retrain else "")
    )
    length = MAX_LENGTHS[args.dataset]
    report = {
        "command": command,
        "dataset": args.dataset,
        "audit_call": f"bertkit audit --data noisy.tsv --output audit --folds {args.folds} --task {task} "
        f"--model {args.model} --epochs {args.epochs} --lr {LR} --batch-size {BATCH} --max-length {length}",
        "rows": len(noisy),
        "flipped": len(flipped),
        "flip_rate": args.flip,
        "audit": {**scores(audit_rows, flipped), "estimated_noise_rate": result.estimated_noise_rate},
        "audit_equals_cleanlab_by_hand": same,
        **compared,
        "audit_model_check": result.summary.get("model_check"),
        "audit_warnings": result.summary.get("warnings", []),
        "near_duplicates_with_other_labels": result.summary["near_duplicates_with_other_labels"],
        "outliers": result.summary["outliers"],
        "top_flagged_not_flipped": suspects,
        "audit_seconds": round(seconds, 1),
    }
    if args.retrain:
        report["retrained"] = retrained(work, args, noisy, audit_rows, flipped)
    report["machine"] = machine()
    return report


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        f"# Finding injected label errors on {NAMES[report.get('dataset', 'sst2')]} (bertkit audit)",
        "",
        f"{report['rows']:,} {NAMES[report.get('dataset', 'sst2')]} training rows (the first), "
        f"{report['flipped']} labels flipped "
        f"({report['flip_rate']:.0%}, seeded). Command: `{report['command']}`; the audit it runs: "
        f"`{report['audit_call']}`.",
        "",
        "| ranking | rows flagged | precision | recall |",
        "|---|---|---|---|",
    ]
    for name, key in (
        ("bertkit audit (cleanlab, confident learning)", "audit"),
        ("cleanlab by hand on the same out-of-fold file", "cleanlab_by_hand"),
        ("out-of-fold prediction disagrees with the label", "disagreement"),
        ("highest out-of-fold loss, same count as the audit", "loss_top_k"),
        ("random rows, same count (mean of 1,000 draws)", "random_same_count"),
    ):
        row = report[key]
        lines.append(f"| {name} | {row['flagged']} | {row['precision']} | {row['recall']} |")
    lines += [
        "",
        f"Estimated noise rate (cleanlab's joint): {report['audit']['estimated_noise_rate']:.3f} "
        f"(true: {report['flip_rate']}). Audit equals cleanlab by hand: {report['audit_equals_cleanlab_by_hand']}. "
        f"Out-of-fold accuracy against the given (noisy) labels: {report['oof_accuracy_vs_given']}, "
        f"the majority class's: {report['majority_class_accuracy_vs_given']} "
        f"(the audit's own check: {report.get('audit_model_check')}; warnings: {report.get('audit_warnings')}).",
        f"Near-duplicate pairs with different labels: {report['near_duplicates_with_other_labels']}; "
        f"outliers: {report['outliers']} (Datalab on the best fold model's mean-pooled vectors).",
        f"The audit took {report['audit_seconds']} s (folds, scoring, Datalab).",
        "",
        *_retrained(report.get("retrained")),
        "The most suspicious flagged rows whose label was not flipped (the data's own labels):",
        "",
        *[
            f"- row {s['row']}: given {s['given']}, suggested {s['suggested']}, quality {s['quality']}: "
            + " ||| ".join(s[k] for k in ("text", "text_pair") if k in s)
            for s in report["top_flagged_not_flipped"]
        ],
        "",
        f"Machine: {m['date']}; {m['cpu_model']} ({' '.join(m['cpu_flags'])}), {m['usable_cores']} cores, "
        f"torch threads {m['torch_threads']}, torch {m['torch']}, transformers {m['transformers']}, "
        f"commit {m['git_commit'][:10]}.",
        "",
    ]
    return "\n".join(lines)


def _retrained(found: dict | None) -> list[str]:
    if not found:
        return []
    lines = [
        "Then the same recipe trained on three sets of rows, scored on the dev split after its last epoch:",
        "",
        "| trained on | rows | flipped labels left | dev accuracy | seconds |",
        "|---|---|---|---|---|",
    ]
    for name, row in found.items():
        lines.append(
            f"| {name.replace('_', ' ')} | {row['train_rows']} | {row['flipped_left']} | "
            f"{row['dev_accuracy_last_epoch']} | {row['seconds']} |"
        )
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--flip", type=float, default=0.1)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--epochs", type=float, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dataset", choices=sorted(TASKS), default="sst2")
    parser.add_argument("--retrain", action="store_true", help="dev accuracy: noisy, minus flagged, clean rows")
    parser.add_argument("--name", default=None, help="default: audit_noisy_<dataset>")
    parser.add_argument("--model", default=MODEL, help="a quick check of the script: a tiny model directory")
    args = parser.parse_args()
    args.name = args.name or f"audit_noisy_{args.dataset}"
    report = run(args)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / f"{args.name}.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
