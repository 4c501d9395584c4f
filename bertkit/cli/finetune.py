"""`bertkit finetune TASK`: one subcommand per task of the registry (bertkit.tasks.finetune_tasks()).

Each subcommand has the shared options plus the options its task reads (``Task.option_names``);
it is built when asked for, so only that task's module is imported (`bertkit --help` imports none).
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Annotated, Optional

import typer
from typer.core import TyperGroup

from bertkit.cli.app import app
from bertkit.cli.common import (PRECISION_HELP, THREADS_HELP, Precision, echo_notices, format_metrics, is_main_process,
                                 runtime_line)
from bertkit.cli.options import DATA_PANEL, MODEL_PANEL, OUTPUT_PANEL, TRAINING_PANEL, DataDir
from bertkit.tasks import finetune_tasks

TASK_PANEL = "Task options"
LONG_PANEL = "Long runs: steps, checkpoints, resume (README: Long runs)"


def _option(kind, help: str, panel: str = TRAINING_PANEL, *flags: str, **extra):
    return Annotated[kind, typer.Option(*flags, help=help, rich_help_panel=panel, **extra)]


# The options every task takes, in help order.
def _shared(
    data: _option(str, "A known dataset name (see `bertkit datasets`) or a file path.", DATA_PANEL,
                  show_default=False),
    eval_data: _option(Optional[str], "Evaluation data; default: the known dataset's dev split.", DATA_PANEL,
                       show_default=False) = None,
    data_dir: DataDir = None,
    max_train_samples: _option(Optional[int], "Use only the first N training examples.", DATA_PANEL,
                               show_default=False) = None,
    max_eval_samples: _option(Optional[int], "Use only the first N evaluation examples.", DATA_PANEL,
                              show_default=False) = None,
    model: _option(str, "Hub name, local directory, or 'minilm' (bundled, offline).", MODEL_PANEL) =
    "bert-base-uncased",
    output: _option(Optional[str], "Model directory to create (parents too); default runs/<task>-<data>.",
                    MODEL_PANEL, show_default=False) = None,
    overwrite: _option(bool, "Replace an existing model directory written by bertkit (only once training "
                             "succeeded); other directories are never replaced.", MODEL_PANEL, "--overwrite") = False,
    epochs: _option(float, "Training epochs (fractions allowed).") = 3.0,
    lr: _option(float, "Peak learning rate (BERT paper: 2e-5 .. 5e-5).") = 2e-5,
    batch_size: _option(int, "Training batch size per device (BERT paper: 16 or 32).") = 32,
    eval_batch_size: _option(int, "Batch size for evaluation.") = 64,
    max_length: _option(Optional[int], "Max tokens per sequence; default 128 (qa: 384).", show_default=False) = None,
    warmup_ratio: _option(float, "Share of steps with linear warmup, then linear decay to 0.") = 0.1,
    weight_decay: _option(float, "AdamW weight decay (not on biases and LayerNorm).") = 0.01,
    grad_accum: _option(int, "Gradient accumulation steps.") = 1,
    max_grad_norm: _option(float, "Gradient clipping norm (0: off).") = 1.0,
    precision: _option(Precision, PRECISION_HELP) = Precision.auto,
    threads: _option(Optional[int], THREADS_HELP, show_default=False) = None,
    freeze_embeddings: _option(bool, "Do not train the word embeddings (faster; README: accuracy cost).",
                               TRAINING_PANEL, "--freeze-embeddings") = False,
    save_memory: _option(bool, "Recompute attention in backward: same numbers, much less memory for long "
                               "sequences (qa), slower steps.", TRAINING_PANEL, "--save-memory") = False,
    seed: _option(int, "Random seed (data order, head initialisation, dropout).") = 42,
    patience: _option(Optional[int], "Stop after N evaluations without improvement of the main metric.",
                      show_default=False) = None,
    report_to: _option(str, "Trackers: tensorboard, wandb, mlflow, all or none (comma-separated allowed); "
                            "logs go to <output>.logs/.", OUTPUT_PANEL) = "none",
    max_steps: _option(Optional[int], "Optimizer steps to train (overrides --epochs).", LONG_PANEL,
                       show_default=False) = None,
    eval_every: _option(Optional[int], "Evaluate every N steps (default: after every epoch).", LONG_PANEL,
                        show_default=False) = None,
    log_every: _option(int, "Log loss, learning rate, gradient norm to history.jsonl every N steps.",
                       LONG_PANEL) = 10,
    save_every: _option(Optional[int], "Save a resumable checkpoint every N steps into <output>.checkpoints/step-N "
                                       "(Ctrl-C then saves one and stops).", LONG_PANEL, show_default=False) = None,
    keep_checkpoints: _option(Optional[int], "Keep the K newest checkpoints plus the best (default: all).",
                              LONG_PANEL, show_default=False) = None,
    resume: _option(bool, "Continue from the newest complete checkpoint of --output (same command line "
                          "otherwise).", LONG_PANEL, "--resume") = False,
    resume_from: _option(Optional[str], "Continue from this checkpoint directory instead.", LONG_PANEL,
                         show_default=False) = None,
):
    """Only its signature is used."""


# Definitions of the task options; which task shows which comes from Task.option_names.
TASK_OPTIONS = {
    "text_column": lambda task: _option(Optional[str], "Column with the (first) text.", TASK_PANEL,
                                        show_default=False),
    "text_pair_column": lambda task: _option(Optional[str], "Column with the second text.", TASK_PANEL,
                                             show_default=False),
    "label_column": lambda task: _option(Optional[str], "Column with the label.", TASK_PANEL, show_default=False),
    "doc_stride": lambda task: _option(Optional[int], {
        "qa": "Tokens of OVERLAP between consecutive windows of a long context (as in HF, not the step "
              "between windows; default 128).",
        "ner": "Words shared by consecutive windows of a long sentence (default: half a window)."}[task],
        TASK_PANEL, show_default=False),
    "max_answer_length": lambda task: _option(Optional[int], "Longest answer in tokens (default 30).", TASK_PANEL,
                                              show_default=False),
}


class TaskGroup(TyperGroup):
    """Subcommands from the task registry, each built on first use."""

    def list_commands(self, ctx):
        return list(finetune_tasks())

    def get_command(self, ctx, name):
        return _task_command(name) if name in finetune_tasks() else None

    def parse_args(self, ctx, args):
        from typer._click.exceptions import UsageError

        first = args[0] if args else None
        if first is not None and first not in finetune_tasks() and first not in ("--help", "-h"):
            if first.startswith("-"):
                raise UsageError(f"Missing argument 'task'. Choose from: {', '.join(finetune_tasks())}", ctx)
            raise UsageError(f"'{first}' is not one of {', '.join(repr(t) for t in finetune_tasks())}", ctx)
        return super().parse_args(ctx, args)


finetune_app = typer.Typer(cls=TaskGroup, no_args_is_help=True, rich_markup_mode=None,
                           help="Fine-tune a pretrained model for a task and save a directory that plain "
                                "transformers can load.")
app.add_typer(finetune_app, name="finetune")


@finetune_app.callback()
def _finetune_group():
    """Fine-tune a pretrained model for a task: cls, pair, ner or qa."""


def _task_command(name: str):
    from bertkit.tasks import get_task_class

    task_class = get_task_class(name)
    task_options = [key for key in task_class.option_names if key in TASK_OPTIONS]
    parameters = list(inspect.signature(_shared, eval_str=True).parameters.values())
    parameters += [inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, annotation=TASK_OPTIONS[key](name),
                                     default=None) for key in task_options]

    def command(**values):
        _finetune(name, values, task_options)

    command.__signature__ = inspect.Signature([p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in parameters])
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    single = typer.Typer(add_completion=False)
    about = (task_class.__doc__ or sys.modules[task_class.__module__].__doc__ or "").strip().split("\n")[0]
    single.command(name=name, help=f"Fine-tune for {name} ({task_class.summary or name}). {about}")(command)
    return typer.main.get_command(single)


def _finetune(task: str, values: dict, task_options: list) -> None:
    from bertkit import api
    from bertkit.config import TrainConfig

    options = {key: values.pop(key) for key in task_options}
    data, output = values.pop("data"), values.pop("output")
    config = TrainConfig(precision=values.pop("precision").value,
                         task_options={k: v for k, v in options.items() if v is not None},
                         **{key: values.pop(key) for key in list(values)
                            if key in TrainConfig.__dataclass_fields__})
    output = output or os.path.join("runs", f"{task}-{os.path.splitext(os.path.basename(data))[0]}")
    from bertkit.engine.interrupts import TrainingInterrupted

    try:
        result = api.finetune(task, data, output, config=config, **values)
    except TrainingInterrupted as stop:
        if is_main_process():
            typer.echo(f"interrupted: {stop}; to continue, run the same command with --resume", err=True)
        sys.exit(130)
    if not is_main_process():
        return
    t = result.throughput
    if result.resumed_from:
        typer.echo(f"resumed from {result.resumed_from}")
    for entry in result.history:
        where = f"step {entry['step']} (epoch {entry['epoch']})" if config.eval_every else f"epoch {entry['epoch']}"
        typer.echo(f"{where}: train loss {entry['train_loss']:.4f}" +
                   "".join(f", {k} {v:.4f}" for k, v in entry.get("metrics", {}).items() if isinstance(v, float)))
    typer.echo(f"train: {result.train_examples} examples ({result.preprocessing.get('train_features')} features), "
               f"{t['examples_per_s']:.1f} examples/s, {t['tokens_per_s']:.0f} tokens/s, "
               f"padding {100 * t['padding_share']:.1f}%, {t['train_seconds']:.1f}s")
    typer.echo(runtime_line(result.runtime))
    echo_notices(result.preprocessing.get("train", {}), prefix="train: ")
    echo_notices(result.preprocessing.get("eval", {}), prefix="eval: ")
    echo_notices({"notices": result.notices})
    if result.metrics:
        typer.echo(f"best (epoch {result.best_epoch}, step {result.best_step}): {format_metrics(result.metrics)}")
    echo_notices(result.report)
    typer.echo(f"saved to {result.output_dir}")
