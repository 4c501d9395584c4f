"""--long-text for cls and pair: the encodings (head-tail, windows) against the tokenizer's own,
window pooling against a hand computation, and each option's limits."""

from __future__ import annotations

import re

import numpy as np
import pytest

from bertkit.errors import BertkitError
from bertkit.tasks.classification import SentencePairTask, SingleSentenceTask
from bertkit.tasks.long_text import (
    check_long_text_options,
    encode_rows,
    head_tail,
    pool_windows,
    template_of,
    window_spans,
)


@pytest.fixture(scope="module")
def tokenizer(tiny_bert):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert)


WORDS = "the film was very good and the plot was great but the acting was poor".split()


def long_text(n: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))  # one token per word in the tiny vocab


@pytest.mark.parametrize("how", ["head-tail", "windows"])
def test_rows_that_fit_are_encoded_as_the_tokenizer_encodes_them(tokenizer, how):
    texts, pairs = ["the film was good", "bad plot"], ["good acting", "it was not very good"]
    for second in (None, pairs):
        encoded = encode_rows(tokenizer, texts, second, 32, {"long_text": how})
        plain = tokenizer(texts, second)
        assert [f["input_ids"] for f in encoded.features] == plain["input_ids"]
        assert [f["token_type_ids"] for f in encoded.features] == plain["token_type_ids"]
        assert not any(f["truncated"] for f in encoded.features)


def test_head_tail_keeps_the_first_and_last_tokens(tokenizer):
    ids = list(range(100))
    assert head_tail(ids, 10, 3) == [0, 1, 2, 93, 94, 95, 96, 97, 98, 99]
    assert head_tail(ids[:10], 10, 3) == ids[:10]
    text = long_text(40)
    body = tokenizer(text, add_special_tokens=False)["input_ids"]
    feature = encode_rows(tokenizer, [text], None, 12, {"long_text": "head-tail", "head_tokens": 4}).features[0]
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    assert feature["input_ids"] == [cls, *body[:4], *body[-6:], sep] and feature["truncated"]
    default = encode_rows(tokenizer, [text], None, 12, {"long_text": "head-tail"}).features[0]
    assert default["input_ids"] == [cls, *body[:2], *body[-8:], sep]  # a quarter of the 10 tokens of room


def test_windows_overlap_by_the_stride_and_cover_the_text(tokenizer):
    assert window_spans(10, 4, 1) == [(0, 4), (3, 7), (6, 10)]
    assert window_spans(11, 4, 1) == [(0, 4), (3, 7), (6, 10), (9, 11)]
    assert window_spans(4, 4, 3) == [(0, 4)]
    text = long_text(25)
    body = tokenizer(text, add_special_tokens=False)["input_ids"]
    encoded = encode_rows(tokenizer, [text, "good film"], None, 12, {"long_text": "windows", "stride": 2})
    windows = [f["input_ids"][1:-1] for f in encoded.features if f["example_index"] == 0]
    assert windows == [body[0:10], body[8:18], body[16:25]]
    assert [f["example_index"] for f in encoded.features] == [0, 0, 0, 1]
    assert encoded.stats == {"truncated": 0, "windows": 4, "windowed": 1}
    assert encoded.notices == [
        "1 of 2 texts were longer than a window and were read as overlapping windows (4 windows for 2 rows, "
        "2 tokens shared; logits combined by mean)"
    ]


def test_pairs_window_only_the_second_text_and_say_when_the_first_is_cut(tokenizer):
    first, second = long_text(20), long_text(30)
    encoded = encode_rows(tokenizer, [first], [second], 16, {"long_text": "windows", "stride": 1})
    template = template_of(tokenizer, pair=True)
    firsts = tokenizer(first, add_special_tokens=False)["input_ids"][:6]  # half of the 13 tokens of room
    seconds = tokenizer(second, add_special_tokens=False)["input_ids"]
    assert [f["input_ids"] for f in encoded.features] == [
        template.build(firsts, seconds[a:b])[0] for a, b in window_spans(30, 7, 1)
    ]
    assert all(f["token_type_ids"].count(1) == len(f["input_ids"]) - 8 for f in encoded.features)
    assert all(f["truncated"] for f in encoded.features)
    assert "1 of 1 first texts of pairs were cut to 6 tokens" in encoded.notices[-1]


def test_window_pooling_is_the_hand_computed_mean_and_max():
    # one document of 3 windows, one of 1; three labels
    logits = np.array([[1.0, -2.0, 0.5], [3.0, 0.0, -1.0], [-1.0, 4.0, 0.5], [0.2, 0.3, 0.4]])
    mean, counts = pool_windows(logits, [0, 0, 0, 1], 2, "mean")
    assert counts == [3, 1]
    assert mean[0].tolist() == pytest.approx([(1 + 3 - 1) / 3, (-2 + 0 + 4) / 3, (0.5 - 1 + 0.5) / 3])
    assert mean[1].tolist() == pytest.approx([0.2, 0.3, 0.4])
    high, _ = pool_windows(logits, [0, 0, 0, 1], 2, "max")
    assert high.tolist() == [[3.0, 4.0, 0.5], [0.2, 0.3, 0.4]]
    regression, _ = pool_windows(np.array([[1.0], [2.0], [6.0]]), [0, 0, 0], 1, "mean")
    assert regression.tolist() == [[3.0]]


