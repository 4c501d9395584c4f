"""A RunOptions as the keyword arguments ``finetune`` takes today.

The commands that wrap finetune (seeds, folds, tune, pretrain) take a RunOptions and a TrainConfig,
as the rest of the API takes its options objects; ``finetune`` itself is being converted
separately, and once it takes a RunOptions this module goes.
"""

from __future__ import annotations

from bertkit.options import RunOptions, default_output

# what finetune takes from a RunOptions besides data, output and overwrite (each wrapper sets those)
FINETUNE_RUN = ("model", "eval_data", "data_dir", "threads", "report_to", "resume", "resume_from")


def finetune_keywords(run: RunOptions) -> dict:
    return {name: getattr(run, name) for name in FINETUNE_RUN}


def output_of(run: RunOptions, prefix: str) -> str:
    """--output, or runs/<prefix><data's name> when it was not given (as the command line does)."""
    return run.output or default_output(run.data, prefix)
