"""Full-budget reproduction: the bundled MiniLM trained the recommended way on six benchmarks, by
bertkit (``api.finetune_seeds``, its defaults) and by the HF Trainer at its best options in bf16, on
the same rows, recipe and seeds; one table of mean ± std, wall time and a published reference.

    make reproduce                     # python -m benchmarks.reproduce -> results/reproduce.{json,md}
    python -m benchmarks.reproduce [--only sst2,mrpc,stsb,conll,goemotions,squad] [--sides bertkit,hf]
                                   [--set mrpc.seeds=5,sst2.train=none,...] [--quick] [--out-dir D]

Recipe on both sides: batch 32, lr 5e-5, linear warmup 10 % then decay, weight decay 0.01, an
evaluation on the dev data after every epoch and the best epoch's scores reported (bertkit's
selection; the Trainer's ``load_best_model_at_end``, see hf_trainer.EpochEvaluator). Each (task,
side) runs all its seeds in one freshly spawned process; its wall time counts everything (loading,
tokenising, training, every evaluation). Budgets (PLANS) are sized for about an hour on 2 cores:
the small sets (MRPC, STS-B) get their whole training split, 3 epochs, 3 seeds; the large ones one
seed and the rows / epochs named in the table. SQuAD has only its dev file here: the first 38
articles train, the last 10 evaluate (benchmarks/workloads.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.machine import load_average, machine, matmul_peak
from benchmarks.report import cpu_flags
from benchmarks.run import RESULTS, log, run_isolated

SEEDS = (42, 43, 44)
RECIPE = dict(batch_size=32, lr=5e-5, warmup=0.1, weight_decay=0.01)
QA_OPTIONS = {"doc_stride": 128, "max_answer_length": 30}


@dataclass(frozen=True)
class Plan:
    title: str
    task: str  # bertkit's task
    data: str | None  # the registry dataset (None: the SQuAD article split)
    kind: str  # the HF side's problem: single, regression, multi-label, ner, qa
    metric: str  # the main metric, the one the best epoch is chosen on
    also: tuple  # further metrics shown
    train: int | None  # training rows (None: the whole split); QA: questions
    epochs: float
    seeds: int
    reference: str  # a published number for context, cited


PLANS = {
    "sst2": Plan(
        "SST-2",
        "cls",
        "sst2",
        "single",
        "accuracy",
        (),
        20000,
        1,
        1,
        "91.5 acc: MiniLM-L6xH384, GLUE dev (microsoft/unilm minilm/README.md)",
    ),
    "mrpc": Plan(
        "MRPC",
        "pair",
        "mrpc",
        "single",
        "accuracy",
        ("f1",),
        None,
        3,
        3,
        "88.9 acc: MiniLM-L6xH384, GLUE dev (microsoft/unilm minilm/README.md)",
    ),
    "stsb": Plan(
        "STS-B",
        "pair",
        "stsb",
        "regression",
        "pearson_spearman_mean",
        ("pearson", "spearman"),
        None,
        3,
        3,
        "85.8 Spearman: BERT-base, GLUE test (Devlin et al. 2019, table 1)",
    ),
    "conll": Plan(
        "CoNLL-2003",
        "ner",
        "conll2003",
        "ner",
        "f1",
        ("precision", "recall"),
        None,
        2,
        1,
        "96.4 dev F1: BERT-base (Devlin et al. 2019, table 7)",
    ),
    "goemotions": Plan(
        "GoEmotions",
        "cls",
        "goemotions",
        "multi-label",
        "micro_f1",
        ("macro_f1",),
        20000,
        1,
        1,
        "46 macro-F1 (test): BERT-base (Demszky et al. 2020, table 4)",
    ),
    "squad": Plan(
        "SQuAD v1.1 split",
        "qa",
        None,
        "qa",
        "f1",
        ("exact_match",),
        1000,
        2,
        1,
        "88.5 F1 / 80.8 EM: BERT-base on the full train set (Devlin et al. 2019, table 2)",
    ),
}
QUICK = {"train": 64, "eval": 48, "epochs": 1, "seeds": 2}  # only proves the harness runs end to end
PERCENT = (
    "accuracy",
    "f1",
    "precision",
    "recall",
    "micro_f1",
    "macro_f1",
    "pearson",
    "spearman",
    "pearson_spearman_mean",
)


def bertkit_side(key: str, plan: dict, n_eval: int | None) -> dict:
    """``api.finetune_seeds`` with the recipe; every seed's metrics and training seconds."""
    from benchmarks.bertkit_side import _prepare
    from benchmarks.workloads import data_dir, write_squad_split
    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.options import RepeatOptions, RunOptions

    _prepare()
    plan, qa = Plan(**plan), key == "squad"
    config = TrainConfig(
        epochs=plan.epochs,
        lr=RECIPE["lr"],
        batch_size=RECIPE["batch_size"],
        eval_batch_size=64,
        warmup_ratio=RECIPE["warmup"],
        weight_decay=RECIPE["weight_decay"],
        max_length=384 if qa else None,
        max_train_samples=plan.train,
        max_eval_samples=n_eval,
        task_options=dict(QA_OPTIONS) if qa else {},
    )
    with tempfile.TemporaryDirectory(prefix="bertkit-reproduce-") as tmp:
        data, eval_data = write_squad_split(tmp) if qa else (plan.data, None)
        run = RunOptions(
            data=data, output=os.path.join(tmp, "model"), model="minilm", eval_data=eval_data, data_dir=str(data_dir())
        )
        result = api.finetune_seeds(plan.task, run, config, RepeatOptions(seeds=list(SEEDS[: plan.seeds])))
    return {
        "runs": [
            {
                "seed": run["seed"],
                "metrics": _numbers(run["metrics"]),
                "best_epoch": run["best_epoch"],
                "train_seconds": run["train_seconds"],
            }
            for run in result.runs
        ],
        "n_train": result.best.train_examples,
        "n_eval": result.best.eval_examples,
        "precision": result.best.runtime.get("precision"),
    }


