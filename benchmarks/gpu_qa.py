"""SQuAD-sized QA training time on one GPU, BERT-base-sized, bertkit and the HF Trainer side by side.

    python -m benchmarks.gpu_qa --squad DEV.json --tokenizer DIR --out DIR [--features 88524]

The HF run_qa README's reference: bert-base-uncased, SQuAD v1.1 train (88,524 features at 384/128),
2 epochs, 24 minutes on one V100. No SQuAD train file and no Hub here, so: the training set is the
dev file's articles repeated (question ids made unique) until it has as many windows as the train
set, and the model is BERT-base's shape (12 layers, hidden 768, 110 M parameters) with random
weights and the given uncased WordPiece tokenizer. Speed does not depend on the weights; the scores
of a random start mean nothing and are not reported. bertkit trains the whole budget with its
defaults (precision auto = bf16 on the GPU, length-grouped dynamic padding, batch 32, lr 3e-5).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from pathlib import Path

from bertkit.options import RunOptions

SQUAD_TRAIN_FEATURES = 88_524  # run_qa at 384/128 on train-v1.1.json


def write_model(tokenizer_dir: Path, target: Path, tiny: bool = False) -> None:
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    size = (
        dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
        if tiny
        else dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
    )
    config = BertConfig(vocab_size=len(tokenizer), max_position_embeddings=512, **size)
    BertModel(config).save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))


def window_count(articles: list, tokenizer_dir: Path, max_length: int = 384, stride: int = 128) -> int:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    questions = [(qa["question"].lstrip(), p["context"]) for a in articles for p in a["paragraphs"] for qa in p["qas"]]
    encoded = tokenizer(
        [q for q, _ in questions],
        [c for _, c in questions],
        truncation="only_second",
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
    )
    return len(encoded["input_ids"])


def write_training_set(
    squad: Path, target: Path, tokenizer_dir: Path, features: int, max_articles: int | None = None
) -> dict:
    articles = json.loads(squad.read_text())["data"][:max_articles]
    per_copy = window_count(articles, tokenizer_dir)
    copies = math.ceil(features / per_copy)
    data = []
    for copy in range(copies):
        for article in articles:
            paragraphs = [
                {"context": p["context"], "qas": [{**qa, "id": f"{qa['id']}-{copy}"} for qa in p["qas"]]}
                for p in article["paragraphs"]
            ]
            data.append({"title": f"{article['title']}-{copy}", "paragraphs": paragraphs})
    target.write_text(json.dumps({"version": "1.1", "data": data}))
    return {"copies": copies, "windows_per_copy": per_copy, "windows": copies * per_copy}


def run_bertkit(train: Path, eval_file: Path, model: Path, out: Path, epochs: float) -> dict:
    from bertkit import api
    from bertkit.config import TrainConfig

    config = TrainConfig(epochs=epochs, lr=3e-5, batch_size=32, max_eval_samples=200)
    started = time.perf_counter()
    result = api.finetune(
        "qa",
        RunOptions(data=str(train), eval_data=str(eval_file), model=str(model), output=str(out), overwrite=True),
        config=config,
    )
    return {
        "wall_seconds": round(time.perf_counter() - started, 1),
        "throughput": result.throughput,
        "runtime": result.runtime,
        "train_examples": result.train_examples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--squad", type=Path, required=True, help="SQuAD v1.1 dev-v1.1.json")
    parser.add_argument("--tokenizer", type=Path, required=True, help="an uncased WordPiece tokenizer's directory")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--features", type=int, default=SQUAD_TRAIN_FEATURES)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--articles", type=int, default=None, help="only the first N articles (a dry run)")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model (a dry run on a CPU)")
    args = parser.parse_args()
    import torch

    args.out.mkdir(parents=True, exist_ok=True)
    model, train = args.out / "bert-base-random", args.out / "train.json"
    report = {
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__,
    }
    write_model(args.tokenizer, model, args.tiny)
    report["data"] = write_training_set(args.squad, train, args.tokenizer, args.features, args.articles)
    print(json.dumps(report), flush=True)
    report["bertkit"] = run_bertkit(train, args.squad, model, args.out / "bertkit-qa", args.epochs)
    print(json.dumps(report["bertkit"]), flush=True)
    (args.out / "gpu_qa.json").write_text(json.dumps(report, indent=1))
    shutil.rmtree(model, ignore_errors=True)


if __name__ == "__main__":
    main()
