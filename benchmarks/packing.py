"""Packed vs padded training, side by side in one process: SST-2 (cls) and CoNLL-2003 (ner), MiniLM.

Arms (benchmarks/bertkit_side.py's sides, each a TrainConfig through the public API):
``bertkit_padded`` (--packing auto, length-grouped batches: the default), ``bertkit_packed``
(--packing on, length-grouped), ``bertkit_packed_random`` (packed, random batches:
--random-batches) and ``bertkit_padded_random``. Every round runs every arm of a workload
one after the other in this one process, the arm order reversed every other round, so a shared
machine's load falls on every arm alike; the table gives the median of the rounds and the ratio
of each arm's training steps per second to the first arm's (bertkit_padded by default), round by
round. The accuracy of each arm is the dev metric after the run (a few seeds with --seeds: random vs grouped batches).

    flock /tmp/bertkit-heavy.lock python -m benchmarks.packing [--rows 2000] [--eval-rows 500]
        [--rounds 2] [--workloads sst2,ner] [--seeds 42]
        [--arms bertkit_padded,bertkit_packed,bertkit_packed_random]

Writes benchmarks/results/packing.{json,md}.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import time

from benchmarks import bertkit_side
from benchmarks.machine import kernel_caps, uncapped_libraries
from benchmarks.run import HP
from benchmarks.side_by_side import write_results


def cpu_flags() -> str:
    found = subprocess.run(
        "grep -o 'avx512_bf16\\|amx_tile\\|avx2' /proc/cpuinfo | sort -u", shell=True, capture_output=True, text=True
    )
    capped = kernel_caps()
    caps = ", ".join(f"{k}={v}" for k, v in capped.items())
    left = "".join(f"; {k} unset" for k in uncapped_libraries(capped))
    return " ".join(found.stdout.split()) + (f" (kernels capped: {caps}{left})" if caps else "")


def one_run(workload: str, arm: str, rows: int, eval_rows: int, root: str, seed: int) -> dict:
    made = bertkit_side.train(workload, arm, rows, eval_rows, root, {**HP, "seed": seed})
    steps = math.ceil(made["n_train"] / HP["batch_size"]) * HP["epochs"]
    made["steps_per_s"] = steps / made["train_seconds"]
    made["load_avg"] = os.getloadavg()[0]
    return made


def measure(args) -> list[dict]:
    runs = []
    for seed in args.seeds:
        for round_ in range(args.rounds):
            for workload in args.workloads:
                arms = args.arms if round_ % 2 == 0 else args.arms[::-1]
                for arm in arms:
                    made = one_run(workload, arm, args.rows, args.eval_rows, args.data_dir, seed)
                    runs.append({"workload": workload, "arm": arm, "round": round_, "seed": seed, **made})
                    print(
                        f"{workload} {arm} seed {seed} round {round_}: {made['steps_per_s']:.3f} steps/s, "
                        f"padding {made['padding_share']:.3f}, metric {made['metric']:.4f}",
                        flush=True,
                    )
    return runs


def summary(runs: list[dict], workloads: list[str], arms: list[str]) -> list[dict]:
    """Each arm's medians, its speed against the first arm's (the baseline) run by run."""
    rows, baseline = [], arms[0]
    for workload in workloads:
        for arm in arms:
            mine = [r for r in runs if r["workload"] == workload and r["arm"] == arm]
            ratios = [
                r["steps_per_s"] / base["steps_per_s"]
                for r in mine
                for base in runs
                if base["workload"] == workload
                and base["arm"] == baseline
                and (base["round"], base["seed"]) == (r["round"], r["seed"])
            ]
            rows.append(
                {
                    "workload": workload,
                    "arm": arm,
                    "steps_per_s": statistics.median(r["steps_per_s"] for r in mine),
                    "ratio_to_padded": statistics.median(ratios) if ratios else None,
                    "ratios": [round(x, 3) for x in ratios],
                    "padding_share": statistics.median(r["padding_share"] for r in mine),
                    "metrics": [round(r["metric"], 4) for r in mine],
                    "metric_mean": statistics.mean(r["metric"] for r in mine),
                    "metric_std": statistics.stdev([r["metric"] for r in mine]) if len(mine) > 1 else 0.0,
                }
            )
    return rows


def markdown(record: dict) -> str:
    lines = [
        f"# Packed vs padded training ({record['rows']} train rows, {record['eval_rows']} eval rows, MiniLM, "
        f"precision {record['precision']}, batch {HP['batch_size']}, 1 epoch)",
        "",
        f"CPU flags: {record['cpu_flags']}; {record['machine']['cpus']} CPUs, shared with other engineers' jobs "
        f"(load average {record['load_avg']}).",
        "",
        f"| workload | arm | steps/s (median) | vs {record['arms'][0]} (median) | per round | padding share "
        "| metric per run | mean ± std (sample) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in record["summary"]:
        ratio = f"{r['ratio_to_padded']:.3f}x" if r["ratio_to_padded"] else ""
        lines.append(
            f"| {r['workload']} | {r['arm']} | {r['steps_per_s']:.3f} | {ratio} | {r['ratios']} | "
            f"{r['padding_share']:.3f} | {r['metrics']} | {r['metric_mean']:.4f} ± {r.get('metric_std', 0.0):.4f} |"
        )
    lines += [
        "",
        "Padding share: of the tokens the encoder ran (since 400ae60; a packed arm's is the spare tokens that "
        "round each packed row up to 32, where earlier results show its batches' padding).",
        "",
        f"Command: `{record['command']}`",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2000)
    p.add_argument("--eval-rows", type=int, default=500)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--workloads", default="sst2,ner")
    p.add_argument("--arms", default="bertkit_padded,bertkit_packed,bertkit_packed_random")
    p.add_argument("--seeds", default="42")
    p.add_argument("--data-dir", default=os.environ.get("BERTKIT_DATA_DIR", "../shared/data"))
    p.add_argument("--name", default="packing")
    args = p.parse_args()
    args.workloads, args.arms = args.workloads.split(","), args.arms.split(",")
    args.seeds = [int(s) for s in args.seeds.split(",")]
    started = time.perf_counter()
    runs = measure(args)
    record = {
        "rows": args.rows,
        "eval_rows": args.eval_rows,
        "arms": args.arms,
        "precision": sorted({r["precision"] for r in runs}),
        "cpu_flags": cpu_flags(),
        "load_avg": round(statistics.mean(r["load_avg"] for r in runs), 2),
        "summary": summary(runs, args.workloads, args.arms),
        "runs": runs,
    }
    print(write_results(record, args.name, markdown, started))


if __name__ == "__main__":
    main()
