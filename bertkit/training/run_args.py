"""What the commands that wrap finetune (seeds, folds, tune, pretrain) share about a RunOptions."""

from __future__ import annotations

from bertkit.options import RunOptions, default_output


def output_of(run: RunOptions, prefix: str) -> str:
    """--output, or runs/<prefix><data's name> when it was not given (as the command line does)."""
    return run.output or default_output(run.data, prefix)
