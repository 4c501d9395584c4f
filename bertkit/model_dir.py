"""Model directories: plain transformers files plus ``bertkit.json``, written all-or-nothing.

Everything about an output location is checked before any expensive work, so a mistake in the
path never costs a training run, and nothing is written when the check fails.

``bertkit.json`` (schema 2) has the same top-level keys for every kind of directory, in this order;
a section that does not apply to a kind is null (or empty), never missing:

    schema, kind ("finetune" | "probe" | "pretrain"), bertkit_version, task, base_model,
    data {name, train, data_dir, eval, eval_file, train_examples, eval_examples},
    config, metrics, best_epoch, best_step, resumed_from, history, throughput, preprocessing,
    stopped_early, runtime, versions, eval_details, before, probe, pretraining

``config`` holds the command's own settings (TrainConfig for finetune and pretrain; mlm examples
are documents). Null for a kind: probe (no training loop) has no best_*, resumed_from,
preprocessing, stopped_early, eval_details and an empty history; pretrain has no resumed_from
or eval_details; only pretrain has ``before`` (held-out metrics of the starting model) and
``pretraining``, only probe has ``probe``. Files without ``schema`` are version 1 (keys varied by
command): load_meta upgrades them in memory, and update_meta writes them back as version 2.

Siblings of a model directory OUT, all named here: ``OUT.checkpoints/`` (resumable training state),
``OUT.logs/`` (trackers), ``.OUT.partial-<pid>-<random>/`` (being written) and ``.OUT.old/`` (the
previous model during a replace).
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from bertkit.errors import BertkitError

META_FILE = "bertkit.json"
PROBE_HEAD_FILE = "probe_head.safetensors"  # a probe's linear head, next to its frozen encoder
SCHEMA = 2
KINDS = ("finetune", "probe", "pretrain")
DATA_KEYS = ("name", "train", "data_dir", "eval", "eval_file", "train_examples", "eval_examples")


def checkpoint_root(output: Path) -> Path:
    return output.parent / f"{output.name}.checkpoints"


def logging_dir(output: Path) -> Path:
    return output.parent / f"{output.name}.logs"


def staging_prefix(output: Path) -> str:
    return f".{output.name}.partial-"  # + <pid>-<random>: the pid tells a live writer from a killed one


def trash_dir(output: Path) -> Path:
    return output.parent / f".{output.name}.old"


def check_output_dir(output: Path, overwrite: bool) -> None:
    """Fail before any work if ``output`` cannot be written or would clobber the user's files.

    Missing parent directories are fine (they are created when the model is saved); the nearest
    existing one must be a writable directory. ``--overwrite`` replaces only an empty directory or
    one that bertkit wrote (it has bertkit.json), never a directory of the user's own files.
    """
    output = output.expanduser().resolve()
    if output == Path(output.anchor) or Path.cwd().resolve().is_relative_to(output):
        raise BertkitError(f"--output {output} is the current directory or one of its parents",
                           "name a new directory, e.g. runs/my-model")
    if output.exists() and not output.is_dir():
        raise BertkitError(f"--output {output} is a file", "choose a directory path")
    existing = _nearest_existing(output.parent)
    if not existing.is_dir():
        raise BertkitError(f"the parent of --output {output} is under a file ({existing})", "choose a directory path")
    _probe_writable(existing, f"--output {output}")
    _clean_stale(output)
    if output.is_dir() and any(output.iterdir()):
        if not overwrite:
            raise BertkitError(f"--output {output} exists and is not empty",
                               "choose a new directory or pass --overwrite")
        if not (output / META_FILE).is_file():
            found = ", ".join(sorted(p.name for p in output.iterdir())[:3])
            raise BertkitError(f"--output {output} holds files bertkit did not write ({found}, ...); --overwrite "
                               f"replaces only a bertkit model directory", "choose a new directory for the model")


def check_output_file(path: str | Path, flag: str = "--output") -> Path:
    """Fail before any work if a result file cannot be written at ``path``; returns it resolved."""
    target = Path(path).expanduser().resolve()
    if target.is_dir():
        raise BertkitError(f"{flag} {path} is a directory", "give a file name, e.g. results.json")
    if not target.parent.exists():
        existing = _nearest_existing(target.parent)
        if not existing.is_dir():
            raise BertkitError(f"{flag} {path} is under a file ({existing})", "choose a path in a directory")
        raise BertkitError(f"the directory of {flag} {path} does not exist", f"mkdir -p {target.parent}")
    if not target.parent.is_dir():
        raise BertkitError(f"{flag} {path} is under a file ({target.parent})", "choose a path in a directory")
    _probe_writable(target.parent, f"{flag} {path}")
    if target.exists() and not os.access(target, os.W_OK):
        raise BertkitError(f"{flag} {path} is not writable", "choose another file or fix its permissions")
    return target


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _probe_writable(directory: Path, what: str) -> None:
    # os.access is wrong for root, read-only mounts and some network file systems: really try.
    try:
        Path(tempfile.mkdtemp(prefix=".bertkit-probe-", dir=directory)).rmdir()
    except OSError as exc:
        raise BertkitError(f"{what}: cannot write in {directory} ({exc.strerror or type(exc).__name__})",
                           "choose a writable location") from exc


def _clean_stale(output: Path) -> None:
    """Remove what an interrupted save left next to ``output`` (a kill cannot run cleanup code).

    A staging sibling whose process is gone is stale. ``.NAME.old`` is the previous model, moved
    aside during a replace: garbage once the new one is in place, and put back if the kill came
    between the two renames (the interrupted run never succeeded, so the old model stands).
    """
    parent = output.parent
    if not parent.is_dir():
        return
    prefix = staging_prefix(output)
    for sibling in parent.iterdir():
        if sibling.name.startswith(prefix) and sibling.is_dir() and not _owner_alive(sibling.name[len(prefix):]):
            shutil.rmtree(sibling, ignore_errors=True)
    trash = trash_dir(output)
    try:
        if trash.is_dir() and not output.exists() and (trash / META_FILE).is_file():
            trash.rename(output)
        elif trash.is_dir():
            shutil.rmtree(trash, ignore_errors=True)
    except OSError:
        pass  # another process of the same launch got there first


def _owner_alive(suffix: str) -> bool:
    pid = suffix.split("-", 1)[0]
    if not pid.isdigit():
        return False  # not ours, or from a version without the pid: nobody can be writing it
    if int(pid) == os.getpid():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a live process of another user
    return True


@contextmanager
def staged_output(output: Path):
    """Yield a hidden sibling directory to write into; it replaces ``output`` only on success,
    so an error or Ctrl-C never leaves a half-written model behind."""
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{staging_prefix(output)}{os.getpid()}-", dir=output.parent))
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if output.exists():
        trash = trash_dir(output)
        shutil.rmtree(trash, ignore_errors=True)
        output.rename(trash)
        staging.rename(output)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        staging.rename(output)


@contextmanager
def atomic_file(path: Path, mode: str = "w"):
    """Yield a handle on a hidden temporary sibling of ``path`` that replaces ``path`` only once
    written and synced, so readers (and a crash) see the old file or the new one, never half."""
    path = Path(path)
    # unique per writer: two processes saving the same file must not write into one temporary file
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, mode.replace("w", "x"), **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    with atomic_file(path) as handle:
        handle.write(text)


def write_json(path: Path, data) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


@dataclass
class ModelMeta:
    """What ``bertkit.json`` records (the module docstring lists the schema); ``to_json`` is the
    only way a new one is written."""

    kind: str
    task: dict
    base_model: str
    data: dict
    config: dict
    metrics: dict = field(default_factory=dict)
    best_epoch: float | None = None
    best_step: int | None = None
    resumed_from: str | None = None
    history: list = field(default_factory=list)
    throughput: dict = field(default_factory=dict)
    preprocessing: dict | None = None
    stopped_early: bool | None = None
    runtime: dict | None = None
    eval_details: dict | None = None
    before: dict | None = None
    probe: dict | None = None
    pretraining: dict | None = None

    def to_json(self) -> dict:
        if self.kind not in KINDS or set(self.data) != set(DATA_KEYS):
            raise ValueError(f"bertkit.json: kind {self.kind!r}, data keys {sorted(self.data)}: use data_record()")
        record = {"schema": SCHEMA, "bertkit_version": bertkit_version(), **asdict(self),
                  "data": {key: self.data[key] for key in DATA_KEYS}, "versions": library_versions()}
        if self.runtime is not None:  # the passing load notice is for the console, not the record
            record["runtime"] = {k: v for k, v in self.runtime.items() if k != "notice"}
        return {key: record[key] for key in META_KEYS}


META_KEYS = ("schema", "kind", "bertkit_version", "task", "base_model", "data", "config", "metrics", "best_epoch",
             "best_step", "resumed_from", "history", "throughput", "preprocessing", "stopped_early", "runtime",
             "versions", "eval_details", "before", "probe", "pretraining")


def data_record(train_source, eval_source, train_examples: int, eval_examples: int, name: str | None = None,
                data_dir=None, eval_description: str | None = None) -> dict:
    """The ``data`` section from the registry's sources (``.description``, ``.path``)."""
    return {"name": name, "train": train_source.description, "data_dir": str(data_dir) if data_dir else None,
            "eval": eval_description or (eval_source.description if eval_source else None),
            # absolute, so that `bertkit eval DIR` finds a file-based eval set from any directory
            "eval_file": str(eval_source.path.resolve()) if eval_source and eval_source.path else None,
            "train_examples": train_examples, "eval_examples": eval_examples}


