"""``bertkit.json``: one schema for every kind of model directory, one builder (ModelMeta), one
writer (save_model_dir), one updater (update_meta), and the upgrade of older versions on load."""

from __future__ import annotations

import json
import platform
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.model_dir.files import META_FILE, write_json

SCHEMA = 2
KINDS = ("finetune", "probe", "pretrain", "multi-head")
DATA_KEYS = ("name", "train", "data_dir", "eval", "eval_file", "train_examples", "eval_examples")


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
    seeds: dict | None = None  # --seeds: every seed's metrics and their spread (bertkit.api.seeds)
    tune: dict | None = None  # bertkit tune: the study, every trial, the importances (bertkit.api.tuning)
    folds: dict | None = None  # --folds: every fold's metrics and their spread (bertkit.api.folds)
    warnings: list | None = None  # what the run said of its model (degenerate, a baseline not beaten)
    baselines: list | None = None  # the trivial baselines on the evaluation data, judged (bertkit.metrics.baselines)
    distillation: dict | None = None  # bertkit distill: the teacher, the student, the loss, the measured ratios
    lora: dict | None = None  # finetune --lora: rank, alpha, targets, trainable parameters, base model, how saved
    methods: list | None = None  # the training methods that made it, in order (bertkit/methods/)
    calibration: dict | None = None  # --calibrate / bertkit calibrate: the temperature, ECE and Brier, conformal scores
    sections: dict = field(default_factory=dict)  # sections a task or method adds: a field above, or its own key

    def to_json(self) -> dict:
        if self.kind not in KINDS or set(self.data) != set(DATA_KEYS):
            raise ValueError(f"bertkit.json: kind {self.kind!r}, data keys {sorted(self.data)}: use data_record()")
        fixed = {k: v for k, v in asdict(self).items() if k != "sections"}
        record = {
            "schema": SCHEMA,
            "bertkit_version": bertkit_version(),
            **fixed,
            **self.sections,
            "data": {key: self.data[key] for key in DATA_KEYS},
            "versions": library_versions(),
        }
        if self.runtime is not None:  # the passing load notice is for the console, not the record
            record["runtime"] = {k: v for k, v in self.runtime.items() if k != "notice"}
        extra = {key: value for key, value in self.sections.items() if key not in META_KEYS}  # a new method's
        return {**{key: record[key] for key in META_KEYS}, **extra}


META_KEYS = (
    "schema",
    "kind",
    "bertkit_version",
    "task",
    "base_model",
    "data",
    "config",
    "metrics",
    "best_epoch",
    "best_step",
    "resumed_from",
    "history",
    "throughput",
    "preprocessing",
    "stopped_early",
    "runtime",
    "versions",
    "eval_details",
    "before",
    "probe",
    "pretraining",
    "seeds",
    "tune",
    "folds",
    "warnings",
    "baselines",
    "distillation",
    "lora",
    "methods",
    "calibration",
)


def data_record(
    train_source,
    eval_source,
    train_examples: int,
    eval_examples: int,
    name: str | None = None,
    data_dir=None,
    eval_description: str | None = None,
) -> dict:
    """The ``data`` section from the registry's sources (``.description``, ``.path``)."""
    return {
        "name": name,
        "train": train_source.description,
        "data_dir": str(data_dir) if data_dir else None,
        "eval": eval_description or (eval_source.description if eval_source else None),
        # absolute, so that `bertkit eval DIR` finds a file-based eval set from any directory
        "eval_file": str(eval_source.path.resolve()) if eval_source and eval_source.path else None,
        "train_examples": train_examples,
        "eval_examples": eval_examples,
    }


def save_model_dir(directory: Path, model, tokenizer, meta: ModelMeta, save_weights=None) -> dict:
    """Save the model, its tokenizer and ``bertkit.json``; returns what bertkit.json holds.
    ``save_weights(directory, model)`` writes the model's files instead of ``save_pretrained``
    (LoRA's adapter directory)."""
    if save_weights is not None:
        save_weights(directory, model)
    else:
        model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    record = meta.to_json()
    write_json(directory / META_FILE, record)  # last: a directory with bertkit.json is complete
    return record


