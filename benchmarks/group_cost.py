"""What one more attention group costs (networks/attention_groups.GROUP_COST), measured on random
packed batches: MiniLM in bf16 weights with bertkit's CPU training kernels, forward and backward,
the batches ``--random-batches`` builds (batch 32) from the first ``--rows`` SST-2 sentences (cls),
CoNLL-2003 sentences (ner) or SQuAD-dev questions' 384-token windows (qa), each batch run once under
every ``--costs`` value, the order rotated from one batch to the next (a shared machine's load falls
on every value alike); the first batch warms up and is not counted.

    flock /tmp/bertkit-heavy.lock python -m benchmarks.group_cost [--workloads sst2,ner,qa] [--costs 60000,1200000]

Writes benchmarks/results/group_cost.{json,md}: milliseconds a step and groups a batch per value.
"""

from __future__ import annotations

import argparse
import os
import time

from benchmarks.packing import cpu_flags
from benchmarks.packing_steps import collate, features, model_for, step
from benchmarks.side_by_side import write_results
from benchmarks.workloads import model_path

ROWS = {"sst2": 3200, "ner": 3200, "qa": 600}


def measure(workload: str, rows: int, costs: list[int]) -> dict:
    from transformers import AutoTokenizer

    from bertkit.engine.batching import LengthGroupedBatches
    from bertkit.networks import attention_groups
    from bertkit.networks.packed_heads import pack_encoder

    feats = features(workload, rows, AutoTokenizer.from_pretrained(model_path()))
    lengths = [len(f["input_ids"]) for f in feats]
    batches = list(LengthGroupedBatches(lengths, 32, 42, group=1))  # random batches
    model = model_for(workload)
    pack_encoder(model)
    heads, chosen = model.config.num_attention_heads, attention_groups.GROUP_COST
    seconds, groups = dict.fromkeys(costs, 0.0), dict.fromkeys(costs, 0)
    for i, rows_of_batch in enumerate(batches):
        batch = collate([feats[j] for j in rows_of_batch], per_token=workload != "sst2")
        for cost in costs[i % len(costs) :] + costs[: i % len(costs)]:
            attention_groups.GROUP_COST = cost
            took = step(model, batch)
            if i:
                seconds[cost] += took
                groups[cost] += len(attention_groups.layout([lengths[j] for j in rows_of_batch], heads, 2))
    attention_groups.GROUP_COST = chosen
    counted = len(batches) - 1
    return {
        "workload": workload,
        "batches": counted,
        "costs": {
            str(cost): {
                "ms_per_step": round(seconds[cost] / counted * 1000, 1),
                "vs_first": round(seconds[costs[0]] / seconds[cost], 3),
                "groups_per_batch": round(groups[cost] / counted, 2),
            }
            for cost in costs
        },
    }


def markdown(record: dict) -> str:
    lines = [
        "# What one more attention group costs: random packed batches under each GROUP_COST "
        "(MiniLM, bf16 weights, batch 32, forward + backward, paired batch by batch)",
        "",
        f"CPU flags: {record['cpu_flags']}; torch threads {record['threads']}; load average "
        f"{record['load_avg']} at the end. GROUP_COST in bertkit: {record['group_cost']}.",
        "",
        "| workload | batches | GROUP_COST | ms a step | speed vs the first value | groups a batch |",
        "|---|---|---|---|---|---|",
    ]
    for w in record["workloads"]:
        for cost, r in w["costs"].items():
            lines.append(
                f"| {w['workload']} | {w['batches']} | {int(cost):,} | {r['ms_per_step']} | {r['vs_first']}x "
                f"| {r['groups_per_batch']} |"
            )
    lines += ["", f"Command: `{record['command']}`", ""]
    return "\n".join(lines)


def main() -> None:
    import torch

    from bertkit.networks import attention_groups

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default="sst2,ner,qa")
    p.add_argument("--costs", default="60000,600000,1200000")
    p.add_argument("--rows", type=int, default=0, help="rows a workload (0: sst2/ner 3,200, qa 600 questions)")
    p.add_argument("--name", default="group_cost")
    args = p.parse_args()
    started = time.perf_counter()
    torch.manual_seed(0)
    costs = [int(float(c)) for c in args.costs.split(",")]
    measured = [measure(w, args.rows or ROWS[w], costs) for w in args.workloads.split(",")]
    record = {
        "threads": torch.get_num_threads(),
        "cpu_flags": cpu_flags(),
        "load_avg": round(os.getloadavg()[0], 2),
        "group_cost": attention_groups.GROUP_COST,
        "workloads": measured,
    }
    print(write_results(record, args.name, markdown, started))


if __name__ == "__main__":
    main()
