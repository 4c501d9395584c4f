"""--report-to: experiment trackers, run by Accelerate's tracker integrations (the engine logs).

Checked before any work: a named tracker whose package is missing fails in one line instead of
being dropped silently, as Accelerate would. Local trackers (TensorBoard, MLflow's file store)
write to ``<output>.logs/`` beside the model directory: it exists while training runs (the model
directory appears only at the end) and survives a failed run and an ``--overwrite``.
"""

from __future__ import annotations

import importlib.util

from bertkit.errors import BertkitError
from bertkit.model_dir import logging_dir  # noqa: F401  (re-exported: every sibling's name is spelled in model_dir)

TRACKERS = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}  # name -> package
CHOICES = ("none", "all", *TRACKERS)
PROJECT = "bertkit"


def parse_report_to(value: str | None) -> list[str]:
    """Tracker names from ``--report-to`` (comma-separated allowed); [] for none."""
    names = [part.strip().lower() for part in (value or "none").split(",") if part.strip()]
    unknown = [n for n in names if n not in CHOICES]
    if unknown:
        raise BertkitError(f"unknown --report-to {unknown[0]!r}", f"use one of {', '.join(CHOICES)}")
    if "none" in names:
        if len(names) > 1:
            raise BertkitError("--report-to none cannot be combined with a tracker", "give none, or trackers")
        return []
    if "all" in names:
        found = [n for n, package in TRACKERS.items() if _installed(package)]
        if not found:
            raise BertkitError(
                "--report-to all found no tracker package installed",
                "pip install 'bertkit[track]' (tensorboard), or install wandb or mlflow",
            )
        return found
    for name in names:
        if not _installed(TRACKERS[name]):
            raise BertkitError(
                f"--report-to {name} needs the {TRACKERS[name]} package",
                "pip install 'bertkit[track]'" if name == "tensorboard" else f"pip install {TRACKERS[name]}",
            )
    return list(dict.fromkeys(names))


def hyperparameters(config: dict) -> dict:
    """Flat scalars only: TensorBoard's hparams accept nothing else."""
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items() if isinstance(v, (int, float, str, bool))})
        elif isinstance(value, (int, float, str, bool)):
            flat[key] = value
    return flat


def _installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None