def directory_kind(model_dir: str) -> str | None:
    """The ``kind`` a model directory's bertkit.json names, peeked without loading it (which command
    path takes the directory: that path then loads it once); None where there is no readable one
    (the loading says why)."""
    try:
        with open(Path(model_dir).expanduser() / META_FILE, encoding="utf-8") as handle:
            kind = json.load(handle).get("kind")
    except (OSError, ValueError, AttributeError):
        return None
    return kind if isinstance(kind, str) else None


def load_meta(model_dir: str) -> dict:
    """``bertkit.json`` of ``model_dir`` as schema 2, whichever version wrote it; a file that is
    unreadable, not JSON, or lacks what its schema requires is one BertkitError (every command
    reads it here, so every command says the same)."""
    path = Path(model_dir).expanduser()
    if not path.is_dir():
        raise BertkitError(f"model directory not found: {model_dir}", "pass the --output of `bertkit finetune`")
    meta_path = path / META_FILE
    if not meta_path.is_file():
        raise BertkitError(
            f"{model_dir} is not a bertkit model (no {META_FILE})", "pass the --output of `bertkit finetune`"
        )
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except OSError as exc:  # say why: a file that is there but cannot be read is not "missing"
        raise BertkitError(
            f"{meta_path} cannot be read ({exc.strerror or exc})",
            "make it readable for this user (chmod a+r), or run as its owner",
        ) from exc
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        what = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8 JSON"
        raise BertkitError(f"{meta_path} is corrupt ({what})", BROKEN_META_HINT) from exc
    meta = upgrade_meta(meta, meta_path)
    heads = meta.get("heads") if meta["kind"] == "multi-head" else None  # bertkit finetune multi: a task per head
    for task in [head.get("task") for head in heads] if isinstance(heads, list) else [meta["task"]]:
        _check_task_section(task, meta_path)
        _check_labels(task, meta_path)
    return meta


def _check_labels(task: dict, where) -> None:
    """A saved classifier or tagger names its outputs (``upgrade_meta`` alone also takes partial dicts)."""
    from bertkit.tasks import task_from_state  # torch-free; an unknown task is its own one line

    if task_from_state(task).names_outputs and not task.get("labels"):
        raise BertkitError(f"{where} is corrupt (a {task['task']} model without its label names)", BROKEN_META_HINT)


BROKEN_META_HINT = "restore the file from a copy, or fine-tune the model again"
REQUIRED = {1: ("task",), 2: ("schema", "kind", "task", "base_model", "data", "config")}  # per schema version
SECTION_TYPES = {
    "task": dict,
    "base_model": (str, type(None)),
    "data": dict,
    "config": dict,
    "metrics": dict,
    "history": list,
    "throughput": dict,
    "preprocessing": (dict, type(None)),
    "runtime": (dict, type(None)),
    "eval_details": (dict, type(None)),
    "before": (dict, type(None)),
    "probe": (dict, type(None)),
    "pretraining": (dict, type(None)),
    "seeds": (dict, type(None)),
    "tune": (dict, type(None)),
    "folds": (dict, type(None)),
    "warnings": (list, type(None)),
    "distillation": (dict, type(None)),
    "lora": (dict, type(None)),
    "methods": (list, type(None)),
    "calibration": (dict, type(None)),
}
LATER = ("seeds", "tune", "folds", "warnings", "baselines", "distillation", "lora", "methods", "calibration")
TASK_KEYS = {"task": str, "max_length": (int, type(None)), "options": (dict, type(None)), "labels": (list, type(None))}


