"""Whether a checkpoint's files can be read back, decided before any work and without loading them.

A disk that filled up or a copy cut short can leave a checkpoint whose ``state.json`` exists (so it
counts as complete) but whose weights or optimizer file is truncated; loading it would fail with a
library traceback after the data was read and the model built. The checks read only headers and
checksums: safetensors files must be as long as their header says, ``torch.save`` files are zip
archives whose every member must match its CRC.
"""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

STATE, MODEL, BEST = "state.json", "model.safetensors", "best.safetensors"
TORCH_FILES = ("optimizer.pt", "scheduler.pt")


def checkpoint_problem(path: Path) -> str | None:
    """The first reason ``path`` (a step-N directory) cannot be resumed from, or None."""
    try:
        json.loads((path / STATE).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"{STATE}: {_reason(exc)}"
    ranks = sorted(path.glob("rank-*.pt"))
    if not ranks:
        return "no rank-0.pt"
    for name in (MODEL, *TORCH_FILES):
        if not (path / name).is_file():
            return f"no {name}"
    safetensors = [path / MODEL] + ([path / BEST] if (path / BEST).exists() else [])
    for file in safetensors:
        problem = _safetensors_problem(file)
        if problem:
            return f"{file.name}: {problem}"
    for file in [path / name for name in TORCH_FILES] + ranks:
        problem = _torch_file_problem(file)
        if problem:
            return f"{file.name}: {problem}"
    return None


def _safetensors_problem(file: Path) -> str | None:
    """safetensors: 8 bytes of header length, the JSON header, then the tensors' bytes, whose
    extent the header's ``data_offsets`` give."""
    try:
        size = file.stat().st_size
        with file.open("rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                return "truncated"
            length = struct.unpack("<Q", head)[0]
            if length > size - 8:
                return "truncated"
            header = json.loads(handle.read(length))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
        return _reason(exc)
    if not isinstance(header, dict):
        return "not a safetensors file"
    try:
        end = max((entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"), default=0)
    except (KeyError, IndexError, TypeError):
        return "not a safetensors file"
    expected = 8 + length + end
    if size < expected:
        return f"truncated ({size} of {expected} bytes)"
    if size > expected:
        return f"{size - expected} unexpected bytes after the tensors"
    return None


def _torch_file_problem(file: Path) -> str | None:
    try:
        with zipfile.ZipFile(file) as archive:
            bad = archive.testzip()
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        return "truncated or not a torch.save file" if isinstance(exc, (zipfile.BadZipFile, EOFError)) \
            else _reason(exc)
    return f"corrupt ({bad} fails its checksum)" if bad else None


def _reason(exc: Exception) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, FileNotFoundError):
        return "missing"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return "not valid JSON" if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)) else str(exc)
