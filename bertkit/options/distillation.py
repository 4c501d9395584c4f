"""`bertkit distill`'s own options: which student, how the teacher's outputs weigh in the loss, and
text the teacher labels. Its training options are finetune's (TrainConfig, RunOptions but --model)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.options.base import DATA_PANEL, MODEL_PANEL, option

DISTILL_PANEL = "Distillation"
HIDDEN_LOSSES = ("mse", "cosine")


@dataclass
class DistillOptions:
    """The student and the loss: alpha * T^2 * KL(teacher_T || student_T) + (1 - alpha) * gold loss."""

    student: str | None = option(
        None,
        "A smaller checkpoint (Hub name, directory, 'minilm') with the teacher's vocabulary; "
        "default: the teacher with --student-layers layers.",
        MODEL_PANEL,
    )
    student_layers: int | None = option(
        None,
        "The student is the teacher's encoder with N layers (layers i*L//N of the teacher's L, as DistilBERT "
        "took every other one); default: half the teacher's, when no --student is given.",
        MODEL_PANEL,
    )
    temperature: float = option(
        2.0, "Softmax temperature of the soft targets (> 0; Hinton et al. 2015).", DISTILL_PANEL
    )
    alpha: float = option(
        0.5, "Weight of the soft-target loss; 1 - alpha weighs the gold labels' loss (0..1).", DISTILL_PANEL
    )
    hidden_loss: str | None = option(
        None,
        "Also match the mapped layers' hidden states (mse or cosine; the student's width must be the teacher's).",
        DISTILL_PANEL,
        choices=HIDDEN_LOSSES,
    )
    hidden_weight: float = option(1.0, "Weight of --hidden-loss in the loss (>= 0).", DISTILL_PANEL)
    unlabelled: str | None = option(
        None,
        "Unlabelled text the teacher labels (one per line, or a file of the task's columns without labels); "
        "trained on the soft targets only (Tang et al. 2019). cls and pair.",
        DATA_PANEL,
    )
    augment: int = option(
        0,
        "Also N rewritten variants of each training row (words masked or swapped, n-grams cut out; Tang et al. "
        "2019) for the teacher to label; trained on the soft targets only. cls and pair.",
        DATA_PANEL,
    )
    plain_student: bool = option(
        False,
        "Also train the same student without the teacher (gold labels only; same data, steps and seed) and "
        "warn when the distilled student does not beat it: the baseline of distillation. About doubles the time.",
        DISTILL_PANEL,
    )

    def validate(self, command: str = "bertkit distill") -> "DistillOptions":
        """Every rule that needs no file or model: before anything is read or written."""
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise BertkitError(
                f"--temperature must be > 0, got {self.temperature}", "2 (the default) softens the teacher's outputs"
            )
        if not (math.isfinite(self.alpha) and 0 <= self.alpha <= 1):
            raise BertkitError(
                f"--alpha must be between 0 and 1, got {self.alpha}",
                "1 trains on the teacher's outputs only, 0 on the gold labels only",
            )
        if not (math.isfinite(self.hidden_weight) and self.hidden_weight >= 0):
            raise BertkitError(f"--hidden-weight must be >= 0, got {self.hidden_weight}", "1 is the default")
        if self.student_layers is not None and self.student_layers < 1:
            raise BertkitError(f"--student-layers must be >= 1, got {self.student_layers}", "e.g. --student-layers 3")
        if self.student is not None and self.student_layers is not None:
            raise BertkitError(
                "--student and --student-layers name two students", "give one: a checkpoint, or the teacher's layers"
            )
        if self.hidden_loss is not None and self.hidden_loss not in HIDDEN_LOSSES:
            raise BertkitError(f"unknown --hidden-loss {self.hidden_loss!r}", f"use one of {', '.join(HIDDEN_LOSSES)}")
        if self.unlabelled is not None:
            check_unlabelled_file(self.unlabelled)
        if not 0 <= self.augment <= 100:
            raise BertkitError(f"--augment must be between 0 and 100 variants a row, got {self.augment}", "e.g. 4")
        if (self.augment or self.unlabelled) and self.alpha == 0:  # those rows have soft targets only
            flag = "--augment" if self.augment else "--unlabelled"
            raise BertkitError(
                f"{flag} adds rows the teacher labels, and --alpha 0 gives the teacher's labels no weight",
                f"raise --alpha, or drop {flag}",
            )
        return self


def check_unlabelled_file(path: str) -> None:
    """--unlabelled names a readable file with at least one non-blank line."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise BertkitError(f"--unlabelled {path}: no such file", "give a text file, one example per line")
    with file.open("rb") as handle:
        if not any(line.strip() for line in handle):
            raise BertkitError(f"--unlabelled {path} is empty", "give a text file, one example per line")
