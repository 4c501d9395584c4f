"""Typer options generated from the one declaration of each option (bertkit/options: a family's
dataclass fields; a task's TaskOption), plus the few arguments that belong to a single command."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from enum import Enum
from typing import Annotated, Optional

import typer

from bertkit.options import (
    DATA_PANEL,
    INFERENCE_PANEL,
    LONG_PANEL,
    LORA_PANEL,
    MODEL_PANEL,
    OUTPUT_PANEL,
    PRECISIONS,
    REQUIRED,
    TRAINING_PANEL,
    RunOptions,
)
from bertkit.tasks.panels import (
    LABEL_KINDS_PANEL,
    LONG_TEXT_PANEL,
    LOSS_PANEL,
    READING_PANEL,
    RECIPE_PANEL,
    TASK_PANEL,
)

# one-shot actions (model_dir/run_config.ONE_SHOT, never written to config.yaml) that a --config
# file may not carry either: replaying a file must not resume or replace a directory unasked
CONFIG_REFUSED = ("resume", "resume_from", "overwrite")
PANELS = (DATA_PANEL, MODEL_PANEL, TRAINING_PANEL, OUTPUT_PANEL, INFERENCE_PANEL, TASK_PANEL)  # for the commands
# The order of a command's --help panels, by purpose: what it reads, which model, how it trains, what
# the task's options change, then the rarer runs and the output. A panel not named here (a command's
# own: Distillation, Serving...) comes where None stands.
PANEL_ORDER = (
    DATA_PANEL,
    READING_PANEL,
    MODEL_PANEL,
    TRAINING_PANEL,
    None,
    INFERENCE_PANEL,
    LABEL_KINDS_PANEL,
    LOSS_PANEL,
    RECIPE_PANEL,
    LONG_TEXT_PANEL,
    TASK_PANEL,
    LORA_PANEL,
    LONG_PANEL,
    OUTPUT_PANEL,
)

ModelDir = Annotated[str, typer.Argument(help="A directory written by `bertkit finetune`.", show_default=False)]
Precision = Enum("Precision", {name: name for name in PRECISIONS}, type=str)  # click shows the choices
# commands whose flags include the registered tasks' (eval, predict): name -> a builder, called when
# the command runs (cli/app.py), so a task registered after bertkit.cli was imported adds its flags
LATE_COMMANDS: dict = {}


def from_dataclass(
    cls, defaults: dict | None = None, exclude: tuple = (), helps: dict | None = None, only: tuple | None = None
) -> list:
    """Keyword parameters for every field of ``cls`` that declares a help text (``only``: these
    fields). ``defaults`` and ``helps`` adjust a field for one command (pretraining's learning
    rate, its data's wording)."""
    hints = typing.get_type_hints(cls)
    parameters = []
    for f in dataclasses.fields(cls):
        if "help" not in f.metadata or f.name in exclude or (only is not None and f.name not in only):
            continue
        default = (defaults or {}).get(f.name, f.default)
        help_text = (helps or {}).get(f.name, f.metadata["help"])
        parameters.append(
            _parameter(
                f.name,
                hints[f.name],
                default,
                help_text,
                f.metadata["panel"],
                f.metadata["choices"],
                f.metadata["flag"],
                f.metadata.get("metavar"),
            )
        )
    return parameters


def from_task(task_class, command: str) -> list:
    """The flags a task offers on ``command``; unset, they leave the task's own default."""
    return [_task_parameter(o) for o in task_class.options_for(command)]


def registry_options(command: str) -> dict:
    """Name -> TaskOption of every registered task's options for ``command``. A name declared by
    several tasks is one option: the tasks share one declaration (classification's
    LABEL_KIND_OPTIONS); where two declarations still differ, the first registered task's wins."""
    from bertkit.tasks import TASKS, get_task_class, load_plugins

    load_plugins()  # the entry points' tasks join TASKS here
    found: dict = {}
    for name in list(TASKS):
        for declared in get_task_class(name).options_for(command):
            found.setdefault(declared.name, declared)
    return found


def from_registry(command: str, taken: typing.Iterable[str] = ()) -> list:
    """The flags every registered task adds to ``command`` (not those the command has already)."""
    taken = set(taken)
    return [_task_parameter(o) for name, o in registry_options(command).items() if name not in taken]


def task_values(values: dict, names: typing.Iterable[str]) -> dict:
    """Take the task options out of ``values``: only those given (an unset flag is None, an unset
    bare --flag False), so the model's task keeps its own defaults; 0 is a value."""
    taken = {name: values.pop(name) for name in list(names) if name in values}
    return {k: v for k, v in taken.items() if v is not None and v is not False}


def training_values(values: dict, task_names: typing.Iterable[str], *families) -> tuple:
    """finetune's, tune's and pretrain's one step from the flat flags to their parts: (the given task
    options, RunOptions' values, each of ``families``' values, and what is left: TrainConfig's)."""
    values = plain(values)
    values.pop("config", None)  # read already: its values arrived as the options' defaults
    task_options = task_values(values, task_names)
    run = split(values, RunOptions)
    return (task_options, run, *(split(values, family) for family in families), values)


def built_late(name: str, build) -> None:
    """Register ``build`` (-> a click command) to make command ``name`` when it is invoked."""
    LATE_COMMANDS[name] = build


def single_command(name: str, run, parameters: list, leading: tuple = (), help: str | None = None):
    """One click command named ``name`` from ``run`` and its generated parameters."""

    def fresh(**values):  # its own signature: ``run`` keeps the one it was registered with
        return run(**values)

    single = typer.Typer(add_completion=False)
    single.command(name=name, help=help)(command(fresh, parameters, leading))
    return typer.main.get_command(single)


def positional(name: str, annotation) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation)