def upgrade_meta(meta, where="bertkit.json") -> dict:
    """``meta`` as schema 2: a version-1 dict gets the keys it lacks (null or empty), in order."""
    if not isinstance(meta, dict):
        raise BertkitError(f"{where} is corrupt ({_json_type(meta)}, not a JSON object)", BROKEN_META_HINT)
    version = meta.get("schema", 1)
    if version not in range(1, SCHEMA + 1) or isinstance(version, bool):
        raise BertkitError(
            f"{where} has schema {version!r}; this bertkit reads schema 1 to {SCHEMA}",
            "upgrade bertkit (pip install -U bertkit)",
        )
    missing = [key for key in REQUIRED[version] if key not in meta]
    if missing:
        raise BertkitError(
            f"{where} is corrupt (schema {version} requires {', '.join(map(repr, missing))})", BROKEN_META_HINT
        )
    _check_task_section(meta["task"], where)
    if version == SCHEMA:
        later = {key: meta.get(key) for key in LATER}  # sections added later: null if absent
        return _checked({**meta, **later}, where)
    data = dict(meta.get("data") or {})
    for old, new in (("train_documents", "train_examples"), ("eval_documents", "eval_examples")):
        if old in data:  # version 1 of pretrain counted documents under their own names
            data.setdefault(new, data.pop(old))
    kind = "probe" if meta.get("probe") else "pretrain" if meta.get("pretraining") else "finetune"
    upgraded = {
        **meta,
        "schema": SCHEMA,
        "kind": kind,
        **{
            spec.name: meta.get(spec.name, _empty(spec))
            for spec in fields(ModelMeta)
            if spec.name not in ("kind", "sections")
        },
        "data": {**dict.fromkeys(DATA_KEYS), **data},
    }
    # the schema's order first; keys no longer written stay readable after it
    return _checked({**{key: upgraded.get(key) for key in META_KEYS}, **upgraded}, where)


def _check_task_section(task, where) -> None:
    """What ``tasks.task_from_state`` needs to rebuild the task."""
    if not isinstance(task, dict):
        raise BertkitError(f"{where} is corrupt (its task section is not an object)", BROKEN_META_HINT)
    for key, kind in TASK_KEYS.items():
        if key in ("task", "max_length") and key not in task:
            raise BertkitError(f"{where} is corrupt (its task section has no {key!r})", BROKEN_META_HINT)
        if key in task and (not isinstance(task[key], kind) or isinstance(task[key], bool)):
            raise BertkitError(f"{where} is corrupt (task.{key} is {_json_type(task[key])})", BROKEN_META_HINT)


def _checked(meta: dict, where) -> dict:
    """Every section there of the type its readers expect."""
    if meta["kind"] not in KINDS:
        raise BertkitError(f"{where} is corrupt (kind {meta['kind']!r}; one of {', '.join(KINDS)})", BROKEN_META_HINT)
    for key, kind in SECTION_TYPES.items():
        if key in meta and not isinstance(meta[key], kind):
            raise BertkitError(f"{where} is corrupt ({key} is {_json_type(meta[key])})", BROKEN_META_HINT)
    if meta.get("probe"):
        _check_probe_section(meta["probe"], where)
    return meta


def _check_probe_section(probe: dict, where) -> None:
    """The pooling a probe's predictions and card rebuild (an edited one failed deep in either)."""
    from bertkit.networks.pooling import parse_pooling

    pooling = probe.get("pooling")
    try:
        if not isinstance(pooling, str):
            raise BertkitError(f"it is {_json_type(pooling)}")
        parse_pooling(pooling)
    except BertkitError as exc:
        raise BertkitError(f"{where} is corrupt (probe.pooling {pooling!r}: {exc.message})", BROKEN_META_HINT) from None


def _json_type(value) -> str:
    if isinstance(value, bool):
        return "true/false"
    return {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number"}.get(
        type(value), "null"
    )


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
        raise BertkitError(
            "this model was trained on a file without evaluation data, so there is nothing recorded to evaluate on",
            "pass --data FILE",
        )
    if not recorded.get("eval_file") and not Path(eval_file).is_file():  # "eval" is a description, no file
        raise BertkitError(
            f"this model was evaluated on {eval_file}, which is not a file to evaluate on again", "pass --data FILE"
        )
    if not Path(eval_file).is_file():
        raise BertkitError(f"the evaluation file recorded at training time is gone: {eval_file}", "pass --data FILE")
    return eval_file
