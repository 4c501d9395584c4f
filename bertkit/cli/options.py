"""Typer options generated from the one declaration of each option (bertkit/config.py dataclass
fields, a task's TaskOption), plus the few arguments that belong to a single command."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from enum import Enum
from typing import Annotated, Optional

import typer

from bertkit.config import (DATA_PANEL, INFERENCE_PANEL, MODEL_PANEL, OUTPUT_PANEL, PRECISION_HELP, PRECISIONS,
                            REQUIRED, THREADS_HELP, TRAINING_PANEL, InferenceOptions, RunOptions)

TASK_PANEL = "Task options"
PANELS = (DATA_PANEL, MODEL_PANEL, TRAINING_PANEL, OUTPUT_PANEL, INFERENCE_PANEL, TASK_PANEL)  # for the commands

ModelDir = Annotated[str, typer.Argument(help="A directory written by `bertkit finetune`.", show_default=False)]
Backend = Annotated[str, typer.Option(help="torch, onnx, onnx-int8 (after `bertkit export onnx`), openvino, "
                                           "openvino-int8 (after `bertkit export openvino`), or auto: the "
                                           "fastest the exports measured.",
                                      rich_help_panel=INFERENCE_PANEL)]
Precision = Enum("Precision", {name: name for name in PRECISIONS}, type=str)  # click shows the choices
# for commands whose precision is not (yet) generated from a dataclass
PrecisionOption = Annotated[Precision, typer.Option(help=PRECISION_HELP)]
ThreadsOption = Annotated[Optional[int], typer.Option(help=THREADS_HELP, show_default=False)]
# the input-at-any-scale options `predict` and `embed` share (bertkit.api.streaming)
ChunkRows = Annotated[int, typer.Option(help="Rows read, run and written at a time: memory stays flat whatever "
                                             "the input's size.", rich_help_panel=INFERENCE_PANEL)]
Resume = Annotated[bool, typer.Option("--resume", help="Continue an interrupted run into the same --output after its "
                                      "last complete chunk (same input, model and options).",
                                      rich_help_panel=OUTPUT_PANEL)]
# scale-out on Ray Data (bertkit.ray), the same three flags for `predict` and `embed`
RAY_PANEL = "Ray cluster"
Ray = Annotated[bool, typer.Option("--ray", help="Run on a Ray cluster with Ray Data (the bertkit ray extra): "
                                   "--output is a directory of Parquet files.", rich_help_panel=RAY_PANEL)]
RayAddress = Annotated[Optional[str], typer.Option("--ray-address", help="The cluster: auto, ray://HOST:10001, ... "
                                                   "(default: RAY_ADDRESS, else a new local cluster).",
                                                   rich_help_panel=RAY_PANEL, show_default=False)]
Actors = Annotated[int, typer.Option(help="--ray: actors, each with the model loaded once.", rich_help_panel=RAY_PANEL)]


def from_dataclass(cls, defaults: dict | None = None, exclude: tuple = (), helps: dict | None = None) -> list:
    """Keyword parameters for every field of ``cls`` that declares a help text. ``defaults`` and
    ``helps`` adjust a field for one command (pretraining's learning rate, its data's wording)."""
    hints = typing.get_type_hints(cls)
    parameters = []
    for f in dataclasses.fields(cls):
        if "help" not in f.metadata or f.name in exclude:
            continue
        default = (defaults or {}).get(f.name, f.default)
        help_text = (helps or {}).get(f.name, f.metadata["help"])
        parameters.append(_parameter(f.name, hints[f.name], default, help_text, f.metadata["panel"],
                                     f.metadata["choices"], f.metadata["flag"]))
    return parameters


def from_task(task_class, command: str) -> list:
    """The flags a task offers on ``command``; unset, they leave the task's own default."""
    return [_parameter(o.name, Optional[o.type], False if o.type is bool else None, _task_help(o), TASK_PANEL,
                       (), o.type is bool) for o in task_class.options_for(command)]


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
            raise BertkitError(f"--config {value} is for task {task!r}, not {command_name!r}",
                               f"run `bertkit {verb} {task} --config {value}`, or edit its task")
        known = {p.name for p in ctx.command.params} - {"config"}
        unknown = sorted(set(values) - known)
        if unknown:
            raise BertkitError(f"--config {value}: {', '.join(unknown)} is not an option of {command_name}",
                               f"see `bertkit {verb} {command_name} --help`")
        ctx.default_map = {**(ctx.default_map or {}), **values}
        return value

    annotation = Annotated[Optional[str], typer.Option(
        "--config", metavar="FILE", help="Options from a YAML/JSON file (e.g. a model directory's config.yaml); "
        "flags given here override it.", is_eager=True, callback=load, rich_help_panel=DATA_PANEL,
        show_default=False)]
    return inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=None)


def annotated(cls, name: str):
    """One declared field as an ``Annotated`` type, for a hand-written command signature."""
    (parameter,) = [p for p in from_dataclass(cls) if p.name == name]
    return parameter.annotation


def _task_help(option) -> str:
    shown = option.default is not None and option.type is not bool
    return option.help + (f" Default {option.default}." if shown and "default" not in option.help.lower() else "")


def _parameter(name: str, kind, default, help_text: str, panel: str, choices: tuple, flag: bool):
    if choices == PRECISIONS:  # click lists an Enum's values as the choices
        kind = Precision
        default = default if default is REQUIRED else Precision(default)
    declared = (f"--{name.replace('_', '-')}",) if flag else ()
    optional = default is None or _allows_none(kind)
    if optional and not flag:
        kind = Optional[_without_none(kind)]
    annotation = Annotated[kind, typer.Option(*declared, help=help_text, rich_help_panel=panel,
                                              show_default=not (default is None or flag))]
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                             default=inspect.Parameter.empty if default is REQUIRED else default)


def _allows_none(kind) -> bool:
    return type(None) in typing.get_args(kind)


def _without_none(kind):
    if not _allows_none(kind):
        return kind
    (inner,) = [a for a in typing.get_args(kind) if a is not type(None)]
    return inner


def command(function, parameters: list, leading: tuple = ()):
    """``function(**values)`` with the given keyword parameters as its signature, so Typer builds
    the options from them (``leading``: positional parameters first)."""
    ordered = list(leading) + sorted(parameters, key=lambda p: p.default is not inspect.Parameter.empty)
    function.__signature__ = inspect.Signature(ordered)
    function.__annotations__ = {p.name: p.annotation for p in ordered}
    return function


def plain(values: dict) -> dict:
    """Enum choices back to their strings."""
    return {k: (v.value if isinstance(v, Enum) else v) for k, v in values.items()}


def split(values: dict, cls) -> dict:
    """Take ``cls``'s fields out of ``values`` (the rest stays)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: values.pop(k) for k in list(values) if k in names}


DataDir = annotated(RunOptions, "data_dir")
BatchSize = annotated(InferenceOptions, "batch_size")
InferencePrecision = annotated(InferenceOptions, "precision")
Threads = annotated(InferenceOptions, "threads")