def _task_parameter(option) -> inspect.Parameter:
    return _parameter(
        option.name,
        Optional[option.type],
        False if option.type is bool else None,
        _task_help(option),
        option.panel,
        (),
        option.type is bool,
    )


def config_file_parameter(command_name: str, verb: str = "finetune"):
    """``--config FILE``: its options become the command's defaults (read first: an eager option),
    so a flag on the command line overrides the file; a key the command does not take is an error."""

    def load(ctx: typer.Context, value: Optional[str]):
        if value is None or ctx.resilient_parsing:
            return value
        from bertkit.errors import BertkitError
        from bertkit.model_dir.run_config import read_run_config

        values = read_run_config(value)
        task = values.pop("task", command_name)
        if str(task) != command_name:
            raise BertkitError(
                f"--config {value} is for task {task!r}, not {command_name!r}",
                f"run `bertkit {verb} {task} --config {value}`, or edit its task",
            )
        actions = sorted(set(values) & set(CONFIG_REFUSED))
        if actions:  # a file replayed later must never resume or replace a directory by itself
            flags = " ".join(f"--{name.replace('_', '-')}" for name in actions)
            raise BertkitError(
                f"--config {value}: {', '.join(actions)} is an action of one run, not a setting a file may carry",
                f"remove it from the file and give {flags} on the command line",
            )
        known = {p.name for p in ctx.command.params} - {"config"}
        unknown = sorted(set(values) - known)
        if unknown:
            raise BertkitError(
                f"--config {value}: {', '.join(unknown)} is not an option of {command_name}",
                f"see `bertkit {verb} {command_name} --help`",
            )
        ctx.default_map = {**(ctx.default_map or {}), **values}
        return value

    annotation = Annotated[
        Optional[str],
        typer.Option(
            "--config",
            metavar="FILE",
            help="Options from a YAML/JSON file (e.g. a model directory's config.yaml); flags given here override it.",
            is_eager=True,
            callback=load,
            rich_help_panel=DATA_PANEL,
            show_default=False,
        ),
    ]
    return inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=None)


def _task_help(option) -> str:
    shown = option.default is not None and option.type is not bool
    return option.help + (f" Default {option.default}." if shown and "default" not in option.help.lower() else "")


def _parameter(
    name: str, kind, default, help_text: str, panel: str, choices: tuple, flag: bool | str, metavar: str | None = None
):
    if choices == PRECISIONS:  # click lists an Enum's values as the choices
        kind = Precision
        default = default if default is REQUIRED else Precision(default)
    declared = (flag if isinstance(flag, str) else f"--{name.replace('_', '-')}",) if flag else ()
    optional = default is None or _allows_none(kind)
    if optional and not flag:
        kind = Optional[_without_none(kind)]
    annotation = Annotated[
        kind,
        typer.Option(
            *declared,
            help=help_text,
            rich_help_panel=panel,
            metavar=metavar,
            show_default=not (default is None or flag),
        ),
    ]
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        annotation=annotation,
        default=inspect.Parameter.empty if default is REQUIRED else default,
    )


def _allows_none(kind) -> bool:
    return type(None) in typing.get_args(kind)


def _without_none(kind):
    if not _allows_none(kind):
        return kind
    (inner,) = [a for a in typing.get_args(kind) if a is not type(None)]
    return inner


def command(function, parameters: list, leading: tuple = ()):
    """``function(**values)`` with the given keyword parameters as its signature, so Typer builds
    the options from them (``leading``: positional parameters first; the others by PANEL_ORDER, in
    which Typer then prints the panels)."""
    ordered = list(leading) + sorted(parameters, key=_panel_rank)
    function.__signature__ = inspect.Signature(ordered)
    function.__annotations__ = {p.name: p.annotation for p in ordered}
    return function


def _panel_rank(parameter: inspect.Parameter) -> tuple:
    panel = next((getattr(m, "rich_help_panel", None) for m in typing.get_args(parameter.annotation)[1:]), None)
    return PANEL_ORDER.index(panel if panel in PANEL_ORDER else None), parameter.default is not inspect.Parameter.empty


def chosen(values: dict, cls, exclude: tuple = ()):
    """``cls`` built from its fields in ``values`` (taken out of them), Enum choices as strings."""
    return cls(**plain(split(values, cls, exclude)))


def plain(values: dict) -> dict:
    """Enum choices back to their strings."""
    return {k: (v.value if isinstance(v, Enum) else v) for k, v in values.items()}


def split(values: dict, cls, exclude: tuple = ()) -> dict:
    """Take ``cls``'s fields out of ``values`` (the rest stays)."""
    names = {f.name for f in dataclasses.fields(cls)} - set(exclude)
    return {k: values.pop(k) for k in list(values) if k in names}