def hf_side(key: str, plan: dict, n_eval: int | None) -> dict:
    """The Trainer's best recipe in bf16 (hf_trainer.RECIPES["hf_best_bf16"]), once per seed."""
    from benchmarks import hf_ner, hf_qa, hf_sequence, workloads

    plan = Plan(**plan)
    path, runs = workloads.model_path(), []
    if plan.kind == "ner":
        train, dev = workloads.load_conll(plan.train, n_eval)
        workloads.check_identical("ner", train, dev, plan.train, n_eval)
    elif plan.kind == "qa":
        train, dev = workloads.load_squad(plan.train, n_eval)
        workloads.check_identical("qa", train, dev, plan.train, n_eval)
    else:  # bertkit's own readers: the same rows by construction
        train = hf_sequence.bertkit_rows(plan.data, "train", plan.train, plan.task)
        dev = hf_sequence.bertkit_rows(plan.data, "dev", n_eval, plan.task)
    for seed in SEEDS[: plan.seeds]:
        hp = {**RECIPE, "epochs": plan.epochs, "seed": seed, "select_on": plan.metric}
        if plan.kind == "ner":
            out = hf_ner.run("hf_best_bf16", train, dev, path, hp)
        elif plan.kind == "qa":
            out = hf_qa.run("hf_best_bf16", train, dev, path, hp)
        else:
            from bertkit.data.registry import DATASETS

            labels = None if plan.kind == "regression" else list(DATASETS[plan.data].label_names)
            out = hf_sequence.run("hf_best_bf16", plan.kind, train, dev, labels, path, hp)
        runs.append(
            {
                "seed": seed,
                "metrics": _numbers(out["metrics"]),
                "best_epoch": out.get("best_epoch"),
                "train_seconds": out["train_seconds"],
            }
        )
    return {"runs": runs, "n_train": len(train), "n_eval": len(dev), "precision": "bf16"}


def _numbers(metrics: dict) -> dict:
    return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def spread(runs: list, metric: str) -> dict:
    values = [run["metrics"][metric] for run in runs if metric in run["metrics"]]
    if not values:
        return {}
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else None,
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def scale_of(plan: Plan, metric: str) -> int:
    return 100 if metric in PERCENT and plan.kind != "qa" else 1  # SQuAD's scorer gives percent already


