"""Does oneDNN run a bf16 matmul of a MiniLM linear layer on every core? For each of the layer shapes
(x @ W^T with x [M, K], W [N, K]: the attention projections, the FFN's input and output layers) and M
= 32 rows x L tokens: microseconds a call and the process's CPU time over wall time while it runs
(about the number of busy cores; each shape warmed first, then ``--calls`` calls).

Found with it (torch 2.13.0, oneDNN v3.12.0, 2 cores with AMX): the FFN's output layer, [M, 1536] x
[1536, 384], ran on ONE core for M of 384 and from 512 to 928 (cpu/wall 1.0; M = 640 slower than M = 960): oneDNN's
AMX blocking heuristic may choose fewer threads than it has (``find_best_blocking`` in
``src/cpu/x64/matmul/amx_blocking_heuristics.cpp``). Splitting those matmuls into pieces that run on both
cores was 22-28 % faster here, in isolation, and not faster in whole training steps (their operands
come from memory there), so bertkit does not split them; rerun this after a torch upgrade.

    flock /tmp/bertkit-heavy.lock python -m benchmarks.matmul_threads [--lengths 8,12,...] [--calls 200]

Writes benchmarks/results/matmul_threads.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import re
import time

import torch

from benchmarks.packing import cpu_flags
from benchmarks.side_by_side import write_results

# (K, N) of MiniLM's linear layers: attention projections, FFN input, FFN output
LAYERS = {"attention 384 -> 384": (384, 384), "FFN in 384 -> 1536": (384, 1536), "FFN out 1536 -> 384": (1536, 384)}


def measure(rows: int, k: int, n: int, calls: int) -> dict:
    x = torch.randn(rows, k, dtype=torch.bfloat16)
    weight_t = torch.randn(n, k, dtype=torch.bfloat16).t()
    for _ in range(5):
        torch.mm(x, weight_t)
    cpu, wall = os.times(), time.perf_counter()
    for _ in range(calls):
        torch.mm(x, weight_t)
    wall, cpu_after = time.perf_counter() - wall, os.times()
    busy = (cpu_after.user + cpu_after.system - cpu.user - cpu.system) / wall
    return {"us": round(wall / calls * 1e6, 1), "cpu_per_wall": round(busy, 2)}


def markdown(record: dict) -> str:
    names = list(LAYERS)
    lines = [
        "# bf16 matmuls of MiniLM's linear layers: µs a call and busy cores (CPU time / wall time)",
        "",
        f"CPU flags: {record['cpu_flags']}; torch {record['torch']} (oneDNN {record['onednn']}); torch threads "
        f"{record['threads']}; {record['calls']} calls a cell. A cell reads `µs (cpu/wall)`; cpu/wall near 1.0 "
        "with 2 threads: one core did the work.",
        "",
        "| M (32 rows x L) | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for row in record["rows"]:
        cells = [f"{row[name]['us']} ({row[name]['cpu_per_wall']})" for name in names]
        lines.append(f"| {row['m']} | " + " | ".join(cells) + " |")
    lines += ["", f"Command: `{record['command']}`", ""]
    return "\n".join(lines)


def _onednn_version() -> str:
    found = re.search(r"MKL-DNN (v[\d.]+)", torch.__config__.show())
    return found.group(1) if found else "unknown"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", default="8,12,14,16,18,20,22,24,26,28,30,32,40")
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--name", default="matmul_threads")
    args = p.parse_args()
    started = time.perf_counter()
    rows = []
    for length in (int(n) for n in args.lengths.split(",")):
        m = 32 * length
        rows.append({"m": m, **{name: measure(m, k, n, args.calls) for name, (k, n) in LAYERS.items()}})
    record = {
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "onednn": _onednn_version(),
        "cpu_flags": cpu_flags(),
        "calls": args.calls,
        "rows": rows,
    }
    print(write_results(record, args.name, markdown, started))


if __name__ == "__main__":
    main()
