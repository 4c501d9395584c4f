"""`bertkit pretrain bert` on SQuAD's paragraphs, then MRPC from the result against MRPC from the
original checkpoint, with the same fine-tuning budget.

    flock /tmp/heavy.lock python benchmarks/pretrain_bert.py            # -> benchmarks/results/pretrain_bert.{json,md}

The corpus: the SQuAD v1.1 dev articles as documents (48 Wikipedia articles), each paragraph cut
into sentences (one a row; a paragraph's sentences follow each other, articles are separated by a
blank line). The first ``--train-articles`` train, the next ``--eval-articles`` are the held-out
text: evaluated (MLM loss, perplexity, NSP accuracy on fixed pairs and masks) before training and
every ``--eval-every`` steps, which gives the curves. Then `finetune pair --data mrpc` on the first
``--mrpc-rows`` training rows, from the pre-trained directory and from the original, scored on all
408 MRPC dev rows.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from bertkit.options import RunOptions

REPO = Path(__file__).resolve().parents[1]
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def squad_documents(path: Path) -> list[str]:
    """One text per article: its paragraphs' sentences, one a line."""
    articles = json.loads(path.read_text())["data"]
    return [
        "\n".join(
            sentence.strip()
            for paragraph in article["paragraphs"]
            for sentence in SENTENCE_END.split(paragraph["context"])
            if sentence.strip()
        )
        for article in articles
    ]


def write_corpora(work: Path, data_dir: Path, train_articles: int, eval_articles: int) -> tuple[Path, Path]:
    documents = squad_documents(data_dir / "squad" / "dev-v1.1.json")
    train, held = documents[:train_articles], documents[train_articles : train_articles + eval_articles]
    work.mkdir(parents=True, exist_ok=True)
    (work / "squad-train.txt").write_text("\n\n".join(train) + "\n")
    (work / "squad-held.txt").write_text("\n\n".join(held) + "\n")
    return work / "squad-train.txt", work / "squad-held.txt"


def pretrain(args, train: Path, held: Path, output: Path) -> dict:
    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.options import RunOptions

    config = TrainConfig(
        epochs=1,
        max_steps=args.steps,
        eval_every=args.eval_every,
        batch_size=args.batch_size,
        lr=args.lr,
        max_length=args.max_length,
        seed=args.seed,
    )
    started = time.perf_counter()
    run = RunOptions(data=str(train), output=str(output), model=args.model, eval_data=str(held), overwrite=True)
    result = api.pretrain_bert(run, config)
    curve = [{"step": 0, **result.before}] + [
        {"step": entry["step"], "train_loss": entry.get("train_loss"), **entry["metrics"]}
        for entry in result.history
        if entry.get("metrics")
    ]
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "preprocessing": result.preprocessing,
        "throughput": result.throughput,
        "runtime": result.runtime,
        "notices": result.notices,
        "curve": curve,
        "saved": result.metrics,
        "heads": json.loads((output / "bertkit.json").read_text())["pretraining"]["heads"],
    }


def mrpc(args, model: str, output: Path) -> dict:
    from bertkit import api
    from bertkit.config import TrainConfig

    config = TrainConfig(
        epochs=args.mrpc_epochs,
        batch_size=16,
        lr=5e-5,
        max_length=128,
        seed=args.seed,
        max_train_samples=args.mrpc_rows,
    )
    started = time.perf_counter()
    result = api.finetune(
        "pair", RunOptions(data="mrpc", model=model, output=str(output), overwrite=True), config=config
    )
    return {"seconds": round(time.perf_counter() - started, 1), "metrics": result.metrics}


def table(results: dict) -> str:
    lines = [
        "| step | held-out MLM loss | perplexity | MLM accuracy | NSP loss | NSP accuracy |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for point in results["pretrain"]["curve"]:
        lines.append(
            f"| {point['step']} | {point['mlm_loss']:.3f} | {point['perplexity']:.1f} | {point['mlm_accuracy']:.3f} | "
            f"{point['nsp_loss']:.3f} | {point['nsp_accuracy']:.3f} |"
        )
    lines += ["", "| MRPC from | accuracy | F1 | seconds |", "|---|---:|---:|---:|"]
    for name, run in results["mrpc"].items():
        m = run["metrics"]
        lines.append(f"| {name} | {m['accuracy']:.4f} | {m['f1']:.4f} | {run['seconds']:.0f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    import os

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--train-articles", type=int, default=40)
    parser.add_argument("--eval-articles", type=int, default=8)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--eval-every", type=int, default=25)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--mrpc-rows", type=int, default=2000)
    parser.add_argument("--mrpc-epochs", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "pretrain_bert"))
    args = parser.parse_args()
    data_dir = Path(os.environ.get("BERTKIT_DATA_DIR", REPO.parent / "shared" / "data"))
    work = REPO / "benchmarks" / "work" / "pretrain_bert"
    train, held = write_corpora(work, data_dir, args.train_articles, args.eval_articles)
    results = {"settings": vars(args), "pretrain": pretrain(args, train, held, work / "bert")}
    results["mrpc"] = {
        "original": mrpc(args, args.model, work / "mrpc-original"),
        "pretrain bert": mrpc(args, str(work / "bert"), work / "mrpc-pretrained"),
    }
    Path(args.out + ".json").write_text(json.dumps(results, indent=1) + "\n")
    Path(args.out + ".md").write_text(table(results))
    print(table(results))


if __name__ == "__main__":
    main()
