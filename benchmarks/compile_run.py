"""Is --compile worth it here? Eager vs compiled whole runs, compiling from a cold and a warm cache.

    python -m benchmarks.compile_run [--rows 4000] [--workload sst2] [--name compile_run]

Each arm is a separate process (inductor's in-memory caches would otherwise make a second compile
free), all sharing one fresh TORCHINDUCTOR_CACHE_DIR: eager (--compile off), compiled with the cache
empty (cold), compiled again (warm: inductor's FX-graph and AOT-autograd caches are on disk), eager
again (the machine's drift). A compiled run's first step includes compiling: its steady step time
is (train seconds - first step) / (steps - 1); the compile cost is the first step minus a steady
one. Reported: step-time ratio eager / compiled, compile seconds cold and warm, and the steps a run
needs to pay back each (what --compile auto's PAYBACK table in bertkit/engine/compilation.py uses).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.packing import cpu_flags
from benchmarks.run import HP
from benchmarks.side_by_side import write_results

ARMS = (("eager", "bertkit_eager"), ("compiled_cold", "bertkit_compiled"), ("compiled_warm", "bertkit_compiled"))


def one_arm(side: str, workload: str, rows: int, root: str) -> dict:
    from benchmarks import bertkit_side

    return bertkit_side.train(workload, side, rows, 200, root, dict(HP))


def in_process(side: str, args, cache: str) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
    command = [sys.executable, "-m", "benchmarks.compile_run", "--one", side, "--rows", str(args.rows)]
    command += ["--workload", args.workload, "--data-dir", args.data_dir]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def summarise(made: dict) -> dict:
    steps, facts = made["optimizer_steps"], made["compile"]
    first = facts.get("first_step_seconds")
    steady = (made["train_seconds"] - first) / (steps - 1) if first is not None else made["train_seconds"] / steps
    return {
        "steps": steps,
        "train_seconds": made["train_seconds"],
        "step_seconds": steady,
        "first_step": first,
        "metric": made["metric"],
        "compiled": facts.get("compiled", False),
    }


def markdown(record: dict) -> str:
    arms, derived = record["arms"], record["derived"]
    lines = [
        f"# --compile: eager vs compiled ({record['workload']}, {record['rows']} rows, MiniLM, batch "
        f"{HP['batch_size']}, 1 epoch)",
        "",
        f"CPU flags: {record['cpu_flags']}; {record['machine']['cpus']} CPUs; precision {record['precision']}.",
        "",
        "| arm | steps | train s | steady step s | first step s | metric |",
        "|---|---|---|---|---|---|",
    ]
    for name, a in arms.items():
        first = f"{a['first_step']:.1f}" if a["first_step"] is not None else ""
        seconds = f"{a['train_seconds']:.1f} | {a['step_seconds']:.3f}"
        lines.append(f"| {name} | {a['steps']} | {seconds} | {first} | {a['metric']:.4f} |")
    payback = (
        f"pays back after {derived['cold_payback_steps']} steps cold, {derived['warm_payback_steps']} warm"
        if derived["speedup"] > 1
        else "never pays back here: the compiled step is the slower one"
    )
    lines += [
        "",
        f"Steady step, eager / compiled (warm run): **{derived['speedup']:.3f}x**; compiling cost "
        f"{derived['cold_cost']:.0f} s cold, {derived['warm_cost']:.0f} s warm; {payback}.",
        "",
        f"Command: `{record['command']}`",
        "",
    ]
    return "\n".join(lines)


def derive(arms: dict) -> dict:
    eager = statistics.mean(arms[a]["step_seconds"] for a in arms if a.startswith("eager"))
    compiled = arms["compiled_warm"]["step_seconds"]
    saved = eager - compiled
    costs = {k: arms[f"compiled_{k}"]["first_step"] - compiled for k in ("cold", "warm")}
    payback = {k: (round(c / saved) if saved > 0 else None) for k, c in costs.items()}
    return {
        "eager_step": eager,
        "compiled_step": compiled,
        "speedup": eager / compiled,
        "saving": saved / eager,
        "cold_cost": costs["cold"],
        "warm_cost": costs["warm"],
        "cold_payback_steps": payback["cold"],
        "warm_payback_steps": payback["warm"],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=4000)
    p.add_argument("--workload", default="sst2")
    p.add_argument("--data-dir", default=os.environ.get("BERTKIT_DATA_DIR", "../shared/data"))
    p.add_argument("--name", default="compile_run")
    p.add_argument("--one", help=argparse.SUPPRESS)  # one arm, in this process: prints its JSON
    args = p.parse_args()
    if args.one:
        print(json.dumps(one_arm(args.one, args.workload, args.rows, args.data_dir)))
        return
    started, arms, precisions = time.perf_counter(), {}, set()
    with tempfile.TemporaryDirectory(prefix="bertkit-compile-cache-") as cache:
        for name, side in (*ARMS, ("eager_again", "bertkit_eager")):
            made = in_process(side, args, cache)
            precisions.add(made["precision"])
            arms[name] = summarise(made)
            print(name, json.dumps(arms[name]), flush=True)
    record = {
        "workload": args.workload,
        "rows": args.rows,
        "precision": sorted(precisions),
        "cpu_flags": cpu_flags(),
        "arms": arms,
        "derived": derive(arms),
    }
    print(write_results(record, args.name, markdown, started))


if __name__ == "__main__":
    main()