def save_model_dir(directory: Path, model, tokenizer, meta: ModelMeta) -> dict:
    """Save the model, its tokenizer and ``bertkit.json``; returns what bertkit.json holds."""
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    record = meta.to_json()
    write_json(directory / META_FILE, record)  # last: a directory with bertkit.json is complete
    return record


def load_meta(model_dir: str) -> dict:
    """``bertkit.json`` of ``model_dir`` as schema 2, whichever version wrote it."""
    path = Path(model_dir).expanduser()
    if not path.is_dir():
        raise BertkitError(f"model directory not found: {model_dir}", "pass the --output of `bertkit finetune`")
    meta_path = path / META_FILE
    if not meta_path.is_file():
        raise BertkitError(f"{model_dir} is not a bertkit model (no {META_FILE})", "pass the --output of `bertkit finetune`")
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as exc:
        raise BertkitError(f"{meta_path} is corrupt ({exc.msg})", "fine-tune the model again") from exc
    return upgrade_meta(meta, meta_path)


def upgrade_meta(meta, where="bertkit.json") -> dict:
    """``meta`` as schema 2: a version-1 dict gets the keys it lacks (null or empty), in order."""
    if not isinstance(meta, dict) or not isinstance(meta.get("task"), dict):
        raise BertkitError(f"{where} is corrupt (no task section)", "fine-tune the model again")
    version = meta.get("schema", 1)
    if version not in range(1, SCHEMA + 1):
        raise BertkitError(f"{where} has schema {version!r}; this bertkit reads schema 1 to {SCHEMA}",
                           "upgrade bertkit (pip install -U bertkit)")
    if version == SCHEMA:
        return meta
    data = dict(meta.get("data") or {})
    for old, new in (("train_documents", "train_examples"), ("eval_documents", "eval_examples")):
        if old in data:  # version 1 of pretrain counted documents under their own names
            data.setdefault(new, data.pop(old))
    kind = "probe" if meta.get("probe") else "pretrain" if meta.get("pretraining") else "finetune"
    upgraded = {**meta, "schema": SCHEMA, "kind": kind, **{spec.name: meta.get(spec.name, _empty(spec))
                                                          for spec in fields(ModelMeta) if spec.name != "kind"},
                "data": {**dict.fromkeys(DATA_KEYS), **data}}
    # the schema's order first; keys no longer written stay readable after it
    return {**{key: upgraded.get(key) for key in META_KEYS}, **upgraded}


