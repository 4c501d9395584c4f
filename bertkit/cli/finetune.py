"""`bertkit finetune TASK`: one subcommand per task of the registry (bertkit.tasks.finetune_tasks()).

Each subcommand has the shared options plus the options its task reads (``Task.option_names``);
it is built when asked for, so only that task's module is imported (`bertkit --help` imports none).
"""

from __future__ import annotations

import re
import sys

import typer
from typer.core import TyperGroup

from bertkit.cli.app import app
from bertkit.cli.common import best_line, echo_notices, echo_runtime, is_main_process, show_spread
from bertkit.cli.options import command, config_file_parameter, from_dataclass, from_task, training_values
from bertkit.errors import BertkitError
from bertkit.options import RepeatOptions, RunOptions, TrainConfig, default_output, parse_seeds
from bertkit.tasks import finetune_tasks


class TaskGroup(TyperGroup):
    """Subcommands from the task registry, each built on first use (by ``build``: finetune's, or
    another command's that takes the same task options, such as tune)."""

    build = staticmethod(lambda name: _task_command(name))
    verb = "finetune"
    others: dict = {}  # commands beside the tasks' (finetune multi): name -> builder

    def names(self) -> tuple:
        return (*finetune_tasks(), *self.others)

    def list_commands(self, ctx):
        return list(self.names())

    def get_command(self, ctx, name):
        if name in self.others:
            return self.others[name]()
        return self.build(name) if name in finetune_tasks() else None

    def parse_args(self, ctx, args):
        from typer._click.exceptions import UsageError

        first = args[0] if args else None
        if first == "--config" or (first or "").startswith("--config="):  # the task from the file
            args = [task_of_config(args, self.verb), *args]
            first = args[0]
        if first is not None and first not in self.names() and first not in ("--help", "-h"):
            if first.startswith("-"):
                raise UsageError(f"Missing argument 'task'. Choose from: {', '.join(self.names())}", ctx)
            raise UsageError(f"'{first}' is not one of {', '.join(repr(t) for t in self.names())}", ctx)
        return super().parse_args(ctx, args)


class FinetuneGroup(TaskGroup):
    """finetune's tasks, and `finetune multi` (several task heads over one encoder: cli/multihead.py)."""

    others = {"multi": lambda: _multi_command()}


def _multi_command():
    from bertkit.cli.multihead import multi_command

    return multi_command()


finetune_app = typer.Typer(
    cls=FinetuneGroup,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Fine-tune a pretrained model for a task and save a directory that plain transformers can load.",
)
app.add_typer(finetune_app, name="finetune")


@finetune_app.callback()
def _finetune_group():
    """Fine-tune a pretrained model for a task: cls, pair, ner or qa."""


def _task_command(name: str):
    from bertkit.tasks import get_task_class

    task_class = get_task_class(name)
    length = f"Max tokens per sequence; default {task_class.default_max_length} (this task's)."
    parameters = (
        from_dataclass(RunOptions)
        + from_dataclass(TrainConfig, helps={"max_length": length})
        + from_dataclass(RepeatOptions)
        + from_task(task_class, "finetune")
        + [config_file_parameter(name)]
    )

    def run(**values):
        _finetune(name, values, [o.name for o in task_class.options_for("finetune")])

    single = typer.Typer(add_completion=False)
    single.command(name=name, help=task_help(task_class))(command(run, parameters))
    return typer.main.get_command(single)


def task_help(task_class) -> str:
    """`finetune TASK`'s summary: what it reads, then the first paragraph of the task's docstring
    (whole sentences, RST literals as plain text, without a note naming the command itself)."""
    doc = (task_class.__doc__ or sys.modules[task_class.__module__].__doc__ or "").strip()
    about = " ".join(doc.split("\n\n")[0].split()).replace("``", "")
    about = re.sub(r" \(bertkit finetune \w+\)", "", about)
    return f"Fine-tune for {task_class.name}: {task_class.summary or task_class.name}. {about}".strip()


