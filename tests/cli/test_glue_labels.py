"""Label ids as the datasets define them, numeric labels normalised, and refusals for what a
classifier cannot honestly learn (continuous labels, a second text a cls model would drop)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import DATA_DIR, assert_user_error, require_data

from bertkit.data import formats
from bertkit.data.registry import Source, resolve
from bertkit.errors import BertkitError
from bertkit.metrics.classification import classification_scores
from bertkit.tasks.base import EVAL, PREDICT, TRAIN
from bertkit.tasks.classification import SentencePairTask, SingleSentenceTask
from bertkit.tasks.single_label import normalise_label


def constant(label_id: int, n: int) -> list[dict]:
    probabilities = np.eye(2)[label_id] * 0.6 + 0.2  # (0.8, 0.2) or (0.2, 0.8)
    return [{"probabilities": probabilities, "truncated": False}] * n


def test_classification_scores_by_hand():
    # Binary, positive = id 1: TP 2 (rows 0, 1), FP 1 (row 4), FN 1 (row 2), TN 1 (row 3).
    # P = R = 2/3 -> F1 2/3; MCC = (2*1 - 1*1) / sqrt(3 * 3 * 2 * 2) = 1/6.
    scores = classification_scores([1, 1, 1, 0, 0], [1, 1, 0, 0, 1], 2)
    assert scores == pytest.approx({"accuracy": 3 / 5, "f1": 2 / 3, "mcc": 1 / 6})
    # The F1 of id 1, not of id 0: swapping ids changes it (class 0: TP 1, FP 1, FN 1 -> 1/2).
    assert classification_scores([0, 0, 0, 1, 1], [0, 0, 1, 1, 0], 2)["f1"] == pytest.approx(1 / 2)
    # Three classes: per-class F1 1 (class 0), 0 (class 1), 1/2 (class 2) -> macro 1/2.
    assert classification_scores([0, 1, 2, 2], [0, 2, 2, 1], 3) == pytest.approx({"accuracy": 0.5, "macro_f1": 0.5})


def test_real_mrpc_dev_keeps_glue_ids_and_scores_like_glue():
    require_data("mrpc", "dev.tsv")
    source = resolve("mrpc", "dev", str(DATA_DIR))
    task = SentencePairTask()
    examples = task.read(source, TRAIN)
    task.fit_labels(examples)
    assert task.labels == ["not_equivalent", "equivalent"]  # GLUE: 1 = equivalent (the paraphrase class)
    assert task.model_kwargs()["id2label"] == {0: "not_equivalent", 1: "equivalent"}
    assert sum(ex["label"] == "equivalent" for ex in examples) == 279 and len(examples) == 408
    # Always "equivalent": TP 279, FP 129, FN 0 -> F1 = 2*279 / (2*279 + 129) = 0.8122...
    scores = task.metrics(examples, constant(1, len(examples)))
    assert scores["f1"] == pytest.approx(558 / 687) and scores["f1"] == pytest.approx(0.81223, abs=1e-5)
    assert scores["accuracy"] == pytest.approx(279 / 408) and scores["mcc"] == 0.0
    assert scores["positive_label"] == "equivalent"
    assert task.metrics(examples, constant(0, len(examples)))["f1"] == 0.0  # always "not_equivalent"


def glue_dir(tmp_path, name: str, header: str, rows: list[str]):
    root = tmp_path / "data" / name
    root.mkdir(parents=True)
    for split in ("train", "dev"):
        (root / f"{split}.tsv").write_text("\ufeff" + header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return tmp_path / "data"


def test_qqp_ids_follow_the_registry_even_when_training_sees_one_id_first(tmp_path):
    rows = [f"{i}\t{i}\t{i}\twho is john ?\twho is mary ?\t{1 - i % 2}" for i in range(6)]
    data = glue_dir(tmp_path, "qqp", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate", rows)
    task = SentencePairTask()
    examples = task.read(resolve("qqp", "train", str(data)), TRAIN)
    task.fit_labels(examples)
    assert examples[0]["label"] == "duplicate" and task.labels == ["not_duplicate", "duplicate"]


def test_finetuned_mrpc_model_saves_glue_id2label(tmp_path, tiny_bert, run_cli):
    from transformers import AutoConfig

    rows = [
        f"{i % 2}\t{i}\t{i + 100}\tjohn lives in paris .\t{'john' if i % 2 else 'mary'} lives in paris ."
        for i in range(12)
    ]
    data = glue_dir(tmp_path, "mrpc", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String", rows)
    out = tmp_path / "model"
    code, stdout, stderr = run_cli(
        "finetune",
        "pair",
        "--data",
        "mrpc",
        "--data-dir",
        data,
        "--model",
        tiny_bert,
        "--output",
        out,
        "--epochs",
        1,
        "--batch-size",
        4,
    )
    assert code == 0, stderr
    assert AutoConfig.from_pretrained(out).id2label == {0: "not_equivalent", 1: "equivalent"}
    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["task"]["labels"] == ["not_equivalent", "equivalent"]
    assert meta["metrics"]["positive_label"] == "equivalent" and "positive_label equivalent" in stdout


@pytest.mark.parametrize(
    "value, expected",
    [
        (1, "1"),
        ("1", "1"),
        (1.0, "1"),
        ("1.0", "1"),
        (" 01 ", "1"),
        ("-2.00", "-2"),
        ("1e1", "10"),
        (0.5, "0.5"),
        ("pos", "pos"),
        (True, "True"),
        ("12345678901234567891", "12345678901234567891"),
    ],
)
def test_numeric_labels_are_normalised(value, expected):
    assert normalise_label(value) == expected


def records_task(records, purpose=TRAIN, task_class=SingleSentenceTask):
    task = task_class()
    examples = task.from_records(records, Source("data.jsonl"), purpose)
    if purpose == TRAIN:
        task.fit_labels(examples)
    return task, examples


def test_one_and_one_point_zero_are_one_class_and_ints_sort_numerically():
    labels = [1, "1.0", 0.0, "10", 2]
    task, examples = records_task([{"text": t, "label": label} for t, label in zip("abcde", labels)])
    assert task.labels == ["0", "1", "2", "10"] and [ex["label"] for ex in examples] == ["1", "1", "0", "10", "2"]
    task, _ = records_task([{"text": "a", "label": "pos"}, {"text": "b", "label": "neg"}])
    assert task.labels == ["neg", "pos"]  # strings: alphabetical, documented


@pytest.mark.parametrize(
    "labels, shown",
    [
        ([4.2, 3.8, 0.0, 5.0, 1.5], "5 distinct numeric values, e.g. 1.5, 3.8, 4.2"),  # STS-B-like scores
        ([str(1900 + i) for i in range(95)], "95 distinct numeric values, e.g. 1900, 1901, 1902"),  # years, not ids
    ],
)
def test_continuous_labels_are_refused(labels, shown):
    records = [{"text": f"t{i}", "label": label} for i, label in enumerate(labels)]
    with pytest.raises(BertkitError, match="not classes") as info:
        records_task(records)
    assert shown in str(info.value) and "--problem-type regression" in str(info.value) and "\n" not in str(info.value)


def test_many_integer_class_ids_are_still_classes():
    task, _ = records_task([{"text": f"t{i}", "label": i % 30} for i in range(60)])
    assert task.labels == [str(i) for i in range(30)]


def test_continuous_labels_fail_on_the_command_line_before_any_model_work(tmp_path, run_cli):
    data = tmp_path / "sts.tsv"
    data.write_text("sentence1\tsentence2\tlabel\n" + "".join(f"a {i}\tb {i}\t{i / 7:.2f}\n" for i in range(40)))
    result = run_cli(
        "finetune", "pair", "--data", data, "--model", tmp_path / "never-loaded", "--output", tmp_path / "out"
    )
    assert_user_error(result, "look continuous", "add --problem-type regression")
    assert not (tmp_path / "out").exists()


def test_text_after_a_tab_is_refused_for_a_single_text_model():
    records = formats.parse_records("a fine film\nthe plot\tthe acting\nok\nx\ty\n", ".txt", "in.txt")
    with pytest.raises(BertkitError, match=r"in.txt: 2 row\(s\) have a second text after a TAB \(rows 2, 4\)"):
        SingleSentenceTask().from_records(records, Source("in.txt"), PREDICT)
    pair = SentencePairTask(labels=["different", "same"]).from_records(
        [{"text": "a", "text_pair": "b"}], Source("in.txt"), PREDICT
    )
    assert pair == [{"text": "a", "text_pair": "b"}]
    # a pair model given single texts still fails
    with pytest.raises(BertkitError, match="a pair model needs two texts"):
        SentencePairTask().from_records([{"text": "a"}], Source("in.txt"), PREDICT)


def test_eval_labels_are_normalised_too():
    task, _ = records_task([{"text": "a", "label": 0}, {"text": "b", "label": 1}])
    examples = task.from_records([{"text": "c", "label": "1.0"}], Source("dev.jsonl"), EVAL)
    task.check_eval_examples(examples, Source("dev.jsonl"))
    assert examples[0]["label"] == "1"
