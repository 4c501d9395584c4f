"""Extractive QA: windowed features and targets, decoding, and the CLI end to end (reading the
SQuAD layouts: tests/unit/test_qa_reading.py)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from bertkit.errors import BertkitError
from bertkit.tasks.qa import QuestionAnsweringTask, answer_tokens

NAMES = ["john", "mary", "obama"]
CITIES = ["paris", "london", "berlin", "france", "germany"]
FILLER = "the company is very good and the city is great".split()


def make_paragraph(rng: random.Random, index: int, sentences: int = 3, impossible: bool = False) -> dict:
    """Facts 'NAME lives in CITY .' with filler; questions 'who lives in CITY ?' with exact offsets."""
    cities = rng.sample(CITIES, sentences)
    parts, qas = [], []
    for s, city in enumerate(cities):
        name = rng.choice(NAMES)
        filler = " ".join(rng.sample(FILLER, 3))
        prefix = " ".join(parts) + (" " if parts else "")
        qas.append(
            {
                "id": f"p{index}-q{s}",
                "question": f"who lives in {city} ?",
                "answers": [{"text": name, "answer_start": len(prefix) + len(filler) + 3}],
            }
        )
        parts.append(f"{filler} , {name} lives in {city} .")
    context = " ".join(parts)
    if impossible:
        unused = next(c for c in CITIES if c not in cities)
        qas.append(
            {"id": f"p{index}-none", "question": f"who lives in {unused} ?", "answers": [], "is_impossible": True}
        )
    for qa in qas:
        for answer in qa["answers"]:
            assert context[answer["answer_start"] : answer["answer_start"] + len(answer["text"])] == answer["text"]
    return {"context": context, "qas": qas}


def make_squad(n: int, seed: int, v2: bool = False) -> dict:
    rng = random.Random(seed)
    paragraphs = [make_paragraph(rng, i, impossible=v2 and i % 2 == 0) for i in range(n)]
    return {"version": "v2.0" if v2 else "1.1", "data": [{"title": "facts", "paragraphs": paragraphs}]}


def write_json(path, data) -> str:
    path.write_text(json.dumps(data))
    return str(path)


@pytest.fixture(scope="module")
def tokenizer(tiny_bert):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert)


LONG_CONTEXT = " ".join(f"{n} lives in {c} ." for n, c in zip(NAMES * 4, CITIES * 3)) + " mary met obama in paris ."
LONG_ANSWER_AT = LONG_CONTEXT.index("mary met obama")


def long_example() -> dict:
    return {
        "id": "long",
        "question": "who met obama ?",
        "context": LONG_CONTEXT,
        "answers": [{"text": "mary", "start": LONG_ANSWER_AT}],
    }


# --- features ---------------------------------------------------------------------------------------
def test_question_first_then_context_windows_that_overlap_by_doc_stride(tokenizer):
    task = QuestionAnsweringTask(32, {"doc_stride": 8})
    features = task.preprocess([long_example()], tokenizer, train=True)
    question_ids = tokenizer("who met obama ?", add_special_tokens=False)["input_ids"]
    assert len(features) > 3 and task.stats["windowed_examples"] == 1
    for feature in features:
        ids = feature["input_ids"]
        assert ids[: len(question_ids) + 2] == [tokenizer.cls_token_id, *question_ids, tokenizer.sep_token_id]
        assert feature["token_type_ids"][: len(question_ids) + 2] == [0] * (len(question_ids) + 2)
        assert ids[-1] == tokenizer.sep_token_id and len(ids) <= 32
        assert tokenizer.pad_token_id not in ids  # no padding here: the engine pads per batch
        assert all(o is None for o in feature["offsets"][: len(question_ids) + 2]) and feature["offsets"][-1] is None
        assert feature["example_index"] == 0
    contexts = [[o for o in f["offsets"] if o is not None] for f in features]
    for previous, current in zip(contexts, contexts[1:]):
        assert previous[-8:] == current[:8]  # exactly doc_stride tokens of overlap
        assert previous[-9] not in current
    covered = sorted({o for c in contexts for o in c})
    assert LONG_CONTEXT[covered[0][0] : covered[-1][1]] == LONG_CONTEXT.rstrip()


def test_targets_land_on_the_answer_or_cls_when_outside(tokenizer):
    task = QuestionAnsweringTask(32, {"doc_stride": 8})
    features = task.preprocess([long_example()], tokenizer, train=True)
    inside = [f for f in features if f["start_positions"] > 0]
    outside = [f for f in features if f["start_positions"] == 0]
    assert inside and outside
    for f in inside:
        start, end = f["offsets"][f["start_positions"]], f["offsets"][f["end_positions"]]
        assert LONG_CONTEXT[start[0] : end[1]] == "mary" and f["end_positions"] >= f["start_positions"]
    for f in outside:
        assert f["end_positions"] == 0
        window = [o for o in f["offsets"] if o is not None]
        assert not (window[0][0] <= LONG_ANSWER_AT and window[-1][1] >= LONG_ANSWER_AT + 4)
    assert task.stats["windows_without_answer"] == len(outside)
    # A multi-token answer ends on its last token; one cut by the window edge goes to [CLS].
    offsets = [None, (0, 4), (5, 10), (11, 13), None]
    assert answer_tokens(offsets, {"text": "lives in", "start": 5}) == (2, 3)
    assert answer_tokens(offsets, {"text": "in paris", "start": 11}) == (0, 0)


def test_unanswerable_questions_target_cls(tokenizer):
    task = QuestionAnsweringTask(64)
    example = {"id": "x", "question": "who ?", "context": "john lives in paris .", "answers": []}
    (feature,) = task.preprocess([example], tokenizer, train=True)
    assert (feature["start_positions"], feature["end_positions"]) == (0, 0)


def test_doc_stride_that_leaves_no_room_is_one_clear_error(tokenizer):
    # question 4 tokens + 3 specials: a 32-token window holds 25 context tokens.
    with pytest.raises(BertkitError, match="--doc-stride 25 is too large.*holds 25 context tokens"):
        QuestionAnsweringTask(32, {"doc_stride": 25}).preprocess([long_example()], tokenizer, train=False)
    assert len(QuestionAnsweringTask(32, {"doc_stride": 24}).preprocess([long_example()], tokenizer, False)) > 10


def test_long_questions_are_cut_to_max_query_length(tokenizer):
    task = QuestionAnsweringTask(64, {"doc_stride": 16})
    question = " ".join(["who lives in paris"] * 20) + " ?"  # 81 tokens
    features = task.preprocess([{**long_example(), "question": question}], tokenizer, train=False)
    assert task.stats["questions_truncated"] == 1 and task.max_query_length == 32
    first_context = next(i for i, o in enumerate(features[0]["offsets"]) if o is not None)
    assert first_context == 1 + 32 + 1


# --- decoding -------------------------------------------------------------------------------------------
def fake_outputs(features, spans: dict, cls: dict | None = None):
    """Logits that favour the char span spans[example_index] (and [CLS] by cls[example_index])."""
    outputs = {"start_logits": [], "end_logits": []}
    for f in features:
        n = len(f["input_ids"])
        start, end = np.zeros(n, dtype=np.float32), np.zeros(n, dtype=np.float32)
        s, e = spans[f["example_index"]]
        for t, o in enumerate(f["offsets"]):
            if o is not None and o[0] == s:
                start[t] = 5.0
            if o is not None and o[1] == e:
                end[t] = 4.0
        start[0] = end[0] = (cls or {}).get(f["example_index"], -1.0)
        outputs["start_logits"].append(start)
        outputs["end_logits"].append(end)
    return outputs


def test_postprocess_finds_the_span_in_the_right_window_with_char_offsets_and_n_best(tokenizer):
    task = QuestionAnsweringTask(32, {"doc_stride": 8, "n_best": 3})
    examples = [long_example()]
    features = task.preprocess(examples, tokenizer, train=False)
    outputs = fake_outputs(features, {0: (LONG_ANSWER_AT, LONG_ANSWER_AT + 14)})  # "mary met obama"
    (prediction,) = task.postprocess(examples, features, outputs)
    assert prediction["answer"] == "mary met obama" == LONG_CONTEXT[prediction["start"] : prediction["end"]]
    assert len(prediction["n_best"]) == 3 and len({a["answer"] for a in prediction["n_best"]}) == 3
    scores = [a["score"] for a in prediction["n_best"]]
    assert scores == sorted(scores, reverse=True) and 0 < prediction["score"] <= 1
    assert task.metrics(examples, [prediction]) == pytest.approx({"exact_match": 0.0, "f1": 50.0})
    row = task.format_prediction(examples[0], prediction)
    assert set(row) == {"id", "answer", "start", "end", "score", "n_best"}


def test_tune_sets_the_null_threshold_that_predict_uses(tokenizer):
    context = "john lives in paris . mary lives in london ."
    examples = [
        {"id": "a", "question": "who lives in paris ?", "context": context, "answers": [{"text": "john", "start": 0}]},
        {"id": "b", "question": "who lives in berlin ?", "context": context, "answers": []},
    ]
    task = QuestionAnsweringTask(64)
    task.fit_labels(examples)
    features = task.preprocess(examples, tokenizer, train=False)
    # Null score minus best span: a = 2*0 - 9 = -9, b = 2*8 - 9 = 7; any t in [-9, 7) separates them.
    outputs = fake_outputs(features, {0: (0, 4), 1: (22, 26)}, cls={0: 0.0, 1: 8.0})
    assert task.metrics(examples, task.postprocess(examples, features, outputs))["f1"] == 100.0  # default t = 0
    tuned = task.tune(examples, features, outputs)
    assert -9 <= tuned["null_threshold"] < 7 and "null_threshold" not in task.options  # the caller stores it
    task.options.update(tuned)
    predictions = task.postprocess(examples, features, outputs)
    assert [p["answer"] for p in predictions] == ["john", ""] and predictions[1]["start"] is None
    scores = task.metrics(examples, predictions)
    assert scores["HasAns_f1"] == scores["NoAns_f1"] == 100.0 and scores["NoAns_total"] == 1
    rebuilt = QuestionAnsweringTask(**{"max_length": 64, "options": task.state()["options"]})
    assert rebuilt.options["null_threshold"] == tuned["null_threshold"]


# --- the CLI end to end ------------------------------------------------------------------------------------
def test_qa_finetune_eval_predict(tmp_path, tiny_bert, run_cli):
    from transformers import AutoModelForQuestionAnswering

    train = write_json(tmp_path / "train.json", make_squad(24, seed=1))
    dev = write_json(tmp_path / "dev.json", make_squad(8, seed=2))
    out = tmp_path / "qa"
    code, stdout, stderr = run_cli(
        "finetune",
        "qa",
        "--data",
        train,
        "--eval-data",
        dev,
        "--model",
        tiny_bert,
        "--output",
        out,
        "--epochs",
        2,
        "--lr",
        "1e-3",
        "--batch-size",
        16,
        "--max-length",
        24,
        "--doc-stride",
        6,
    )
    assert code == 0, stderr
    assert "train: 72 examples" in stdout and "f1" in stdout
    assert "split into overlapping windows" in stderr  # said once preprocessing counted them, before training
    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["task"] == {
        "task": "qa",
        "max_length": 24,
        "labels": None,
        "options": {"doc_stride": 6, "unanswerable": False},
    }
    assert meta["preprocessing"]["train"]["windowed_examples"] > 0
    assert meta["preprocessing"]["train_features"] > 72
    assert 0.0 <= meta["metrics"]["f1"] <= 100.0 and "exact_match" in meta["metrics"]
    assert AutoModelForQuestionAnswering.from_pretrained(out).config.architectures == ["BertForQuestionAnswering"]

    code, stdout, stderr = run_cli("eval", out, "--data", dev, "--output", tmp_path / "metrics.json")
    assert code == 0, stderr
    report = json.loads((tmp_path / "metrics.json").read_text())
    assert (
        report["examples"] == 24 and report["tuned"] == {} and set(report["metrics"]) == {"exact_match", "f1", "loss"}
    )

    questions = [
        {"question": "who lives in paris ?", "context": "the city is great , john lives in paris ."},
        {"id": "x", "question": "who lives in london ?", "context": " ".join(["mary lives in london ."] * 12)},
    ]  # several windows
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    code, stdout, stderr = run_cli("predict", out, "--input", tmp_path / "in.jsonl", "--n-best", 3)
    assert code == 0, stderr
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert [r["id"] for r in rows] == ["q1", "x"]
    for row, question in zip(rows, questions):
        assert row["answer"] == question["context"][row["start"] : row["end"]] != ""
        assert 0 < row["score"] <= 1 and row["n_best"][0]["answer"] == row["answer"]
        assert 1 <= len(row["n_best"]) <= 3 and len({a["answer"] for a in row["n_best"]}) == len(row["n_best"])
        assert all(question["context"][a["start"] : a["end"]] == a["answer"] for a in row["n_best"])
    code, stdout, stderr = run_cli("predict", out, "--input", tmp_path / "in.jsonl")
    assert code == 0, stderr
    assert "n_best" not in json.loads(stdout.splitlines()[0])
    code, stdout, stderr = run_cli("predict", out, "--input", tmp_path / "in.jsonl", "--n-best", 0)
    assert code == 2 and "--n-best must be at least 1" in stderr and "predict" not in stderr  # before inference


def test_qa_v2_eval_tunes_and_stores_the_null_threshold(tmp_path, tiny_bert, run_cli):
    train = write_json(tmp_path / "train.json", make_squad(16, seed=4, v2=True))
    dev = write_json(tmp_path / "dev.json", make_squad(6, seed=5, v2=True))
    out = tmp_path / "qa2"
    code, _, stderr = run_cli(
        "finetune",
        "qa",
        "--data",
        train,
        "--model",
        tiny_bert,
        "--output",
        out,
        "--epochs",
        1,
        "--lr",
        "1e-3",
        "--batch-size",
        16,
        "--max-length",
        64,
    )
    assert code == 0, stderr
    # Trained without evaluation data: dev.json is not known to be the model's dev data, so the tuned
    # threshold is reported but stored only when asked.
    code, stdout, stderr = run_cli("eval", out, "--data", dev, "--output", tmp_path / "m.json")
    assert code == 0, stderr
    assert "tuned on this data was NOT stored" in stdout and "stored with the model" not in stdout
    assert "null_threshold" not in json.loads((out / "bertkit.json").read_text())["task"]["options"]
    code, stdout, stderr = run_cli("eval", out, "--data", dev, "--output", tmp_path / "m.json", "--store-threshold")
    assert code == 0, stderr
    assert "tuned null_threshold" in stdout
    metrics = json.loads((tmp_path / "m.json").read_text())["metrics"]
    assert {"HasAns_f1", "NoAns_f1", "HasAns_total", "NoAns_total", "best_f1", "best_f1_thresh"} <= set(metrics)
    threshold = json.loads((out / "bertkit.json").read_text())["task"]["options"]["null_threshold"]
    assert threshold == pytest.approx(metrics["best_f1_thresh"], abs=1e-6)
    assert isinstance(threshold, float)
    (tmp_path / "q.json").write_text(json.dumps([{"question": "who ?", "context": "john lives in paris ."}]))
    code, stdout, stderr = run_cli("predict", out, "--input", tmp_path / "q.json")
    row = json.loads(stdout)
    assert code == 0 and (row["answer"] == "" and row["start"] is None or row["answer"] in "john lives in paris .")


def test_qa_cli_bad_input_is_one_line(tmp_path, tiny_bert, run_cli):
    train = write_json(tmp_path / "train.json", make_squad(4, seed=1))
    args = ("finetune", "qa", "--data", train, "--model", tiny_bert, "--output", tmp_path / "o", "--epochs", 1)
    code, _, stderr = run_cli(*args, "--max-length", 32, "--doc-stride", 40)
    assert code == 2 and stderr.count("\n") == 1 and "--doc-stride 40 is too large" in stderr
    (tmp_path / "rows.json").write_text(json.dumps([{"sentence": "no question here"}]))
    code, _, stderr = run_cli(*args[:3], tmp_path / "rows.json", *args[4:])
    assert code == 2 and "neither SQuAD articles nor question records" in stderr


def test_known_squad_without_a_local_train_file_is_a_clear_error(tmp_path, tiny_bert):
    (tmp_path / "squad").mkdir()
    write_json(tmp_path / "squad" / "dev-v1.1.json", make_squad(2, seed=1))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "BERTKIT_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bertkit",
            "finetune",
            "qa",
            "--data",
            "squad",
            "--model",
            str(tiny_bert),
            "--output",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2
    assert "squad train needs train-v1.1.json in <data dir>/squad/" in done.stderr
    assert "split_squad_by_article.py" in done.stderr


@pytest.mark.parametrize(
    "options, message",
    [
        ({"doc_stride": -1}, "--doc-stride must be at least 0"),
        ({"max_answer_length": 0}, "--max-answer-length must be at least 1"),
        ({"n_best": 0}, "--n-best must be at least 1"),
    ],
)
def test_bad_options_fail_before_any_work(options, message):
    with pytest.raises(BertkitError, match=message):
        QuestionAnsweringTask(384, options)
