"""Preprocessing facts reach the console through one mechanism: tasks put human-readable lines in
``stats["notices"]`` and the CLI prints them for finetune, eval and predict (predict on stderr)."""

from __future__ import annotations

import json

import pytest

from bertkit.tasks.classification import SentencePairTask, SingleSentenceTask
from bertkit.tasks.tagging import TaggingTask


@pytest.fixture(scope="module")
def tokenizer(tiny_bert):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert)


def test_only_rows_that_lost_tokens_count_as_truncated(tokenizer):
    # With [CLS] and [SEP]: "the film was good" is 6 tokens (fits 6 exactly), "the film was very good" 7.
    task = SingleSentenceTask(6, labels=["neg", "pos"])
    examples = [
        {"text": "the film was good"},
        {"text": "the film was very good"},
        {"text": "good"},
        {"text": "the film was very very good"},
    ]
    features = task.preprocess(examples, tokenizer, train=False)
    assert [f["truncated"] for f in features] == [False, True, False, True]
    assert [len(f["input_ids"]) for f in features] == [6, 6, 3, 6]
    assert task.stats == {"truncated": 2, "notices": ["2 of 4 texts were truncated to 6 tokens"]}
    assert SingleSentenceTask(7).preprocess(examples[:3], tokenizer, train=False) and SingleSentenceTask(7).stats == {}
    task.preprocess(examples[:1], tokenizer, train=False)
    assert task.stats == {"truncated": 0}  # nothing to say: no notice


def test_pairs_are_counted_as_text_pairs(tokenizer):
    task = SentencePairTask(7, labels=["different", "same"])
    task.preprocess(
        [
            {"text": "good film", "text_pair": "bad plot"},  # 7 tokens: fits
            {"text": "good film", "text_pair": "bad plot and acting"},
        ],
        tokenizer,
        train=False,
    )
    assert task.stats["notices"] == ["1 of 2 text pairs were truncated to 7 tokens"]


def test_ner_windows_use_the_same_mechanism(tokenizer):
    task = TaggingTask(8, labels=["O", "B-PER", "I-PER"])
    task.preprocess(
        [{"tokens": ["john"] * 12, "tags": ["B-PER"] * 12}, {"tokens": ["john"], "tags": ["B-PER"]}],
        tokenizer,
        train=False,
    )
    assert task.stats["notices"] == ["1 of 2 sentence(s) longer than --max-length were split into overlapping windows"]


def test_cls_console_and_predict_rows_report_truncation(tmp_path, tiny_bert, run_cli):
    long_text = "the film was very good and the plot was great"  # 12 tokens with [CLS]/[SEP]
    rows = [
        (long_text if i % 4 == 0 else ("good film" if i % 2 else "bad film"), "pos" if i % 2 else "neg")
        for i in range(16)
    ]
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"{t},{label}\n" for t, label in rows))
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\n" + "".join(f"{t},{label}\n" for t, label in rows[:6]))
    out = tmp_path / "model"
    code, stdout, stderr = run_cli(
        "finetune",
        "cls",
        "--data",
        train,
        "--eval-data",
        dev,
        "--model",
        tiny_bert,
        "--output",
        out,
        "--epochs",
        1,
        "--max-length",
        8,
    )
    assert code == 0, stderr
    # said on stderr once preprocessing counted them, before training; not again with the summary
    assert "train: 4 of 16 texts were truncated to 8 tokens" in stderr
    assert "eval: 2 of 6 texts were truncated to 8 tokens" in stderr
    assert "truncated" not in stdout
    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["preprocessing"]["train"]["truncated"] == 4 and meta["preprocessing"]["eval"]["truncated"] == 2

    code, stdout, stderr = run_cli("eval", out, "--data", dev, "--output", tmp_path / "m.json")
    assert code == 0, stderr
    assert "2 of 6 texts were truncated to 8 tokens" in stderr

    (tmp_path / "in.txt").write_text(f"good film\n{long_text}\nbad\n")
    code, stdout, stderr = run_cli("predict", out, "--input", tmp_path / "in.txt")
    assert code == 0, stderr
    predictions = [json.loads(line) for line in stdout.splitlines()]  # stdout is pure JSONL
    assert [p.get("truncated") for p in predictions] == [None, True, None]  # the key only where it happened
    assert stderr.strip().splitlines()[-1] == "1 of 3 texts were truncated to 8 tokens"  # after the progress bar

    (tmp_path / "tabs.txt").write_text("good film\nbad film\tgreat plot\n")
    code, stdout, stderr = run_cli("predict", out, "--input", tmp_path / "tabs.txt")
    assert code == 2 and stdout == "" and "1 row(s) have a second text after a TAB (rows 2)" in stderr
