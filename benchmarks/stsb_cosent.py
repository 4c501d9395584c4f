"""STS-B side by side: `bertkit finetune embedding --data stsb` (CoSENT, the loss for scored pairs)
against sentence-transformers' SentenceTransformerTrainer with CoSENTLoss, on the same model (the
bundled MiniLM), training rows (the first ``--train-rows`` of sts-train.csv), batch size, lr,
epochs, warmup, weight decay, max length and seeds; fp32 on both by default (bertkit ``--precision
no``), or each side's bf16 (``--precision bf16 --st-precision bf16``: bertkit's bf16 weights with
fp32 master weights, the Trainer's CPU autocast).

The score: the Spearman correlation of the cosine of the two sentences' vectors with the gold score
on the whole dev set (1,500 pairs), computed the same way for every model (the directory loaded in
``SentenceTransformer``, ``encode``, scipy's spearmanr); bertkit's own `before`/after Spearman from
its bertkit.json is recorded beside it as a cross-check.

Wall time: bertkit's is the whole `python -m bertkit finetune embedding` process (start-up, reading,
model load, the dev set scored before and after training, as it does for a known dataset, the
directory written) and its training loop alone (bertkit.json); sentence-transformers' is
``trainer.train()`` plus ``save_pretrained`` (its whole worker process too). Each training runs alone
in its own process, sequentially, with ``--threads`` torch threads; the load average is recorded.

    flock /tmp/heavy.lock python -m benchmarks.stsb_cosent [--seeds 42] [--train-rows 5749]
        [--epochs 1] [--batch-size 16] [--lr 2e-5]

Writes benchmarks/results/stsb_cosent.{json,md}.
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
from pathlib import Path

from benchmarks.side_by_side import write_results

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
WARMUP, WEIGHT_DECAY = 0.1, 0.01  # bertkit's defaults, given to sentence-transformers too


def data_dir() -> Path:
    return Path(os.environ.get("BERTKIT_DATA_DIR", REPO.parent / "shared" / "data")).resolve()


def sts_rows(name: str) -> list[tuple[str, str, float]]:
    """(sentence1, sentence2, score) as bertkit reads the STS benchmark's file: TAB-separated, no
    quoting, no header, fields 5-7 (some rows carry two more source columns)."""
    rows = []
    for line in (data_dir() / "stsb" / name).read_text(encoding="utf-8").splitlines():
        if line.strip():
            fields = line.split("\t")
            rows.append((fields[5], fields[6], float(fields[4])))
    return rows


def spearman(model_dir: str, rows, threads: int) -> float:
    """Dev Spearman of the cosine, the same scorer for every model."""
    import numpy as np
    import torch
    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    model = SentenceTransformer(model_dir, device="cpu")
    first = model.encode([a for a, _, _ in rows], normalize_embeddings=True, batch_size=64)
    second = model.encode([b for _, b, _ in rows], normalize_embeddings=True, batch_size=64)
    cosines = np.sum(first * second, axis=1)
    return round(float(spearmanr(cosines, [s for _, _, s in rows]).statistic), 6)


def bertkit_train(seed: int, out: Path, args) -> dict:
    command = [sys.executable, "-m", "bertkit", "finetune", "embedding", "--data", "stsb", "--model", args.model]
    command += ["--data-dir", str(data_dir()), "--max-train-samples", str(args.train_rows)]
    command += ["--output", str(out), "--overwrite", "--epochs", str(args.epochs), "--batch-size", str(args.batch_size)]
    command += ["--lr", str(args.lr), "--seed", str(seed), "--max-length", str(args.max_length)]
    command += ["--warmup-ratio", str(WARMUP), "--weight-decay", str(WEIGHT_DECAY)]
    command += ["--precision", "bf16" if args.precision == "bf16" else "no"]
    command += ["--threads", str(args.threads)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"bertkit finetune embedding failed:\n{done.stderr.decode(errors='replace')[-3000:]}")
    meta = json.loads((out / "bertkit.json").read_text())
    return {
        "train_s": round(wall, 2),
        "loop_s": meta["throughput"].get("train_seconds"),
        "steps": meta["throughput"].get("optimizer_steps"),
        "own_spearman": meta["metrics"].get("spearman"),
        "own_spearman_before": (meta.get("before") or {}).get("spearman"),
        "load_average": os.getloadavg()[0],
    }


def st_train(seed: int, out: Path, args) -> dict:
    spec = {"seed": seed, "out": str(out), **{k: v for k, v in vars(args).items() if k != "seeds"}}
    command = [sys.executable, "-m", "benchmarks.stsb_cosent", "--worker", json.dumps(spec)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True)
    process = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"sentence-transformers CoSENT failed:\n{done.stderr.decode(errors='replace')[-3000:]}")
    timed = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return {**timed, "process_s": round(process, 2), "load_average": os.getloadavg()[0]}


def worker(spec: dict) -> None:
    """SentenceTransformerTrainer + CoSENTLoss; print {"train_s", "steps"} (train() + save)."""
    import torch
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers import SentenceTransformerTrainingArguments as Arguments
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss

    from bertkit.models import resolve_model

    torch.set_num_threads(spec["threads"])
    rows = sts_rows("sts-train.csv")[: spec["train_rows"]]
    model = SentenceTransformer(str(resolve_model(spec["model"])), device="cpu")
    model.max_seq_length = spec["max_length"]
    columns = {"sentence1": [a for a, _, _ in rows], "sentence2": [b for _, b, _ in rows]}
    dataset = Dataset.from_dict({**columns, "score": [s for _, _, s in rows]})
    arguments = Arguments(
        output_dir=tempfile.mkdtemp(prefix="st-stsb-"),
        num_train_epochs=spec["epochs"],
        per_device_train_batch_size=spec["batch_size"],
        learning_rate=spec["lr"],
        warmup_steps=WARMUP,  # transformers 5: a float below 1 is a ratio of the steps
        weight_decay=WEIGHT_DECAY,
        seed=spec["seed"],
        save_strategy="no",
        report_to="none",
        logging_steps=10_000,
        disable_tqdm=True,
        use_cpu=True,
        bf16=spec["st_precision"] == "bf16",  # the Trainer's autocast (its weights stay fp32)
    )
    trainer = SentenceTransformerTrainer(model=model, args=arguments, train_dataset=dataset, loss=CoSENTLoss(model))
    started = time.perf_counter()
    trainer.train()
    model.save_pretrained(spec["out"])
    print(json.dumps({"train_s": round(time.perf_counter() - started, 2), "steps": trainer.state.global_step}))


def number(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def markdown(record: dict) -> str:
    lines = [
        "# STS-B dev (1,500 pairs): Spearman of the embedding cosine, bertkit CoSENT against sentence-transformers",
        "",
        "Settings: " + ", ".join(f"{k} {v}" for k, v in record["settings"].items()),
        "",
        "| row | seed | dev Spearman | bertkit's own Spearman | training s | loop s | bertkit/ST time |",
        "|---|---|---|---|---|---|---|",
        f"| zero-shot | - | {record['zero_shot']:.4f} | - | - | - | - |",
    ]
    for seed, run in record["runs"].items():
        ours, theirs = run["bertkit"], run["st"]
        ratio = (
            f"{ours['train_s'] / theirs['train_s']:.2f}x ({ours['loop_s'] / theirs['train_s']:.2f}x loop; "
            f"{ours['train_s'] / theirs['process_s']:.2f}x process to process)"
        )
        own = f"{number(ours['own_spearman'])} (before {number(ours['own_spearman_before'])})"
        lines.append(
            f"| CoSENT bertkit | {seed} | {ours['spearman']:.4f} | {own} | {ours['train_s']:.1f} | "
            f"{ours['loop_s']:.1f} | {ratio} |"
        )
        lines.append(
            f"| CoSENT ST | {seed} | {theirs['spearman']:.4f} | - | {theirs['train_s']:.1f} "
            f"(process {theirs['process_s']:.1f}) | - | - |"
        )
    if len(record["runs"]) > 1:
        for side in ("bertkit", "st"):
            values = [run[side]["spearman"] for run in record["runs"].values()]
            spread = f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"
            lines.append(f"| mean ± std {side} | all | {spread} | | | | |")
    lines += [
        "",
        "Training s: bertkit's whole `finetune` process (the dev set scored before and after included); loop s: "
        "its training loop alone; sentence-transformers': train() + save_pretrained (whole process: `process_s`).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="42")
    parser.add_argument("--train-rows", type=int, default=5749)
    parser.add_argument("--epochs", type=float, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="bertkit's training precision")
    parser.add_argument(
        "--st-precision", choices=("fp32", "bf16"), default="fp32", help="sentence-transformers' (bf16: autocast)"
    )
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--name", default="stsb_cosent")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(json.loads(args.worker))
    from bertkit.models import resolve_model

    started, dev = time.perf_counter(), sts_rows("sts-dev.csv")
    record = {"zero_shot": spearman(str(resolve_model(args.model)), dev, args.threads), "runs": {}}
    print(json.dumps({"zero-shot": record["zero_shot"]}), flush=True)
    with tempfile.TemporaryDirectory(prefix="stsb-bench-") as work:
        for seed in (int(s) for s in args.seeds.split(",")):
            run = {"bertkit": bertkit_train(seed, Path(work) / f"bk-{seed}", args)}
            run["st"] = st_train(seed, Path(work) / f"st-{seed}", args)
            for side, out in (("bertkit", f"bk-{seed}"), ("st", f"st-{seed}")):
                run[side]["spearman"] = spearman(str(Path(work) / out), dev, args.threads)
            record["runs"][seed] = run
            print(json.dumps({seed: run}), flush=True)
    record["settings"] = {
        "model": args.model,
        "train rows": min(args.train_rows, len(sts_rows("sts-train.csv"))),
        "epochs": args.epochs,
        "batch": args.batch_size,
        "lr": args.lr,
        "warmup ratio": WARMUP,
        "weight decay": WEIGHT_DECAY,
        "max length": args.max_length,
        "precision": f"bertkit {args.precision}, sentence-transformers {args.st_precision}",
        "threads": args.threads,
        "seeds": args.seeds,
    }
    print(write_results(record, args.name, markdown, started))


if __name__ == "__main__":
    main()
