"""Annotation tools in and out (#32): Label Studio and doccano exports read as training data, spans
aligned to words, and `predict --format` writing tasks that read back as the predictions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import assert_user_error, require_data

from bertkit.data.annotations import plain_records
from bertkit.data.registry import Source
from bertkit.decoding.tags import entity_spans
from bertkit.errors import BertkitError
from bertkit.options import RunOptions
from bertkit.tasks.classification import SingleSentenceTask
from bertkit.tasks.tagging import TaggingTask


def joined(tokens: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """The sentence as an annotation tool holds it: words joined by spaces, and each word's offsets."""
    offsets, position = [], 0
    for token in tokens:
        offsets.append((position, position + len(token)))
        position += len(token) + 1
    return " ".join(tokens), offsets


def spans_of(example: dict) -> tuple[str, list[dict]]:
    text, offsets = joined(example["tokens"])
    return text, entity_spans(example["tokens"], example["tags"], offsets, text)


def label_studio_task(number: int, text: str, spans: list[dict], **annotation) -> dict:
    result = [
        {
            "id": f"r{i}",
            "from_name": "label",
            "to_name": "text",
            "type": "labels",
            "value": {"start": s["start"], "end": s["end"], "text": s["text"], "labels": [s["type"]]},
        }
        for i, s in enumerate(spans)
    ]
    return {"id": number, "data": {"text": text}, "annotations": [{"id": number, "result": result, **annotation}]}


def write_exports(examples: list[dict], directory: Path) -> tuple[Path, Path]:
    """A Label Studio JSON export and a doccano JSONL of the same sentences."""
    tasks, lines = [], []
    for number, example in enumerate(examples, 1):
        text, spans = spans_of(example)
        tasks.append(label_studio_task(number, text, spans, was_cancelled=False))
        lines.append(
            json.dumps({"id": number, "text": text, "label": [[s["start"], s["end"], s["type"]] for s in spans]})
        )
    studio, doccano = directory / "studio.json", directory / "doccano.jsonl"
    studio.write_text(json.dumps(tasks))
    doccano.write_text("\n".join(lines) + "\n")
    return studio, doccano


def read(task, path: Path, purpose: str = "train"):
    return task.read(Source(str(path), path=path), purpose)


def test_conll2003_exports_train_the_same_tensors(tmp_path, tiny_bert):
    """Every CoNLL-2003 training sentence, exported to Label Studio and doccano and read back: the
    same words, tags, input_ids and label ids as the CoNLL file."""
    from transformers import AutoTokenizer

    conll = require_data("conll2003", "train.txt")
    task = TaggingTask(64)
    gold = read(task, conll)
    studio, doccano = write_exports(gold, tmp_path)
    trained = task.with_learned(task.fit(gold))
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    expected = trained.preprocess(gold, tokenizer, train=True)
    for export in (studio, doccano):
        examples = read(task, export)
        assert [ex["tokens"] for ex in examples] == [ex["tokens"] for ex in gold]
        assert [ex["tags"] for ex in examples] == [ex["tags"] for ex in gold]
        assert task.fit(examples).labels == trained.labels
        features = trained.preprocess(examples, tokenizer, train=True)
        assert [f["input_ids"] for f in features] == [f["input_ids"] for f in expected]
        assert [f["labels"] for f in features] == [f["labels"] for f in expected]
        assert any("read as a" in notice for notice in examples.seen["notices"])


def test_conll2003_exports_score_the_same_after_a_short_run(tmp_path, tiny_bert):
    from bertkit import api
    from bertkit.config import TrainConfig

    train, dev = require_data("conll2003", "train.txt"), require_data("conll2003", "valid.txt")
    task = TaggingTask(64)
    subset = read(task, train)[:160]
    conll = tmp_path / "train.txt"
    conll.write_text(
        "\n\n".join("\n".join(f"{w} {t}" for w, t in zip(ex["tokens"], ex["tags"])) for ex in subset) + "\n"
    )
    dev_subset = tmp_path / "dev.txt"
    dev_subset.write_text("\n\n".join(dev.read_text().split("\n\n")[:80]) + "\n")
    studio, doccano = write_exports(subset, tmp_path)
    metrics = []
    for number, data in enumerate((conll, studio, doccano)):
        config = TrainConfig(epochs=1, batch_size=16, max_length=64, seed=3)
        result = api.finetune(
            "ner",
            RunOptions(
                data=str(data), eval_data=str(dev_subset), model=str(tiny_bert), output=str(tmp_path / f"m{number}")
            ),
            config=config,
        )
        metrics.append({k: v for k, v in result.metrics.items() if isinstance(v, (int, float))})
        meta = json.loads((tmp_path / f"m{number}" / "bertkit.json").read_text())
        assert "data_format" not in json.dumps(meta["task"]["options"])  # how the file was read is not stored
    assert metrics[0] == metrics[1] == metrics[2]


