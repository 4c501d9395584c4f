"""What every options family shares: the field helper, the panels, and ONE check per rule.

Each rule a value must follow (a batch size >= 1, the max-length range, a known precision, a
thread count) is a function here; every family's ``validate()`` calls it, so the rule and its
message exist once. Nothing here imports torch: the CLI reads these modules to build its --help.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from bertkit.errors import BertkitError

PRECISIONS = ("auto", "no", "fp16", "bf16")
DATA_PANEL, MODEL_PANEL, TRAINING_PANEL, OUTPUT_PANEL = "Data", "Model and output", "Training", "Output"
LONG_PANEL = "Long runs: steps, checkpoints, resume (docs: scale.md)"
INFERENCE_PANEL = "Inference"
LORA_PANEL = "LoRA adapters (docs: lora.md)"
CALIBRATION_PANEL = "Calibration (docs: calibration.md)"
MAX_SEED = 2**32 - 1  # numpy's seeds, which set_seed passes the seed to, end there
MIN_LENGTH, MAX_LENGTH = 8, 8192  # below 8 no text fits beside the special tokens; 8192: the longest models
REQUIRED = ...  # a field without a default: a required option on the command line
PRECISION_HELP = (
    "auto: bf16 where the hardware has it natively (CPU avx512_bf16 or amx_bf16, recent GPUs, TPU), "
    "else no (fp32); bf16; fp16 (GPU)."
)
THREADS_HELP = "CPU threads for torch; default $OMP_NUM_THREADS, else every core (shared machine: docs/scale.md)."
INFERENCE_BATCH = 64  # rows per forward pass of a frozen model: eval, predict, embed, probe, serve
RUNS_DIR = "runs"  # where a command that writes a model puts it when --output is not given


def option(
    default,
    help: str,
    panel: str = TRAINING_PANEL,
    choices: tuple = (),
    flag: bool | str = False,
    metavar: str | None = None,
):
    """A field the CLI turns into ``--name`` (``flag``: a bool given as a bare ``--name``, or as the
    bare flag it names, e.g. "--json" for a field that cannot be called ``json``)."""
    return field(
        default=default, metadata={"help": help, "panel": panel, "choices": choices, "flag": flag, "metavar": metavar}
    )


# The defaults and help of the options several families take, one row per family: a family's
# field is ``batch_size_option("training")``, so the value a command shows is written here only.
BATCH_SIZES = {
    "training": (32, "Training batch size per device, before accumulation (BERT paper: 16 or 32)."),
    "inference": (INFERENCE_BATCH, "Inference batch size."),
    "probing": (INFERENCE_BATCH, "Inference batch size for the frozen encoder."),
    "serving": (INFERENCE_BATCH, "Largest model batch; concurrent requests are batched together."),
}
# --calibration-data: a held-out labelled file, read for what each command calibrates
CALIBRATION_DATA = {
    "training": "With --calibrate: a held-out labelled file to fit the temperature on instead of the dev split.",
    "coverage": "With --coverage: a held-out labelled file to compute the conformal scores on (default: the "
    "scores stored by calibrate).",
}


def calibration_data_option(purpose: str, panel: str = CALIBRATION_PANEL):
    return option(None, CALIBRATION_DATA[purpose], panel, metavar="FILE")


TRUNCATED = "Longer inputs are truncated (and it is said so)."
MAX_LENGTHS = {  # None: the command picks (the task's default; the probe's 128)
    "training": (None, "Max tokens per sequence; default: the task's."),
    "probing": (None, "Max tokens per row (truncated, as in finetune); default 128."),
    "pretraining": (None, "Tokens per block, [CLS] and [SEP] included; default 128."),
    "embedding": (128, "Tokens per window; longer inputs become overlapping windows."),
    "retrieval": (256, "Tokens per window of a query or passage; a longer one becomes windows averaged, as embed."),
    "inspect attention": (128, TRUNCATED),
    "inspect tokens": (512, TRUNCATED),
}


@dataclass
class DatasetOptions:
    """Which config and splits of a `datasets` dataset --data names (a Hub id, a directory in the
    Hub's layout or written by save_to_disk): every command that reads --data takes them."""

    data_config: str | None = option(
        None, "Config (subset) of a Hub dataset given as --data; default: its only or default one.", DATA_PANEL
    )
    train_split: str | None = option(None, "Split of a Hub dataset to train on; default train.", DATA_PANEL)
    eval_split: str | None = option(
        None, "Split of a Hub dataset to evaluate on; default validation, else dev, else test.", DATA_PANEL
    )
    test_split: str | None = option(
        None, "Split of a Hub dataset that is its test split (eval --split test); default test.", DATA_PANEL
    )


def batch_size_option(family: str, panel: str = INFERENCE_PANEL):
    default, help_text = BATCH_SIZES[family]
    return option(default, help_text, panel)


def max_length_option(family: str, panel: str = INFERENCE_PANEL):
    default, help_text = MAX_LENGTHS[family]
    return option(default, help_text, panel)


def precision_option(panel: str = INFERENCE_PANEL):
    return option("auto", PRECISION_HELP, panel, choices=PRECISIONS)


def threads_option(panel: str = INFERENCE_PANEL):
    return option(None, THREADS_HELP, panel)


def fail(message: str, command: str) -> None:
    raise BertkitError(message, f"see `{command} --help` for the accepted values")


def check_at_least(value, flag: str, command: str, minimum: int = 1) -> None:
    """An optional count (None: not given) or a given one of at least ``minimum``."""
    if value is not None and value < minimum:
        fail(f"{flag} must be >= {minimum}, got {value}", command)


def check_batch_size(value: int, command: str, flag: str = "--batch-size") -> None:
    check_at_least(value, flag, command)


def check_max_length(value: int | None, command: str) -> None:
    """None: the command's own default (the task's, the model's)."""
    if value is not None and not MIN_LENGTH <= value <= MAX_LENGTH:
        fail(f"--max-length must be between {MIN_LENGTH} and {MAX_LENGTH}, got {value}", command)


def check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise BertkitError(f"unknown --precision {precision!r}", f"use one of {', '.join(PRECISIONS)}")


def check_threads(threads: int | None, command: str) -> None:
    """The thread rule depends on the machine (4 per usable core): bertkit.engine.threads owns it."""
    from bertkit.engine.threads import check

    check(threads, command.removeprefix("bertkit "))


def check_choice(value, choices: tuple, flag: str) -> None:
    if value not in choices:
        raise BertkitError(f"unknown {flag} {value!r}", f"use one of {', '.join(map(str, choices))}")


def default_output(data: str, prefix: str) -> str:
    """runs/<prefix><data's name>: the model directory of a run whose --output was not given."""
    return os.path.join(RUNS_DIR, f"{prefix}{os.path.splitext(os.path.basename(data))[0]}")
