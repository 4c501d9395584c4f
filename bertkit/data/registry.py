"""Where data comes from: the known dataset names (bertkit/data/known_datasets.py), and
``resolve``, which turns ``--data`` into a Source: a known name, a file, or any other `datasets`
dataset (a Hub id, a repository-layout or save_to_disk directory: bertkit/data/hub_datasets.py).

A local data directory (``--data-dir``, else ``BERTKIT_DATA_DIR``, else ``../shared/data`` from the
current directory or beside this checkout, the first that exists) is tried first with the original
file names (``<dir>/sst2/train.tsv``), the Hugging Face Hub second.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from bertkit.data import hub_datasets
from bertkit.data.hub_datasets import DatasetChoice
from bertkit.data.known_datasets import DATASETS, DatasetSpec
from bertkit.errors import BertkitError
from bertkit.events import notice

DATA_DIR_ENV = "BERTKIT_DATA_DIR"
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class Source:
    """Where one split comes from: a local file (``path``) or a Hub dataset (``hub_id``)."""

    description: str
    spec: DatasetSpec | None = None
    split: str | None = None
    path: Path | None = None
    looked_in: Path | None = None  # the data directory that did not have the file (Hub sources)
    limit: int | None = None  # read only the first rows (--max-train-samples): any dataset's split
    stream: bool = False  # any dataset: stream the split (its run reads part of the dataset)
    # what bertkit.json records of it (model_dir.data_record): the dataset's name (a known name, a Hub
    # id, a dataset directory; None for a file) and where a known dataset's files were found
    name: str | None = None
    data_dir: Path | None = None


def data_dir(explicit: str | None = None) -> Path | None:
    """The data directory given: ``--data-dir``, else ``$BERTKIT_DATA_DIR`` (None: neither)."""
    value = explicit or os.environ.get(DATA_DIR_ENV)
    return Path(value).expanduser() if value else None


def default_data_dirs() -> list[Path]:
    """Where a known dataset's files are looked for when no directory is given: ``../shared/data``
    from the current directory, then beside this checkout (what ``make`` sets; an editable install)."""
    found = [Path.cwd().parent / "shared" / "data", Path(__file__).resolve().parents[3] / "shared" / "data"]
    return list(dict.fromkeys(path.resolve() for path in found))


def local_data_dir(explicit: str | None = None) -> Path | None:
    """The data directory to read: the one given, else the first default that exists."""
    given = data_dir(explicit)
    if given is not None:
        return given
    return next((path for path in default_data_dirs() if path.is_dir()), None)


def _no_data_dir() -> str:
    tried = ", ".join(map(str, default_data_dirs()))
    return f"no data directory was given (--data-dir or {DATA_DIR_ENV}) or found (tried {tried})"


def is_known(name: str) -> bool:
    return name in DATASETS


def resolve(
    data: str,
    split: str,
    explicit_dir: str | None = None,
    task: str | None = None,
    command: str = "finetune",
    choice: DatasetChoice | None = None,
    limit: int | None = None,
) -> Source:
    """Turn ``--data NAME|PATH|DATASET`` and a split (train, dev, test; any dataset's own split
    name too) into a Source, local files first, carrying what bertkit.json records of it. ``command``
    is the CLI command asking, so that hints name only what that command can do; ``choice``:
    --data-config and the split flags; ``limit``: the rows a dataset's split is read to (files are
    read whole)."""
    source = _located(data, split, explicit_dir, task, command, choice, limit)
    found_in = data_dir(explicit_dir) if is_known(data) else None
    return dataclasses.replace(source, name=dataset_name(data), data_dir=found_in)


def _located(data, split, explicit_dir, task, command, choice, limit) -> Source:
    path = Path(data).expanduser()
    if data not in DATASETS:
        if path.is_file():
            return Source(str(path), path=path)
        if hub_datasets.looks_like_dataset(data, path):
            return _any_dataset(data, split, choice or DatasetChoice(), limit)
        if path.is_dir():
            raise BertkitError(
                f"--data {data} is a directory",
                "pass a file, a known dataset name with --data-dir, or a dataset directory (save_to_disk, or "
                "the Hub's layout: README.md and data/)",
            )
        known = ", ".join(sorted(DATASETS))
        if path.suffix or os.sep in data:
            raise BertkitError(f"file not found: {data}", f"check the path, or use a known dataset name ({known})")
        raise BertkitError(f"--data {data}: no such file and not a known dataset", f"known names: {known}")
    spec = DATASETS[data]
    if task and spec.task != task and task not in spec.also_for:
        if command == "finetune":
            raise BertkitError(
                f"dataset {data} is for the '{spec.task}' task, not '{task}'", f"use `bertkit finetune {spec.task}`"
            )
        raise BertkitError(
            f"dataset {data} is for the '{spec.task}' task, but this is a '{task}' model",
            f"evaluate it on {task} data (`bertkit datasets` lists each name's task)",
        )
    if split not in spec.files and split not in spec.hub_splits:
        raise BertkitError(f"dataset {data} has no split {split!r}", f"splits: {', '.join(spec.files)}")
    if command == "eval" and split in spec.unlabelled:
        raise BertkitError(
            f"{data} split {split!r} has no labels (the benchmark withholds them), so it cannot be scored",
            "evaluate on --split dev, or run `bertkit predict` on that file",
        )
    root = local_data_dir(explicit_dir)
    if root is not None and split in spec.files:
        local = root / data / spec.files[split]
        if local.is_file():
            return Source(str(local), spec, split, local)
    if split not in spec.hub_splits:
        raise BertkitError(f"{data} split {split!r} is not in the data directory {root}", "check --data-dir")
    where = spec.hub_id + (f" ({spec.hub_config})" if spec.hub_config else "")
    return Source(f"Hub {where} split {spec.hub_splits[split]}", spec, split, looked_in=root)


def _any_dataset(data: str, split: str, choice: DatasetChoice, limit, required: bool = True, stream: bool = False):
    """A Source for one split of a dataset that is not a known name (None: no such split, where
    ``required`` is False)."""
    located = hub_datasets.locate(data, choice, ", ".join(sorted(DATASETS)))
    name = located.split_of(split, choice, required)
    if split == "dev" and choice.eval_split is None and name != "validation":  # a default the user may not want
        said = f"evaluating on its {name!r} split" if name else "no evaluation data"
        notice(
            "data",
            f"{data} has no validation split ({', '.join(located.splits)}): {said}; --eval-split names another",
            dataset=data,
            split=name,
        )
    if name is None:
        return None
    spec = DatasetSpec(
        data,
        "",
        {},
        located.where,
        located.config,
        {split: name},
        column_labels=located.labels_by_column(name),
        located=located,
    )
    return Source(located.describe(name), spec, split, limit=limit, stream=stream)


def is_any_dataset(source: Source) -> bool:
    return source.spec is not None and source.spec.located is not None


def read_hub(source: Source, from_records, purpose: str):
    """A Hub source's records through a task's ``from_records(records, source, purpose, hub=True)``;
    for any dataset, an error reading them names the columns' features (what the data offered)."""
    records = load_hub_records(source)
    try:
        return from_records(records, source, purpose, hub=True)
    except BertkitError as exc:
        if not is_any_dataset(source) or not source.spec.located.features:
            raise
        raise BertkitError(f"{exc.message} (features: {source.spec.located.feature_list()})", exc.hint) from exc


