"""Tiny fine-tuned models of each task for the reporting / export / serving tests (seconds each)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from test_cli_classification import write_sentiment_csv
from test_qa_task import make_squad

from bertkit.options import RunOptions

PEOPLE, PLACES, ORGS = ["john", "mary", "obama"], ["paris", "london", "berlin"], ["google"]


def write_conll(path: Path, n: int, seed: int, places: list = PLACES) -> None:
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        sentence = [(rng.choice(PEOPLE), "B-PER"), ("lives", "O"), ("in", "O"), (rng.choice(places), "B-LOC")]
        if rng.random() < 0.5:
            sentence += [("and", "O"), ("works", "O"), ("for", "O"), (rng.choice(ORGS), "B-ORG")]
        lines += [f"{word} {tag}" for word, tag in sentence + [(".", "O")]] + [""]
    path.write_text("\n".join(lines) + "\n")


def train_tiny(task: str, root: Path, tiny_bert: Path, **finetune) -> Path:
    """Fine-tune the tiny random BERT for ``task`` on generated data with eval data; returns the model dir."""
    from bertkit import api
    from bertkit.config import TrainConfig

    root.mkdir(parents=True, exist_ok=True)
    if task == "cls":
        train, dev = root / "train.csv", root / "dev.csv"
        write_sentiment_csv(train, 64, seed=1)
        write_sentiment_csv(dev, 24, seed=2)
    elif task == "ner":
        train, dev = root / "train.txt", root / "dev.txt"
        write_conll(train, 48, seed=1)
        write_conll(dev, 16, seed=2)
    else:
        train, dev = root / "train.json", root / "dev.json"
        train.write_text(json.dumps(make_squad(12, seed=1)))
        dev.write_text(json.dumps(make_squad(6, seed=2)))
    config = TrainConfig(epochs=2, lr=1e-3, batch_size=16, max_length=64 if task == "qa" else None)
    run = RunOptions(data=str(train), output=str(root / "model"), model=str(tiny_bert), eval_data=str(dev), **finetune)
    api.finetune(task, run, config)
    return root / "model"
