"""The task registry: a task is one module (a ``Task`` subclass) plus one registry entry.

Built-in tasks are listed below; any other module adds its own with ``register(name, TaskClass)``.
Such a module is imported when bertkit starts if it is named in ``BERTKIT_TASK_MODULES``
(comma-separated module names) or published as a ``bertkit.tasks`` entry point by an installed
package, so a saved model of that task loads in every process (eval, predict, serve).
"""

from __future__ import annotations

import importlib
import os

from bertkit.errors import BertkitError

MODULES_ENV = "BERTKIT_TASK_MODULES"
ENTRY_POINT_GROUP = "bertkit.tasks"

# name -> "module:Class" (imported lazily so `bertkit --help` stays instant) or a Task class
TASKS: dict = {
    "cls": "bertkit.tasks.classification:SingleSentenceTask",
    "pair": "bertkit.tasks.classification:SentencePairTask",
    "ner": "bertkit.tasks.tagging:TaggingTask",
    "qa": "bertkit.tasks.qa:QuestionAnsweringTask",
    "mlm": "bertkit.tasks.mlm:MaskedLMTask",
    "embedding": "bertkit.tasks.embedding:EmbeddingTask",
    "rerank": "bertkit.tasks.rerank:RerankTask",
    "bert": "bertkit.tasks.bert_pretraining:BertPretrainingTask",
}
# Tasks trained by their own command (`bertkit pretrain mlm|bert`), not by `bertkit finetune`.
PRETRAINING_TASKS = {"mlm", "bert"}
FINETUNE_TASKS = tuple(name for name in TASKS if name not in PRETRAINING_TASKS)  # the built-in ones
_plugins_loaded = False


def register(name: str, task, finetune: bool = True) -> None:
    """Add a task: ``task`` is a Task subclass or a "module:Class" string. ``finetune`` False keeps
    it out of `bertkit finetune` (a task trained by a command of its own)."""
    if not name.isidentifier():
        raise ValueError(f"task name {name!r} must be an identifier")
    TASKS[name] = task
    if finetune:
        PRETRAINING_TASKS.discard(name)
    else:
        PRETRAINING_TASKS.add(name)


def finetune_tasks() -> tuple:
    """Every task `bertkit finetune` offers, registered plug-ins included."""
    load_plugins()
    return tuple(name for name in TASKS if name not in PRETRAINING_TASKS)


def load_plugins() -> None:
    """Import the task modules named by the environment and by installed packages (once)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from importlib.metadata import entry_points

    for entry in entry_points(group=ENTRY_POINT_GROUP):
        TASKS.setdefault(entry.name, entry.value)
    for module in filter(None, (m.strip() for m in os.environ.get(MODULES_ENV, "").split(","))):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise BertkitError(
                f"{MODULES_ENV} names {module!r}, which cannot be imported ({exc})",
                f"fix {MODULES_ENV} or the module's location (PYTHONPATH)",
            ) from exc


def get_task_class(name: str):
    load_plugins()
    if name not in TASKS:
        raise BertkitError(f"unknown task {name!r}", f"tasks: {', '.join(TASKS)}")
    target = TASKS[name]
    if not isinstance(target, str):
        return target
    module_name, class_name = target.split(":")
    return getattr(importlib.import_module(module_name), class_name)


def task_from_state(state: dict):
    """Rebuild a configured task from the ``task`` section of a model's bertkit.json."""
    if state["task"] == "multi":  # bertkit finetune multi's directory: a task per head (tasks/multihead.py)
        raise BertkitError(
            "this is a multi-head model (bertkit finetune multi); this command does not take one yet",
            "use bertkit eval or predict (every head), or bertkit export head DIR NAME (a one-task directory)",
        )
    return get_task_class(state["task"])(state["max_length"], state.get("options"), state.get("labels"))
