"""Long reviews: `--long-text truncate|head-tail|windows` side by side, at --max-length 128 and 256.

Data: the IMDB reviews of Maas et al. 2011 (aclImdb v1), as held in the public repository
PVidyadhar/Detection-of-Fraud-apps-using-Sentiment-Analysis@81406d56e9c006de30f9d50737fd66177a4a1434
at ``aclImdb/{train,test}/{pos,neg}/*.txt`` (12,500 files each, the original release). Put it outside
the repository, e.g.::

    git archive 81406d56e9c006de30f9d50737fd66177a4a1434 aclImdb/train/pos aclImdb/train/neg \\
        aclImdb/test/pos aclImdb/test/neg | tar -x -C /work/data-long

Only reviews of at least ``--min-words`` words (300: 23 % of the train split, 22 % of the test
split) are used, so the median review is long (417-454 words, about 600 MiniLM tokens, in the
samples tried: the script prints it); ``--train`` of them from the
train split and ``--test`` from the test split, half positive and half negative, seeded. Every run is
MiniLM (``--model minilm``), one epoch, the same documents, batch, lr and seed; the only change is how a
long review is read. Test accuracy is `bertkit eval` on the test documents; examples/s are documents
per second, for training (train_seconds of the run) and for evaluation (tokenising + scoring), on
this machine's CPUs. Windows train and score every window, so they cost more per document.

Published truncation baselines on the full IMDB set (25,000 train / 25,000 test, BERT-base at 512,
Sun et al. 2019, "How to Fine-Tune BERT for Text Classification", table 3): head-only 5.63 % error,
tail-only 5.44 %, head+tail (128 + 382) 5.42 %. This benchmark is far smaller (a small model,
a short window, a few thousand reviews) and answers a narrower question: what each strategy buys
at the lengths a CPU user picks.

    flock /tmp/heavy.lock python -m benchmarks.long_text --imdb /work/data-long/aclImdb \\
        --train 2000 --test 1000        # -> benchmarks/results/long_text.{json,md}
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import statistics
import time
from pathlib import Path

from bertkit.options import RunOptions

REPO = Path(__file__).resolve().parents[1]
STRATEGIES = ("truncate", "head-tail", "windows")
PUBLISHED = "Sun et al. 2019, BERT-base at 512 on all of IMDB: head-only 5.63 % error, head+tail 5.42 %"


def reviews(root: Path, split: str, min_words: int) -> dict[str, list[str]]:
    """label -> the split's reviews of at least ``min_words`` words (HTML line breaks as spaces)."""
    found = {}
    for label in ("neg", "pos"):
        texts = []
        for path in sorted((root / split / label).glob("*.txt")):
            text = " ".join(path.read_text(encoding="utf-8").replace("<br />", " ").split())
            if len(text.split()) >= min_words:
                texts.append(text)
        found[label] = texts
    return found


def write_sample(found: dict, n: int, seed: int, path: Path) -> list[int]:
    """n reviews, half of each label, shuffled; returns their word counts."""
    rng = random.Random(seed)
    rows = [(text, label) for label, texts in found.items() for text in rng.sample(texts, n // 2)]
    rng.shuffle(rows)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return [len(text.split()) for text, _ in rows]


def run_one(train: Path, test: Path, work: Path, how: str, length: int, args) -> dict:
    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.options import EvalOptions

    out = work / f"{how}-{length}"
    config = TrainConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        max_length=length,
        seed=args.seed,
        task_options={"long_text": how},
    )
    result = api.finetune(
        "cls", RunOptions(data=str(train), model=args.model, output=str(out), overwrite=True), config=config
    )
    started = time.perf_counter()
    report = api.evaluate(str(out), EvalOptions(data=str(test)))
    timings = report.get("timings") or {}
    scoring = timings.get("preprocess_seconds", 0) + timings.get("score_seconds", 0) or time.perf_counter() - started
    seconds = result.throughput["train_seconds"]
    return {
        "long_text": how,
        "max_length": length,
        "accuracy": report["metrics"]["accuracy"],
        "error_pct": round(100 * (1 - report["metrics"]["accuracy"]), 2),
        "train_docs_per_s": round(args.train / seconds, 2),
        "train_features": result.throughput["examples"],
        "train_seconds": seconds,
        "eval_docs_per_s": round(args.test / scoring, 2),
        "eval_windows": (report.get("preprocessing") or {}).get("windows", args.test),
    }


def table(rows: list[dict], facts: dict) -> str:
    lines = [
        f"IMDB reviews of >= {facts['min_words']} words (median {facts['median_words']} words): "
        f"{facts['train']} train / {facts['test']} test documents, MiniLM, "
        f"{facts['epochs']} epoch{'s' if facts['epochs'] != 1 else ''}, batch "
        f"{facts['batch_size']}, lr {facts['lr']}, seed {facts['seed']}; {facts['machine']}.",
        "",
        "| --long-text | --max-length | test accuracy | error % | train docs/s | eval docs/s | windows (test) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['long_text']} | {r['max_length']} | {r['accuracy']:.4f} | {r['error_pct']:.2f} | "
            f"{r['train_docs_per_s']:.1f} | {r['eval_docs_per_s']:.1f} | {r['eval_windows']} |"
        )
    lines += ["", f"Published (not this setting): {PUBLISHED}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--imdb", required=True, help="the aclImdb directory (train/ and test/ with pos/ and neg/)")
    parser.add_argument("--train", type=int, default=2000)
    parser.add_argument("--test", type=int, default=1000)
    parser.add_argument("--min-words", type=int, default=300)
    parser.add_argument("--lengths", default="128,256")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--workdir", default="/tmp/bertkit-long-text")
    parser.add_argument("--out-dir", default=str(REPO / "benchmarks" / "results"))
    parser.add_argument("--name", default="long_text")
    args = parser.parse_args()
    import os

    root, work = Path(args.imdb), Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    train, test = work / "train.csv", work / "test.csv"
    words = write_sample(reviews(root, "train", args.min_words), args.train, args.seed, train)
    words += write_sample(reviews(root, "test", args.min_words), args.test, args.seed, test)
    facts = {
        "data": str(root),
        "min_words": args.min_words,
        "median_words": int(statistics.median(words)),
        "train": args.train,
        "test": args.test,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "seed": args.seed,
        "machine": f"{os.cpu_count()} CPU cores, shared with other work",
    }
    print(f"median review: {facts['median_words']} words", flush=True)
    out_dir = Path(args.out_dir)
    rows = []
    for length in map(int, args.lengths.split(",")):
        for how in args.strategies.split(","):
            rows.append(run_one(train, test, work, how, length, args))
            print(json.dumps(rows[-1]), flush=True)
            # written after every run: a run cut short keeps what it measured
            (out_dir / f"{args.name}.json").write_text(json.dumps({"facts": facts, "rows": rows}, indent=1) + "\n")
            (out_dir / f"{args.name}.md").write_text(table(rows, facts))
    print(table(rows, facts))


if __name__ == "__main__":
    main()
