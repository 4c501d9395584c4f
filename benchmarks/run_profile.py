"""Where a whole bertkit fine-tuning run's operator time goes, by operator family: how much of it the
matmuls take, so how far the rest could move it. One ``api.finetune`` on real data (bertkit_side's,
the benchmark's own hyperparameters) under torch.profiler (self CPU time; the profiler adds its own
per-operator cost, so the small operators' share is an upper bound).

    python -m benchmarks.run_profile [--workload ner] [--rows 4000] [--name run_profile]

Run it once as is and once with ``--cap avx2`` (oneDNN, ATen and oneMKL capped at AVX2,
benchmarks/machine.py) to see each CPU class. Writes benchmarks/results/NAME.{json,md}.
"""

from __future__ import annotations

import argparse
import time

from benchmarks.machine import CAPS, cap_kernels
from benchmarks.side_by_side import write_results


def profiled_run(workload: str, rows: int, eval_rows: int) -> dict:
    from torch.profiler import ProfilerActivity, profile

    from benchmarks import bertkit_side  # here: they import torch, which --cap must precede
    from benchmarks.profile_step import GROUPS
    from benchmarks.run import HP
    from benchmarks.workloads import data_dir

    bertkit_side._prepare()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        made = bertkit_side.train(workload, "bertkit", rows, eval_rows, str(data_dir()), dict(HP))
    seconds: dict[str, float] = {}
    for event in prof.key_averages():
        seconds[event.key] = seconds.get(event.key, 0.0) + event.self_cpu_time_total / 1e6
    families = {name: sum(seconds.get(key, 0.0) for key in keys) for name, keys in GROUPS}
    grouped = {key for _, keys in GROUPS for key in keys}
    others = sorted(((v, k) for k, v in seconds.items() if k not in grouped), reverse=True)
    families["everything else"] = sum(v for v, _ in others)
    return {
        "train_seconds": made["train_seconds"],
        "eval_seconds": made["eval_seconds"],
        "precision": made["precision"],
        "metric": made["metric"],
        "tokens": made["tokens"],  # real (unpadded) tokens trained on
        "operator_seconds": round(sum(seconds.values()), 3),
        "families": {k: round(v, 3) for k, v in families.items()},
        "everything_else_top": {k: round(v, 3) for v, k in others[:12]},
    }


def markdown(record: dict) -> str:
    run = record["run"]
    total = run["operator_seconds"]
    lines = [
        f"# Operator time of one whole run: {record['workload']}, {record['rows']} rows, {run['precision']}",
        "",
        f"CPU: {record['cpu_flags']}. `{record['command']}`",
        "",
        f"Training {run['train_seconds']:.1f} s (profiled) on {run['tokens']:,} tokens, "
        f"evaluation {run['eval_seconds']:.1f} s; "
        f"operators' self CPU {total:.1f} s in all.",
        "",
        "| operator family | seconds | share of operator time |",
        "|---|---|---|",
    ]
    for name, value in run["families"].items():
        lines.append(f"| {name} | {value:.2f} | {value / total:.0%} |")
    lines += [
        "",
        "Everything else, its largest: " + ", ".join(f"{k} {v:.2f} s" for k, v in run["everything_else_top"].items()),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("sst2", "ner", "qa"), default="ner")
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--eval-rows", type=int, default=64)
    parser.add_argument("--name", default="run_profile")
    parser.add_argument("--cap", choices=sorted(CAPS), help="oneDNN, ATen and oneMKL capped (an AVX2-only CPU)")
    args = parser.parse_args()
    if args.cap:
        cap_kernels(args.cap)
    from benchmarks.packing import cpu_flags

    started = time.perf_counter()
    record = {"workload": args.workload, "rows": args.rows, "cpu_flags": cpu_flags()}
    record["run"] = profiled_run(args.workload, args.rows, args.eval_rows)
    print(write_results(record, args.name, markdown, started))


if __name__ == "__main__":
    main()