@pytest.mark.parametrize("kind", ["single-label", "regression", "multi-label"])
def test_postprocess_pools_each_rows_windows_for_every_label_kind(tokenizer, kind):
    labels = {"single-label": ["neg", "pos"], "regression": None, "multi-label": ["a", "b"]}[kind]
    task = SingleSentenceTask(
        12, {"long_text": "windows", "stride": 2, "problem_type": kind, "window_pooling": "max"}, labels
    )
    examples = [{"text": long_text(25)}, {"text": "good film"}]
    features = task.preprocess(examples, tokenizer, train=False)
    width = 1 if kind == "regression" else 2
    logits = [np.arange(width, dtype=np.float32) + i for i in range(len(features))]  # window i: i, i+1
    predictions = task.postprocess(examples, features, {"logits": logits})
    assert [p["windows"] for p in predictions] == [3, 1]
    expected = task.kind.decode(np.array([[2.0, 3.0][:width], [3.0, 4.0][:width]]))
    for got, want in zip(predictions, expected):
        for key, value in want.items():
            assert np.allclose(got[key], value)
    row = task.format_prediction(examples[0], predictions[0])
    assert row["windows"] == 3 and "truncated" not in row


@pytest.mark.parametrize(
    ("options", "max_length", "fragment"),
    [
        ({"long_text": "slide"}, 32, "unknown --long-text 'slide'"),
        ({"long_text": ""}, 32, "unknown --long-text ''"),
        ({"long_text": "windows", "window_pooling": "sum"}, 32, "unknown --window-pooling 'sum'"),
        ({"window_pooling": "max"}, 32, "--window-pooling applies to --long-text windows only"),
        ({"long_text": "head-tail", "stride": 4}, 32, "--stride applies to --long-text windows only"),
        ({"long_text": "windows", "head_tokens": 4}, 32, "--head-tokens applies to --long-text head-tail only"),
        ({"long_text": "windows", "stride": -1}, 32, "--stride -1 must be at least 0"),
        ({"long_text": "head-tail", "head_tokens": 40}, 32, "--head-tokens 40 must be at least 0 and below"),
    ],
)
def test_options_that_cannot_work_are_refused_before_any_data(options, max_length, fragment):
    with pytest.raises(BertkitError, match=re.escape(fragment)):
        check_long_text_options(options, max_length, training=True)


def test_limits_that_need_the_tokenizer_are_refused_before_any_feature(tokenizer):
    examples = [{"text": "good film"}]
    with pytest.raises(BertkitError, match="--stride 30 must be below the 30 text tokens"):
        SingleSentenceTask(32, {"long_text": "windows", "stride": 30}).preprocess(examples, tokenizer, False)
    with pytest.raises(BertkitError, match="--head-tokens 31 must be at most the 30 text tokens"):
        SingleSentenceTask(32, {"long_text": "head-tail", "head_tokens": 31}).preprocess(examples, tokenizer, False)
    pairs = [{"text": "good", "text_pair": "film"}]
    with pytest.raises(BertkitError, match="--stride 15 must be below the 15 text tokens the second text"):
        SentencePairTask(32, {"long_text": "windows", "stride": 15}).preprocess(pairs, tokenizer, False)
    assert SingleSentenceTask(32, {"long_text": "head-tail", "head_tokens": 30}).preprocess(examples, tokenizer, False)


def test_the_choice_is_stored_with_the_task_and_eval_may_change_only_the_pooling():
    task = SingleSentenceTask(64, {"long_text": "windows", "stride": 8}, ["neg", "pos"])
    assert task.state()["options"] == {"long_text": "windows", "stride": 8}
    assert task.apply_options({"window_pooling": "max"}, "predict").options["window_pooling"] == "max"
    truncating = SingleSentenceTask(64, {}, ["neg", "pos"])
    with pytest.raises(BertkitError, match="--window-pooling applies to models trained with --long-text windows"):
        truncating.apply_options({"window_pooling": "max"}, "predict")


@pytest.mark.parametrize("name", ["roberta-bpe", "modernbert-bpe", "albert-unigram", "deberta-unigram"])
def test_every_tokenizer_family_keeps_its_own_special_tokens(name):
    from tiny_models import TOKENIZERS

    tokenizer = TOKENIZERS[name]()
    texts, pairs = ["John visited Paris", "Anna met John ."], ["and met Anna", "Paris"]
    for second in (None, pairs):
        plain = tokenizer(texts, second)
        for how in ("head-tail", "windows"):
            encoded = encode_rows(tokenizer, texts, second, 64, {"long_text": how})
            assert [f["input_ids"] for f in encoded.features] == plain["input_ids"], (how, second)
            if "token_type_ids" in plain:
                assert [f["token_type_ids"] for f in encoded.features] == plain["token_type_ids"]
    long = " ".join(["John visited Paris and met Anna ."] * 20)
    windows = encode_rows(tokenizer, [long], None, 24, {"long_text": "windows", "stride": 4}).features
    first = tokenizer(long, truncation=True, max_length=24)["input_ids"]
    assert len(windows) > 2 and windows[0]["input_ids"] == first  # the first window is what truncation keeps
    assert all(len(w["input_ids"]) <= 24 for w in windows)
