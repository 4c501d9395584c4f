"""Extractive QA: reading the SQuAD layouts (nested v1/v2, flat JSON / JSON Lines, the Hub's),
one-line errors for what is not SQuAD, and answer starts that are off (repaired, skipped, strict)."""

from __future__ import annotations

import json

import pytest
from test_qa_task import NAMES, make_squad, tokenizer  # noqa: F401 (tokenizer: a fixture)

from bertkit.data.registry import Source
from bertkit.errors import BertkitError
from bertkit.tasks.base import EVAL, PREDICT, TRAIN
from bertkit.tasks.qa import QuestionAnsweringTask


def read(task, tmp_path, name, content, purpose=TRAIN):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return task.read(Source(str(path), path=path), purpose)


def test_reads_nested_v1_v2_flat_json_jsonl_and_hub_layouts(tmp_path):
    task = QuestionAnsweringTask()
    v1 = read(task, tmp_path, "v1.json", make_squad(3, seed=1))
    assert len(v1) == 9 and v1[0]["answers"][0]["text"] in NAMES and v1[0]["id"] == "p0-q0"
    v2 = read(task, tmp_path, "v2.json", make_squad(4, seed=1, v2=True))
    assert sum(not ex["answers"] for ex in v2) == 2
    task.fit_labels(v2)
    assert task.options["unanswerable"] is True

    context = "john lives in paris ."
    hub = {
        "id": "h1",
        "title": "t",
        "question": "where ?",
        "context": context,
        "answers": {"text": ["paris"], "answer_start": [14]},
    }
    (example,) = read(task, tmp_path, "flat.json", [hub])
    assert example["answers"] == [{"text": "paris", "start": 14}]
    lines = "".join(json.dumps({**hub, "id": f"h{i}"}) + "\n" for i in range(3))
    assert [ex["id"] for ex in read(task, tmp_path, "flat.jsonl", lines)] == ["h0", "h1", "h2"]
    assert len(read(task, tmp_path, "lines-in-a.json", lines)) == 3  # JSON Lines whatever the suffix
    listed = [{"question": "where ?", "context": context, "answers": [{"text": "paris", "answer_start": 14}]}]
    assert read(task, tmp_path, "list.json", listed)[0]["id"] == "q1"
    v2_hub = [{"question": "who ?", "context": context, "answers": {"text": [], "answer_start": []}}]
    assert read(task, tmp_path, "v2hub.json", v2_hub)[0]["answers"] == []

    # Prediction needs only question + context; ids are made up from the row number when missing.
    rows = read(task, tmp_path, "predict.jsonl", '{"question": "who ?", "context": "john"}\n' * 2, PREDICT)
    assert [r["id"] for r in rows] == ["q1", "q2"] and "answers" not in rows[0]


@pytest.mark.parametrize(
    "content, message",
    [
        ({"version": "1.1", "rows": []}, "neither SQuAD JSON nor a list of question records"),
        ([{"text": "hello", "label": 1}], "neither SQuAD articles nor question records"),
        ([{"question": "who ?", "context": "   ", "answers": []}], "1 question\\(s\\) with an empty context \\(q1\\)"),
        ([{"question": "who ?", "context": "john"}], "without gold answers"),
        ({"data": [{"title": "x", "paragraphs": [{"context": "c"}]}]}, "paragraph without a qas list"),
        ("{not json", "invalid JSON"),
    ],
)
def test_bad_input_is_one_line_error(tmp_path, content, message):
    with pytest.raises(BertkitError, match=message) as info:
        read(QuestionAnsweringTask(), tmp_path, "bad.json", content, EVAL)
    assert "\n" not in str(info.value)


def test_wrong_answer_start_is_repaired_or_skipped_and_counted_or_fails_when_strict(tmp_path, tokenizer):  # noqa: F811
    squad = make_squad(2, seed=3)
    qas = squad["data"][0]["paragraphs"][0]["qas"]
    qas[0]["answers"][0]["answer_start"] += 1  # off by one: the text is still in the context
    qas[1]["answers"][0]["text"] = "nobody"  # nowhere in the context: nothing to repair it with
    task = QuestionAnsweringTask(64)
    examples = read(task, tmp_path, "off.json", squad)
    assert examples[0]["answers"][0]["start"] == qas[0]["answers"][0]["answer_start"] - 1
    task.fit_labels(examples)
    features = task.preprocess(examples, tokenizer, train=True)
    assert task.stats["repaired_answer_start"] == 1 and task.stats["bad_answer_start"] == 1
    assert task.stats["skipped_bad_answer_start"] == 1 and task.stats["questions"] == len(examples) - 1
    assert {f["example_index"] for f in features} == set(range(len(examples))) - {1}
    assert any(n.startswith("1 of 6 question(s) skipped") for n in task.stats["notices"])
    assert any(n.startswith("1 of 6 question(s) had an answer_start") for n in task.stats["notices"])
    task.preprocess(examples, tokenizer, train=False)  # evaluation scores texts: the question stays
    assert task.stats["questions"] == len(examples) and "notices" not in task.stats
    strict = QuestionAnsweringTask(64, {"strict": True})
    with pytest.raises(BertkitError, match="2 question\\(s\\) whose answer_start does not point at the answer"):
        read(strict, tmp_path, "off.json", squad)
    assert "strict" not in strict.state()["options"]  # not saved with the model
