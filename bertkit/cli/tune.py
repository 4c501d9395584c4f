"""`bertkit tune TASK`: a hyperparameter search over finetune's options (bertkit.api.tuning).

The subcommands are finetune's (the same task registry and options, built when asked for) plus
the search's own; a searched hyperparameter given on the command line or in --config is fixed."""

from __future__ import annotations

import inspect
import sys

import typer

from bertkit.cli.app import app
from bertkit.cli.common import format_metrics, is_main_process
from bertkit.cli.finetune import TaskGroup
from bertkit.cli.options import command, config_file_parameter, from_dataclass, from_task, training_values
from bertkit.options import RunOptions, TrainConfig, TuneOptions, default_output

GIVEN = ("COMMANDLINE", "DEFAULT_MAP", "ENVIRONMENT")  # click's parameter sources that the user chose


class TuneTaskGroup(TaskGroup):
    build = staticmethod(lambda name: _tune_command(name))
    verb = "tune"


tune_app = typer.Typer(
    cls=TuneTaskGroup,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Search hyperparameters with Optuna; the best trial's model is the output.",
)
app.add_typer(tune_app, name="tune")


@tune_app.callback()
def _tune_group():
    """Search finetune's hyperparameters with Optuna: cls, pair, ner or qa."""


def _tune_command(name: str):
    from bertkit.tasks import get_task_class

    task_class = get_task_class(name)
    parameters = (
        from_dataclass(RunOptions)
        + from_dataclass(TrainConfig)
        + from_dataclass(TuneOptions)
        + from_task(task_class, "finetune")
        + [config_file_parameter(name, "tune")]
    )
    context = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)

    def run(ctx: typer.Context, **values):
        from bertkit.training.search_space import searchable

        fixed = tuple(
            n
            for n in searchable()
            if ctx.get_parameter_source(n) is not None and ctx.get_parameter_source(n).name in GIVEN
        )
        _tune(name, values, [o.name for o in task_class.options_for("finetune")], fixed)

    single = typer.Typer(add_completion=False)
    single.command(name=name, help=f"Search hyperparameters for {name} ({task_class.summary or name}).")(
        command(run, parameters, leading=(context,))
    )
    return typer.main.get_command(single)


def _tune(task: str, values: dict, task_options: list, fixed: tuple) -> None:
    from bertkit import api

    options, run, search, rest = training_values(values, task_options, TuneOptions)
    config = TrainConfig(task_options=options, **rest)
    run = RunOptions(**run)
    run.output = run.output or default_output(run.data, f"tune-{task}-")
    from bertkit.engine.interrupts import TrainingInterrupted

    try:
        result = api.tune(
            task, run, config, TuneOptions(**search, fixed=fixed), _show_trial if is_main_process() else None
        )
    except TrainingInterrupted as stop:
        if is_main_process():
            typer.echo(f"interrupted: {stop}; run the same command again to continue the study", err=True)
        sys.exit(130)
    if not is_main_process():
        return
    best = result.best_trial
    states = [t["state"] for t in result.trials]
    typer.echo(
        f"study {result.study_name} in {result.storage}: {len(states)} trials ({states.count('complete')} "
        f"complete, {states.count('pruned')} pruned, {states.count('fail')} failed); this process ran "
        f"{len(result.ran_here)}"
    )
    typer.echo(f"best: trial {best['number']}, value {best['value']:.4f}, {best['params']}")
    if result.importances:
        typer.echo("importances: " + ", ".join(f"{k} {v:.2f}" for k, v in result.importances.items()))
    if result.best is not None:
        typer.echo(f"best (epoch {result.best.best_epoch}): {format_metrics(result.best.metrics)}")
    typer.echo(f"saved to {result.output_dir}")


def _show_trial(summary: dict) -> None:
    value = f"{summary['value']:.4f}" if summary["value"] is not None else "-"
    typer.echo(f"trial {summary['number']}: {summary['state']}, value {value}, {summary['params']}", err=True)