def task_of_config(args: list, verb: str = "finetune") -> str:
    """``bertkit finetune --config FILE ...``: the task the file names."""
    from bertkit.model_dir.run_config import read_run_config

    path = args[0].split("=", 1)[1] if "=" in args[0] else (args[1] if len(args) > 1 else None)
    if path is None:
        raise BertkitError("--config needs a file", f"e.g. bertkit {verb} --config run.yaml")
    task = read_run_config(path).get("task")
    if task is None:
        raise BertkitError(
            f"--config {path} names no task",
            f"add `task: cls` (or pair, ner, qa), or give it: bertkit {verb} cls --config FILE",
        )
    return str(task)


def _finetune(task: str, values: dict, task_options: list) -> None:
    from bertkit import api

    options, values, repeat, rest = training_values(values, task_options, RepeatOptions)
    config = TrainConfig(task_options=options, **rest)
    data, output = values.pop("data"), values.pop("output")
    output = output or default_output(data, f"{task}-")
    repeat = RepeatOptions(**repeat)
    seeds, folds = parse_seeds(repeat.seeds, config.seed), repeat.folds
    if seeds is not None and folds is not None:
        raise BertkitError("--seeds and --folds each train several runs; one at a time", "drop one of them")
    if repeat.keep_all and seeds is None and folds is None:
        raise BertkitError("--keep-all applies only with --seeds or --folds", "add --seeds N or --folds K")
    from bertkit.engine.interrupts import TrainingInterrupted

    try:
        shown = _show_run if is_main_process() else None
        run = RunOptions(data=data, output=output, **values)
        if seeds is not None:
            repeated = api.finetune_seeds(task, run, config, repeat, on_run=shown)
        elif folds is not None:
            repeated = api.finetune_folds(task, run, config, repeat, on_run=shown)
        else:
            repeated = None
        result = api.finetune(task, run, config) if repeated is None else repeated.best
    except TrainingInterrupted as stop:
        if is_main_process():
            typer.echo(f"interrupted: {stop}; to continue, run the same command with --resume", err=True)
        sys.exit(130)
    if not is_main_process():
        return
    if repeated is not None:
        _show_spread(repeated)
    t = result.throughput
    if result.resumed_from:
        typer.echo(f"resumed from {result.resumed_from}")
    for entry in result.history:
        where = f"step {entry['step']} (epoch {entry['epoch']})" if config.eval_every else f"epoch {entry['epoch']}"
        typer.echo(
            f"{where}: train loss {entry['train_loss']:.4f}"
            + "".join(f", {k} {v:.4f}" for k, v in entry.get("metrics", {}).items() if isinstance(v, float))
        )
    typer.echo(
        f"train: {result.train_examples} examples ({result.preprocessing.get('train_features')} features), "
        f"{t['examples_per_s']:.1f} examples/s, {t['tokens_per_s']:.0f} tokens/s, "
        f"padding {100 * t['padding_share']:.1f}%, {t['train_seconds']:.1f}s"
    )
    echo_runtime(result.runtime)
    echo_notices(result.preprocessing.get("train", {}), prefix="train: ")
    echo_notices(result.preprocessing.get("eval", {}), prefix="eval: ")
    echo_notices({"notices": result.notices})
    if result.metrics:
        typer.echo(best_line(result))  # not "fine" when it is not
    echo_notices(result.report)
    typer.echo(f"saved to {result.output_dir}")


def _show_run(number: int, result) -> None:
    metrics = ", ".join(f"{k} {v:.4f}" for k, v in result.metrics.items() if isinstance(v, float))
    what = f"fold {number}" if result.eval_rows is not None else f"seed {number}"
    typer.echo(
        f"{what}: {metrics} (best epoch {result.best_epoch}, {result.throughput.get('train_seconds', 0):.1f}s)",
        err=True,
    )
    # what this run's data did (a fold that trains without a class, its truncations): only the
    # kept run's notices are printed at the end
    echo_notices(result.preprocessing.get("train", {}), prefix=f"{what}: train: ", err=True)


def _show_spread(repeated) -> None:
    show_spread(repeated)
    folds = getattr(repeated, "folds", None)
    if folds:
        typer.echo(
            f"out-of-fold predictions (every example, by a model that did not train on it): {repeated.predictions_file}"
        )
