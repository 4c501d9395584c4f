"""Prediction rows as Arrow tables that every Ray batch, from any actor, gives the same schema."""

from __future__ import annotations

import json


def id_column_type(input_type):
    """The id column keeps the input's type when it is a string or a number (as `predict` keeps
    the value); anything else, or no id column, gives strings."""
    import pyarrow as pa

    if input_type is not None and (pa.types.is_integer(input_type) or pa.types.is_floating(input_type)):
        return pa.int64() if pa.types.is_integer(input_type) else pa.float64()
    return pa.string()


def batch_name(records: list) -> str:
    """How an error names a batch: Ray hands out batches without their place in the input, so
    row numbers count within the batch; its first id (when rows have ids) finds it."""
    first = records[0] if records else None
    given = first.get("id") if isinstance(first, dict) else None
    return f"Ray batch of {len(records)} row(s)" + (f" starting at id {given!r}" if given is not None else "")


def arrow_table(rows: list[dict], fields: list[str], id_type=None):
    """Prediction rows as an Arrow table with the same schema for every batch: ``fields`` in order
    (absent values null), then any other key; nested values as JSON strings; each column typed by
    FIELD_TYPES (``id`` as the input's id column) even where a batch has only nulls in it."""
    import pyarrow as pa

    names = list(dict.fromkeys([*fields, *(key for row in rows for key in row)]))
    columns = {}
    for name in names:
        values = [_cell(row.get(name)) for row in rows]
        wanted = id_type if name == "id" else FIELD_TYPES.get(name)
        try:
            columns[name] = pa.array(values, type=pa.type_for_alias(wanted) if isinstance(wanted, str) else wanted)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # e.g. numeric label names: inferred instead
            columns[name] = pa.array(values)
        if columns[name].type == pa.null():  # a field no row of this batch has: a type all batches share
            columns[name] = columns[name].cast(pa.string())
    return pa.table(columns)


# Fields whose values are dicts or lists in some task's rows: JSON strings (string columns).
NESTED = frozenset({"probabilities", "labels", "entities", "words", "tags", "n_best"})
# The Arrow type of each prediction field any task writes (a field not named here is inferred).
FIELD_TYPES = {
    "text": "string",
    "text_pair": "string",
    "label": "string",
    "score": "float64",
    "truncated": "bool",
    "windows": "int64",  # --long-text windows: how many windows the row was read in
    "answer": "string",
    "start": "int64",
    "end": "int64",
    "null_score_diff": "float64",
    "best_span_answer": "string",
    **{name: "string" for name in NESTED},
}


def _cell(value):
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False)
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # a numpy scalar
        return value.item()
    return value
