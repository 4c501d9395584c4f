"""ner --context document (FLERT): documents found in the data, each sentence encoded between the
word pieces of its neighbours, labels and scores on its own words only. The reference is a
hand-built `[CLS] before sentence after [SEP]` encoding of the same words, run through the same
model: the sentence's words must get exactly its logits (and so its tags)."""

from __future__ import annotations

import numpy as np
import pytest

from bertkit.data.registry import Source
from bertkit.errors import BertkitError
from bertkit.tasks.base import EVAL, PREDICT
from bertkit.tasks.document_context import document_runs, share
from bertkit.tasks.tagging import TaggingTask

LABELS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
# one document of three sentences, then one of two ("filmed" is two word pieces in the tiny vocab)
DOCUMENTS = [
    [
        (["john", "lives", "in", "paris"], ["B-PER", "O", "O", "B-LOC"]),
        (["mary", "filmed", "in", "berlin", "."], ["B-PER", "O", "O", "B-LOC", "O"]),
        (["obama", "visited", "london"], ["B-PER", "O", "B-LOC"]),
    ],
    [
        (["paris", "is", "a", "city"], ["B-LOC", "O", "O", "O"]),
        (["john", "works", "in", "france"], ["B-PER", "O", "O", "B-LOC"]),
    ],
]


def conll_text(documents=DOCUMENTS, marked=True) -> str:
    blocks = []
    for document in documents:
        blocks.append("-DOCSTART- O\n\n" if marked else "")
        for words, tags in document:
            blocks.append("".join(f"{w} {t}\n" for w, t in zip(words, tags)) + "\n")
    return "".join(blocks)


def read(tmp_path, options, text=None, purpose=EVAL, max_length=128):
    path = tmp_path / "data.conll"
    path.write_text(conll_text() if text is None else text)
    task = TaggingTask(max_length, options, LABELS)
    return task, task.read(Source(str(path), path=path), purpose)


@pytest.fixture(scope="module")
def tiny(tiny_bert):
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    torch.manual_seed(3)
    model = AutoModelForTokenClassification.from_pretrained(tiny_bert, num_labels=len(LABELS)).eval()
    return AutoTokenizer.from_pretrained(tiny_bert), model


def pieces(tokenizer, words: list) -> list:
    return tokenizer(words, is_split_into_words=True, add_special_tokens=False)["input_ids"] if words else []


def logits_of(model, input_ids) -> np.ndarray:
    import torch

    with torch.no_grad():
        return model(input_ids=torch.tensor([input_ids])).logits[0].numpy()


def test_documents_are_runs_of_one_id_and_an_id_may_not_come_back():
    assert document_runs(["a", "a", "b", 7, 7], "f", False) == [(0, 2), (2, 3), (3, 5)]
    assert document_runs([None] * 3, "f", True) == [(0, 3)]  # raw sentences: one document, in order
    assert document_runs([None] * 3, "f", False) is None  # gold data without a boundary: sentences alone
    with pytest.raises(BertkitError, match="document 'a' comes back at row 4, after document 'b' began"):
        document_runs(["a", "a", "b", "a"], "f", False)
    with pytest.raises(BertkitError, match="row 2 has no document id"):
        document_runs(["a", None, "a"], "f", False)


def test_the_room_a_sentence_leaves_is_shared_between_the_sides():
    assert share(10, 3, 4) == (3, 4)  # both fit
    assert share(10, 20, 20) == (5, 5)  # half each
    assert share(10, 2, 20) == (2, 8)  # what one side leaves goes to the other
    assert share(10, 20, 1) == (9, 1)
    assert share(0, 5, 5) == (0, 0)
    assert share(128 - 2 - 20, 64, 64) == (53, 53)  # README: a 20-piece sentence at --max-length 128
    assert share(256 - 2 - 20, 64, 64) == (64, 64)


def test_context_is_the_neighbours_in_the_same_document_only(tmp_path):
    _, examples = read(tmp_path, {"context": "document", "context_tokens": 5})
    assert [ex["context"] for ex in examples] == [
        [[], ["mary", "filmed", "in", "berlin", "."]],
        [["john", "lives", "in", "paris"], ["obama", "visited", "london"]],
        [["mary", "filmed", "in", "berlin", "."], []],  # the last 5 words before it
        [[], ["john", "works", "in", "france"]],  # a new document: nothing from the one before
        [["paris", "is", "a", "city"], []],
    ]
    _, alone = read(tmp_path, {"context": "sentence"})
    assert not any("context" in ex for ex in alone)


