"""Any `datasets` dataset as bertkit data, as HF's run_glue.py / run_ner.py take it: a Hub id
(``imdb``, ``owner/name``), a local directory in the Hub's repository layout (data files plus a
README whose YAML names the ``configs``), or a directory written by ``save_to_disk``.

A Hub id and a repository-layout directory go through the same ``datasets.load_dataset`` call.
``locate`` settles the config, the splits and the features before anything is read (so a wrong
``--data-config`` or split costs seconds); ``load_rows`` reads one split, only its first rows when a
limit is given (streamed, or a slice of the cached Arrow table offline). Label names come from the
``ClassLabel`` / ``Sequence(ClassLabel)`` features, each split's own (bertkit/data/split_features.py:
splits may number their classes apart). Offline (bertkit/hub.py decides fast), the
``datasets`` cache serves a dataset loaded before.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from bertkit.data import formats
from bertkit.data.split_features import class_labels, parquet_features, saved_features
from bertkit.errors import BertkitError

# each role's split when none is named: HF's scripts' train / validation / test
ROLE_SPLITS = {"train": ("train",), "dev": ("validation", "dev", "valid", "test"), "test": ("test",)}
ROLE_FLAGS = {"train": "--train-split", "dev": "--eval-split", "test": "--test-split"}
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
FILE_SUFFIXES = formats.suffixes() + formats.DATASET_ONLY_SUFFIXES  # a name ending so is a file, not a Hub id
PLAIN_TYPES = ("Value", "ClassLabel", "List", "Sequence", "LargeList")
SAVED_FILES = ("dataset_dict.json", "state.json")  # what save_to_disk writes (a DatasetDict, a Dataset)


@dataclass(frozen=True)
class DatasetChoice:
    """``--data-config`` and the three split names (None: the role's default split)."""

    config: str | None = None
    train_split: str | None = None
    eval_split: str | None = None
    test_split: str | None = None

    @classmethod
    def of(cls, options) -> "DatasetChoice":
        """From any options object (or dict: a model's recorded config) with ``data_config``,
        ``train_split``, ... (absent: None)."""
        names = ("data_config", "train_split", "eval_split", "test_split")
        if isinstance(options, dict):
            return cls(*(options.get(name) for name in names))
        return cls(*(getattr(options, name, None) for name in names))

    def given(self) -> bool:
        return any(value is not None for value in vars(self).values())

    def split_for(self, role: str) -> str | None:
        return {"train": self.train_split, "dev": self.eval_split, "test": self.test_split}.get(role)


@dataclass(frozen=True)
class Located:
    """A dataset found: where (a Hub id or a directory), how it loads, its config, splits, features."""

    data: str  # as given
    where: str  # the Hub id, or the directory's absolute path
    kind: str  # "hub", "repo" (a local directory in the Hub's layout) or "disk" (save_to_disk)
    config: str | None
    splits: tuple
    features: dict = field(default_factory=dict)  # column -> datasets feature (empty: not known before loading)
    split_features: dict = field(default_factory=dict)  # split -> its own features, where known

    def describe(self, split: str) -> str:
        what = {"hub": "Hub", "repo": "dataset directory", "disk": "saved dataset"}[self.kind]
        return f"{what} {self.where}" + (f" ({self.config})" if self.config else "") + f" split {split}"

    def split_of(self, role: str, choice: DatasetChoice, required: bool = True) -> str | None:
        """The split that plays ``role`` (train, dev, test, or a split's own name, as eval --split
        gives it); None where ``required`` is False and the dataset has no default one."""
        named = choice.split_for(role) or (role if role not in ROLE_SPLITS else None)
        if named is not None:
            if named not in self.splits:
                flag = ROLE_FLAGS.get(role, "--split")
                raise BertkitError(
                    f"{self.data}: no split {named!r}" + (f" ({self.config})" if self.config else ""),
                    f"name one of its splits with {flag}: {', '.join(self.splits)}",
                )
            return named
        found = next((name for name in ROLE_SPLITS[role] if name in self.splits), None)
        if found is None and required:
            raise BertkitError(
                f"{self.data} has no {'/'.join(ROLE_SPLITS[role])} split (splits: {', '.join(self.splits)})",
                f"name the {role} split with {ROLE_FLAGS[role]}",
            )
        return found

    def features_of(self, split: str | None) -> dict:
        """The split's own features (a split may number its classes apart), else the dataset's."""
        return self.split_features.get(split) or self.features

    def labels_by_column(self, split: str | None = None) -> dict:
        """column -> label names (the split's own), for every ClassLabel and Sequence(ClassLabel) feature."""
        return class_labels(self.features_of(split))

    def feature_list(self) -> str:
        return ", ".join(f"{column}: {describe_feature(feature)}" for column, feature in self.features.items())


def looks_like_dataset(data: str, path: Path) -> bool:
    """A dataset directory, or what could be a Hub id (``name``, ``owner/name``) rather than a file
    path. A plain folder of files is not a dataset (it stays "a directory" to the user)."""
    if path.is_dir():
        return is_saved_dataset(path) or (path / "data").is_dir() or _dataset_card(path / "README.md")
    return not path.exists() and bool(HUB_ID.match(data)) and not data.lower().endswith(FILE_SUFFIXES)


def _dataset_card(readme: Path) -> bool:
    """A README whose YAML header describes a dataset (``configs`` or ``dataset_info``), not a model
    card (a bertkit model directory has a README too)."""
    try:
        head = readme.read_text(encoding="utf-8", errors="replace")[:65536] if readme.is_file() else ""
    except OSError:
        return False
    if not head.startswith("---"):
        return False
    header = head.split("\n---", 1)[0]
    return bool(re.search(r"^(configs|dataset_info):", header, re.M))


def is_saved_dataset(path: Path) -> bool:
    return any((path / name).is_file() for name in SAVED_FILES)


@contextlib.contextmanager
def quiet():
    """datasets' progress bars and log lines kept off the console while bertkit reads: a failure is
    one error line, and a success says what it read in bertkit's own words."""
    from datasets import utils
    from datasets.utils import logging as datasets_logging

    shown, level = not utils.are_progress_bars_disabled(), datasets_logging.get_verbosity()
    utils.disable_progress_bars()
    datasets_logging.set_verbosity(logging.CRITICAL + 1)
    try:
        yield
    finally:
        datasets_logging.set_verbosity(level)
        if shown:
            utils.enable_progress_bars()


def locate(data: str, choice: DatasetChoice, known: str) -> Located:
    """The dataset ``data`` names, with its config and splits settled; ``known`` lists the
    registry's names for the message when it is nowhere."""
    with quiet():
        return _locate(data, choice, known)


def _locate(data: str, choice: DatasetChoice, known: str) -> Located:
    path = Path(data).expanduser()
    if path.is_dir() and is_saved_dataset(path):
        return _saved(data, path.resolve(), choice)
    if path.is_dir():
        return _loadable(data, str(path.resolve()), "repo", choice, online=True, known=known)
    from bertkit.hub import use_hub_or_cache

    online = use_hub_or_cache()
    if not online:
        import datasets

        datasets.config.HF_HUB_OFFLINE = True  # read at import time; it may have been imported already
    return _loadable(data, data, "hub", choice, online=online, known=known)


def _saved(data: str, path: Path, choice: DatasetChoice) -> Located:
    if choice.config:
        raise BertkitError(
            f"--data-config {choice.config}: {data} was written by save_to_disk, which keeps no configs",
            "drop --data-config (its splits are named with --train-split, --eval-split, --test-split)",
        )
    dataset = _load_saved(path)
    if hasattr(dataset, "features"):  # one Dataset: it is the train split
        return Located(data, str(path), "disk", None, ("train",), dict(dataset.features))
    splits = tuple(dataset)
    features = dict(dataset[splits[0]].features) if splits else {}
    return Located(data, str(path), "disk", None, splits, features, saved_features(dataset, splits))


def _load_saved(path: Path):
    import datasets

    try:
        return datasets.load_from_disk(str(path))
    except Exception as exc:  # a damaged directory fails in many ways inside datasets and pyarrow
        raise BertkitError(
            f"cannot read the saved dataset {path} ({_said(exc)})",
            "write it again with Dataset.save_to_disk / DatasetDict.save_to_disk",
        ) from exc


def _loadable(data: str, where: str, kind: str, choice: DatasetChoice, online: bool, known: str) -> Located:
    """A Hub id or a repository-layout directory: config names, the builder, its splits, features."""
    import datasets

    if kind == "hub" and not online:
        builder = _cached_builder(data, choice.config, known)
        config = builder.config.name if builder.config.name != "default" else None
    else:
        try:
            configs = datasets.get_dataset_config_names(where)
        except Exception as exc:  # DatasetNotFoundError, connection errors, bad READMEs
            raise _not_found(data, kind, online, known, exc) from exc
        config = _config(data, configs, choice.config, where)
        try:
            builder = datasets.load_dataset_builder(where, config)
        except Exception as exc:
            raise _not_found(data, kind, online, known, exc) from exc
    files = getattr(builder.config, "data_files", None)
    splits = tuple(map(str, files if files else builder.info.splits or ()))  # NamedSplit or str
    if not splits:
        raise BertkitError(f"{data}: no data files found" + (f" ({config})" if config else ""), _LAYOUT_HINT)
    located = Located(data, where, kind, config, splits)
    features = builder.info.features
    # the README declares no features: datasets takes the first file's for every split (split_features.py)
    own = parquet_features(data, files) if kind == "repo" and features is None else {}
    if features is None and (online or kind == "repo"):
        try:
            features = _streamed(where, config, splits[0]).features  # the data files' own schema, nothing read
        except Exception as exc:  # a damaged file, a connection lost
            raise BertkitError(f"could not read {located.describe(splits[0])} ({_said(exc)})", _FILES_HINT) from exc
    return Located(data, where, kind, config, splits, dict(features or {}), own)


def _cached_builder(data: str, config: str | None, known: str):
    """Offline: the builder of a Hub dataset in the datasets cache (its config names are the cached
    ones: the Hub's list cannot be asked)."""
    import datasets

    try:
        return datasets.load_dataset_builder(data, config)
    except ValueError as exc:
        if config is None or f"config '{config}'" not in str(exc):
            raise _not_found(data, "hub", False, known, exc) from exc
        raise BertkitError(
            f"{data} has no config {config!r} in the datasets cache, and the Hub is unreachable ({_said(exc)})",
            "name a cached config with --data-config, or load this one once with the Hub reachable",
        ) from exc
    except Exception as exc:  # not cached at all
        raise _not_found(data, "hub", False, known, exc) from exc


_FILES_HINT = "check the dataset's files, or pass a data file"
_LAYOUT_HINT = "put the data files (parquet, csv, json) under data/ with a README whose YAML names its configs"


def _config(data: str, configs: list, given: str | None, where: str) -> str | None:
    if given is not None:
        if given not in configs:
            raise BertkitError(
                f"{data} has no config {given!r} (configs: {', '.join(configs)})",
                "name one of them with --data-config",
            )
        return given
    if len(configs) <= 1:
        return configs[0] if configs and configs[0] != "default" else None
    import datasets

    default = datasets.get_dataset_default_config_name(where)
    if default is None:
        raise BertkitError(
            f"{data} has {len(configs)} configs and none is its default ({', '.join(configs)})",
            "choose one with --data-config",
        )
    return default


def _not_found(data: str, kind: str, online: bool, known: str, exc: Exception) -> BertkitError:
    if kind == "repo":
        return BertkitError(
            f"--data {data} is a directory but not a dataset datasets can load ({_said(exc)})",
            _LAYOUT_HINT + ", or pass a data file",
        )
    why = (
        "the Hub is unreachable and it is not in the datasets cache" if not online else _said(exc)
    )  # gated, missing...
    return BertkitError(
        f"--data {data}: no such file or directory, not a known dataset, and not a Hugging Face dataset ({why})",
        f"known names: {known}; a Hub id (owner/name) needs the Hub or a copy in the datasets cache",
    )


def _streamed(where: str, config: str | None, split: str, features=None):
    import datasets

    return datasets.load_dataset(where, config, split=split, streaming=True, features=features)


def load_rows(located: Located, split: str, limit: int | None, stream: bool = False) -> list[dict]:
    """The rows of ``split`` as plain dicts (at most ``limit``), without the columns bertkit cannot
    read (images, audio...: not decoded). A directory is streamed (only that split is read, nothing
    is cached); the Hub too where a limit is given or ``stream`` asks (a run that reads part of a
    dataset must not download all of it); else the Hub's split is prepared in the datasets cache,
    where an offline run finds it (a slice of the memory-mapped table when a limit is given)."""
    with quiet():
        return _rows(located, split, limit, stream)


def _rows(located: Located, split: str, limit: int | None, stream: bool) -> list[dict]:
    import datasets

    from bertkit.hub import hub_reachable

    own = located.features_of(split)
    dropped = [column for column, feature in own.items() if not usable(feature)]
    try:
        if located.kind == "disk":
            dataset = _load_saved(Path(located.where))
            dataset = dataset if hasattr(dataset, "features") else dataset[split]
            dataset = dataset.select(range(min(limit, len(dataset)))) if limit is not None else dataset
        elif located.kind == "repo" or (hub_reachable() and (limit is not None or stream)):
            # a split whose files carry features of their own is read with them, not the first split's
            given = datasets.Features(own) if own and own != located.features else None
            dataset = _streamed(located.where, located.config, split, given)
            dataset = dataset.remove_columns(dropped) if dropped else dataset
            # islice, not take(): take reads ahead in batches, into shards past the first rows
            return [dict(row) for row in itertools.islice(iter(dataset), limit)]
        else:
            part = split if limit is None else f"{split}[:{limit}]"
            dataset = datasets.load_dataset(located.where, located.config, split=part)
        dataset = dataset.remove_columns(dropped) if dropped else dataset
        return dataset.to_list()
    except BertkitError:
        raise
    except Exception as exc:  # files that do not parse, a cache gone since locate, a connection lost
        raise BertkitError(f"could not read {located.describe(split)} ({_said(exc)})", _FILES_HINT) from exc


def usable(feature) -> bool:
    """Whether bertkit can read values of this feature: strings, numbers, class labels, and lists
    and records of them (SQuAD's ``answers``); not images, audio, arrays or bytes."""
    if isinstance(feature, dict):
        return all(usable(inner) for inner in feature.values())
    kind = _type(feature)
    if kind not in PLAIN_TYPES:
        return False
    if kind == "Value":
        return "binary" not in str(feature.dtype)
    inner = getattr(feature, "feature", None)
    return inner is None or usable(inner)


def describe_feature(feature) -> str:
    if isinstance(feature, dict):
        return "{" + ", ".join(f"{key}: {describe_feature(value)}" for key, value in feature.items()) + "}"
    kind = _type(feature)
    if not usable(feature) and kind not in PLAIN_TYPES[2:]:
        return f"{getattr(feature, 'dtype', None) if kind == 'Value' else kind} (bertkit cannot read this type)"
    if kind == "Value":
        return str(feature.dtype)
    if kind == "ClassLabel":
        names = list(feature.names)
        return f"ClassLabel({', '.join(names[:6])}{', ...' if len(names) > 6 else ''})"
    return f"list of {describe_feature(feature.feature)}"


def _said(exc: Exception) -> str:
    """An exception from datasets or pyarrow in one short line (their messages run over lines)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:160]}{'...' if len(text) > 160 else ''}" if text else type(exc).__name__


def _type(feature) -> str:
    return getattr(feature, "_type", type(feature).__name__)
