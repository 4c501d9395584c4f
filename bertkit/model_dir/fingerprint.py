"""Which files of a model directory make its exported graph, and their fingerprint.

An export is a copy of the weights in another format: once the weights (or the config or the
tokenizer the export was traced with) change under it, the exported file computes another model.
``export.json`` records the fingerprint of the files it was made from (name, size, sha256); a
backend that would run the export checks it first, so a stale export is never used in silence.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

# the files a model is loaded from: weights, config, tokenizer (bertkit.json is not: eval rewrites
# its metrics, and the exported graph does not read it)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
MADE_FROM_NAMES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
)
KEY = "made_from"  # export.json's field


def made_from_files(model_dir) -> list[Path]:
    """The files of ``model_dir`` an export is made from, sorted by name."""
    directory = Path(model_dir)
    if not directory.is_dir():
        return []
    return sorted(
        p
        for p in directory.iterdir()
        if p.is_file() and (p.name in MADE_FROM_NAMES or p.suffix.lower() in WEIGHT_SUFFIXES or p.suffix == ".model")
    )


def fingerprint(model_dir) -> dict:
    """{file name: [size, sha256]} of the files an export is made from."""
    return {path.name: [path.stat().st_size, file_digest(path)] for path in made_from_files(model_dir)}


def file_digest(path: Path) -> str:
    """A file's SHA-256, read in 4 MiB blocks (the one file hash of a model directory's records)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def stale_reason(report: dict, model_dir) -> str | None:
    """Why the export described by ``report`` (its export.json) is not of the model now in
    ``model_dir``; None when its recorded fingerprint matches."""
    recorded = report.get(KEY) if isinstance(report, dict) else None
    if not isinstance(recorded, dict) or not recorded:
        return "its export.json records no fingerprint of the weights it was made from (an older bertkit made it)"
    now = {path.name: path for path in made_from_files(model_dir)}
    changed = sorted(set(recorded) ^ set(now))
    if not changed:  # sizes first: a size that differs needs no hashing
        changed = [name for name in sorted(now) if _entry(recorded[name])[0] != now[name].stat().st_size]
    if not changed:
        changed = [name for name in sorted(now) if _entry(recorded[name])[1] != file_digest(now[name])]
    if not changed:
        return None
    return f"{', '.join(changed[:3])} changed since it was exported"


def _entry(value) -> tuple:
    return tuple(value) if isinstance(value, list) and len(value) == 2 else (None, None)
