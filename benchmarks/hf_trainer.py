"""The HF side's shared Trainer setup: the three recipes, the measuring callback, process plumbing.

    hf_default    what the example scripts do: run_glue pads every row to 128, run_qa every window to
                  384, run_ner pads dynamically; random order, fp32
    hf_best       dynamic padding + train_sampling_strategy="group_by_length" + fused AdamW, fp32
    hf_best_bf16  hf_best + bf16=True (the Trainer's bf16 autocast)

transformers 5.x names (checked in the installed 5.23 source): ``warmup_steps`` takes a float in
[0, 1) as the old ``warmup_ratio``; ``group_by_length=True`` is ``train_sampling_strategy=
"group_by_length"``; ``overwrite_output_dir`` and ``evaluation_strategy`` are gone.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import time
from typing import Any, Callable

from transformers import TrainerCallback

RECIPES = {
    "hf_default": {"pad": True, "group": False, "bf16": False, "eval_batch": 8},  # Trainer's default eval batch
    "hf_best": {"pad": False, "group": True, "bf16": False, "eval_batch": 64},
    "hf_best_bf16": {"pad": False, "group": True, "bf16": True, "eval_batch": 64},
}


def prepare() -> None:
    """No warnings about fresh heads, no progress bars (a child's stderr is the runner's log); the
    model module imported before any timer, as on the bertkit side."""
    import datasets
    import transformers

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    transformers.BertModel  # noqa: B018  (a lazy import)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    datasets.disable_progress_bars()


def peak_rss_mb() -> float:
    """ru_maxrss of this process; meaningful per run because every run has its own process."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class Meter(TrainerCallback):
    """Wraps the data collator and is the Trainer's callback: it times on_train_begin..on_train_end (the
    training loop only; loading, tokenising and evaluation stay outside) and counts, in the batches
    built meanwhile, real tokens, padded positions and the sum of squared real lengths (attention's
    FLOPs). The Trainer collates in this process (dataloader_num_workers=0), so the counts are exact."""

    def __init__(self, collate: Callable):
        self.collate, self.active = collate, False
        self.seconds = self.started = self.paused = 0.0
        self.real = self.padded = self.pairs = 0

    def __call__(self, features):
        batch = self.collate(features)
        if self.active:
            mask = batch["attention_mask"]
            lengths = mask.sum(dim=1).long()
            self.real += int(lengths.sum())
            self.padded += mask.numel()
            self.pairs += int((lengths * lengths).sum())
        return batch

    def on_train_begin(self, args, state, control, **kwargs):
        self.active, self.started = True, time.perf_counter()

    def on_train_end(self, args, state, control, **kwargs):
        self.seconds, self.active = time.perf_counter() - self.started - self.paused, False


class EpochEvaluator(TrainerCallback):
    """bertkit's selection on the HF side: evaluate after every epoch and keep the best epoch's metrics,
    what ``load_best_model_at_end`` gives (without its checkpoint writes, which would only slow this
    side down). The evaluations are taken out of the Meter's training time and token counts."""

    def __init__(self, evaluate: Callable, main: str, meter: Meter):
        self.evaluate, self.main, self.meter = evaluate, main, meter
        self.trainer, self.epochs, self.seconds = None, [], 0.0

    def on_epoch_end(self, args, state, control, **kwargs):
        started, self.meter.active = time.perf_counter(), False
        metrics = self.evaluate(self.trainer)
        self.meter.active = True
        seconds = time.perf_counter() - started
        self.meter.paused += seconds
        self.seconds += seconds
        self.epochs.append({"epoch": round(state.epoch, 4), "metrics": metrics})

    def best(self) -> dict:
        return max(self.epochs, key=lambda entry: entry["metrics"][self.main])