def load_hub_records(source: Source) -> list[dict]:
    from bertkit.hub import use_hub_or_cache

    spec = source.spec
    if spec.located is not None:
        return hub_datasets.load_rows(spec.located, spec.hub_splits[source.split], source.limit, source.stream)
    # Offline, datasets would spend up to a minute in retries: one quick probe decides, and the
    # local Hugging Face cache still serves a dataset downloaded earlier.
    online = use_hub_or_cache()
    try:
        import datasets

        if not online:
            datasets.config.HF_HUB_OFFLINE = True  # read at import time; it may have been imported already
        dataset = datasets.load_dataset(spec.hub_id, spec.hub_config, split=spec.hub_splits[source.split])
    except Exception as exc:  # the Hub raises many types (connection, offline mode, missing repo)
        where = f"not in {source.looked_in / spec.name}" if source.looked_in else _no_data_dir()
        why = "the Hub is unreachable and it is not in the local cache" if not online else type(exc).__name__
        raise BertkitError(
            f"could not load {spec.name}: {where}, and not from the Hugging Face Hub ({why})",
            f"put the original files ({', '.join(spec.files.values())}) in <data dir>/{spec.name}/ and pass "
            f"--data-dir or set {DATA_DIR_ENV}",
        ) from exc
    return [dict(row) for row in dataset]


