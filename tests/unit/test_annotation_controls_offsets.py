"""Hostile review, round four, findings 2 and 3 (annotation tools' exports):

* a Label Studio export with two controls (``<Choices name="sentiment">`` and ``name="quality"``,
  or two ``<Labels>``) was pooled into one problem; one control is read, named by --label-control,
  and several without one are refused, listing them;
* Label Studio's (and doccano's) offsets count UTF-16 code units, so every span after an emoji
  landed on the wrong words; they are read as the span's own ``text`` says, and where a file does
  not say (doccano, spaCy-style) and the counts differ, --span-offsets must.

Each expected tagging is checked against an independent computation: the words a span's own
``text`` covers (found in the text by Python, not through any offset)."""

from __future__ import annotations

import json

import pytest

from bertkit.data.annotations import plain_records
from bertkit.data.registry import Source
from bertkit.errors import BertkitError
from bertkit.tasks.classification import SingleSentenceTask
from bertkit.tasks.tagging import TaggingTask

TEXT = "Loved it 😀 Paris is lovely 🇫🇷 and Berlin too"
ENTITIES = [("Paris", "LOC"), ("Berlin", "LOC")]


def utf16(text: str, index: int) -> int:
    """A code-point offset as JavaScript counts it (UTF-16 code units)."""
    return len(text[:index].encode("utf-16-le")) // 2


def region(text: str, said: str, tag: str, unit: str = "utf-16", control: str = "label", with_text: bool = True):
    start = text.index(said)
    end = start + len(said)
    if unit == "utf-16":
        start, end = utf16(text, start), utf16(text, end)
    value = {"start": start, "end": end, "labels": [tag], **({"text": said} if with_text else {})}
    return {"from_name": control, "to_name": "text", "type": "labels", "value": value}


def task(number: int, text: str, result: list) -> dict:
    return {"id": number, "data": {"text": text}, "annotations": [{"id": number, "result": result}]}


def tagged_by_text(text: str, entities: list) -> list:
    """The expected tags, from the entities' own texts: the words each one's text covers."""
    words, tags, position = text.split(), [], 0
    starts = []
    for word in words:
        position = text.index(word, position)
        starts.append(position)
        position += len(word)
    tags = ["O"] * len(words)
    for said, tag in entities:
        begin = text.index(said)
        inside = [i for i, s in enumerate(starts) if begin <= s < begin + len(said)]
        tags[inside[0]] = f"B-{tag}"
        for i in inside[1:]:
            tags[i] = f"I-{tag}"
    return tags


def test_label_studio_offsets_after_an_emoji_are_utf16_code_units():
    export = [task(1, TEXT, [region(TEXT, said, tag) for said, tag in ENTITIES])]
    read = plain_records(export, "spans", True, "ls.json")
    expected = tagged_by_text(TEXT, ENTITIES)
    assert read.records[0]["tags"] == expected
    tagged = [w for w, t in zip(read.records[0]["tokens"], read.records[0]["tags"]) if t != "O"]
    assert tagged == ["Paris", "Berlin"]  # the spans' own text; before: "Paris" read 1 code point late
    assert any("2 span(s) after characters outside the BMP" in notice for notice in read.notices)
    # without the spans' text the tool's count still holds (a pre-annotation written by a script)
    bare = [task(1, TEXT, [region(TEXT, said, tag, with_text=False) for said, tag in ENTITIES])]
    assert plain_records(bare, "spans", True, "ls.json").records[0]["tags"] == expected
    # a file a Python script wrote (code points), with each span's text: the text decides
    python = [task(1, TEXT, [region(TEXT, said, tag, unit="code-points") for said, tag in ENTITIES])]
    assert plain_records(python, "spans", True, "ls.json").records[0]["tags"] == expected


def test_a_span_whose_offsets_give_another_text_is_refused():
    wrong = region(TEXT, "Paris", "LOC")
    wrong["value"]["text"] = "Rome"
    with pytest.raises(BertkitError) as raised:
        plain_records([task(4, TEXT, [wrong])], "spans", True, "ls.json")
    assert "task 4: span 1 [" in raised.value.message and "says 'Rome'" in raised.value.message
    assert "'Paris'" in raised.value.message  # what UTF-16 code units give there