def shown(summary: dict, scale: int) -> str:
    if not summary:
        return "–"
    text = f"{summary['mean'] * scale:.1f}"
    return text + (f" ± {summary['std'] * scale:.1f}" if summary["std"] is not None else "")


def table(report: dict) -> str:
    lines = [
        "| task | training data, budget | metric | bertkit | HF Trainer bf16 | Δ (bertkit − HF) | "
        "bertkit wall | HF wall | HF ÷ bertkit time | published, for context |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for key, entry in report["tasks"].items():
        plan, sides = Plan(**entry["plan"]), entry["sides"]
        size = next((s.get("n_train") for s in sides.values() if "n_train" in s), plan.train)
        budget = f"{size:,} {'questions' if plan.kind == 'qa' else 'rows'}, {plan.epochs:g} ep, {plan.seeds} seed(s)"
        for metric in (plan.metric, *plan.also):
            cells = {name: spread(side.get("runs", []), metric) for name, side in sides.items()}
            scale = scale_of(plan, metric)
            values = [
                shown(cells.get(name, {}), scale) if "error" not in sides.get(name, {}) else "error"
                for name in ("bertkit", "hf")
            ]
            delta = "–"
            if cells.get("bertkit") and cells.get("hf"):
                delta = f"{(cells['bertkit']['mean'] - cells['hf']['mean']) * scale:+.1f}"
            walls = [sides.get(name, {}).get("process_wall_seconds") for name in ("bertkit", "hf")]
            first = metric == plan.metric
            wall_cells = [f"{w:.0f} s" if (w and first) else "" for w in walls]
            ratio = f"**{walls[1] / walls[0]:.2f}x**" if first and all(walls) else ""
            lines.append(
                f"| {plan.title if first else ''} | {budget if first else ''} | {metric} | {values[0]} | "
                f"{values[1]} | {delta} | {wall_cells[0]} | {wall_cells[1]} | {ratio} | "
                f"{plan.reference if first else ''} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.reproduce", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default=",".join(PLANS))
    parser.add_argument("--sides", default="bertkit,hf")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="TASK.FIELD=VALUE",
        help="e.g. sst2.train=none (the whole split), mrpc.seeds=5, conll.epochs=3",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves the harness, measures nothing")
    parser.add_argument("--out-dir", default=str(RESULTS))
    parser.add_argument(
        "--merge",
        metavar="JSON",
        help="an earlier reproduce.json whose sides not run now are "
        "kept (each side records the commit and machine it ran on)",
    )
    args = parser.parse_args(argv)
    plans = {key: PLANS[key] for key in args.only.split(",")}
    for item in (x for s in args.set for x in s.split(",")):
        target, value = item.split("=", 1)
        key, name = target.split(".", 1)
        cast = type(getattr(plans[key], name)) if getattr(plans[key], name) is not None else int
        plans[key] = dataclasses.replace(plans[key], **{name: None if value in ("none", "all") else cast(value)})
    if args.quick:
        plans = {
            key: dataclasses.replace(
                plan,
                train=QUICK["train"] // (2 if plan.kind == "qa" else 1),
                epochs=QUICK["epochs"],
                seeds=min(plan.seeds, QUICK["seeds"]),
            )
            for key, plan in plans.items()
        }
    n_eval = QUICK["eval"] if args.quick else None
    started = time.perf_counter()
    report = {
        "machine": machine(),
        "recipe": RECIPE,
        "seeds": SEEDS,
        "quick": args.quick,
        "load_average_start": load_average(),
        "matmul_peak_gflops": run_isolated(matmul_peak, 3.0),
        "tasks": {},
    }
    for key, plan in plans.items():
        entry = report["tasks"][key] = {"plan": dataclasses.asdict(plan), "sides": {}}
        for side in args.sides.split(","):
            log(f"{key}: {side} ({plan.seeds} seed(s), {plan.epochs:g} epoch(s))")
            fn = bertkit_side if side == "bertkit" else hf_side
            entry["sides"][side] = {
                **run_isolated(fn, key, dataclasses.asdict(plan), n_eval),
                "commit": report["machine"]["git_commit"][:10],
                "date": report["machine"]["date"],
            }
            if "error" in entry["sides"][side]:
                log(f"{key}: {side} failed: {entry['sides'][side]['error']}")
    report.update(load_average_end=load_average(), suite_seconds=time.perf_counter() - started)
    name = "reproduce-quick" if args.quick else "reproduce"
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(report, indent=1))  # first as measured: a failed merge loses nothing
    if args.merge:
        merge(report, json.loads(Path(args.merge).read_text()))
        (out / f"{name}.json").write_text(json.dumps(report, indent=1))
    (out / f"{name}.md").write_text(markdown(report))
    print(markdown(report))
    return 0


