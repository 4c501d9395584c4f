"""`bertkit finetune multi`'s own options: its heads and how batches are drawn from them (the run's
other options are finetune's RunOptions and TrainConfig, shared by every head)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from bertkit.errors import BertkitError
from bertkit.options.base import DATA_PANEL, OUTPUT_PANEL, REQUIRED, TRAINING_PANEL, option
from bertkit.tasks.multihead import HEAD_KINDS, SAMPLINGS, check_heads, parse_head

__all__ = ["HeadExportOptions", "MultiOptions"]


@dataclass
class MultiOptions:
    heads: list[str] | None = option(
        None,
        "A head: NAME:KIND:DATA, then its own :key=value pairs (weight=W, eval_data=PATH, its task's reading "
        f"options); repeatable, one per head. KIND: {', '.join(HEAD_KINDS)}.",
        DATA_PANEL,
        flag="--task",
        metavar="NAME:KIND:DATA",
    )
    sampling: str = option(
        "proportional",
        f"Which head each batch comes from: {', '.join(SAMPLINGS)} (temperature: n^(1/T), MT-DNN's).",
        TRAINING_PANEL,
    )
    temperature: float = option(2.0, "--sampling temperature's T (1: proportional; larger evens the heads).")
    from_dir: str | None = option(
        None,
        "Add the --task heads to this trained multi-head directory: they train over its encoder, its heads are "
        "kept (each scored before and after: the forgetting is recorded).",
        DATA_PANEL,
        flag="--from",
        metavar="DIR",
    )
    freeze_encoder: bool = option(
        False,
        "With --from: train the new heads' own layers only; the encoder and the heads it has stay as they are.",
        TRAINING_PANEL,
        flag=True,
    )

    def validate(self) -> "MultiOptions":
        if self.sampling not in SAMPLINGS:
            raise BertkitError(
                f"--sampling {self.sampling!r} is not one of {', '.join(SAMPLINGS)}",
                f"use one of {', '.join(SAMPLINGS)}",
            )
        if (
            not (isinstance(self.temperature, (int, float)) and math.isfinite(self.temperature))
            or self.temperature <= 0
        ):
            raise BertkitError(f"--temperature {self.temperature} is not positive", "e.g. --temperature 2")
        if self.freeze_encoder and self.from_dir is None:
            raise BertkitError("--freeze-encoder applies with --from (adding heads)", "add --from DIR, or drop it")
        self.specs()
        return self

    def specs(self) -> list:
        """The heads, parsed and checked (names once each, at least one)."""
        return check_heads([parse_head(text) for text in self.heads or ()])


@dataclass
class HeadExportOptions:
    """`bertkit export head DIR NAME`: where the one-task directory goes."""

    output: str = option(REQUIRED, "The one-task model directory to create.", OUTPUT_PANEL)
    overwrite: bool = option(
        False,
        "Replace an existing model directory written by bertkit; other directories are never replaced.",
        OUTPUT_PANEL,
        flag=True,
    )
