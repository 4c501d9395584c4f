"""Would packing help inference? The padding eval and predict batches carry, and a forward pass of a
random batch (serve's micro-batches are in arrival order) padded with SDPA vs packed with the CPU
training attention (networks/packed_heads.py), MiniLM, no gradients, interleaved in one process.

    flock /tmp/bertkit-heavy.lock python -m benchmarks.packing_inference [--reps 20] [--batch 64]

Writes benchmarks/results/packing_inference.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from pathlib import Path

from benchmarks.packing import cpu_flags
from benchmarks.side_by_side import write_results


def padding_share(lengths: list[int], batches: list[list[int]]) -> float:
    real = sum(lengths[i] for b in batches for i in b)
    padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    return 1 - real / padded


def sentences(root: str) -> list[str]:
    lines = (Path(root) / "sst2" / "dev.tsv").read_text().splitlines()[1:]
    return [line.split("\t")[0] for line in lines]


def timed(model, batch, reps: int) -> list[float]:
    import torch

    times = []
    with torch.no_grad():
        for _ in range(reps):
            start = time.perf_counter()
            model(**batch)
            times.append(time.perf_counter() - start)
    return times


def main() -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from bertkit.engine.batching import sorted_batches
    from bertkit.engine.cpu_kernels import CpuTrainingKernels
    from bertkit.models import resolve_model
    from bertkit.networks.first_token_head import first_token_only_last_layer
    from bertkit.networks.packed_heads import pack_encoder, unpack_encoder

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--data-dir", default=os.environ.get("BERTKIT_DATA_DIR", "../shared/data"))
    args = p.parse_args()
    started = time.perf_counter()
    path = resolve_model("minilm")
    tokenizer = AutoTokenizer.from_pretrained(path)
    texts = sentences(args.data_dir)
    lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=128)["input_ids"]]
    order = list(range(len(texts)))
    random.Random(0).shuffle(order)
    arrival = [order[i : i + args.batch] for i in range(0, len(order), args.batch)]
    sorted_share = padding_share(lengths, sorted_batches(lengths, args.batch))
    random_share = padding_share(lengths, arrival)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2, attn_implementation="sdpa")
    model = model.to(torch.bfloat16).eval()
    first_token_only_last_layer(model)  # as bertkit's inference runs a sequence classifier (both arms)
    batch = dict(tokenizer([texts[i] for i in arrival[0]], padding=True, return_tensors="pt"))
    kernels = CpuTrainingKernels(model)
    padded, packed = [], []
    for round_ in range(2):  # interleaved: the machine's load falls on both
        padded += timed(model, batch, args.reps)
        kernels.apply()
        pack_encoder(model)
        packed += timed(model, batch, args.reps)
        unpack_encoder(model)
        kernels.undo()
    record = {
        "batch": args.batch,
        "sst2_dev_padding_share_sorted": round(sorted_share, 4),
        "sst2_dev_padding_share_arrival_order": round(random_share, 4),
        "random_batch_padding_share": round(padding_share(lengths, arrival[:1]), 4),
        "padded_sdpa_ms": round(1000 * statistics.median(padded), 1),
        "packed_ms": round(1000 * statistics.median(packed), 1),
        "cpu_flags": cpu_flags(),
        "threads": torch.get_num_threads(),
        "load_avg": round(os.getloadavg()[0], 2),
    }
    print(write_results(record, "packing_inference", markdown, started))


def markdown(r: dict) -> str:
    return "\n".join(
        [
            f"# Packing at inference (MiniLM bf16, batch {r['batch']}, SST-2 dev, {r['threads']} torch threads)",
            "",
            f"CPU flags: {r['cpu_flags']}; shared machine, load average {r['load_avg']}.",
            "",
            f"- padding share of eval/predict's length-sorted batches: {r['sst2_dev_padding_share_sorted']}",
            f"- padding share of batches in arrival order (serve): {r['sst2_dev_padding_share_arrival_order']}",
            f"- one arrival-order batch ({r['random_batch_padding_share']} padding): padded SDPA "
            f"{r['padded_sdpa_ms']} ms, packed {r['packed_ms']} ms (median, interleaved)",
            "",
            f"Command: `{r['command']}`",
            "",
        ]
    )


if __name__ == "__main__":
    main()
