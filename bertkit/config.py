"""Kept for the code that imports it: the options live in bertkit.options (one module per family)."""

from bertkit.options.base import MAX_SEED, PRECISION_HELP, PRECISIONS, THREADS_HELP, check_precision, option
from bertkit.options.inference import InferenceOptions
from bertkit.options.training import RepeatOptions, RunOptions, TrainConfig, TuneOptions, parse_seeds

__all__ = [
    "MAX_SEED",
    "PRECISION_HELP",
    "PRECISIONS",
    "THREADS_HELP",
    "InferenceOptions",
    "RepeatOptions",
    "RunOptions",
    "TrainConfig",
    "TuneOptions",
    "check_precision",
    "option",
    "parse_seeds",
]
