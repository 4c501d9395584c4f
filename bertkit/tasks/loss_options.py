"""Losses for imbalanced classes: ``--class-weights auto|none|FILE`` and ``--loss focal``.

The HF Trainer has no class-weight option (transformers#7024, #9625): users subclass
``compute_loss``. Here a task that has classes (cls and pair with one or several labels, ner)
declares these options and trains through ``networks.losses.TrainingLoss`` (a ``LossSpec``) when one is set;
without them the model's own loss runs, unchanged.

``auto`` weights: for one label per row (and per token, -100 ignored), scikit-learn's "balanced"
rule ``w_c = N / (C * n_c)``, so that the weighted count of every class is the same and the mean
weight per example stays 1; for multi-label, each label's ``pos_weight = sqrt(negatives /
positives)``. The full ratio (the example in PyTorch's BCEWithLogitsLoss docs) made MiniLM on 4,000
GoEmotions comments predict nearly every rare label (micro recall 0.89, precision 0.10 at 0.5);
the square root moves each label's log-odds half as far.
The weights used are printed and stored in bertkit.json (task options, ``class_weight_values``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bertkit.errors import BertkitError
from bertkit.tasks.base import TaskOption
from bertkit.tasks.panels import LOSS_PANEL
from bertkit.tasks.training_spec import LossSpec

LOSSES = ("cross-entropy", "focal")
CLASS_WEIGHTS = TaskOption(
    "class_weights",
    str,
    "auto (inverse frequency), none, or a JSON file {label: weight}.",
    ("finetune",),
    panel=LOSS_PANEL,
)
LOSS = TaskOption(
    "loss",
    str,
    f"{' | '.join(LOSSES)} (focal: Lin et al. 2017, down-weights easy examples).",
    ("finetune",),
    "cross-entropy",
    panel=LOSS_PANEL,
)
FOCAL_GAMMA = TaskOption(
    "focal_gamma", float, "Focusing parameter of --loss focal (0 = cross-entropy).", ("finetune",), 2.0, LOSS_PANEL
)
WEIGHT_VALUES = TaskOption("class_weight_values", list, "The class weights training used (stored).", ())
LOSS_OPTIONS = (CLASS_WEIGHTS, LOSS, FOCAL_GAMMA, WEIGHT_VALUES)


def check_loss_options(options: dict, has_classes: bool) -> None:
    """Before any data is read: the values are known ones, and the task has classes to weight."""
    weights, loss = options.get("class_weights"), options.get("loss") or "cross-entropy"
    if loss not in LOSSES:
        raise BertkitError(f"unknown --loss {loss!r}", f"use one of {', '.join(LOSSES)}")
    if options.get("focal_gamma") is not None and not 0 <= options["focal_gamma"] <= 10:
        raise BertkitError(f"--focal-gamma must be between 0 and 10, got {options['focal_gamma']}", "2 is usual")
    if weights not in (None, "none", "auto") and not Path(weights).expanduser().is_file():
        raise BertkitError(
            f"--class-weights {weights}: not auto, none or an existing file",
            'give a JSON file like {"negative": 1.0, "positive": 2.5}',
        )
    if not has_classes and (weights not in (None, "none") or loss != "cross-entropy"):
        raise BertkitError(
            "--class-weights and --loss focal apply to classes, and this is a regression model", "leave them out"
        )


def loss_notices(options: dict) -> list[str]:
    """Options given that change nothing without another: said, not silently ignored. Only a value
    other than the default is said, since a replayed config.yaml carries every option's default."""
    gamma = options.get("focal_gamma")
    if gamma is not None and gamma != FOCAL_GAMMA.default and options.get("loss") != "focal":
        return [f"--focal-gamma {gamma:g} has no effect without --loss focal: training with cross-entropy"]
    return []


def class_weights(
    options: dict, counts: np.ndarray | None, labels: list, multi_label: bool, examples: int
) -> np.ndarray | None:
    """The weights to train with (None: unweighted), from the training counts per label."""
    choice = options.get("class_weights")
    if choice in (None, "none") or counts is None:
        return None
    counts = np.asarray(counts, dtype=np.float64)
    if choice == "auto":
        if multi_label:
            return np.sqrt((examples - counts) / np.maximum(counts, 1.0))
        return counts.sum() / (len(counts) * np.maximum(counts, 1.0))
    return _from_file(Path(choice).expanduser(), labels)


def _from_file(path: Path, labels: list) -> np.ndarray:
    from bertkit.data.readers import parse_json, read_text

    try:
        given = parse_json(read_text(path), unique_keys=True)
    except json.JSONDecodeError as exc:
        raise BertkitError(
            f"--class-weights {path}: invalid JSON ({exc.msg})", 'e.g. {"negative": 1, "positive": 2.5}'
        ) from exc
    if not isinstance(given, dict) or set(given) != set(labels):
        named = sorted(given) if isinstance(given, dict) else []
        raise BertkitError(
            f"--class-weights {path} must give a weight to exactly the model's labels "
            f"({', '.join(labels)}); it names {', '.join(named) or 'none'}",
            "a JSON object {label: weight}, one entry per label",
        )
    values = [given[label] for label in labels]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in values):
        raise BertkitError(f"--class-weights {path}: every weight must be a number >= 0", "e.g. 1.0 or 2.5")
    if not any(values):  # every example would weigh 0: the weighted mean loss is 0/0, NaN from step 1
        raise BertkitError(
            f"--class-weights {path}: every weight is 0, so no example would count",
            "give at least one label a weight > 0 (1.0 is unweighted)",
        )
    return np.asarray(values, dtype=np.float64)


def weights_notice(weights: np.ndarray, labels: list, choice: str, multi_label: bool) -> str:
    what = "positive weights (pos_weight)" if multi_label else "class weights"
    how = "inverse frequency" if choice == "auto" else choice
    shown = ", ".join(f"{label} {w:.3g}" for label, w in zip(labels[:12], weights[:12]))
    return f"training with {what} ({how}): {shown}" + (", ..." if len(labels) > 12 else "")


def weigh_classes(options: dict, counts, labels: list, multi_label: bool, examples: int) -> str | None:
    """Decide the training weights from the training targets' counts; stores them in ``options``
    (saved with the model) and returns the notice that shows them, or None when unweighted."""
    weights = class_weights(options, counts, labels, multi_label, examples)
    options.pop(WEIGHT_VALUES.name, None)
    if weights is None:
        return None
    options[WEIGHT_VALUES.name] = [round(float(w), 6) for w in weights]
    return weights_notice(weights, labels, options["class_weights"], multi_label)


def loss_spec(options: dict, target: str = "class") -> LossSpec | None:
    """The loss to train with: the stored weights or the focal loss, or float targets (``target``
    "float" or "multi_hot": the loss in fp32, networks/losses.py says why); None for plain classes
    (the model's own loss: the plain, fastest path)."""
    weights = options.get(WEIGHT_VALUES.name)
    gamma = float(options.get("focal_gamma") or FOCAL_GAMMA.default) if options.get("loss") == "focal" else 0.0
    if weights is None and not gamma and target == "class":
        return None
    return LossSpec(target, tuple(weights) if weights is not None else None, gamma)
