"""The options of `bertkit audit`: where each row's out-of-sample probabilities come from (folds run
here, a `finetune --folds` run's file, or a trained model scoring held-out rows) and what it writes.
With --folds it also takes the training family's hyperparameters (TrainConfig)."""

from __future__ import annotations

from dataclasses import dataclass

from bertkit.errors import BertkitError
from bertkit.options.base import (
    DATA_PANEL,
    MODEL_PANEL,
    OUTPUT_PANEL,
    REQUIRED,
    check_choice,
    option,
    threads_option,
)

AUDIT_TASKS = ("cls", "pair", "ner")
RELABEL_FORMATS = ("label-studio", "doccano")  # the annotation tool the flagged rows go to
MAX_AUDIT_FOLDS = 100  # as finetune --folds
# the training settings audit --folds takes (TrainConfig's fields); the others stay finetune's defaults
FOLD_SETTINGS = ("epochs", "lr", "batch_size", "max_length", "seed", "max_train_samples")


@dataclass
class AuditOptions:
    """What `bertkit audit` reads, where its probabilities come from and where it writes."""

    data: str = option(
        REQUIRED,
        "The labelled rows to audit: a file (CSV/TSV, JSONL, CoNLL, an annotation tool's export) or a "
        "known dataset's name (its training split).",
        DATA_PANEL,
    )
    output: str = option(
        REQUIRED,
        "Output directory: ranked.jsonl and ranked.csv (every row, most suspicious first), summary.json, "
        "the flagged rows as tasks to relabel (relabel-label-studio.json or relabel-doccano.jsonl).",
        OUTPUT_PANEL,
    )
    format: str = option(
        "label-studio",
        "The annotation tool the flagged rows go to: label-studio (the given label as the annotation, the "
        "model's as the prediction) or doccano (the given label, the model's in the task's metadata).",
        OUTPUT_PANEL,
        choices=RELABEL_FORMATS,
    )
    folds: int | None = option(
        None,
        "Fine-tune --model on K folds here (finetune --folds K) for each row's out-of-fold probabilities.",
        DATA_PANEL,
    )
    task: str | None = option(None, "With --folds: the task to fine-tune (cls, pair, ner).", MODEL_PANEL)
    model: str | None = option(
        None,
        "With --folds: the checkpoint each fold fine-tunes (alias, directory, Hub name). Without: a trained "
        "bertkit model directory that scores --data (rows it did not train on).",
        MODEL_PANEL,
    )
    from_run: str | None = option(
        None,
        "A `finetune --folds` run's model directory: audit its out-of-fold predictions of --data.",
        MODEL_PANEL,
        flag="--from",
        metavar="RUN_DIR",
    )
    data_issues: bool = option(
        True,
        "Also report near-duplicate rows with different labels and outliers (cleanlab Datalab on the model's "
        "mean-pooled vectors of the rows).",
        OUTPUT_PANEL,
        flag="--data-issues/--no-data-issues",
    )
    overwrite: bool = option(False, "Replace an earlier audit in --output.", OUTPUT_PANEL, flag=True)
    threads: int | None = threads_option(MODEL_PANEL)

    def check_settings(self, config) -> None:
        """A training setting (TrainConfig) applies with --folds only: given without it, refused."""
        if self.folds is not None or config is None:
            return
        from bertkit.options.training import TrainConfig

        default = TrainConfig()
        for name in FOLD_SETTINGS[:-1]:  # --max-train-samples: the rows audited, whatever the source
            if getattr(config, name) != getattr(default, name):
                raise BertkitError(
                    f"--{name.replace('_', '-')} is a training setting; it applies with --folds only",
                    f"drop --{name.replace('_', '-')}, or add --folds K",
                )

    def validate(self, command: str = "bertkit audit") -> "AuditOptions":
        check_choice(self.format, RELABEL_FORMATS, "--format")
        sources = [name for name, given in (("--folds", self.folds), ("--from", self.from_run)) if given is not None]
        if len(sources) > 1:
            raise BertkitError(
                "--folds trains new folds and --from reads a run's folds: give one", "drop --folds or --from"
            )
        if self.folds is not None:
            if not isinstance(self.folds, int) or not 2 <= self.folds <= MAX_AUDIT_FOLDS:
                raise BertkitError(
                    f"--folds must be between 2 and {MAX_AUDIT_FOLDS}, got {self.folds}", "e.g. --folds 5"
                )
            if self.task is None or self.model is None:
                raise BertkitError(
                    "--folds fine-tunes a model per fold: it needs --task and --model", "e.g. --task cls --model minilm"
                )
            check_choice(self.task, AUDIT_TASKS, "--task")
        elif self.task is not None:
            raise BertkitError("--task applies with --folds (a trained model or run knows its task)", "drop --task")
        if self.from_run is not None and self.model is not None:
            raise BertkitError(
                "--from reads a run's out-of-fold predictions; --model would score --data again",
                "drop --model or --from",
            )
        if not sources and self.model is None:
            raise BertkitError(
                "bertkit audit needs out-of-sample probabilities",
                "give --folds K --task cls --model minilm, --from RUN_DIR, or --model DIR with held-out --data",
            )
        return self
