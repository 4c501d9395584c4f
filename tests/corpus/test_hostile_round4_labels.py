"""Hostile review, round four ("Trust"): labels read from the wrong place. Splits that number their
ClassLabel names apart, Label Studio exports with several controls, span offsets counted in UTF-16
code units: what cannot be read one way ends in ONE line (tests/hostile.py's contract: exit 2,
nothing written), before any training. The right readings: tests/unit/test_split_class_labels.py
and tests/unit/test_annotation_controls_offsets.py."""

from __future__ import annotations

import json

import pytest
from hostile import CLS_CSV, Case, Context, jsonl, run_case

EMOJI_TEXT = "Loved it 😀 Paris is lovely"
PARIS = EMOJI_TEXT.index("Paris")
PARIS_UTF16 = PARIS + 1  # the emoji counts two UTF-16 code units


def region(start: int, end: int, tag: str, control: str = "label", said: str | None = None) -> dict:
    value = {"start": start, "end": end, "labels": [tag], **({"text": said} if said is not None else {})}
    return {"from_name": control, "to_name": "text", "type": "labels", "value": value}


def task(number: int, text: str, result: list) -> dict:
    return {"id": number, "data": {"text": text}, "annotations": [{"id": number, "result": result}]}


def two_choice_controls() -> str:
    def choices(number, text, sentiment, quality):
        return task(
            number,
            text,
            [
                {"from_name": "sentiment", "to_name": "text", "type": "choices", "value": {"choices": [sentiment]}},
                {"from_name": "quality", "to_name": "text", "type": "choices", "value": {"choices": [quality]}},
            ],
        )

    return json.dumps([choices(i, f"film {i}", ["pos", "neg"][i % 2], ["high", "low"][i // 2 % 2]) for i in range(8)])


def two_labels_controls() -> str:
    text = "john lives in paris"
    return json.dumps(
        [task(i, text, [region(0, 4, "PER", "people"), region(14, 19, "LOC", "places")]) for i in range(1, 9)]
    )


def split_files_apart(c: Context):
    """A Hub-layout directory whose train split is two files that name the classes apart."""
    from datasets import ClassLabel, Dataset, Features, Value

    root = c.tmp / "repo"
    (root / "data").mkdir(parents=True)
    for number, names in enumerate((["neg", "pos"], ["pos", "neg"])):
        features = Features({"text": Value("string"), "label": ClassLabel(names=names)})
        data = Dataset.from_dict({"text": [f"film {i}" for i in range(4)], "label": [0, 1, 0, 1]}, features)
        data.to_parquet(str(root / "data" / f"train-{number}.parquet"))
    (root / "README.md").write_text(
        "---\nconfigs:\n- config_name: main\n  data_files:\n  - split: train\n    path: data/train-*\n---\n"
    )
    return root


CASES = [
    Case(
        "label-studio-two-choices-controls",
        lambda c: c.finetune("cls", ("ls.json", two_choice_controls())),
        ("2 <Choices> controls (sentiment, quality)", "--label-control"),
    ),
    Case(
        "label-studio-two-labels-controls",
        lambda c: c.finetune("ner", ("ls.json", two_labels_controls())),
        ("2 <Labels> controls (people, places)", "--label-control"),
    ),
    Case(
        "eval-label-studio-two-labels-controls",
        lambda c: ["eval", c.trained("ner"), "--data", c.file("ls.json", two_labels_controls())],
        ("2 <Labels> controls (people, places)",),
    ),
    Case(
        "label-control-not-in-the-export",
        lambda c: c.finetune("cls", ("ls.json", two_choice_controls()), "--label-control", "mood"),
        ("--label-control mood: no <Choices> control of that name", "controls: sentiment, quality"),
    ),
    Case(
        "label-control-on-a-csv",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--label-control", "sentiment"),
        ("--label-control sentiment", "is not a Label Studio export"),
    ),
    Case(
        "doccano-offsets-after-an-emoji",
        lambda c: c.finetune(
            "ner", ("d.jsonl", jsonl({"id": 5, "text": EMOJI_TEXT, "label": [[PARIS_UTF16, PARIS_UTF16 + 5, "LOC"]]}))
        ),
        ("task 5: span 1", "outside the BMP", "--span-offsets utf-16"),
    ),
    Case(
        "label-studio-span-text-disagrees",
        lambda c: c.finetune(
            "ner",
            ("ls.json", json.dumps([task(6, EMOJI_TEXT, [region(PARIS_UTF16, PARIS_UTF16 + 5, "LOC", said="Rome")])])),
        ),
        ("task 6: span 1", "says 'Rome'", "'Paris'"),
    ),
    Case(
        "span-offsets-unknown",
        lambda c: c.finetune(
            "ner", ("d.jsonl", jsonl({"text": "john", "label": [[0, 4, "PER"]]})), "--span-offsets", "bytes"
        ),
        ("--span-offsets 'bytes' is not a unit",),
    ),
    Case(
        "span-offsets-utf16-inside-an-emoji",
        lambda c: c.finetune(
            "ner",
            ("d.jsonl", jsonl({"id": 7, "text": EMOJI_TEXT, "label": [[10, 12, "X"]]})),
            "--span-offsets",
            "utf-16",
        ),
        ("task 7: span 1 [10, 12, 'X'] does not fall on whole characters counted in UTF-16 code units",),
    ),
    Case(
        "dataset-split-files-name-classes-apart",
        lambda c: c.finetune("cls", split_files_apart(c)),
        ("the train split's files name the 'label' classes differently", "train-0.parquet: neg, pos"),
    ),
]


@pytest.fixture(autouse=True)
def _no_hub(tmp_path, monkeypatch):
    """No Hub, and the offline switches bertkit throws (bertkit/hub.py) put back afterwards."""
    import datasets
    import huggingface_hub.constants

    from bertkit import hub

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", datasets.config.HF_HUB_OFFLINE)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", huggingface_hub.constants.HF_HUB_OFFLINE)
    for name in hub.OFFLINE_VARIABLES:
        monkeypatch.setenv(name, "1")
    hub.hub_reachable.cache_clear()
    yield
    hub.hub_reachable.cache_clear()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_labels_read_one_way_or_refused_in_one_line(case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)