def merge(report: dict, earlier: dict) -> None:
    """Keep the earlier run's sides (and tasks) that this run did not measure, marked with their
    own commit and date, so one table shows which code produced which number."""
    for key, entry in earlier["tasks"].items():
        target = report["tasks"].setdefault(key, {"plan": entry["plan"], "sides": {}})
        if json.loads(json.dumps(target["plan"])) != entry["plan"]:  # tuples came back from JSON as lists
            raise SystemExit(f"--merge: {key} was run with another plan; rerun both sides")
        for side, result in entry["sides"].items():
            if side not in target["sides"]:
                target["sides"][side] = {
                    "commit": earlier["machine"]["git_commit"][:10],
                    "date": earlier["machine"]["date"],
                    **result,
                }
    report["merged_from"] = {
        "commit": earlier["machine"]["git_commit"][:10],
        "date": earlier["machine"]["date"],
        "suite_seconds": earlier.get("suite_seconds"),
    }
    report["tasks"] = {key: report["tasks"][key] for key in PLANS if key in report["tasks"]}


def provenance(report: dict) -> str:
    here = report["machine"]["git_commit"][:10], report["machine"]["date"]
    groups: dict = {}
    for key, entry in report["tasks"].items():
        for side, result in entry["sides"].items():
            groups.setdefault((result.get("commit", here[0]), result.get("date", here[1])[:16]), []).append(
                f"{key} {side}"
            )
    return "; ".join(f"commit {commit} at {date}: {', '.join(runs)}" for (commit, date), runs in groups.items())


def _bf16_peak(peak: dict) -> str:
    """machine.matmul_peak measures bf16 only where it is native (an emulated one takes minutes)."""
    return f"{peak['bf16']:.0f}" if "bf16" in peak else "– (emulated here: not measured)"


def markdown(report: dict) -> str:
    m, peak = report["machine"], report["matmul_peak_gflops"]
    head = [
        f"# bertkit vs the HF Trainer (bf16), full budget{' (QUICK: harness check only)' if report['quick'] else ''}",
        "",
        f"- {m['date']}; {m['cpu_model']} ({cpu_flags(m)}), {m['usable_cores']} cores, "
        f"torch threads {m['torch_threads']}; torch {m['torch']}, transformers {m['transformers']}; "
        f"bertkit commit {m['git_commit'][:10]} ({m['git_uncommitted_files']} uncommitted files)",
        f"- matmul peak GFLOP/s: fp32 {peak.get('fp32', 0):.0f}, bf16 {_bf16_peak(peak)}; load average "
        f"start / end {report['load_average_start']} / {report.get('load_average_end')}; "
        f"suite {report.get('suite_seconds', 0) / 60:.0f} min",
        f"- recipe, both sides: batch {RECIPE['batch_size']}, lr {RECIPE['lr']}, warmup {RECIPE['warmup']}, "
        f"weight decay {RECIPE['weight_decay']}, seeds {', '.join(map(str, SEEDS))} (first n), best epoch on dev",
        f"- which run measured what: {provenance(report)}",
        "",
        table(report),
        "",
        "mean ± sample standard deviation over the seeds, in percent (QA: SQuAD's own percent). Wall: the "
        "process that ran every seed of the row, loading and every evaluation included.",
    ]
    return "\n".join(head) + "\n"


if __name__ == "__main__":
    sys.exit(main())
