"""Where packing helps inference: batches from eval's length-sorted ones (little padding) to serve's
arrival-order ones (much), each a forward pass padded with SDPA vs packed (engine/packed_inference.py:
the CPU training attention, networks/packed_heads.py), MiniLM bf16, no gradients, interleaved in one
process; the share of padding from which packing wins sets PADDING_SHARE.

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


def timed(model, batch, reps: int, forced: bool = False, whole_grid: bool = False) -> list[float]:
    """Seconds of each of ``reps`` forward passes (``forced``: PackedInference packs whatever the share;
    ``whole_grid``: packed attention on the whole padded grid, one row a grid row, as before short rows
    shared grid rows, networks/attention_groups.layout)."""
    import torch

    from bertkit.engine import packed_inference
    from bertkit.networks import attention_groups

    times, threshold, layout = [], packed_inference.PADDING_SHARE, attention_groups.layout
    packed_inference.PADDING_SHARE = 0.0 if forced else threshold
    if whole_grid:
        attention_groups.layout = lambda lengths, *a: [[[row] for row in range(len(lengths))]]
    with torch.inference_mode():
        for _ in range(reps):
            start = time.perf_counter()
            model(**batch)
            times.append(time.perf_counter() - start)
    packed_inference.PADDING_SHARE, attention_groups.layout = threshold, layout
    return times


def main() -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from bertkit.engine.batching import sorted_batches
    from bertkit.engine.packed_inference import PADDING_SHARE, PackedInference
    from bertkit.models import resolve_model
    from bertkit.networks.first_token_head import first_token_only_last_layer

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=8)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--batches", type=int, default=6, help="arrival-order batches measured")
    p.add_argument("--data-dir", default=os.environ.get("BERTKIT_DATA_DIR", "../shared/data"))
    p.add_argument("--name", default="packing_inference")
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
    # batches from nearly unpadded (eval's length-sorted ones) to mostly padding (serve's arrival order)
    chosen = sorted_batches(lengths, args.batch)[1:4:2] + arrival[: args.batches]
    engine = PackedInference(model, torch.device("cpu"))
    rows = []
    for indices in chosen:
        batch = dict(tokenizer([texts[i] for i in indices], padding=True, return_tensors="pt"))
        padded, packed, whole = [], [], []
        for round_ in range(2):  # interleaved: the machine's load falls on every arm
            padded += timed(model, batch, args.reps)
            packed += timed(lambda **b: engine.run(model, b), batch, args.reps, forced=True)
            whole += timed(lambda **b: engine.run(model, b), batch, args.reps, forced=True, whole_grid=True)
        rows.append(
            {
                "padding_share": round(padding_share(lengths, [indices]), 4),
                "padded_sdpa_ms": round(1000 * statistics.median(padded), 1),
                "packed_ms": round(1000 * statistics.median(packed), 1),
                "packed_whole_grid_ms": round(1000 * statistics.median(whole), 1),
            }
        )
        print(rows[-1], flush=True)
    rows.sort(key=lambda r: r["padding_share"])
    record = {
        "batch": args.batch,
        "sst2_dev_padding_share_sorted": round(sorted_share, 4),
        "sst2_dev_padding_share_arrival_order": round(random_share, 4),
        "batches": rows,
        "threshold": PADDING_SHARE,
        "cpu_flags": cpu_flags(),
        "threads": torch.get_num_threads(),
        "load_avg": round(os.getloadavg()[0], 2),
    }
    print(write_results(record, args.name, markdown, started))


def markdown(r: dict) -> str:
    lines = [
        f"# Packing at inference (MiniLM bf16, batch {r['batch']}, SST-2 dev, {r['threads']} torch threads)",
        "",
        f"CPU flags: {r['cpu_flags']}; shared machine, load average {r['load_avg']}.",
        "",
        f"- padding share of eval/predict's length-sorted batches: {r['sst2_dev_padding_share_sorted']}",
        f"- padding share of batches in arrival order (serve): {r['sst2_dev_padding_share_arrival_order']}",
        f"- bertkit packs a prediction batch from {r['threshold']} padding on (engine/packed_inference.py)",
        "",
        "| batch's padding share | padded, SDPA (ms) | packed (ms) | packed speed-up "
        "| packed on the whole grid (ms) | its speed-up |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {b['padding_share']:.3f} | {b['padded_sdpa_ms']} | {b['packed_ms']} | "
        f"{b['padded_sdpa_ms'] / b['packed_ms']:.2f}x | {b.get('packed_whole_grid_ms', '-')} | "
        + (f"{b['padded_sdpa_ms'] / b['packed_whole_grid_ms']:.2f}x |" if "packed_whole_grid_ms" in b else "- |")
        for b in r["batches"]
    ]
    return "\n".join(
        lines + ["", "Medians, padded and packed interleaved in one process.", "", f"Command: `{r['command']}`", ""]
    )


if __name__ == "__main__":
    main()
