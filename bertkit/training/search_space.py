"""The search space of `bertkit tune`: which hyperparameters vary and over what range.

The default follows the BERT paper's recommended grid (lr 2e-5..5e-5, batch 16/32, 2-4 epochs),
widened to a log range of lr and a little warmup and weight decay. A YAML/JSON file (``--space``)
overrides it, one line per hyperparameter (a TrainConfig field):

    lr: {low: 1e-5, high: 1e-4, log: true}   # a range (floats, or ints with integer bounds)
    batch_size: [16, 32]                      # a choice
    epochs: 3                                 # fixed
    warmup_ratio: null                        # not searched: the command line's value

A hyperparameter given on the command line (``--epochs 1``) is fixed at that value and left out."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.options import DatasetOptions, TrainConfig

DEFAULT_SPACE = {
    "lr": {"low": 1e-5, "high": 1e-4, "log": True},
    "batch_size": [16, 32],
    "epochs": [2, 3, 4],
    "warmup_ratio": {"low": 0.0, "high": 0.2},
    "weight_decay": {"low": 0.0, "high": 0.1},
}
NOT_SEARCHABLE = (
    "task_options",
    "precision",
    "max_steps",
    "eval_every",
    "log_every",
    "save_every",
    "keep_checkpoints",
    "max_train_samples",
    "max_eval_samples",
    "seed",
    "lora_targets",  # which layers, and how the model is saved: not numbers to search
    "save_adapter",
    *(f.name for f in dataclasses.fields(DatasetOptions)),  # which data: not a hyperparameter
)
HINT = "e.g. `lr: {low: 1e-5, high: 1e-4, log: true}`, `batch_size: [16, 32]`, `epochs: 3` (see `bertkit tune --help`)"


def searchable() -> tuple:
    return tuple(f.name for f in dataclasses.fields(TrainConfig) if f.name not in NOT_SEARCHABLE)


def read_space(path: str | None, fixed: tuple = ()) -> dict:
    """The space: the default, updated by the file at ``path``, without the ``fixed`` names."""
    space = dict(DEFAULT_SPACE)
    if path is not None:
        for name, value in _read_mapping(path).items():
            key = str(name).strip().lstrip("-").replace("-", "_")
            if key not in searchable():
                raise BertkitError(
                    f"--space {path}: {name} is not a hyperparameter bertkit tune can search",
                    f"use {', '.join(searchable())}",
                )
            if value is None:
                space.pop(key, None)
            else:
                space[key] = _checked(key, value, path)
    return {name: value for name, value in space.items() if name not in fixed}


def sample(trial, space: dict) -> dict:
    """One trial's values (Optuna's suggest_* calls; fixed values as they are)."""
    values = {}
    for name, spec in space.items():
        if isinstance(spec, list):
            values[name] = trial.suggest_categorical(name, spec)
        elif isinstance(spec, dict):
            integer = all(isinstance(spec[k], int) and not isinstance(spec[k], bool) for k in ("low", "high"))
            suggest = trial.suggest_int if integer else trial.suggest_float
            values[name] = suggest(name, spec["low"], spec["high"], log=bool(spec.get("log", False)))
        else:
            values[name] = spec
    return values


def _read_mapping(path: str) -> dict:
    import yaml

    source = Path(path).expanduser()
    try:
        values = yaml.safe_load(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BertkitError(f"--space {path} does not exist", "check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BertkitError(
            f"--space {path} cannot be read ({getattr(exc, 'strerror', None) or exc})", "check the file"
        ) from None
    except yaml.YAMLError as exc:
        raise BertkitError(f"--space {path} is not valid YAML ({getattr(exc, 'problem', None) or exc})", HINT) from None
    if not isinstance(values, dict):
        raise BertkitError(f"--space {path} holds a {type(values).__name__}, not a mapping", HINT)
    return values


def _checked(name: str, value, path: str):
    kind = {f.name: f.type for f in dataclasses.fields(TrainConfig)}[name]
    numeric = "int" in str(kind) or "float" in str(kind)
    as_number = _number if numeric else (lambda v: v)
    if isinstance(value, list):
        if not value or any(isinstance(v, (list, dict)) for v in value):
            raise BertkitError(f"--space {path}: {name} must list one or more values", HINT)
        return [_valid(name, as_number(v), path) for v in value]
    if isinstance(value, dict):
        if set(value) - {"low", "high", "log"} or not {"low", "high"} <= set(value) or not numeric:
            raise BertkitError(f"--space {path}: {name} must be a range {{low, high[, log]}} of numbers", HINT)
        value = {**value, "low": _number(value["low"]), "high": _number(value["high"])}
        low, high = value["low"], value["high"]
        if (
            not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (low, high))
            or low >= high
        ):
            raise BertkitError(
                f"--space {path}: {name} needs finite numbers low < high, got {low!r} and {high!r}", HINT
            )
        if value.get("log") and low <= 0:
            raise BertkitError(f"--space {path}: a log range of {name} must start above 0", HINT)
        _valid(name, low, path), _valid(name, high, path)
        return dict(value)
    return _valid(name, as_number(value), path)


def _valid(name: str, value, path: str):
    """``value`` if a run could take it (TrainConfig.validate's rules), checked when the space is
    read: Optuna keeps every value a study sampled, so a bad one found in a trial stays in it."""
    try:
        dataclasses.replace(TrainConfig(), **{name: value}).validate("bertkit tune")
    except BertkitError as exc:
        raise BertkitError(f"--space {path}: {name} {value!r}: {exc.message}", HINT) from None
    except TypeError:  # a string or a list where a number goes
        raise BertkitError(f"--space {path}: {name} {value!r} is not a number", HINT) from None
    return value


def _number(value):
    """YAML 1.1 (PyYAML) reads 1e-5 as a string (a float needs a dot there): a number as written."""
    if isinstance(value, str):
        for kind in (int, float):
            try:
                return kind(value)
            except ValueError:
                pass
    return value


def space_changes(optuna, space: dict, seen: list[dict]) -> list[str]:
    """How ``space`` differs from what a study's trials searched (``seen``: each trial's Optuna
    distributions): a hyperparameter over another range or of another kind, one line each."""
    changes = {}
    for distributions in seen:
        for name, was in distributions.items():
            now = _distribution(optuna, space.get(name))
            if now is not None and now != was and name not in changes:
                changes[name] = f"{name} over {_shown(was)}, this run over {_shown(now)}"
    return [changes[name] for name in sorted(changes)]


def _distribution(optuna, spec):
    """The distribution ``sample`` draws ``spec`` from (None for a fixed value)."""
    dists = optuna.distributions
    if isinstance(spec, list):
        return dists.CategoricalDistribution(spec)
    if isinstance(spec, dict):
        log = bool(spec.get("log", False))
        if all(isinstance(spec[k], int) and not isinstance(spec[k], bool) for k in ("low", "high")):
            return dists.IntDistribution(spec["low"], spec["high"], log=log)
        return dists.FloatDistribution(spec["low"], spec["high"], log=log)
    return None


def _shown(distribution) -> str:
    if hasattr(distribution, "choices"):
        return "the choices " + ", ".join(map(str, distribution.choices))
    kind = "integers" if type(distribution).__name__.startswith("Int") else "numbers"
    return f"{kind} {distribution.low:g}..{distribution.high:g}{' (log)' if distribution.log else ''}"