def test_alignment_policies_and_punctuation():
    text = "I met Jo Smith's dog in Paris."
    spans = [[6, 14, "PER"], [24, 29, "LOC"], [25, 28, "X"]][:2]
    records = [{"text": text, "entities": spans}]
    plain = plain_records(records, "spans", True, "t.jsonl").records[0]
    # a span's end at a word boundary inside a piece cuts it there ("Smith's" -> "Smith" "'s", "Paris." -> "Paris" ".")
    assert plain["tokens"] == ["I", "met", "Jo", "Smith", "'s", "dog", "in", "Paris", "."]
    assert plain["tags"] == ["O", "O", "B-PER", "I-PER", "O", "O", "O", "B-LOC", "O"]
    cut = [{"text": "Parisians love Berlin", "label": [[0, 5, "LOC"], [15, 18, "LOC"]]}]
    expanded = plain_records(cut, "spans", True, "t.jsonl")
    assert expanded.records[0]["tags"] == ["B-LOC", "O", "B-LOC"]
    assert any("2 span(s)" in notice and "widened" in notice for notice in expanded.notices)
    contracted = plain_records(cut, "spans", True, "t.jsonl", alignment="contract")
    assert contracted.records[0]["tags"] == ["O", "O", "O"]
    assert any("2 span(s) held no whole word" in notice for notice in contracted.notices)
    with pytest.raises(BertkitError, match="span 1 'Paris' .* cuts a word"):
        plain_records(cut, "spans", True, "t.jsonl", alignment="strict")


@pytest.mark.parametrize(
    "spans, message",
    [
        ([[0, 5, "PER"], [3, 9, "LOC"]], r"task 7: spans 1 \('Maria', PER\) and 2 \('ia sta', LOC\) overlap"),
        ([[0, 5, "PER"], [10, 99, "LOC"]], r"task 7: span 2 \[10, 99, 'LOC'\] is outside the text"),
        ([[0, 2, "PER"], [3, 5, "LOC"]], r"task 7: spans 1 and 2 take the same word 'Maria'"),
    ],
)
def test_bad_spans_name_the_task_and_span(spans, message):
    with pytest.raises(BertkitError, match=message):
        plain_records([{"id": 7, "text": "Maria stays home", "label": spans}], "spans", True, "t.jsonl")


def test_label_studio_latest_annotation_skipped_and_cancelled_counted():
    tasks = [
        {
            "id": 1,
            "data": {"text": "Berlin is big"},
            "annotations": [
                {"id": 1, "updated_at": "2024-01-01T10:00:00Z", "result": []},
                label_studio_task(1, "", [{"start": 0, "end": 6, "text": "Berlin", "type": "LOC"}])["annotations"][0]
                | {"id": 2, "updated_at": "2024-02-01T10:00:00Z"},
            ],
        },
        {"id": 2, "data": {"text": "Skipped one"}, "annotations": [{"id": 3, "was_cancelled": True, "result": []}]},
        {"id": 3, "data": {"text": "Not yet"}, "annotations": [], "predictions": []},
    ]
    read_back = plain_records(tasks, "spans", True, "ls.json")
    assert read_back.records == [{"tokens": ["Berlin", "is", "big"], "tags": ["B-LOC", "O", "O"]}]
    assert "1 of 3 task(s) used; left out: 1 skipped or cancelled, 1 not annotated" in read_back.notices[0]
    assert plain_records(tasks, "spans", False, "ls.json").records[1] == {"text": "Skipped one"}  # predict: every text
    unreviewed = {"id": 4, "data": {"text": "Guessed"}, "predictions": [{"result": []}]}  # a model's, not gold
    assert (
        "left out: 1 skipped or cancelled, 1 not annotated, 1 only pre-annotated"
        in (plain_records([*tasks, unreviewed], "spans", True, "ls.json").notices[0])
    )
    with pytest.raises(BertkitError, match="no annotated tasks"):
        plain_records(tasks[1:], "spans", True, "ls.json")


def choice_task(number, text, choices, cancelled=False):
    result = [{"from_name": "sentiment", "to_name": "text", "type": "choices", "value": {"choices": choices}}]
    return {
        "id": number,
        "data": {"text": text},
        "annotations": [{"id": number, "result": result, "was_cancelled": cancelled}],
    }


