"""`bertkit pretrain bert`: BERT's pre-training, masked LM + next-sentence prediction; and the
options both pretrain commands share (pretrain mlm itself is in bertkit/cli/features.py).

Thin Typer layer over bertkit.api.pretraining.pretrain_bert; the group `bertkit pretrain` (in
bertkit/cli/features.py) builds it when asked for, with pretrain mlm's options (the masking rule's
flags are the mlm task's, shared by the bert task).
"""

from __future__ import annotations

import sys

import typer

from bertkit.cli.common import echo_notices, echo_runtime, format_metrics
from bertkit.cli.options import config_file_parameter, from_dataclass, from_task, training_values
from bertkit.options import LORA_FIELDS, MAX_LENGTHS, RunOptions, TrainConfig, default_output
from bertkit.options.training import PRETRAIN_RECIPE

PRETRAIN_DEFAULTS = PRETRAIN_RECIPE  # finetune's family defaults replaced by BERT's pre-training recipe
PRETRAIN_HELP = {
    "lr": "Peak learning rate (BERT pre-training: 1e-4, with warmup and weight decay 0.01).",
    "data": "Text file (documents separated by blank lines) or JSONL with 'text'.",
    "eval_data": "Held-out text; default: --eval-share of the documents.",
    "output": "Model directory to create; default runs/mlm-<data>.",
    "max_train_samples": "Use only the first N training documents.",
    "max_eval_samples": "Use only the first N held-out documents.",
    "max_length": MAX_LENGTHS["pretraining"][1],
}
BERT_HELP = {
    "output": "Model directory to create; default runs/bert-<data>.",
    "max_length": "Tokens per sentence pair, [CLS] A [SEP] B [SEP] included; default 128.",
}


def run_pretraining(values: dict, task_class, run_pretrain, prefix: str):
    """What both pretrain commands do with their flags: the options split, the run (Ctrl-C said
    once, exit 130), then the resume line; returns the result and the config for the caller's lines."""
    from bertkit.engine.interrupts import TrainingInterrupted

    task_options, run, rest = training_values(values, [o.name for o in task_class.options_for("pretrain")])
    config = TrainConfig(task_options=task_options, **rest)
    run = RunOptions(**run)
    run.output = run.output or default_output(run.data, prefix)
    try:
        result = run_pretrain(run, config)
    except TrainingInterrupted as stop:
        typer.echo(f"interrupted: {stop}; to continue, run the same command with --resume", err=True)
        sys.exit(130)
    if result.resumed_from:
        typer.echo(f"resumed from {result.resumed_from}")
    return result, config


def echo_history(result) -> None:
    """The held-out score before training and each epoch's losses, as both pretrain commands print them."""
    if result.before:
        typer.echo(f"before: held-out {format_metrics(result.before)}")
    for entry in result.history:
        typer.echo(
            f"epoch {entry['epoch']}: train loss {entry['train_loss']:.4f}"
            + (f", held-out {format_metrics(entry['metrics'])}" if entry.get("metrics") else "")
        )
    if result.metrics and result.baselines:  # the saved epoch's scores beside what learning nothing scores
        typer.echo(f"saved epoch {result.best_epoch}: held-out {format_metrics(result.metrics, result.baselines)}")


def pretrain_bert(**values):
    """Masked LM + next-sentence prediction on documents; the output is a --model for `bertkit finetune`."""
    from bertkit.api.pretraining import pretrain_bert as run_pretrain
    from bertkit.tasks.bert_pretraining import BertPretrainingTask

    result, config = run_pretraining(values, BertPretrainingTask, run_pretrain, "bert-")
    for part, stats in result.preprocessing.items():
        if isinstance(stats, dict) and "pairs" in stats:
            typer.echo(
                f"{part}: {stats['documents']} documents, {stats['tokens']} tokens, {stats['pairs']} sentence pairs "
                f"of at most {config.max_length or 128} tokens ({stats['random_pairs']} with a random B, "
                f"{stats['truncated_pairs']} cut to fit)"
            )
    echo_history(result)
    t = result.throughput
    typer.echo(f"train: {t['examples_per_s']:.1f} pairs/s, {t['tokens_per_s']:.0f} tokens/s, {t['train_seconds']:.1f}s")
    echo_runtime(result.runtime)
    echo_notices({"notices": result.notices})
    typer.echo(f"saved to {result.output_dir}")


def parameters() -> list:
    from bertkit.tasks.bert_pretraining import BertPretrainingTask

    helps = {**PRETRAIN_HELP, **BERT_HELP}
    return (
        from_dataclass(RunOptions, helps=helps)
        + from_dataclass(TrainConfig, PRETRAIN_DEFAULTS, exclude=LORA_FIELDS, helps=helps)  # as pretrain mlm
        + from_task(BertPretrainingTask, "pretrain")
        + [config_file_parameter("bert", "pretrain")]
    )
