"""`bertkit distill TEACHER_DIR`: a smaller student trained on a fine-tuned teacher's outputs.

Thin Typer layer over bertkit.api.distillation; its flags: finetune's training options and DistillOptions,
less what a distillation cannot honour (NOT_HONOURED): --model (the teacher is the argument, the student
--student or --student-layers), --save-adapter, the label kinds, the SetFit recipe and the gold loss's
options (the loss is distillation's own). finetune's --seeds and --folds are not offered either.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from bertkit.cli.app import app
from bertkit.cli.common import best_line, echo_notices, echo_runtime, format_metrics, is_main_process
from bertkit.cli.options import (
    built_late,
    chosen,
    command,
    from_dataclass,
    from_task,
    positional,
    single_command,
    training_values,
)
from bertkit.options import RunOptions, TrainConfig
from bertkit.options.distillation import DistillOptions

TEACHER = positional(
    "teacher",
    Annotated[
        str,
        typer.Argument(
            help="The teacher: a model directory `bertkit finetune` wrote.", show_default=False, metavar="TEACHER_DIR"
        ),
    ],
)
HELPS = {"output": "Student model directory to create; default runs/distilled-<data>."}
# finetune's flags distill does not offer: the api refuses them (methods/distillation.py, api/distillation.py)
# or has no use for them. --model: the teacher is the argument; --save-adapter: the student's layers are
# the teacher's chosen ones, which no base model holds; --problem-type and its companions: a teacher's
# logits are one distribution per row or token (single-label only); --recipe setfit: not distilled;
# --class-weights, --loss, --focal-gamma: the loss is the distillation loss (soft targets + cross-entropy).
NOT_HONOURED = (
    "model",
    "save_adapter",
    "problem_type",
    "label_columns",
    "scale_targets",
    "recipe",
    "pairs_per_example",
    "class_weights",
    "loss",
    "focal_gamma",
)


def _distill(teacher: str, **values) -> None:
    """Distil a fine-tuned model (cls, pair, ner) into a smaller student (docs: distillation.md)."""
    from bertkit.api.distillation import distill
    from bertkit.engine.interrupts import TrainingInterrupted

    options = chosen(values, DistillOptions).validate()
    task_options, run, rest = training_values(values, [p.name for p in _task_parameters()])
    config = TrainConfig(task_options=task_options, **rest)
    try:
        result = distill(teacher, RunOptions(**run), options, config)
    except TrainingInterrupted as stop:
        if is_main_process():
            typer.echo(f"interrupted: {stop}; to continue, run the same command with --resume", err=True)
        sys.exit(130)
    if not is_main_process():
        return
    for entry in result.history:
        typer.echo(
            f"epoch {entry['epoch']}: train loss {entry['train_loss']:.4f}"
            + (f", {format_metrics(entry['metrics'])}" if entry.get("metrics") else "")
        )
    section = result.sections.get("distillation", {})
    size, speed = section.get("parameters", {}), section.get("speed", {})
    typer.echo(
        f"student: {section.get('student', {}).get('layers')} layers, {size.get('student')} parameters "
        f"({size.get('ratio')} of the teacher's), {speed.get('ratio')}x the teacher's predict speed "
        f"(torch, {speed.get('examples')} training examples)"
    )
    echo_runtime(result.runtime)
    echo_notices(result.preprocessing.get("train", {}), prefix="train: ")
    echo_notices({"notices": result.notices})
    if result.metrics:
        typer.echo(best_line(result))  # the teacher's score beside the student's, a baseline not beaten said
    echo_notices(result.report)
    typer.echo(f"saved to {result.output_dir}")


ABOUT = "Distil a fine-tuned model (cls, pair, ner) into a smaller student (docs: distillation.md)."


def _task_parameters() -> list:
    """The reading flags of the tasks a teacher may be (the teacher's own task takes those given)."""
    from bertkit.api.distillation import TASKS
    from bertkit.tasks import get_task_class

    found = {}
    for task in TASKS:
        for parameter in from_task(get_task_class(task), "finetune"):
            if parameter.name not in NOT_HONOURED:
                found.setdefault(parameter.name, parameter)
    return list(found.values())


def _parameters(with_tasks: bool) -> list:
    return (
        from_dataclass(RunOptions, exclude=NOT_HONOURED, helps=HELPS)
        + from_dataclass(TrainConfig, exclude=NOT_HONOURED)
        + from_dataclass(DistillOptions)
        + (_task_parameters() if with_tasks else [])
    )


app.command(name="distill", help=ABOUT)(command(_distill, _parameters(with_tasks=False), leading=(TEACHER,)))
built_late("distill", lambda: single_command("distill", _distill, _parameters(with_tasks=True), (TEACHER,), ABOUT))