def describe_all(explicit_dir: str | None = None) -> list[dict]:
    """One row per known dataset: name, task, and where its train split would load from."""
    rows = []
    for name, spec in DATASETS.items():
        source = None
        try:
            source = resolve(name, "train", explicit_dir)
        except BertkitError:
            pass
        rows.append(
            {
                "name": name,
                "task": spec.task,
                "problem_type": spec.problem_type,
                "source": source.description if source else "unavailable",
                "labels": list(spec.label_names or []),
            }
        )
    return rows


def eval_source(
    data, eval_data, data_dir, task, choice: DatasetChoice | None = None, limit=None, stream: bool = False
) -> Source | None:
    """Where a training run evaluates: --eval-data, else a known dataset's dev split, else any
    dataset's evaluation split (--eval-split; default validation, dev or test), else None.
    ``stream``: the run reads part of its training data, so the dataset is not downloaded whole."""
    choice = choice or DatasetChoice()
    if eval_data:
        source = resolve(eval_data, "dev", data_dir, task, choice=choice, limit=limit)
        return dataclasses.replace(source, stream=stream) if is_any_dataset(source) else source
    if is_known(data):
        return resolve(data, DATASETS[data].dev_split, data_dir, task)
    if _is_any(data):
        return _any_dataset(data, "dev", choice, limit, choice.eval_split is not None, stream)
    return None


def check_choice(data: str, eval_data: str | None, choice: DatasetChoice) -> DatasetChoice:
    """``choice`` when --data (or --eval-data) is a dataset it can apply to; --data-config or a
    split flag given with only files and known names is a mistake, said before anything is read."""
    given = [name for name, value in vars(choice).items() if value is not None]
    if not given or any(_is_any(d) for d in (data, eval_data) if d):
        return choice
    flags = ", ".join("--" + ("data-config" if n == "config" else n.replace("_", "-")) for n in given)
    raise BertkitError(
        f"{flags} applies only to a Hub dataset or a dataset directory, not to --data {data}"
        + (" (a known dataset)" if is_known(data) else ""),
        "drop it (a known dataset's splits are fixed; a file is one split)",
    )


def _is_any(data: str) -> bool:
    path = Path(data).expanduser()
    return not is_known(data) and not path.is_file() and hub_datasets.looks_like_dataset(data, path)


def dataset_name(data: str) -> str | None:
    """What a model records as the dataset it learned from, for `bertkit eval DIR`: a known name, a
    Hub id, a dataset directory's absolute path; None for a file (its path is recorded instead)."""
    if is_known(data) or not _is_any(data):
        return data if is_known(data) else None
    path = Path(data).expanduser()
    return str(path.resolve()) if path.is_dir() else data


def takes_split(data: str) -> bool:
    """Whether ``data`` has splits to choose from (eval --split): a known name or any dataset."""
    return is_known(data) or _is_any(data)
