"""The teacher's logits for every training feature, computed once by the engine's ``infer`` and
cached beside the student's directory, so a student epoch costs a student forward and backward.

The cache is ``<output>.teacher-logits/<key>/``: ``key`` is a hash of its fingerprint (the teacher's
files by size and SHA-256, the features' token ids and targets, the precision that computed them),
so a changed teacher, data or setting gets a new folder and a stale cache is never read. The
features go through in parts of ``PART_FEATURES``; each part is written (atomically) as soon as it
is done, so a killed run keeps what it computed and the next run, with the same fingerprint,
computes only the parts that are missing, as ``predict --resume`` continues after its last part.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bertkit.engine.run_identity import features_sha1
from bertkit.events import notice
from bertkit.model_dir import atomic_file, write_json

PART_FEATURES = 2048
FINGERPRINT = "fingerprint.json"


def cache_root(output: Path) -> Path:
    return output.parent / f"{output.name}.teacher-logits"


@dataclass
class CachedLogits:
    logits: list  # one array per feature: [classes], or [tokens, classes]
    folder: Path
    reused: int = 0  # features read from the cache
    computed: int = 0
    fingerprint: dict = field(default_factory=dict)


def teacher_fingerprint(teacher_files: dict, features: list[dict], targets: dict | None, precision: str) -> dict:
    """What the teacher's logits depend on: its files, the features (ids and targets), the precision."""
    return {
        "teacher_files": teacher_files,
        "features_sha1": features_sha1(features, targets),
        "features": len(features),
        "precision": precision,
    }


def teacher_logits(
    engine,
    network,
    features: list[dict],
    per_token: bool,
    pad_token_id: int,
    batch_size: int,
    root: Path,
    fingerprint: dict,
) -> CachedLogits:
    """Every feature's teacher logits, from ``root``'s cache where its fingerprint matches, else
    computed with ``engine.infer`` and written part by part (by the main process)."""
    key = hashlib.sha1(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:16]
    folder = root / key
    result = CachedLogits([], folder, fingerprint=fingerprint)
    for start in range(0, len(features), PART_FEATURES):
        part = folder / f"part-{start // PART_FEATURES:05d}.npz"
        chunk = features[start : start + PART_FEATURES]
        stored = _read_part(part, len(chunk))
        if stored is not None:
            result.logits += stored
            result.reused += len(chunk)
            continue
        if not result.computed:  # the first part not cached: minutes on a CPU for a large set, said first
            notice("progress", f"teacher: computing the logits of {len(features) - start} training features")
        outputs = engine.infer(network, chunk, batch_size, ("logits",), per_token, pad_token_id, description="teacher")
        result.logits += outputs["logits"]
        result.computed += len(chunk)
        if engine.is_main_process:
            _write_part(folder, part, outputs["logits"], fingerprint)
    engine.accelerator.wait_for_everyone()
    notice(
        "data",
        f"teacher logits: {result.reused} of {len(features)} features read from the cache {folder}, "
        f"{result.computed} computed",
        reused=result.reused,
        computed=result.computed,
        cache=str(folder),
    )
    return result


def _write_part(folder: Path, part: Path, logits: list, fingerprint: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / FINGERPRINT).is_file():  # what the folder's key was made from, for a person to read
        write_json(folder / FINGERPRINT, fingerprint)
    lengths = np.array([len(x) if x.ndim == 2 else 0 for x in logits], dtype=np.int64)
    with atomic_file(part, "wb") as handle:
        np.savez(handle, logits=np.concatenate([x.reshape(-1, x.shape[-1]) for x in logits]), lengths=lengths)


def _read_part(part: Path, count: int) -> list | None:
    """A part's logits, or None when it is missing or unreadable (it is computed again)."""
    if not part.is_file():
        return None
    try:
        with np.load(part) as stored:
            logits, lengths = stored["logits"], stored["lengths"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    if len(lengths) != count:
        return None
    if not lengths.any():  # one row per feature
        return list(logits) if len(logits) == count else None
    if int(lengths.sum()) != len(logits):
        return None
    return np.split(logits, np.cumsum(lengths)[:-1])
