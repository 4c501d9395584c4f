"""SST-2 on the HF side: run_glue.py's tokenisation and accuracy, and transformers.pipeline prediction."""

from __future__ import annotations

import time

from benchmarks.hf_trainer import RECIPES, peak_rss_mb, prepare, train_and_eval

MAX_LENGTH = 128  # run_glue's max_seq_length default


def run(side: str, train_rows: list, eval_rows: list, model_path: str, hp: dict) -> dict:
    """run_glue: hf_default pads every row to 128 (default_data_collator); the best recipes tokenise
    without padding and pad each batch (DataCollatorWithPadding)."""
    import numpy as np
    from datasets import Dataset
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        default_data_collator,
        set_seed,
    )

    prepare()
    set_seed(hp["seed"])
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2)
    pad = RECIPES[side]["pad"]

    def tokenize(rows):
        dataset = Dataset.from_list([{"sentence": r["sentence"], "label": int(r["label"])} for r in rows])
        return dataset.map(
            lambda b: tokenizer(
                b["sentence"], padding="max_length" if pad else False, max_length=MAX_LENGTH, truncation=True
            ),
            batched=True,
        )

    train_ds, eval_ds = tokenize(train_rows), tokenize(eval_rows)

    def evaluate(trainer) -> dict:
        prediction = trainer.predict(eval_ds)
        return {"accuracy": float((np.argmax(prediction.predictions, axis=-1) == prediction.label_ids).mean())}

    collate = default_data_collator if pad else DataCollatorWithPadding(tokenizer)
    out = train_and_eval(side, model, train_ds, collate, hp, evaluate, len(train_rows), len(eval_rows))
    out["metric"] = out["metrics"]["accuracy"]
    return out


def pipeline_run(side: str, model_dir: str, sentences: list, labels: list, batch_size: int | None, bf16: bool) -> dict:
    """pipeline("text-classification") over the sentences; seconds = the call plus scoring accuracy,
    the model load timed apart. batch_size None: the pipeline's default (one sentence per forward)."""
    import torch
    from transformers import pipeline

    prepare()
    started = time.perf_counter()
    pipe = pipeline("text-classification", model=model_dir, device=-1, dtype=torch.bfloat16 if bf16 else torch.float32)
    loaded = time.perf_counter()
    predictions = pipe(sentences, **({"batch_size": batch_size} if batch_size else {}))
    label2id = pipe.model.config.label2id
    accuracy = sum(label2id[p["label"]] == y for p, y in zip(predictions, labels)) / len(labels)
    seconds = time.perf_counter() - loaded
    return {
        "side": side,
        "precision": "bf16" if bf16 else "no",
        "batch_size": batch_size,
        "n": len(sentences),
        "load_seconds": loaded - started,
        "seconds": seconds,
        "metrics": {"accuracy": accuracy},
        "metric": accuracy,
        "peak_rss_mb": peak_rss_mb(),
    }
