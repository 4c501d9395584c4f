"""Every encoder family, every task: finetune -> eval -> predict on tiny random models built in-process
(tests/tiny_models.py), plus the tokenizer handling that differs between families.

The models are random and train for one epoch, so scores are not the point; the checks are what
must hold whatever the weights: counts, label sets, answers at their offsets, one tag per word,
the saved directory working in plain transformers with the same numbers, inputs per family.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from tiny_models import FAMILIES, build_family

from bertkit.options import EvalOptions, InferenceOptions, PredictOptions, RunOptions

TASKS = ("cls", "pair", "ner", "qa")
WITH_SEGMENTS = {"bert", "electra", "albert"}  # type_vocab_size 2; the others have no segment embeddings
BYTE_LEVEL = ("roberta", "modernbert")
NAMES, CITIES, ORGS = ["John", "Mary", "Obama", "Anna"], ["Paris", "London", "Berlin", "Rome"], ["Google", "Acme"]
POSITIVE, NEGATIVE = ["good", "great", "fine"], ["bad", "awful", "poor"]
FILLER = "the movie film plot story acting it was very this".split()
HEAD = {
    "cls": "AutoModelForSequenceClassification",
    "pair": "AutoModelForSequenceClassification",
    "ner": "AutoModelForTokenClassification",
    "qa": "AutoModelForQuestionAnswering",
}


@pytest.fixture(scope="session")
def family_dirs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("families")
    return {name: build_family(name, root / name) for name in FAMILIES}


# --- data: a few dozen rows per task, written once ----------------------------------------------------
def _sentence(rng, word):
    words = rng.sample(FILLER, 4)
    words.insert(rng.randrange(5), word)
    return " ".join(words)


def _ner_sentence(rng):
    name, city, org = rng.choice(NAMES), rng.choice(CITIES), rng.choice(ORGS)
    pattern = rng.choice(
        [
            [(name, "B-PER"), ("lives", "O"), ("in", "O"), (city, "B-LOC"), (".", "O")],
            [(name, "B-PER"), ("works", "O"), ("for", "O"), (org, "B-ORG"), ("in", "O"), (city, "B-LOC"), (".", "O")],
            [("the", "O"), ("company", "O"), (org, "B-ORG"), ("is", "O"), ("in", "O"), (city, "B-LOC")],
        ]
    )
    return pattern


def _qa_paragraph(rng, index):
    name, city, other = rng.choice(NAMES), *rng.sample(CITIES, 2)
    context = f"the company is good .  {name} lives in {city} . {rng.choice(NAMES)} visited {other} ."
    start = context.index(f" {name} lives") + 1
    return {
        "context": context,
        "qas": [
            {
                "id": f"q{index}",
                "question": f"who lives in {city} ?",
                "answers": [{"text": name, "answer_start": start}],
            }
        ],
    }


@pytest.fixture(scope="module")
def task_data(tmp_path_factory) -> dict:
    """{task: (train file, dev file, predict file, number of predict rows)}."""
    root, rng = tmp_path_factory.mktemp("family-data"), random.Random(7)
    files = {}
    for task, (train_n, dev_n) in {"cls": (32, 12), "pair": (32, 12)}.items():
        for part, n in (("train", train_n), ("dev", dev_n)):
            lines = ["sentence1\tsentence2\tlabel" if task == "pair" else "sentence\tlabel"]
            for i in range(n):
                word = rng.choice(POSITIVE if i % 2 else NEGATIVE)
                if task == "cls":
                    lines.append(f"{_sentence(rng, word)}\t{'pos' if i % 2 else 'neg'}")
                else:
                    same = i % 3 == 0
                    second = word if same else rng.choice([w for w in POSITIVE + NEGATIVE if w != word])
                    lines.append(f"{_sentence(rng, word)}\t{_sentence(rng, second)}\t{'same' if same else 'different'}")
            (root / f"{task}-{part}.tsv").write_text("\n".join(lines) + "\n")
    (root / "cls-predict.txt").write_text("the movie was very good\nawful plot\nthis film is fine\n")
    (root / "pair-predict.txt").write_text("the movie was good\tthe film was great\nbad plot\tgood acting\n")
    for part, n in (("train", 32), ("dev", 12)):
        blocks = ["\n".join(f"{w} {t}" for w, t in _ner_sentence(rng)) for _ in range(n)]
        (root / f"ner-{part}.txt").write_text("\n\n".join(blocks) + "\n")
    (root / "ner-predict.txt").write_text(
        "John works for Google in Paris .\nAnna  lives in Rome\nthe company Acme is in Berlin .\n"
    )
    for part, n in (("train", 24), ("dev", 8)):
        squad = {"version": "1.1", "data": [{"title": "t", "paragraphs": [_qa_paragraph(rng, i) for i in range(n)]}]}
        (root / f"qa-{part}.json").write_text(json.dumps(squad))
    predict = [
        {"id": f"p{i}", "question": f"who lives in {city} ?", "context": f"{name} lives in {city} .  it is good ."}
        for i, (name, city) in enumerate(zip(NAMES, CITIES))
    ]
    (root / "qa-predict.jsonl").write_text("".join(json.dumps(r) + "\n" for r in predict))
    counts = {"cls": 3, "pair": 2, "ner": 3, "qa": 4}
    ext = {"cls": "tsv", "pair": "tsv", "ner": "txt", "qa": "json"}
    for task in TASKS:
        predict_file = root / (f"{task}-predict.jsonl" if task == "qa" else f"{task}-predict.txt")
        files[task] = (root / f"{task}-train.{ext[task]}", root / f"{task}-dev.{ext[task]}", predict_file, counts[task])
    return files


# --- every family x every task -------------------------------------------------------------------------
@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("family", FAMILIES)
def test_family_runs_every_task_end_to_end(family, task, family_dirs, task_data, tmp_path):
    import transformers

    from bertkit import api
    from bertkit.config import TrainConfig

    train, dev, predict_file, predict_rows = task_data[task]
    out = tmp_path / "model"
    config = TrainConfig(epochs=1, lr=1e-3, batch_size=8, seed=3)
    result = api.finetune(
        task,
        RunOptions(data=str(train), eval_data=str(dev), model=str(family_dirs[family]), output=str(out)),
        config=config,
    )
    meta = json.loads((out / "bertkit.json").read_text())
    main = "accuracy" if task in ("cls", "pair") else "f1"
    assert result.train_examples == {"cls": 32, "pair": 32, "ner": 32, "qa": 24}[task]
    assert result.eval_examples == {"qa": 8}.get(task, 12)
    assert len(result.history) == 1 and np.isfinite(result.history[0]["train_loss"])
    assert 0 <= result.metrics[main] <= (100 if task == "qa" else 1)

    # eval from the saved directory reproduces the score measured during training (same weights, same data)
    report = api.evaluate(str(out), EvalOptions(output=str(tmp_path / "eval.json"), data=str(dev)))
    assert report["examples"] == result.eval_examples
    assert report["metrics"][main] == pytest.approx(result.metrics[main], abs=1e-6)

    rows = api.predict(
        str(out), PredictOptions(input=str(predict_file)), InferenceOptions(precision="no")
    )  # fp32: compared with plain transformers below
    assert len(rows) == predict_rows
    from bertkit.tasks import task_from_state  # every row keeps to the schema the saved task declares

    fields = task_from_state(meta["task"]).prediction_fields
    assert all(set(row) <= set(fields) for row in rows), rows[0]
    labels = meta["task"]["labels"]
    plain = getattr(transformers, HEAD[task]).from_pretrained(out)  # plain transformers loads the directory
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    assert type(plain).__name__.endswith(HEAD[task][len("AutoModel") :])
    assert ("token_type_ids" in tokenizer("a b")) == (family in WITH_SEGMENTS)
    if task in ("cls", "pair"):
        _check_classification(rows, labels, plain, tokenizer, task)
    elif task == "ner":
        _check_tagging(rows, labels, plain)
    else:
        _check_answers(rows, predict_file)


def _check_classification(rows, labels, plain, tokenizer, task):
    import torch

    assert labels == (["neg", "pos"] if task == "cls" else ["different", "same"])
    assert plain.config.id2label == dict(enumerate(labels))
    for row in rows:
        assert row["label"] in labels and sum(row["probabilities"].values()) == pytest.approx(1, abs=1e-5)
        # the same probabilities from plain transformers: the saved tokenizer encodes as bertkit did
        encoded = tokenizer(row["text"], row.get("text_pair"), return_tensors="pt")
        with torch.no_grad():
            probabilities = plain(**encoded).logits.softmax(-1)[0].tolist()
        assert probabilities == pytest.approx([row["probabilities"][label] for label in labels], abs=1e-5)


def _check_tagging(rows, labels, plain):
    assert labels == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    assert plain.config.num_labels == 7
    expected_words = [
        ["John", "works", "for", "Google", "in", "Paris", "."],
        ["Anna", "lives", "in", "Rome"],
        ["the", "company", "Acme", "is", "in", "Berlin", "."],
    ]
    assert [row["words"] for row in rows] == expected_words
    for row in rows:
        assert len(row["tags"]) == len(row["words"]) and set(row["tags"]) <= set(labels)
        for entity in row["entities"]:
            assert row["text"][entity["start"] : entity["end"]] == entity["text"]


def _check_answers(rows, predict_file):
    contexts = {r["id"]: r["context"] for r in map(json.loads, predict_file.read_text().splitlines())}
    assert [row["id"] for row in rows] == list(contexts)
    for row in rows:
        assert row["answer"] and row["answer"] == row["answer"].strip()  # no space taken from a neighbour token
        assert contexts[row["id"]][row["start"] : row["end"]] == row["answer"]
        assert 0 < row["score"] <= 1


# --- tokenizers ------------------------------------------------------------------------------------------
WORDS = ["John", "visited", "Paris", "and", "met", "Anna", "."]


def _bertkit_tokenizer(directory):
    from bertkit.models import load_config
    from bertkit.models.tokenizer import load_tokenizer

    return load_tokenizer(str(directory), "tiny", load_config(str(directory), "tiny"))


@pytest.mark.parametrize("family", BYTE_LEVEL)
def test_byte_level_bpe_encodes_pre_split_words_like_running_text(family, family_dirs, tmp_path):
    from transformers import AutoTokenizer

    raw = AutoTokenizer.from_pretrained(family_dirs[family])
    # the bug: without a prefix space each pre-split word is encoded as if it continued a word
    # ("is" and "it" are merged before the bare "visited" chain gets a chance)
    assert raw.convert_ids_to_tokens(raw(WORDS, is_split_into_words=True, add_special_tokens=False)["input_ids"]) == [
        "John",
        "v",
        "is",
        "it",
        "e",
        "d",
        "Par",
        "is",
        "and",
        "met",
        "Anna",
        ".",
    ]

    tokenizer = _bertkit_tokenizer(family_dirs[family])
    split = tokenizer(WORDS, is_split_into_words=True)
    assert split["input_ids"] == tokenizer(" ".join(WORDS))["input_ids"]
    assert tokenizer.convert_ids_to_tokens(split["input_ids"])[1:-1] == [
        "ĠJohn",
        "Ġvisited",
        "ĠParis",
        "Ġand",
        "Ġmet",
        "ĠAnna",
        "Ġ.",
    ]
    assert split.word_ids()[1:-1] == list(range(len(WORDS)))
    # the setting travels with the saved model: plain transformers reloads the same behaviour
    tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    assert reloaded(WORDS, is_split_into_words=True)["input_ids"] == split["input_ids"]
    assert (
        reloaded(" ".join(WORDS), return_offsets_mapping=True)["offset_mapping"]
        == tokenizer(" ".join(WORDS), return_offsets_mapping=True)["offset_mapping"]
    )


@pytest.mark.parametrize("family", ("bert", "albert", "deberta-v2"))
def test_other_tokenizers_are_left_unchanged(family, family_dirs):
    from transformers import AutoTokenizer

    raw, tokenizer = AutoTokenizer.from_pretrained(family_dirs[family]), _bertkit_tokenizer(family_dirs[family])
    assert tokenizer.backend_tokenizer.to_str() == raw.backend_tokenizer.to_str()
    for text in (WORDS, " ".join(WORDS)):
        split = isinstance(text, list)
        ids = tokenizer(text, is_split_into_words=split)["input_ids"]
        assert ids == raw(text, is_split_into_words=split)["input_ids"]
    if family == "bert":
        assert tokenizer.convert_ids_to_tokens(tokenizer(WORDS, is_split_into_words=True)["input_ids"]) == [
            "[CLS]",
            "john",
            "visited",
            "paris",
            "and",
            "met",
            "anna",
            ".",
            "[SEP]",
        ]


@pytest.mark.parametrize("family", FAMILIES)
def test_ner_words_start_on_their_own_first_piece(family, family_dirs):
    from bertkit.tasks.word_windows import encode_words

    tokenizer = _bertkit_tokenizer(family_dirs[family])
    (encoding,), vanished = encode_words(tokenizer, [WORDS])
    assert vanished == 0 and all(len(tokens) == 1 for tokens in encoding.word_tokens)  # every word is one known piece
    firsts = tokenizer.convert_ids_to_tokens([encoding.input_ids[tokens[0]] for tokens in encoding.word_tokens])
    assert [piece.lstrip("Ġ▁").lower() for piece in firsts] == [w.lower() for w in WORDS]


@pytest.mark.parametrize("family", FAMILIES)
def test_qa_offsets_cover_the_answer_exactly(family, family_dirs):
    """Training targets land on the answer's own tokens, and those tokens' offsets give back exactly
    the answer text (byte-level BPE and SentencePiece count the preceding space into a token)."""
    from bertkit.tasks.qa import QuestionAnsweringTask

    tokenizer = _bertkit_tokenizer(family_dirs[family])
    context = "the company is good .  Mary lives in Paris . John visited Rome ."
    example = {
        "id": "x",
        "question": "who visited Rome ?",
        "context": context,
        "answers": [{"text": "John visited", "start": context.index("John")}],
    }
    task = QuestionAnsweringTask(32, {"doc_stride": 4})
    features = task.preprocess([example], tokenizer, train=True)
    assert ("token_type_ids" in features[0]) == (family in WITH_SEGMENTS)
    hit = [f for f in features if f["start_positions"] > 0]
    assert hit and all(len(f["input_ids"]) <= 32 for f in features)
    for feature in hit:
        start, end = feature["offsets"][feature["start_positions"]][0], feature["offsets"][feature["end_positions"]][1]
        assert context[start:end] == "John visited"
    for feature in features:  # no context token's span starts or ends on a space
        for offset in filter(None, feature["offsets"]):
            piece = context[offset[0] : offset[1]]
            assert piece == piece.strip()


@pytest.mark.parametrize("family", BYTE_LEVEL)
def test_qa_answer_ending_on_a_whitespace_token_is_trimmed(family, family_dirs):
    """A double space is a token of its own in byte-level BPE; a span may end on it."""
    from bertkit.tasks.qa import QuestionAnsweringTask

    tokenizer = _bertkit_tokenizer(family_dirs[family])
    context = "Anna lives in Rome .  it is good ."
    example = {"id": "x", "question": "where ?", "context": context, "answers": []}
    task = QuestionAnsweringTask(64)
    (feature,) = task.preprocess([example], tokenizer, train=False)
    pieces = tokenizer.convert_ids_to_tokens(feature["input_ids"])
    rome, space = pieces.index("ĠRome"), pieces.index("Ġ")
    assert space == rome + 2 and feature["offsets"][space][0] == feature["offsets"][space][1]  # all space: empty
    start, end = np.full(len(pieces), -5.0), np.full(len(pieces), -5.0)
    start[rome], end[space] = 5.0, 5.0
    (prediction,) = task.postprocess([example], [feature], {"start_logits": [start], "end_logits": [end]})
    assert (prediction["answer"], prediction["start"], prediction["end"]) == ("Rome .", 14, 20)
    assert context[14:20] == "Rome ."
