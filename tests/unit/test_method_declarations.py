"""Every combination of training methods with everything else a run can be, checked by declaration.

The walk: recipes (bertkit/methods/ registry: finetune, setfit) x LoRA (off, merged, --save-adapter)
x distillation (off, on) x --calibrate (off, on) x every registered task x its label kinds (--problem-type) x its input
options (--long-text, --context) x the run modes (one run, --seeds, --folds, bertkit tune,
--save-every/--resume). For each, ``planned_methods`` (what `bertkit finetune` and `distill` call
before reading any data) either accepts it or refuses it in one line that names both parts. The
rules below are the product's promise, written out independently of the methods' declarations: a
combination the code accepts that this table refuses (or the reverse) fails, so nothing is silently
ignored and nothing is refused by accident. Accepted combinations train in
tests/cli/test_method_combinations.py, one representative per shared code path.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from bertkit.errors import BertkitError
from bertkit.methods import METHODS, MODES, planned_methods
from bertkit.methods.base import FOLDS, RESUME, SEEDS, SINGLE, TUNE
from bertkit.methods.distillation import Distillation
from bertkit.options import TrainConfig
from bertkit.options.distillation import DistillOptions
from bertkit.tasks import PRETRAINING_TASKS, TASKS, get_task_class
from bertkit.tasks.label_kinds import KINDS

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class Combination:
    recipe: str  # finetune | setfit
    lora: str  # off | merged | adapter
    distill: bool
    task: str
    calibrate: bool
    kind: str | None  # --problem-type (cls, pair), else None
    reads: tuple  # the input options: (("long_text", "windows"),) ...
    mode: str

    @property
    def name(self) -> str:
        parts = [self.recipe, f"lora-{self.lora}", "distill" if self.distill else "", "calibrate" * self.calibrate]
        parts += [self.task, self.kind or ""]
        parts += [f"{k}={v}" for k, v in self.reads] + [self.mode]
        return "/".join(p for p in parts if p)


def input_choices(task: str) -> list[tuple]:
    declared = {option.name for option in get_task_class(task).options_for("finetune")}
    if "long_text" in declared:
        return [(), (("long_text", "head-tail"),), (("long_text", "windows"),)]
    if "context" in declared:
        return [(), (("context", "document"),)]
    return [()]


def combinations() -> list[Combination]:
    found = []
    for task in TASKS:
        declared = {option.name for option in get_task_class(task).options_for("finetune")}
        kinds = list(KINDS) if "problem_type" in declared else [None]
        recipes = ("finetune", "setfit") if "recipe" in declared else ("finetune",)
        for recipe, lora, distill, calibrate, kind, reads, mode in itertools.product(
            recipes, ("off", "merged", "adapter"), (False, True), (False, True), kinds, input_choices(task), MODES
        ):
            found.append(Combination(recipe, lora, distill, task, calibrate, kind, reads, mode))
    return found


def refusals(c: Combination) -> list[tuple]:
    """The pairs of parts that do not compose in ``c`` (empty: accepted); a refusal names one pair.
    The product's rules, one line each."""
    found = []
    if c.recipe == "setfit":
        found += [("--lora", "--recipe setfit")] if c.lora != "off" else []
        found += [("bertkit distill", "--recipe setfit")] if c.distill else []
        found += [("--recipe setfit", c.kind)] if c.kind in ("regression", "multi-label") else []
        found += [("--recipe setfit", "--long-text windows")] if ("long_text", "windows") in c.reads else []
        found += [("--recipe setfit", "--folds")] if c.mode == FOLDS else []
        found += [("--recipe setfit", "--save-every/--resume")] if c.mode == RESUME else []
    found += [("--lora", c.task)] if c.lora != "off" and c.task in PRETRAINING_TASKS else []
    if c.distill:
        found += [("bertkit distill", c.task)] if c.task not in ("cls", "pair", "ner") else []
        found += [("bertkit distill", c.kind)] if c.kind in ("regression", "multi-label") else []
        found += [("--save-adapter", "bertkit distill")] if c.lora == "adapter" else []
    if c.calibrate:  # one temperature over one softmax, fitted on the kept model's held-out rows
        found += [("--calibrate", c.task)] if c.task not in ("cls", "pair") else []
        found += [("--calibrate", c.kind)] if c.kind in ("regression", "multi-label") else []
        found += [("--calibrate", "--recipe setfit")] if c.recipe == "setfit" else []
        found += [("--calibrate", "--folds")] if c.mode == FOLDS else []
        found += [("--calibrate", "bertkit tune")] if c.mode == TUNE else []
    return found


