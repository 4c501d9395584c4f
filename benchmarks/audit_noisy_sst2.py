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

Precision and recall are against the flipped rows. Also listed: the estimated noise rate.

    flock /tmp/bertkit-heavy.lock python -m benchmarks.audit_noisy_sst2 [--rows 2000] [--flip 0.1]
        [--folds 5] [--epochs 2] [--seed 0]

Writes benchmarks/results/audit_noisy_sst2.{json,md}.
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
MODEL, LR, MAX_LENGTH, BATCH = "minilm", 1e-4, 64, 32


def data_dir() -> Path:
    return Path(os.environ.get("BERTKIT_DATA_DIR", "../shared/data")).resolve()


def noisy_rows(rows: int, flip: float, seed: int) -> tuple[list[tuple[str, str]], set[int]]:
    """SST-2's first ``rows`` training sentences, ``flip`` of their labels flipped (a seeded draw);
    the flipped rows' indexes (0-based)."""
    lines = (data_dir() / "sst2" / "train.tsv").read_text(encoding="utf-8").splitlines()[1 : rows + 1]
    data = [(text.strip(), label) for text, label in (line.rsplit("\t", 1) for line in lines)]
    flipped = set(np.random.default_rng(seed).choice(len(data), int(round(flip * len(data))), replace=False).tolist())
    noisy = [(text, ("1" if label == "0" else "0") if i in flipped else label) for i, (text, label) in enumerate(data)]
    return noisy, flipped


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
    by_hand = set(np.flatnonzero(find_label_issues(given, probabilities)).tolist())
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
    }


def run(args) -> dict:
    from benchmarks.run import machine
    from bertkit import api
    from bertkit.options import AuditOptions, TrainConfig

    work = Path(tempfile.mkdtemp(prefix="bertkit-audit-bench-"))
    noisy, flipped = noisy_rows(args.rows, args.flip, args.seed)
    data = work / "noisy.tsv"
    data.write_text("sentence\tlabel\n" + "".join(f"{t}\t{lab}\n" for t, lab in noisy), encoding="utf-8")
    options = AuditOptions(
        data=str(data), output=str(work / "audit"), folds=args.folds, task="cls", model=args.model, data_issues=True
    )
    config = TrainConfig(epochs=args.epochs, lr=LR, batch_size=BATCH, max_length=MAX_LENGTH, seed=42)
    started = time.perf_counter()
    result = api.audit(options, config)
    seconds = time.perf_counter() - started
    ranked = [json.loads(line) for line in (work / "audit" / "ranked.jsonl").read_text().splitlines()]
    audit_rows = {row["row"] - 1 for row in ranked if row["issue"]}
    compared = baselines(work / "audit" / "model" / "oof-predictions.jsonl", len(audit_rows), flipped, args.seed)
    same = compared["cleanlab_by_hand"].pop("rows") == sorted(audit_rows)
    # flagged rows whose label was NOT flipped: the real data's own suspects (SST-2 has label errors)
    suspects = [
        {k: row[k] for k in ("row", "text", "given", "suggested", "quality")}
        for row in ranked
        if row["issue"] and row["row"] - 1 not in flipped
    ][:10]
    command = (
        f"flock /tmp/bertkit-heavy.lock python -m benchmarks.audit_noisy_sst2 --rows {args.rows} --flip {args.flip} "
        f"--folds {args.folds} --epochs {args.epochs} --seed {args.seed}"
    )
    return {
        "command": command,
        "audit_call": f"bertkit audit --data noisy.tsv --output audit --folds {args.folds} --task cls "
        f"--model {args.model} --epochs {args.epochs} --lr {LR} --batch-size {BATCH} --max-length {MAX_LENGTH}",
        "rows": len(noisy),
        "flipped": len(flipped),
        "flip_rate": args.flip,
        "audit": {**scores(audit_rows, flipped), "estimated_noise_rate": result.estimated_noise_rate},
        "audit_equals_cleanlab_by_hand": same,
        **compared,
        "near_duplicates_with_other_labels": result.summary["near_duplicates_with_other_labels"],
        "outliers": result.summary["outliers"],
        "top_flagged_not_flipped": suspects,
        "audit_seconds": round(seconds, 1),
        "machine": machine(),
    }


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        "# Finding injected label errors on SST-2 (bertkit audit)",
        "",
        f"{report['rows']:,} SST-2 training rows (the first), {report['flipped']} labels flipped "
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
        f"Out-of-fold accuracy against the given (noisy) labels: {report['oof_accuracy_vs_given']}.",
        f"Near-duplicate pairs with different labels: {report['near_duplicates_with_other_labels']}; "
        f"outliers: {report['outliers']} (Datalab on the best fold model's mean-pooled vectors).",
        f"The audit took {report['audit_seconds']} s (folds, scoring, Datalab).",
        "",
        "The most suspicious flagged rows whose label was not flipped (SST-2's own labels; 1 = positive):",
        "",
        *[
            f"- row {s['row']}: given {s['given']}, suggested {s['suggested']}, quality {s['quality']}: {s['text']}"
            for s in report["top_flagged_not_flipped"]
        ],
        "",
        f"Machine: {m['date']}; {m['cpu_model']} ({' '.join(m['cpu_flags'])}), {m['usable_cores']} cores, "
        f"torch threads {m['torch_threads']}, torch {m['torch']}, transformers {m['transformers']}, "
        f"commit {m['git_commit'][:10]}.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--flip", type=float, default=0.1)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--epochs", type=float, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="audit_noisy_sst2")
    parser.add_argument("--model", default=MODEL, help="a quick check of the script: a tiny model directory")
    args = parser.parse_args()
    report = run(args)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / f"{args.name}.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