def training_args(output_dir: str, side: str, hp: dict):
    import torch
    from transformers import TrainingArguments

    recipe = RECIPES[side]
    extra: dict[str, Any] = {}
    if recipe["group"]:
        extra.update(train_sampling_strategy="group_by_length", optim="adamw_torch_fused")
    return TrainingArguments(
        output_dir=output_dir,
        num_train_epochs=hp["epochs"],
        per_device_train_batch_size=hp["batch_size"],
        per_device_eval_batch_size=recipe["eval_batch"],
        learning_rate=hp["lr"],
        warmup_steps=hp["warmup"],
        weight_decay=hp["weight_decay"],
        seed=hp["seed"],
        bf16=recipe["bf16"],
        use_cpu=not torch.cuda.is_available(),  # where bertkit trains too: its engine takes a GPU when there is one
        save_strategy="no",
        eval_strategy="no",
        logging_strategy="no",
        report_to="none",
        disable_tqdm=True,
        **extra,
    )


def predict_in_order(trainer, dataset):
    """``trainer.predict(dataset).predictions`` in the dataset's row order. With
    ``train_sampling_strategy="group_by_length"`` transformers 5.x length-groups the *evaluation*
    batches too (Trainer._get_eval_sampler: a seeded LengthGroupedSampler), so predictions come back
    shuffled; that sampler is rebuilt with the same seed to put them back. Labels, where the rows
    have them, prove the order."""
    import numpy as np

    output = trainer.predict(dataset)
    sampler = trainer._get_eval_sampler(dataset)
    order = np.asarray(list(sampler)) if sampler is not None else np.arange(len(dataset))
    if sorted(order.tolist()) != list(range(len(dataset))):
        raise AssertionError("the evaluation sampler is not a permutation of the rows")
    back = np.argsort(order)
    predictions = output.predictions
    predictions = tuple(p[back] for p in predictions) if isinstance(predictions, tuple) else predictions[back]
    if output.label_ids is not None and not isinstance(output.label_ids, tuple):
        rows = [dataset[i]["labels"] for i in range(len(dataset))]
        restored = output.label_ids[back]
        if not np.allclose(
            np.asarray(rows, dtype=float).reshape(len(rows), -1),
            np.asarray(restored, dtype=float).reshape(len(rows), -1),
        ):
            raise AssertionError("predictions could not be put back in row order")
    return predictions


def train_and_eval(
    side: str, model, train_dataset, collate: Callable, hp: dict, evaluate: Callable, n_train: int, n_eval: int
) -> dict:
    """Trainer.train with the Meter, then ``evaluate(trainer) -> metrics`` timed; the measurement keys
    every side returns (see benchmarks/report.py). ``hp["select_on"]`` (a metric name): evaluate after
    every epoch instead and report the best epoch's metrics (EpochEvaluator)."""
    from transformers import Trainer
    from transformers.trainer_callback import PrinterCallback

    meter = Meter(collate)
    output_dir = tempfile.mkdtemp(prefix="bertkit-bench-hf-")
    try:
        epochs = EpochEvaluator(evaluate, hp["select_on"], meter) if hp.get("select_on") else None
        trainer = Trainer(
            model=model,
            args=training_args(output_dir, side, hp),
            train_dataset=train_dataset,
            data_collator=meter,
            callbacks=[meter] + ([epochs] if epochs else []),
        )
        trainer.remove_callback(PrinterCallback)  # it prints the final metrics even with logging off
        if epochs:
            epochs.trainer = trainer
        trainer.train()
        started = time.perf_counter()
        metrics = epochs.best()["metrics"] if epochs else evaluate(trainer)
        eval_seconds = epochs.seconds if epochs else time.perf_counter() - started
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)
    extra = {"epochs": epochs.epochs, "best_epoch": epochs.best()["epoch"]} if epochs else {}
    return {
        **extra,
        "side": side,
        "precision": "bf16" if RECIPES[side]["bf16"] else "no",
        "n_train": n_train,
        "n_eval": n_eval,
        "train_seconds": meter.seconds,
        "tokens": meter.real,
        "token_pairs": meter.pairs,
        "padding_share": 1 - meter.real / max(meter.padded, 1),
        "eval_seconds": eval_seconds,
        "metrics": metrics,
        "peak_rss_mb": peak_rss_mb(),
    }
