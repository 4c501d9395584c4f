"""What cls and pair check in the rows they read, before any label is learned: the named label
columns, labels that look joined, rows without a label, a second text a single-text model would ignore."""

from __future__ import annotations

from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.tasks.multi_label import joined_labels, label_column_names


def label_columns(value: str, columns: list, source: str) -> list:
    wanted = label_column_names(value)
    missing = [c for c in wanted if c not in columns]
    if missing or len(wanted) < 2:
        raise BertkitError(
            f"{source}: --label-columns {value!r}: "
            + (f"no column {missing[0]!r}" if missing else "name at least two 0/1 columns"),
            f"columns found: {', '.join(columns)}",
        )
    return wanted


def refuse_joined_labels(values: list) -> None:
    """Labels like ``1,2`` with no --problem-type: single-label would make ``0,2`` a class of its own."""
    joined = joined_labels(values)
    if joined:
        shown = ", ".join(repr(label) for label in joined[:3]) + (", ..." if len(joined) > 3 else "")
        raise BertkitError(
            f"{len(joined)} label value(s) look like several labels joined in one field ({shown}); read as "
            "single-label, each would be a class of its own",
            "add --problem-type multi-label to read them as label sets, or --problem-type single-label "
            "to keep them as classes",
        )


def without_unlabelled(records: list[dict], spec, column, source: str, seen: dict) -> tuple[list[dict], dict]:
    """A dataset's ClassLabel marks a row without a label -1 (SNLI's no-consensus pairs, GLUE's test
    splits): such rows are left out, and it is said; a split of nothing but them is an error."""
    if spec is None or not isinstance(column, str) or column not in spec.column_labels:
        return records, seen
    kept = [record for record in records if record.get(column) != -1]
    if len(kept) == len(records):
        return records, seen
    if not kept:
        raise BertkitError(
            f"{source}: every row's {column!r} is -1 (no label: a split published without its labels)",
            "train and evaluate on labelled splits (--train-split, --eval-split); `bertkit predict` reads the rest",
        )
    said = f"{source}: {len(records) - len(kept)} row(s) without a label ({column} -1) left out"
    notice("data", said, rows=len(records) - len(kept))
    return kept, {**seen, "notices": [*seen.get("notices", []), said]}


def refuse_second_texts(records: list[dict], source: str) -> None:
    """A single-text model would silently ignore a second text (what follows a TAB in .txt)."""
    rows = [n for n, record in enumerate(records, 1) if str(record.get("text_pair") or "").strip()]
    if rows:
        where = ", ".join(map(str, rows[:5])) + (", ..." if len(rows) > 5 else "")
        raise BertkitError(
            f"{source}: {len(rows)} row(s) have a second text after a TAB (rows {where}), which a "
            "single-text (cls) model would ignore",
            "remove or replace the TABs to classify the whole line, or use a pair model "
            "(bertkit finetune pair) for two texts",
        )