def _empty(spec):
    return {"dict": dict, "list": list}.get(spec.type, lambda: None)()  # readers rely on containers being there


def update_meta(model_dir, changes: dict, current: dict | None = None) -> dict:
    """Replace top-level sections of an existing ``bertkit.json`` all-or-nothing (a crash leaves the
    old file); returns the new content. ``current``: the content already loaded, to skip a read."""
    fixed = set(changes) - set(META_KEYS) | ({"schema", "kind"} & set(changes))  # what wrote it stays true
    if fixed:
        raise ValueError(f"bertkit.json sections that an update cannot set: {sorted(fixed)}")
    meta = {**(load_meta(model_dir) if current is None else upgrade_meta(current)), **changes}
    write_json(Path(model_dir) / META_FILE, meta)
    return meta


def bertkit_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bertkit")
    except PackageNotFoundError:
        return "unknown"


def library_versions() -> dict:
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__}


def recorded_eval_data(meta: dict) -> str:
    recorded = meta.get("data", {})
    if recorded.get("name"):
        return recorded["name"]
    eval_file = recorded.get("eval_file") or recorded.get("eval")  # older models recorded only "eval"
    if not eval_file:
        raise BertkitError("this model was trained on a file without evaluation data, so there is nothing "
                           "recorded to evaluate on", "pass --data FILE")
    if not Path(eval_file).is_file():
        raise BertkitError(f"the evaluation file recorded at training time is gone: {eval_file}",
                           "pass --data FILE")
    return eval_file
