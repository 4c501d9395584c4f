"""Each split's own features, so that each split's ClassLabel ids are read with its own names.

Splits written apart may number their classes apart: ``ClassLabel(names=["pos", "neg"])`` in the
validation split next to ``["neg", "neu", "pos"]`` in train (a class missing from one split, or
``class_encode_column`` run on each split). The ids mean nothing without the split's own names.

* save_to_disk keeps each split's features (``DatasetDict[split].features``): read there.
* A directory in the Hub's layout: ``datasets`` reads a config with ONE set of features, the first
  parquet file's schema when the README declares none (its parquet builder), and casts every split
  to it; a ClassLabel's integer ids pass that cast unchanged, so they would be read with the first
  split's names. Each split's parquet files carry their own features in their schema metadata
  (``huggingface``): read here, from the footers only, and that split is loaded with them.
  Features the README declares (``dataset_info``) are the dataset's own word for every split, and
  are kept. A Hub id is read with the config's features (its files are not opened before loading).
"""

from __future__ import annotations

from pathlib import Path

from bertkit.errors import BertkitError


def class_labels(features: dict) -> dict:
    """column -> label names, for every ClassLabel and Sequence(ClassLabel) feature."""
    found = {}
    for column, feature in features.items():
        inner = feature if _type(feature) == "ClassLabel" else getattr(feature, "feature", None)
        if _type(inner) == "ClassLabel":
            found[column] = tuple(inner.names)
    return found


def saved_features(dataset, splits: tuple) -> dict:
    """split -> its features, for a DatasetDict written by save_to_disk."""
    return {split: dict(dataset[split].features) for split in splits}


def parquet_features(data: str, files) -> dict:
    """split -> the features its local parquet files carry in their metadata (splits whose files
    carry none are left out). A split whose files disagree on a ClassLabel's names is refused:
    its ids cannot be read one way."""
    import datasets
    import pyarrow.parquet as pq

    found = {}
    for split, paths in (files or {}).items():
        seen = []  # (file, features) of the split's files that carry features
        for path in map(str, paths):
            if not path.endswith(".parquet") or not Path(path).is_file():
                continue
            try:
                schema = pq.read_schema(path)
            except Exception:  # a damaged file: loading the split says so, in its own words
                continue
            if b"huggingface" in (schema.metadata or {}):
                seen.append((path, dict(datasets.Features.from_arrow_schema(schema))))
        for (first, features), (other, more) in zip(seen, seen[1:]):
            for column, names in class_labels(features).items():
                if class_labels(more).get(column, names) != names:
                    raise BertkitError(
                        f"{data}: the {split} split's files name the {column!r} classes differently "
                        f"({Path(first).name}: {', '.join(names)}; "
                        f"{Path(other).name}: {', '.join(class_labels(more)[column])})",
                        "write the split's files with one ClassLabel (Dataset.cast_column), or keep one file per split",
                    )
        if seen:
            found[split] = seen[0][1]
    return found


def _type(feature) -> str:
    return getattr(feature, "_type", type(feature).__name__)