def test_doccano_and_spacy_style_files_say_what_they_count_where_it_matters(tmp_path):
    start = TEXT.index("Paris")
    doccano = [{"id": 3, "text": TEXT, "label": [[utf16(TEXT, start), utf16(TEXT, start + 5), "LOC"]]}]
    with pytest.raises(BertkitError) as raised:
        plain_records(doccano, "spans", True, "d.jsonl")
    assert "task 3: span 1" in raised.value.message and "--span-offsets utf-16" in raised.value.hint
    expected = tagged_by_text(TEXT, ENTITIES[:1])
    assert plain_records(doccano, "spans", True, "d.jsonl", offsets="utf-16").records[0]["tags"] == expected
    spacy = [{"text": TEXT, "entities": [[start, start + 5, "LOC"]]}]
    assert plain_records(spacy, "spans", True, "s.jsonl", offsets="code-points").records[0]["tags"] == expected
    # before the first emoji the two counts agree: nothing to say
    early = [{"text": TEXT, "label": [[0, 5, "EVAL"]]}]
    assert plain_records(early, "spans", True, "d.jsonl").records[0]["tags"][0] == "B-EVAL"
    # the task reads --span-offsets from its options
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(doccano[0]) + "\n")
    examples = TaggingTask(options={"span_offsets": "utf-16"}).read(Source(str(path), path=path), "train")
    assert examples[0]["tags"] == expected


def choices(number: int, text: str, **controls) -> dict:
    result = [
        {"from_name": name, "to_name": "text", "type": "choices", "value": {"choices": [value]}}
        for name, value in controls.items()
    ]
    return task(number, text, result)


TWO_CONTROLS = [
    choices(1, "great film", sentiment="positive", quality="high"),
    choices(2, "dull film", sentiment="negative", quality="high"),
    choices(3, "fine film", sentiment="positive", quality="low"),
]


def test_two_choice_controls_are_not_pooled(tmp_path):
    with pytest.raises(BertkitError) as raised:
        plain_records(TWO_CONTROLS, "choices", True, "ls.json")
    assert "2 <Choices> controls (sentiment, quality)" in raised.value.message
    assert "--label-control" in raised.value.hint
    path = tmp_path / "ls.json"
    path.write_text(json.dumps(TWO_CONTROLS))
    for control in ("sentiment", "quality"):
        examples = SingleSentenceTask(options={"label_control": control}).read(Source(str(path), path=path), "train")
        own = [t["annotations"][0]["result"] for t in TWO_CONTROLS]
        assert [ex["label"] for ex in examples] == [
            next(r["value"]["choices"][0] for r in result if r["from_name"] == control) for result in own
        ]
        assert examples.seen["problem_type"] == "single-label"  # before: 4 labels, multi-label
    # predict reads only the texts: no control to pick
    assert len(plain_records(TWO_CONTROLS, "choices", False, "ls.json").records) == 3


def test_two_labels_controls_are_not_pooled():
    text = "John flew to Paris"
    export = [
        task(1, text, [region(text, "John", "PER", control="people"), region(text, "Paris", "LOC", control="places")])
    ]
    with pytest.raises(BertkitError, match=r"2 <Labels> controls \(people, places\)"):
        plain_records(export, "spans", True, "ls.json")
    read = plain_records(export, "spans", True, "ls.json", control="places")
    assert read.records[0]["tags"] == tagged_by_text(text, [("Paris", "LOC")])
    people = [export[0]["annotations"][0]["result"][0]["value"]]
    minimal = [{"id": 1, "text": text, "people": people, "annotator": 1, "annotation_id": 1, "lead_time": 2.0}]
    minimal[0]["places"] = [export[0]["annotations"][0]["result"][1]["value"]]
    with pytest.raises(BertkitError, match=r"2 <Labels> controls \(people, places\)"):
        plain_records(minimal, "spans", True, "min.json")  # JSON-MIN: one field per control
    assert plain_records(minimal, "spans", True, "min.json", control="people").records[0]["tags"] == tagged_by_text(
        text, [("John", "PER")]
    )


def test_label_control_is_refused_where_it_cannot_apply():
    with pytest.raises(
        BertkitError, match=r"no <Choices> control of that name in ls.json \(controls: sentiment, quality\)"
    ):
        plain_records(TWO_CONTROLS, "choices", True, "ls.json", control="mood")
    with pytest.raises(BertkitError, match="not a Label Studio export"):
        plain_records([{"text": "a", "label": "b"}], "choices", True, "t.jsonl", control="sentiment")
