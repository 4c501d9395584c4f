"""Training methods: the registry, the choice of a run's methods, and the check of their combination.

A new method is one module (a ``Method`` subclass, bertkit/methods/base.py) plus one line in
``METHODS``. A run's methods are those its options request (``Method.requested``) plus those its
command adds (``bertkit distill`` adds distillation); ``check_methods`` then refuses, in one line
naming both parts, a method given a task it does not serve, two methods that do not compose, a run
mode a method cannot take part in, or a task option it cannot train with. Nothing is ignored.
"""

from __future__ import annotations

import importlib

from bertkit.errors import BertkitError
from bertkit.methods.base import MODES, SINGLE, Method, Run

# method name -> "module:Class" (imported when used; the plain recipe first: it is the default)
METHODS = {
    "finetune": "bertkit.methods.finetune:FineTuning",
    "setfit": "bertkit.methods.setfit:SetFit",
    "lora": "bertkit.methods.lora:Lora",
    "distill": "bertkit.methods.distillation:Distillation",
    "calibrate": "bertkit.methods.calibration:Calibration",  # last: its finish scores the finished model
}

__all__ = [
    "METHODS",
    "MODES",
    "Method",
    "Run",
    "check_methods",
    "chosen_methods",
    "get_method",
    "planned_methods",
    "recorded_methods",
]


def get_method(name: str) -> type[Method]:
    module, _, cls = METHODS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def method_classes() -> list[type[Method]]:
    return [get_method(name) for name in METHODS]


def chosen_methods(config, added: list | tuple = ()) -> list[Method]:
    """The run's methods: those ``config`` (a TrainConfig) requests, then ``added`` (instances a
    command built, e.g. distill's), each once, in registry order."""
    chosen = [cls(config) for cls in method_classes() if cls.requested(config)]
    taken = {m.name for m in chosen}
    return chosen + [m for m in added if m.name not in taken]


def check_methods(methods: list[Method], task: str, modes: tuple = (SINGLE,)) -> None:
    """One line for the first combination the declarations refuse (no model, no data needed);
    ``modes``: how the run is driven (MODES: a fold, one of several seeds, a trial, resumable)."""
    if not set(modes) <= set(MODES):
        raise ValueError(f"unknown run mode in {modes!r}")
    trainers = [m for m in methods if m.replaces_training] or [m for m in methods if m.name == "finetune"]
    for method in methods:
        served = method.served_tasks()
        if served is not None and task not in served:
            raise BertkitError(
                f"{method.flag} does not apply to {task} (it trains {', '.join(served)})",
                f"drop {method.flag}, or use one of those tasks",
            )
        for mode in (m for m in modes if m in method.refused_modes):
            raise BertkitError(f"{method.flag} does not compose with {mode_flag(mode)}", f"drop {mode_flag(mode)}")
    for i, first in enumerate(methods):
        for second in methods[i + 1 :]:  # a newer method declares what it composes with; one side is enough
            if second.name not in first.composes_with and first.name not in second.composes_with:
                raise BertkitError(
                    f"{second.flag} does not compose with {first.flag}",
                    "drop one of them (docs: training-methods.md lists what combines)",
                )
    if len(trainers) != 1:  # the registry's own consistency: one method says what trains
        raise ValueError(f"a run needs exactly one training recipe, got {[m.name for m in trainers]}")


def planned_methods(plan, added: list | tuple = (), modes: tuple = (SINGLE,)) -> list[Method]:
    """The run's methods, checked against each other, the task, the run modes and the plan's options:
    everything that refuses a combination before any data is read or model loaded."""
    methods = chosen_methods(plan.config, added)
    check_methods(methods, plan.task, modes)
    for method in methods:
        method.check_plan(plan)
    return methods


def mode_flag(mode: str) -> str:
    return {"seeds": "--seeds", "folds": "--folds", "tune": "bertkit tune", "resume": "--save-every/--resume"}.get(
        mode, mode
    )


def recorded_methods(meta: dict) -> list[type[Method]]:
    """The method classes a saved directory's bertkit.json says trained it."""
    names = meta.get("methods")
    if names:
        return [get_method(name) for name in names if name in METHODS]
    return [cls for cls in method_classes() if cls.recorded_in(meta)]  # older directories: by their sections
