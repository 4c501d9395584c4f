"""`finetune --folds K --resume`: a set of folds stopped part way (Ctrl-C, a lost machine) continues
where it stopped. Each fold that finished left ``fold-N.result.json`` beside its model in the runs'
directory: its result (metrics, its held-out rows' predictions) and the set's fingerprint; a resumed
set takes those folds as they are and trains the others from the start. The fingerprint is the
task, the number of folds, every training setting and the bytes of the data (a local file or
directory: a hash of its contents; a Hub dataset: its name and the settings), so that a resumed set
never mixes folds trained on other data or with other settings: a difference is refused, named."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.model_dir.files import write_text
from bertkit.training.result import FinetuneResult

# what a fold's result does not depend on: where it is written and how it is watched
NOT_SETTINGS = ("output", "overwrite", "resume", "resume_from", "threads", "report_to")


def record_name(fold: int) -> str:
    return f"fold-{fold}.result.json"


def fingerprint(task: str, folds: int, run: dict, config: dict) -> dict:
    """What a fold's result depends on, by part (so a difference can be named)."""
    settings = {key: value for key, value in run.items() if key not in NOT_SETTINGS and key != "data"}
    return {
        "task": task,
        "folds": folds,
        "data": _data_identity(run.get("data"), run.get("data_dir")),
        "settings": json.loads(json.dumps({**settings, **config}, sort_keys=True, default=str)),
    }


def _data_identity(data: str | None, data_dir: str | None) -> str:
    """A hash of the data's bytes (a file, or every file of a directory); a name otherwise."""
    from bertkit.data import registry

    path = Path(str(data)).expanduser()
    if not path.exists() and data and registry.is_known(data):
        found = registry.local_data_dir(data_dir)
        path = found / data if found is not None else path
    if not path.exists():
        return f"name:{data}"
    digest = hashlib.sha256()
    for file in sorted(p for p in ([path] if path.is_file() else path.rglob("*")) if p.is_file()):
        digest.update(str(file.relative_to(path) if file != path else file.name).encode())
        with file.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return "sha256:" + digest.hexdigest()


def check_set(root: Path, wanted: dict, folds: int) -> None:
    """Every fold recorded in ``root`` must have been trained with ``wanted``'s fingerprint."""
    for fold in range(1, folds + 1):
        earlier = (_read(root / record_name(fold)) or {}).get("fingerprint")
        if earlier is not None and earlier != wanted:
            raise BertkitError(
                f"--resume: fold {fold} in {root} was trained with other {_difference(earlier, wanted)}; "
                "a set never mixes them",
                "repeat the first command line exactly, or pass --overwrite to start the set again",
            )


def _difference(earlier: dict, wanted: dict) -> str:
    parts = [part for part in wanted if earlier.get(part) != wanted[part]]
    before, now = earlier.get("settings") or {}, wanted["settings"]
    settings = sorted(key for key in set(before) | set(now) if before.get(key) != now.get(key))
    return ", ".join(part if part != "settings" else f"settings ({', '.join(settings)})" for part in parts)


def finished_folds(root: Path, wanted: dict, folds: int) -> dict[int, FinetuneResult]:
    """fold -> its result, for each fold whose record and model are complete (said); a fold recorded
    with another fingerprint is refused first."""
    check_set(root, wanted, folds)
    done = {}
    for fold in range(1, folds + 1):
        record = _read(root / record_name(fold))
        model = root / f"fold-{fold}"
        if record is None or record.get("fingerprint") != wanted or not (model / "bertkit.json").is_file():
            continue  # not finished: trained again from the start
        known = {f.name for f in dataclasses.fields(FinetuneResult)}
        result = FinetuneResult(**{key: value for key, value in record["result"].items() if key in known})
        result.output_dir = str(model)
        done[fold] = result
    if done:
        notice("resume", f"--resume: fold(s) {', '.join(map(str, done))} finished earlier and are taken as they are")
    return done


def keep_record(root: Path, fold: int, result: FinetuneResult, wanted: dict) -> None:
    """Written once the fold's model is complete: the fold counts as finished from now on."""
    record = {"fingerprint": wanted, "result": dataclasses.asdict(result)}
    write_text(root / record_name(fold), json.dumps(record, default=str) + "\n")


def _read(path: Path) -> dict | None:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None