def test_classification_choices_single_and_multi(tmp_path):
    single = [
        choice_task(1, "good film", ["pos"]),
        choice_task(2, "bad film", ["neg"]),
        choice_task(3, "meh", ["neg"], True),
    ]
    path = tmp_path / "cls.json"
    path.write_text(json.dumps(single))
    examples = read(SingleSentenceTask(), path)
    assert [(ex["text"], ex["label"]) for ex in examples] == [("good film", "pos"), ("bad film", "neg")]
    assert examples.seen["problem_type"] == "single-label"
    multi = [choice_task(1, "good film", ["pos", "fun"]), choice_task(2, "bad film", ["neg"])]
    path.write_text(json.dumps(multi))
    examples = read(SingleSentenceTask(), path)
    assert [sorted(ex["label"]) for ex in examples] == [["fun", "pos"], ["neg"]]
    assert examples.seen["problem_type"] == "multi-label"
    minimal = [{"id": 1, "text": "good", "label": "pos", "annotator": 1, "annotation_id": 4, "lead_time": 2.0}]
    path.write_text(json.dumps(minimal * 2 + [{**minimal[0], "label": "neg"}]))
    assert [ex["label"] for ex in read(SingleSentenceTask(), path)] == ["pos", "pos", "neg"]  # JSON-MIN
    doccano = tmp_path / "doccano.jsonl"
    doccano.write_text(
        '{"text": "good", "label": ["pos"]}\n{"text": "bad", "label": ["neg"]}\n{"text": "?", "label": []}\n'
    )
    forced = read(SingleSentenceTask(options={"data_format": "doccano"}), doccano)
    assert [ex["label"] for ex in forced] == ["pos", "neg"] and forced.seen["problem_type"] == "single-label"


def test_predict_format_round_trips_to_the_predicted_tags(tmp_path, tiny_bert, run_cli):
    """predict --format label-studio, the predictions accepted as annotations (what accepting a
    pre-annotation in the tool does), read back as data: the predicted tags; doccano directly."""
    from test_tagging_task import sentences, write_conll

    train = tmp_path / "train.txt"
    write_conll(train, sentences(60, seed=1))
    model = tmp_path / "ner"
    code, _, err = run_cli(
        "finetune",
        "ner",
        "--data",
        train,
        "--model",
        tiny_bert,
        "--output",
        model,
        "--epochs",
        "2",
        "--max-length",
        "32",
    )
    assert code == 0, err
    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(json.dumps({"tokens": [w for w, _ in s]}) + "\n" for s in sentences(12, seed=2)))
    code, out, err = run_cli("predict", model, "--input", pool)
    assert code == 0, err
    predicted = [json.loads(line) for line in out.splitlines()]
    for tool, suffix in (("label-studio", ".json"), ("doccano", ".jsonl")):
        written = tmp_path / f"pre{suffix}"
        code, _, err = run_cli("predict", model, "--input", pool, "--format", tool, "--output", written)
        assert code == 0, err
        text = written.read_text()
        tasks = json.loads(text) if suffix == ".json" else [json.loads(line) for line in text.splitlines()]
        if tool == "label-studio":
            assert all(t["predictions"][0]["model_version"] == "ner" for t in tasks)
            tasks = [{**t, "annotations": t.pop("predictions")} for t in tasks]
        back = tmp_path / f"back{suffix}"
        back.write_text(json.dumps(tasks) if suffix == ".json" else "".join(json.dumps(t) + "\n" for t in tasks))
        has_entities = [t for t, row in zip(tasks, predicted) if row["entities"]]
        assert has_entities, "the tiny model predicted no entity: the round trip would test nothing"
        examples = plain_records(tasks, "spans", True, str(back)).records
        assert [ex["tokens"] for ex in examples] == [row["words"] for row in predicted]
        assert [ex["tags"] for ex in examples] == [row["tags"] for row in predicted]


def test_predict_format_for_classes_and_refusals(tmp_path, trained, run_cli):
    trained("cls")
    run_cli("--version")  # the training's lines read away
    pool = tmp_path / "pool.txt"
    pool.write_text("a good film\nan awful plot\n")
    out_file = tmp_path / "tasks.json"
    code, _, err = run_cli("predict", trained("cls"), "--input", pool, "--format", "label-studio", "--output", out_file)
    assert code == 0, err
    tasks = json.loads(out_file.read_text())
    assert [t["data"]["text"] for t in tasks] == ["a good film", "an awful plot"]
    prediction = tasks[0]["predictions"][0]
    assert prediction["result"][0]["type"] == "choices" and 0 < prediction["score"] <= 1
    assert_user_error(run_cli("predict", trained("cls"), "--input", pool, "--format", "prodigy"), "--format 'prodigy'")
    parquet = tmp_path / "tasks.parquet"
    assert_user_error(
        run_cli("predict", trained("cls"), "--input", pool, "--format", "doccano", "--output", parquet), "writes JSON"
    )
    assert not parquet.exists()


def test_eval_refuses_a_span_label_the_model_lacks(tmp_path, trained, run_cli):
    model = trained("ner")  # trained first: its training lines are not eval's output
    run_cli("--version")
    data = tmp_path / "gold.jsonl"
    data.write_text(json.dumps({"text": "john lives in paris", "entities": [[0, 4, "PER"], [14, 19, "CITY"]]}) + "\n")
    out = tmp_path / "metrics.json"
    assert_user_error(run_cli("eval", model, "--data", data, "--output", out), "CITY")
    assert not out.exists()
