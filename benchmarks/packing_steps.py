"""Packed vs padded training steps, paired batch by batch in one process (a shared machine's load
falls on every arm alike): MiniLM's forward and backward in bf16 weights, as bertkit trains on a
CPU with native bf16 (the CPU training attention, FastDropout, a sequence classifier's [CLS]-only
last layer), on the batches bertkit's loop builds from the first ``--rows`` SST-2 sentences (cls),
CoNLL-2003 sentences (ner) or SQuAD-dev questions (qa: their 384-token windows, stride 128, under a
token head, a stand-in for QA's two-logit one): length-grouped (the default) and random
(--random-batches).

Arms: padded/packed x grouped/random, padded grouped and packed random as they ran "before"
attention groups (networks/attention_groups.py; the results of 9cc4c3e also drew the "before" arms'
masks on one thread, when large masks came from two), and packed random with its rows "apart" (one
a grid row, as before short rows shared grid rows: attention_groups.layout). For every batch index each arm runs
one step, the order rotated from one index to the next; each arm's seconds are summed over the same
batches. The optimizer step (the same work in every arm) is left out: benchmarks/packing.py
measures whole runs.

    flock /tmp/bertkit-heavy.lock python -m benchmarks.packing_steps [--rows 1000] [--workloads sst2,ner,qa]

Writes benchmarks/results/packing_steps.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import time

from benchmarks.packing import cpu_flags
from benchmarks.side_by_side import write_results
from benchmarks.workloads import load_conll, load_squad, load_sst2, model_path

ARMS = (
    "padded grouped",
    "packed grouped",
    "padded random",
    "packed random",
    "padded grouped, before",
    "packed random, before",
    "packed random, rows apart",
)
# "before": attention on the whole padded grid (no networks/attention_groups.py), as bertkit trained
# until the groups came in; "rows apart": length groups of one row a grid row, as until bins came in
# (attention_groups.layout)


def _packing_and_grouping(arm: str) -> list[str]:
    """``"packed random, before"`` -> ``["packed", "random"]``."""
    return arm.split(",")[0].split()


def features(workload: str, rows: int, tokenizer) -> list[dict]:
    if workload == "qa":  # SQuAD windows (384 tokens, stride 128) under a token head, as a stand-in for QA's
        questions = load_squad(rows, 1)[0]
        encoded = tokenizer(
            [q["question"] for q in questions],
            [q["context"] for q in questions],
            truncation="only_second",
            max_length=384,
            stride=128,
            return_overflowing_tokens=True,
        )
        return [{"input_ids": ids, "labels": [i % 9 for i in range(len(ids))]} for ids in encoded["input_ids"]]
    if workload == "sst2":
        texts = [r["sentence"] for r in load_sst2(rows, 1)[0]]
        encoded = tokenizer(texts, truncation=True, max_length=128)
        return [{"input_ids": ids, "labels": i % 2} for i, ids in enumerate(encoded["input_ids"])]
    sentences = load_conll(rows, 1)[0]
    encoded = tokenizer([s["tokens"] for s in sentences], is_split_into_words=True, truncation=True, max_length=128)
    return [{"input_ids": ids, "labels": [i % 9 for i in range(len(ids))]} for ids in encoded["input_ids"]]


def collate(rows: list[dict], per_token: bool):
    import torch

    longest = max(len(r["input_ids"]) for r in rows)
    ids = torch.zeros(len(rows), longest, dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100) if per_token else torch.tensor([r["labels"] for r in rows])
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        ids[i, :n], mask[i, :n] = torch.tensor(r["input_ids"]), 1
        if per_token:
            labels[i, :n] = torch.tensor(r["labels"])
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids), "labels": labels}


def model_for(workload: str):
    import torch
    import transformers

    from bertkit.engine.cpu_kernels import CpuTrainingKernels
    from bertkit.networks.first_token_head import first_token_only_last_layer

    kind = "AutoModelForSequenceClassification" if workload == "sst2" else "AutoModelForTokenClassification"
    model = getattr(transformers, kind).from_pretrained(model_path(), num_labels=2 if workload == "sst2" else 9)
    model = model.to(torch.bfloat16)
    if workload == "sst2":
        first_token_only_last_layer(model)  # as bertkit's spine does for a sequence classifier
    model.train()
    CpuTrainingKernels(model).apply()
    return model


def step(model, batch) -> float:
    start = time.perf_counter()
    model(**batch).loss.backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def measure(workload: str, rows: int, batch_size: int) -> dict:
    from transformers import AutoTokenizer

    from bertkit.engine.batching import LengthGroupedBatches
    from bertkit.networks import attention_groups
    from bertkit.networks.packed_heads import pack_encoder, unpack_encoder

    now = attention_groups.row_groups, attention_groups.padded_chunks, attention_groups.layout

    def rows_apart(lengths, heads, itemsize):
        return [[[row] for row in group] for group in attention_groups.plan(lengths, heads, itemsize)]

    def attention_as_for(arm: str) -> None:
        """The attention as it was for an arm measured against an earlier state; as it is now for any other."""
        whole_grid, apart = arm.endswith("before"), arm.endswith("rows apart")
        attention_groups.row_groups, attention_groups.padded_chunks = (
            ((lambda *a: None), (lambda *a: 1)) if whole_grid else now[:2]
        )
        attention_groups.layout = rows_apart if apart else now[2]

    feats = features(workload, rows, AutoTokenizer.from_pretrained(model_path()))
    lengths = [len(f["input_ids"]) for f in feats]
    plans = {
        "grouped": list(LengthGroupedBatches(lengths, batch_size, 42, group=50)),
        "random": list(LengthGroupedBatches(lengths, batch_size, 42, group=1)),
    }
    model = model_for(workload)
    seconds, tokens = dict.fromkeys(ARMS, 0.0), dict.fromkeys(ARMS, 0)
    batches = min(len(plans["grouped"]), len(plans["random"]))
    for i in range(batches):
        order = ARMS[i % len(ARMS) :] + ARMS[: i % len(ARMS)]
        for arm in order:
            packing, grouping = _packing_and_grouping(arm)
            batch = collate([feats[j] for j in plans[grouping][i]], per_token=workload != "sst2")
            pack_encoder(model) if packing == "packed" else unpack_encoder(model)
            attention_as_for(arm)
            seconds[arm] += step(model, batch) if i else 0.0  # the first index warms every arm up
            attention_as_for("now")
            tokens[arm] += int(batch["attention_mask"].numel())
    unpack_encoder(model)
    base = seconds["padded grouped"]
    return {
        "workload": workload,
        "batches": batches - 1,
        "arms": {
            arm: {
                "seconds": round(seconds[arm], 2),
                "steps_per_s": round((batches - 1) / seconds[arm], 3),
                "vs_padded_grouped": round(base / seconds[arm], 3),
                "padded_tokens": tokens[arm],
            }
            for arm in ARMS
        },
        "padding_share": {
            grouping: round(1 - sum(lengths) / sum(len(b) * max(lengths[j] for j in b) for b in plan), 3)
            for grouping, plan in plans.items()
        },
    }


def markdown(record: dict) -> str:
    lines = [
        f"# Packed vs padded training steps (MiniLM, bf16 weights, batch {record['batch_size']}, "
        f"first {record['rows']} rows, forward + backward, paired batch by batch)",
        "",
        f"CPU flags: {record['cpu_flags']}; torch threads {record['threads']}; a shared machine "
        f"(load average {record['load_avg']} at the end).",
        "",
        "| workload | arm | padding share of its batches | steps/s | speed vs padded grouped |",
        "|---|---|---|---|---|",
    ]
    for w in record["workloads"]:
        for arm, r in w["arms"].items():
            share = w["padding_share"][_packing_and_grouping(arm)[1]]
            lines.append(f"| {w['workload']} | {arm} | {share} | {r['steps_per_s']} | {r['vs_padded_grouped']}x |")
    lines += ["", f"Command: `{record['command']}`", ""]
    return "\n".join(lines)


def main() -> None:
    import torch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--workloads", default="sst2,ner")
    p.add_argument("--name", default="packing_steps")
    args = p.parse_args()
    started = time.perf_counter()
    torch.manual_seed(0)
    measured = [measure(w, args.rows, args.batch_size) for w in args.workloads.split(",")]
    record = {
        "rows": args.rows,
        "batch_size": args.batch_size,
        "threads": torch.get_num_threads(),
        "cpu_flags": cpu_flags(),
        "load_avg": round(os.getloadavg()[0], 2),
        "workloads": measured,
    }
    print(write_results(record, args.name, markdown, started))


if __name__ == "__main__":
    main()
