"""Which checkpoints there are, and whether their files can be read back: decided before any
work, reading headers, checksums and the small files only.

A disk that filled up or a copy cut short can leave a checkpoint whose ``state.json`` exists (so it
counts as complete) but whose weights or optimizer file is truncated; loading it would fail with a
library traceback after the data was read and the model built. The large files are checked by
their headers and checksums only: safetensors files must be as long as their header says,
``torch.save`` files are zip archives whose every member must match its CRC. The small ones
(state.json with its Progress, history.jsonl, scheduler.pt, rank-N.pt) are read whole and must hold
what ``Checkpoints.begin`` reads. Weights or optimizer state that read back but belong to another
model are found when loaded (``misfit``), still before any training.
"""

from __future__ import annotations

import json
import re
import struct
import zipfile
from dataclasses import dataclass, field, fields
from pathlib import Path

from bertkit.engine.history import FILE as HISTORY
from bertkit.errors import BertkitError

STATE, MODEL, BEST = "state.json", "model.safetensors", "best.safetensors"
TORCH_FILES = ("optimizer.pt", "scheduler.pt")
STEP_DIR = re.compile(r"step-(\d+)")
STEP_TMP = re.compile(r"\.step-\d+\.tmp")  # being written, or left by a kill
# what the small torch files must hold (checkpoints.py writes them; optimizer.pt is checked on loading)
TORCH_KEYS = {"scheduler.pt": ("scheduler",), "rank": ("loss", "counts", "rng")}


@dataclass
class Progress:
    """Where the loop is and what it has decided so far: identical on every rank."""

    step: int = 0  # optimizer steps done
    epoch: int = 0  # the epoch of the last batch done ...
    next_batch: int = 0  # ... and the index of the next one in this rank's share of that epoch's plan
    best_metric: float | None = None
    best_step: int | None = None
    best_epoch: float | None = None
    bad_evals: int = 0
    stopped_early: bool = False
    evals: list = field(default_factory=list)  # TrainReport.history: one entry per evaluation
    train_seconds: float = 0.0
    eval_seconds: float = 0.0


def complete_checkpoints(root: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints under ``root``, oldest first; half-written ones are not listed."""
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := STEP_DIR.fullmatch(p.name))]
    return sorted((step, p) for step, p in found if (p / STATE).is_file())


def newest_readable(existing: list[tuple[int, Path]]) -> tuple[Path, list[str]]:
    """The newest checkpoint whose files read back, and what was passed over on the way (newest
    first, with why): a run killed while its disk was full still resumes from the one before."""
    skipped = []
    for _, path in reversed(existing):
        problem = checkpoint_problem(path)
        if problem is None:
            return path, skipped
        skipped.append(f"{path.name} is unreadable ({problem})")
    raise BertkitError(
        f"no checkpoint under {existing[0][1].parent} can be read: " + "; ".join(skipped),
        "start afresh with --overwrite (it deletes them), or restore the files",
    )


def check_readable(source: Path) -> None:
    """An explicitly named checkpoint that cannot be read fails, naming the newest older one that can."""
    problem = checkpoint_problem(source)
    if problem is not None:
        raise BertkitError(f"checkpoint {source} cannot be read ({problem})", _previous_hint(source))


def _previous_hint(source: Path) -> str:
    paths = [path for _, path in complete_checkpoints(source.parent)]
    older = reversed(paths[: paths.index(source)]) if source in paths else ()
    previous = next((path for path in older if checkpoint_problem(path) is None), None)
    return (
        f"resume from the previous complete one: --resume-from {previous}"
        if previous
        else "restore its files, or start afresh with another --output"
    )


def check_layout(root: Path) -> None:
    """Where checkpoints go holds only what bertkit writes there: a file in their place would fail
    the first save, after the training it was meant to keep."""
    if root.exists() and not root.is_dir():
        raise BertkitError(f"{root} is a file, where this run's checkpoints go", "move it, or choose another --output")
    strays = (
        sorted(p.name for p in root.iterdir() if STEP_DIR.fullmatch(p.name) and not p.is_dir()) if root.is_dir() else []
    )
    if strays:
        raise BertkitError(
            f"{root} holds {', '.join(strays)}, which is not a checkpoint directory",
            "move it out of the checkpoints directory",
        )


def misfit(source: Path, name: str, exc: Exception) -> BertkitError:
    """A checkpoint file that reads back but does not fit this model (copied in from another run)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
    # torch's load_state_dict: "Error(s) in loading state_dict for X:" then the first real reason
    detail = (lines[1] if len(lines) > 1 and lines[0].endswith(":") else lines[0])[:160]
    return BertkitError(f"checkpoint {source}: {name} does not fit this run ({detail})", _previous_hint(source))


def checkpoint_problem(path: Path) -> str | None:
    """The first reason ``path`` (a step-N directory) cannot be resumed from, or None."""
    if not path.is_dir():
        return "not a directory"
    problem = _state_problem(path / STATE) or _history_problem(path / HISTORY)
    if problem:
        return problem
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
        problem = _torch_file_problem(file) or _torch_keys_problem(file)
        if problem:
            return f"{file.name}: {problem}"
    return None


def _state_problem(file: Path) -> str | None:
    """state.json: the step, the loop's Progress (the fields this bertkit knows) and the identity."""
    try:
        state = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"{STATE}: {_reason(exc)}"
    if not isinstance(state, dict) or not all(isinstance(state.get(k), dict) for k in ("progress", "identity")):
        return f"{STATE}: not a bertkit checkpoint state (no progress or identity)"
    unknown = sorted(set(state["progress"]) - {spec.name for spec in fields(Progress)})
    if unknown or not isinstance(state["progress"].get("step"), int):
        return f"{STATE}: written by another bertkit version (progress: {', '.join(unknown) or 'no step'})"
    return None


def _history_problem(file: Path) -> str | None:
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
        if all(isinstance(json.loads(line), dict) for line in lines if line.strip()):
            return None
        return f"{HISTORY}: not one JSON object a line"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"{HISTORY}: {_reason(exc)}"


def _torch_keys_problem(file: Path) -> str | None:
    """The small torch files hold what begin() reads (optimizer.pt, as large as two models, is not
    read twice: checkpoints.py reports it if it does not fit)."""
    keys = TORCH_KEYS.get("rank" if file.name.startswith("rank-") else file.name)
    if keys is None:
        return None
    import torch

    try:
        content = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 (torch's unpickler raises many types for a bad file)
        return f"not loadable ({type(exc).__name__})"
    missing = [key for key in keys if not isinstance(content, dict) or key not in content]
    return f"not what bertkit saves there (no {', '.join(missing)})" if missing else None


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
        return "truncated or not a torch.save file" if isinstance(exc, (zipfile.BadZipFile, EOFError)) else _reason(exc)
    return f"corrupt ({bad} fails its checksum)" if bad else None


def _reason(exc: Exception) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, FileNotFoundError):
        return "missing"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return "not valid JSON" if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)) else str(exc)
