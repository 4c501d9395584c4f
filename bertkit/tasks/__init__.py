"""The task registry: adding a task means one module plus one line here."""

from __future__ import annotations

import importlib

from bertkit.errors import BertkitError

# name -> "module:Class"; imported lazily so `bertkit --help` stays instant.
TASKS = {
    "cls": "bertkit.tasks.classification:SingleSentenceTask",
    "pair": "bertkit.tasks.classification:SentencePairTask",
    "ner": "bertkit.tasks.tagging:TaggingTask",
    "qa": "bertkit.tasks.qa:QuestionAnsweringTask",
    "mlm": "bertkit.tasks.mlm:MaskedLMTask",
}
# Tasks trained by their own command (`bertkit pretrain mlm`), not by `bertkit finetune`.
PRETRAINING_TASKS = ("mlm",)
FINETUNE_TASKS = tuple(name for name in TASKS if name not in PRETRAINING_TASKS)


def get_task_class(name: str):
    if name not in TASKS:
        raise BertkitError(f"unknown task {name!r}", f"tasks: {', '.join(TASKS)}")
    module_name, class_name = TASKS[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)


def task_from_state(state: dict):
    """Rebuild a configured task from the ``task`` section of a model's bertkit.json."""
    return get_task_class(state["task"])(state["max_length"], state.get("options"), state.get("labels"))
