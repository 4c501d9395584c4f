"""What bertkit writes for the annotation tools counts offsets as they do (UTF-16 code units), so a
pre-annotation after an emoji lands on its words in Label Studio and doccano, and an export of it
reads back to the same tags (data/annotation_sinks.py, data/span_offsets.py)."""

from __future__ import annotations

import pytest

from bertkit.data.annotation_sinks import doccano_task, label_studio_task
from bertkit.data.annotations import plain_records

pytestmark = pytest.mark.unit

TEXT = "Loved it 😀 Paris is lovely 🇫🇷 and Berlin too"


def utf16(text: str, index: int) -> int:
    return len(text[:index].encode("utf-16-le")) // 2  # JavaScript's string offsets, independently


def row() -> dict:
    spans = [(TEXT.index(word), TEXT.index(word) + len(word)) for word in ("Paris", "Berlin")]
    return {"id": 7, "text": TEXT, "entities": [{"start": s, "end": e, "type": "LOC"} for s, e in spans]}


def test_label_studio_pre_annotations_count_utf16_and_read_back_to_the_same_words():
    task = label_studio_task(row(), "spans", "m1")
    regions = [r["value"] for r in task["predictions"][0]["result"]]
    for value, word in zip(regions, ("Paris", "Berlin")):
        start = TEXT.index(word)
        assert (value["start"], value["end"]) == (utf16(TEXT, start), utf16(TEXT, start + len(word)))
        assert value["text"] == word
    exported = {**task, "annotations": [{"id": 1, "result": task["predictions"][0]["result"]}]}
    read = plain_records([exported], "spans", True, "ls.json").records[0]
    assert [w for w, t in zip(read["tokens"], read["tags"]) if t != "O"] == ["Paris", "Berlin"]


def test_doccano_pre_annotations_count_utf16():
    task = doccano_task(row(), "spans", "m1")
    start = TEXT.index("Berlin")
    assert task["label"][1] == [utf16(TEXT, start), utf16(TEXT, start + 6), "LOC"]
    read = plain_records([task], "spans", True, "d.jsonl", offsets="utf-16").records[0]
    assert [w for w, t in zip(read["tokens"], read["tags"]) if t != "O"] == ["Paris", "Berlin"]