def plan_of(c: Combination) -> tuple:
    """(a plan as finetune's plan_run makes it, the methods a command adds, the run's modes)."""
    options = {"recipe": c.recipe} if c.recipe != "finetune" else {}
    options.update(dict(c.reads))
    if c.kind:
        options["problem_type"] = c.kind
    lora = {"lora": 4, "save_adapter": c.lora == "adapter"} if c.lora != "off" else {}
    config = TrainConfig(task_options=options, calibrate=c.calibrate, **lora).validate("bertkit finetune")
    adapter = get_task_class(c.task)(None, dict(options))
    plan = SimpleNamespace(task=c.task, adapter=adapter, config=config, model="tiny")
    added = []
    if c.distill:
        meta = {"task": {"task": c.task, "labels": ["a", "b"], "options": {}}}
        added.append(Distillation("teacher", meta, 2, DistillOptions(), [0], Path("out")))
    modes = {FOLDS: (FOLDS,), RESUME: (SINGLE, RESUME), TUNE: (SINGLE, TUNE), SEEDS: (SINGLE,)}.get(c.mode, (c.mode,))
    return plan, added, modes


def test_every_combination_is_accepted_or_refused_in_one_line_naming_both_parts():
    counts, wrong = Counter(), []
    for c in combinations():
        plan, added, modes = plan_of(c)
        expected = refusals(c)
        try:
            methods = planned_methods(plan, added, modes)
        except BertkitError as exc:
            counts["refused"] += 1
            text = exc.message
            if not expected:
                wrong.append(f"{c.name}: refused ({text})")
            elif "\n" in text or not any(all(part in text for part in pair) for pair in expected):
                wrong.append(f"{c.name}: the refusal {text!r} names none of {expected} in one line")
            continue
        counts["accepted"] += 1
        if expected:
            wrong.append(f"{c.name}: accepted, but {expected[0][0]} does not compose with {expected[0][1]}")
        names = [m.name for m in methods]
        wanted = [c.recipe] + (["lora"] if c.lora != "off" else []) + (["distill"] if c.distill else [])
        wanted += ["calibrate"] if c.calibrate else []
        if sorted(names) != sorted(wanted):  # what the run will record is what was asked for
            wrong.append(f"{c.name}: the run's methods are {names}, not {wanted}")
    assert not wrong, f"{len(wrong)} combinations wrong:\n" + "\n".join(wrong[:20])
    assert counts["accepted"] > 300 and counts["refused"] > 300, counts
    print(f"method combinations: {counts['accepted']} accepted, {counts['refused']} refused, 0 ignored")


def test_every_method_is_registered_under_its_name_and_composes_only_with_known_methods():
    from bertkit.methods import get_method

    classes = {name: get_method(name) for name in METHODS}
    assert all(cls.name == name for name, cls in classes.items())
    assert [name for name, cls in classes.items() if cls.replaces_training] == ["setfit"]
    for name, cls in classes.items():
        for other in cls.composes_with:
            assert other in classes and other != name, f"{name} composes with {other}, which is not another method"


def test_every_file_a_method_writes_is_one_bertkit_may_replace():
    """model_dir/ownership.py decides what --overwrite may delete: a method's own files included."""
    import fnmatch

    from bertkit.methods import method_classes
    from bertkit.model_dir.ownership import OURS

    for cls in method_classes():
        for name in cls.owned_files:
            assert any(fnmatch.fnmatchcase(name, pattern) for pattern in OURS), (cls.name, name)


def test_the_finetune_spine_names_no_method():
    """api/finetuning.py calls the hooks; which methods exist is the registry's business alone."""
    import re

    spine = (Path(__file__).resolve().parents[2] / "bertkit" / "api" / "finetuning.py").read_text().lower()
    named = sorted({word for word in re.findall(r"[a-z_]+", spine) if word in ("lora", "setfit", "distill", "teacher")})
    assert not named, f"api/finetuning.py names {named}"
