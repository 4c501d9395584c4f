"""Plain fine-tuning (Devlin et al., 2019): the task model and its head trained together on the
task's loss. Every hook keeps the spine's default; it is the recipe a run uses unless another
method trains something else (``Method.replaces_training``)."""

from __future__ import annotations

from bertkit.methods.base import Method
from bertkit.tasks.few_shot import FINETUNE, recipe_of


class FineTuning(Method):
    name = "finetune"
    flag = "--recipe finetune"
    composes_with = ("lora", "distill")

    @classmethod
    def requested(cls, config) -> bool:
        return recipe_of(config.task_options) == FINETUNE
