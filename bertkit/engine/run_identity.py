"""A run's identity: what must not change between an interrupted run and its resumption (the
settings, and the training data by content), and how a difference is told to the user."""

from __future__ import annotations

import hashlib
import itertools

import numpy as np

# Settings that may change between the interrupted run and its resumption: they do not touch the
# numbers training produces (the eval batch size does, in the last bits of the logits).
# save_adapter: how it is saved; packing: how a batch is computed (the same numbers), not which
MAY_CHANGE = ("log_every", "save_every", "keep_checkpoints", "save_adapter", "packing")
INPUT_KEYS = ("input_ids", "token_type_ids")
# The target keys hashed when no ``targets`` are given, in this order; declared targets keep it
# for these keys, so a task that declares its int targets keeps its checkpoints' fingerprints.
IMPLIED_TARGETS = ("labels", "start_positions", "end_positions")
FLOAT_KINDS = ("float", "multi_hot")  # batching.Collator's float target kinds


# How a checkpoint written before a key existed recorded it: random_batches was group_by_length (its
# opposite) from 31fd17c to b5b3424, and before that every run's batches were length-grouped
OLDER_RECORDS = {"random_batches": lambda saved: not saved.get("group_by_length", True)}


def recorded(saved: dict, key: str):
    """``key``'s value in a checkpoint's identity ``saved``, read from an older record where it has none."""
    if key in saved or key not in OLDER_RECORDS:
        return saved.get(key)
    return OLDER_RECORDS[key](saved)


def differences(identity: dict, saved: dict) -> list[str]:
    """What differs between this run's identity and a checkpoint's, as flags for the user."""
    found = []
    for key, value in identity.items():
        if key in MAY_CHANGE or key not in saved:
            continue
        before = saved[key]
        if isinstance(value, dict) and isinstance(before, dict):
            found += [
                f"{_flag(k)} {_shown(value.get(k))} (checkpoint: {_shown(before.get(k))})"
                for k in sorted(set(value) | set(before))
                if value.get(k) != before.get(k)
            ]
        elif value != before:
            found.append(f"{_flag(key)} {_shown(value)} (checkpoint: {_shown(before)})")
    return found


def _shown(value) -> str:
    """A value as the user gave it: an option left unset is "unset" (its default), not Python's None."""
    return "unset" if value is None else str(value)


def _flag(key: str) -> str:
    names = {
        "task": "task",
        "processes": "processes",
        "precision_used": "precision in use",
        "train_data_sha1": "training data content (sha1)",
    }
    return names.get(key, f"--{key.replace('_', '-')}")


def features_sha1(features: list[dict], targets: dict | None = None) -> str:
    """A fingerprint of the training features (token ids and targets): the same file path with
    other content is refused. Flattened through numpy: a few hundred ms for 50,000 features.

    ``targets``: ``{feature key: kind}`` as batching.Collator takes it. Float kinds are hashed as
    float64 (a changed 0.5 must not pass as the same int 0), everything else as int64; without
    ``targets`` the labels and QA positions are hashed as int64, as before there were kinds, so
    older checkpoints keep their fingerprint."""
    declared = targets if targets is not None else {key: None for key in IMPLIED_TARGETS}
    ordered = [k for k in IMPLIED_TARGETS if k in declared] + [k for k in declared if k not in IMPLIED_TARGETS]
    digest = hashlib.sha1()
    for key in (*INPUT_KEYS, *ordered):
        values = [f.get(key) for f in features]
        if all(v is None for v in values):
            continue
        dtype = np.float64 if declared.get(key) in FLOAT_KINDS else np.int64
        if isinstance(values[0], list):  # per token or multi-hot: the lengths, then every value in a row
            digest.update(np.array([len(v) for v in values], dtype=np.int64).tobytes())
            values = itertools.chain.from_iterable(values)
        digest.update(key.encode() + np.fromiter(values, dtype=dtype).tobytes())
    return digest.hexdigest()