@pytest.mark.parametrize(
    "size", [64, 2]
)  # at --max-length 128  # all of the neighbours, and only the nearest 2 pieces a side
def test_a_sentence_gets_exactly_the_logits_and_tags_of_a_hand_built_encoding(tmp_path, tiny, size):
    tokenizer, model = tiny
    task, examples = read(tmp_path, {"context": "document", "context_tokens": size})
    features = task.preprocess(examples, tokenizer, train=False)
    assert len(features) == len(examples)
    outputs = {"logits": [logits_of(model, f["input_ids"]) for f in features]}
    predicted = task.postprocess(examples, features, outputs)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    for example, feature, logits, tags in zip(examples, features, outputs["logits"], predicted):
        before, after = (pieces(tokenizer, side) for side in example["context"])
        before, after = before[len(before) - size :], after[:size]
        own = tokenizer(example["tokens"], is_split_into_words=True, add_special_tokens=False)
        firsts = [1 + len(before) + own.word_ids().index(w) for w in range(len(example["tokens"]))]
        hand = [cls, *before, *own["input_ids"], *after, sep]  # the context as a separate input
        assert feature["input_ids"] == hand
        reference = logits_of(model, hand)[firsts]
        np.testing.assert_array_equal(logits[feature["first_tokens"]], reference)
        assert tags == [LABELS[i] for i in reference.argmax(-1)]


def test_context_words_carry_no_label_and_never_reach_the_metric(tmp_path, tiny):
    tokenizer, _ = tiny
    task, examples = read(tmp_path, {"context": "document"})
    features = task.preprocess(examples, tokenizer, train=True)
    for example, feature in zip(examples, features):
        labelled = [i for i, label in enumerate(feature["labels"]) if label != -100]
        assert labelled == feature["first_tokens"]  # the sentence's own first pieces, nothing else
        assert [LABELS[feature["labels"][i]] for i in labelled] == example["tags"]
        assert len(feature["input_ids"]) > len(example["tokens"]) + 2  # context is there
    # logits that name a wrong entity at every position but the sentence's own words: a perfect score
    outputs = {"logits": []}
    for feature in features:
        logits = np.zeros((len(feature["input_ids"]), len(LABELS)))
        logits[:, LABELS.index("B-PER")] = 5.0
        for position, label in zip(feature["first_tokens"], [x for x in feature["labels"] if x != -100]):
            logits[position] = 0.0
            logits[position, label] = 9.0
        outputs["logits"].append(logits)
    predictions = task.postprocess(examples, features, outputs)
    assert task.metrics(examples, predictions)["f1"] == 1.0


def test_a_long_sentence_keeps_its_windows_and_a_short_room_trims_the_context_not_the_sentence(tmp_path, tiny):
    tokenizer, _ = tiny
    long = (["john", "lives", "in", "paris", "."] * 5, ["B-PER", "O", "O", "B-LOC", "O"] * 5)
    text = conll_text([[DOCUMENTS[0][0], long, DOCUMENTS[0][2]]])
    task, examples = read(tmp_path, {"context": "document", "context_tokens": 9}, text, max_length=12)
    features = task.preprocess(examples, tokenizer, train=True)
    windows = [f for f in features if f["example_index"] == 1]
    assert len(windows) > 1  # windowed over its own words, as without context
    assert sorted(w for f in windows for w in f["words"]) == list(range(25))
    first = features[0]
    assert len(first["input_ids"]) == 12 and first["first_tokens"] == [1, 2, 3, 4]  # no room before it: all after
    assert features.stats["sentences_with_context"] == 2


def test_gold_data_without_a_boundary_is_read_as_sentences_and_said(tmp_path):
    from bertkit.events import listening

    heard = []
    with listening(heard.append):
        _, examples = read(tmp_path, {"context": "document"}, conll_text(marked=False))
    assert not any("context" in ex for ex in examples)
    assert any("no document boundary (no -DOCSTART- line)" in e.text for e in heard)
    assert any("each sentence is read alone" in n for n in examples.seen["notices"])


def test_raw_sentences_are_one_document_and_records_name_theirs(tmp_path):
    task = TaggingTask(64, {"context": "document", "context_tokens": 8}, LABELS)
    lines = task.from_records([{"text": "john lives in paris"}, {"text": "mary filmed ."}], Source("r"), PREDICT)
    assert lines[1]["context"] == [["john", "lives", "in", "paris"], []]
    named = task.from_records(
        [
            {"text": "obama visited london", "document": 2},
            {"text": "john lives in paris", "document": 1},
            {"text": "mary filmed .", "document": 1},
        ],
        Source("r"),
        PREDICT,
    )
    assert [ex["context"] for ex in named[1:]] == [ex["context"] for ex in lines]
    with pytest.raises(BertkitError, match="'document' is True"):
        task.from_records([{"text": "john", "document": True}], Source("r"), PREDICT)


def test_a_sentence_model_reads_no_document_ids():
    task = TaggingTask(64, {}, LABELS)  # --context sentence: a 'document' field is the user's own business
    examples = task.from_records([{"text": "john lives", "document": [1, 2]}], Source("r"), PREDICT)
    assert "context" not in examples[0]
