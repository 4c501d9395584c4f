"""Ray's prediction rows (bertkit/ray/rows.py): every batch gets the same Arrow schema, whatever
values it happens to hold; here the `windows` field that `--long-text windows` models add."""

import pytest

pa = pytest.importorskip("pyarrow")


def test_windows_is_int64_in_every_batch_even_one_without_it():
    from bertkit.ray.rows import arrow_table

    fields = ["text", "label", "score", "truncated", "windows"]
    counted = arrow_table([{"text": "a long review", "label": "pos", "score": 0.9, "windows": 3}], fields)
    absent = arrow_table([{"text": "short", "label": "neg", "score": 0.8}], fields)
    assert counted.schema.field("windows").type == pa.int64()
    assert absent.schema == counted.schema  # Parquet shards of one run must concatenate
    assert counted.column("windows").to_pylist() == [3] and absent.column("windows").to_pylist() == [None]
