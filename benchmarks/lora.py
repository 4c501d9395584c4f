"""Full fine-tuning against ``--lora 8`` and ``--lora 16`` (MiniLM, SST-2 and MRPC): dev accuracy
(and MRPC's F1) per seed, step time, peak RSS of the training process, trainable parameters.

Every arm trains on the same slice of the training set (the first ``--rows``), for the same
epochs and batch size, in its own process (``os.wait4`` gives that process's peak RSS); the
arms of one seed run before the next seed starts, so a ``--budget`` that runs out leaves whole
seeds. Results go to benchmarks/results/lora.json and lora.md after every run:

    flock /tmp/heavy.lock python benchmarks/lora.py --seeds 42,43,44 --budget 1200
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
ARMS = {"full": (), "lora 8": ("--lora", "8"), "lora 16": ("--lora", "16")}
DATASETS = {"sst2": ("cls", 2000), "mrpc": ("pair", 1600)}  # task, training rows


def train(arm: str, data: str, seed: int, args, out: Path) -> dict:
    task, rows = DATASETS[data]
    lr = args.lora_lr if arm != "full" else args.full_lr
    command = [
        sys.executable,
        "-m",
        "bertkit",
        "finetune",
        task,
        "--data",
        data,
        "--model",
        "minilm",
        "--max-train-samples",
        str(rows),
        "--epochs",
        str(args.epochs),
        "--batch-size",
        "32",
        "--lr",
        str(lr),
        "--seed",
        str(seed),
        "--threads",
        str(args.threads),
        "--output",
        str(out),
        "--overwrite",
        *ARMS[arm],
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    stderr = process.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{arm} {data} seed {seed} failed:\n{stderr[-2000:]}")
    meta = json.loads((out / "bertkit.json").read_text())
    throughput = meta["throughput"]
    return {
        "data": data,
        "arm": arm,
        "seed": seed,
        "lr": lr,
        "train_rows": rows,
        "accuracy": meta["metrics"]["accuracy"],
        "f1": meta["metrics"].get("f1"),
        "step_seconds": throughput["train_seconds"] / max(throughput["optimizer_steps"], 1),
        "examples_per_s": throughput["examples_per_s"],
        "peak_rss_mib": usage.ru_maxrss / 1024,  # Linux: KiB
        "trainable_parameters": (meta["lora"] or {}).get("trainable_parameters") or parameters(out),
        "precision": meta["runtime"]["precision"],
        "wall_seconds": round(time.perf_counter() - started, 1),
        "load_average": os.getloadavg()[0],
    }


def parameters(model_dir: Path) -> int:
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), "pt") as weights:
        total = 0
        for name in weights.keys():
            shape = weights.get_slice(name).get_shape()
            total += int(math.prod(shape))
        return total


def summary(runs: list) -> list:
    rows = []
    for data in DATASETS:
        for arm in ARMS:
            mine = [r for r in runs if r["data"] == data and r["arm"] == arm]
            if not mine:
                continue
            accuracies = [r["accuracy"] for r in mine]
            rows.append(
                {
                    "data": data,
                    "arm": arm,
                    "seeds": len(mine),
                    "accuracy_mean": statistics.mean(accuracies),
                    "accuracy_std": statistics.stdev(accuracies) if len(mine) > 1 else None,
                    "f1_mean": statistics.mean(r["f1"] for r in mine) if mine[0]["f1"] is not None else None,
                    "step_seconds": statistics.median(r["step_seconds"] for r in mine),
                    "peak_rss_mib": statistics.median(r["peak_rss_mib"] for r in mine),
                    "trainable_parameters": mine[0]["trainable_parameters"],
                    "lr": mine[0]["lr"],
                }
            )
    return rows


def write(runs: list, args) -> None:
    table = summary(runs)
    record = {
        "command": " ".join(sys.argv),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "settings": {"epochs": args.epochs, "threads": args.threads, "batch_size": 32, "datasets": DATASETS},
        "summary": table,
        "runs": runs,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "lora.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        "| data | arm | seeds | dev accuracy (mean ± std) | F1 | step time | peak RSS | trainable parameters | lr |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table:
        spread = f" ± {row['accuracy_std']:.4f}" if row["accuracy_std"] is not None else ""
        f1 = f"{row['f1_mean']:.4f}" if row["f1_mean"] is not None else ""
        lines.append(
            f"| {row['data']} | {row['arm']} | {row['seeds']} | {row['accuracy_mean']:.4f}{spread} | {f1} | "
            f"{1000 * row['step_seconds']:.0f} ms | {row['peak_rss_mib']:.0f} MiB | "
            f"{row['trainable_parameters']:,} | {row['lr']:g} |"
        )
    (RESULTS / "lora.md").write_text("\n".join(lines) + "\n")


def interleaved_steps(rounds: int, threads: int) -> dict:
    """One training step (forward, backward, AdamW) of MiniLM's classifier on one SST-2-like batch
    (32 x 24 tokens, fp32), full against LoRA 8, alternating so that a shared machine's load
    drifts over both alike: the median step of each, and the memory its gradients and AdamW's
    state take."""
    import torch
    from transformers import AutoModelForSequenceClassification

    sys.path.insert(0, str(REPO))  # this checkout's bertkit, as the training runs get (PYTHONPATH)

    from bertkit.models import resolve_model
    from bertkit.networks.lora import LoraSettings, add_adapters

    torch.set_num_threads(threads)
    path = resolve_model("minilm")
    models = {"full": AutoModelForSequenceClassification.from_pretrained(path, num_labels=2)}
    models["lora 8"] = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2)
    add_adapters(models["lora 8"], LoraSettings(8, 16.0, 0.1, None), "minilm")
    optimizers = {
        name: torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-5, fused=True)
        for name, m in models.items()
    }
    generator = torch.Generator().manual_seed(0)
    batch = {"input_ids": torch.randint(1000, 20000, (32, 24), generator=generator)}
    batch["labels"] = torch.randint(0, 2, (32,), generator=generator)
    times = {name: [] for name in models}
    for round_ in range(rounds + 1):
        for name, model in models.items():
            model.train()
            started = time.perf_counter()
            model(**batch).loss.backward()
            optimizers[name].step()
            optimizers[name].zero_grad(set_to_none=False)  # the gradients stay allocated, as in training
            if round_:  # the first round warms up (allocations, kernels)
                times[name].append(time.perf_counter() - started)
    state = {}
    for name, model in models.items():
        trained = [p for p in model.parameters() if p.requires_grad]
        state[name] = {
            "median_step_ms": 1000 * statistics.median(times[name]),
            "trainable_parameters": sum(p.numel() for p in trained),
            # a gradient and AdamW's two moments per trained weight, fp32
            "gradient_and_adam_mib": 3 * 4 * sum(p.numel() for p in trained) / 2**20,
        }
    return state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="42,43,44")
    parser.add_argument("--epochs", type=float, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--full-lr", type=float, default=5e-5)
    parser.add_argument("--lora-lr", type=float, default=5e-4)
    parser.add_argument("--budget", type=float, default=1200, help="seconds; no new seed starts after it")
    parser.add_argument("--runs-dir", default="/tmp/bertkit-lora-bench")
    parser.add_argument("--append", action="store_true", help="add to benchmarks/results/lora.json's runs")
    parser.add_argument("--steps-only", type=int, default=0, help="only interleaved_steps, this many rounds")
    args = parser.parse_args()
    if args.steps_only:
        steps = interleaved_steps(args.steps_only, args.threads)
        print(json.dumps(steps, indent=2))
        (RESULTS / "lora_steps.json").write_text(json.dumps({"command": " ".join(sys.argv), **steps}, indent=2) + "\n")
        return
    started, runs = time.perf_counter(), []
    if args.append and (RESULTS / "lora.json").is_file():  # more seeds for the same table
        runs = json.loads((RESULTS / "lora.json").read_text())["runs"]
    for seed in (int(s) for s in args.seeds.split(",")):
        if time.perf_counter() - started > args.budget:
            print(f"budget spent: stopping before seed {seed}", flush=True)
            break
        for data in DATASETS:
            for arm in ARMS:
                out = Path(args.runs_dir) / f"{data}-{arm.replace(' ', '')}-{seed}"
                runs.append(train(arm, data, seed, args, out))
                print(json.dumps(runs[-1]), flush=True)
                write(runs, args)


if __name__ == "__main__":
    main()
