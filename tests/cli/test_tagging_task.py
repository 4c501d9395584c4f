"""The NER adapter: first-sub-word labels, word windows, CLI finetune -> eval -> predict, bad input."""

from __future__ import annotations

import io
import json
import random
import sys

import numpy as np
import pytest
from conftest import assert_user_error

from bertkit.data.registry import DATASETS, Source
from bertkit.errors import BertkitError
from bertkit.options import RunOptions
from bertkit.tasks.tagging import TaggingTask
from bertkit.tasks.word_windows import owners, plan_windows

LABELS = ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
PEOPLE = [["john"], ["mary"], ["obama"], ["john", "obama"]]
PLACES = [["paris"], ["london"], ["france"], ["germany"], ["berlin"]]
ORGS = [["google"], ["google", "company"]]
TEMPLATES = [  # "films" and "filmed" split into sub-words in the tiny vocab
    "{PER} lives in {LOC} .",
    "{PER} works for {ORG} .",
    "{PER} visited {LOC} and {LOC} .",
    "the {ORG} met {PER} in {LOC} .",
    "{PER} films in {LOC} with {PER} .",
    "{ORG} filmed the city of {LOC} .",
]


def sentences(n: int, seed: int) -> list[list[tuple[str, str]]]:
    """``n`` random (word, IOB2 tag) sentences from the templates."""
    rng = random.Random(seed)
    names = {"PER": PEOPLE, "LOC": PLACES, "ORG": ORGS}
    result = []
    while len(result) < n:
        template = rng.choice(TEMPLATES)
        pairs = []
        for slot in template.split():
            if slot.startswith("{"):
                kind = slot[1:-1]
                words = rng.choice(names[kind])
                pairs += [(w, ("B-" if i == 0 else "I-") + kind) for i, w in enumerate(words)]
            else:
                pairs.append((slot, "O"))
        result.append(pairs)
    return result


def write_conll(path, data, sep=" ", rename=None) -> None:
    rename = rename or {}
    lines = []
    for sentence in data:
        for word, tag in sentence:
            if tag != "O":
                tag = tag[:2] + rename.get(tag[2:], tag[2:])
            lines.append(f"{word}{sep}{tag}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def tokenizer(tiny_bert):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert)


# --- label alignment and windows -------------------------------------------------------------
def test_labels_go_to_the_first_subword_only(tokenizer):
    task = TaggingTask(128, labels=LABELS)
    example = {
        "tokens": ["John", "films", "in", "Paris", "\u00ad", "filmed"],
        "tags": ["B-PER", "O", "O", "B-LOC", "O", "B-ORG"],
    }
    [feature] = task.preprocess([example], tokenizer, train=True)
    tokens = tokenizer.convert_ids_to_tokens(feature["input_ids"])
    # a soft hyphen alone has no sub-word in BERT's tokenizer: it becomes [UNK] and still gets a tag
    assert tokens == ["[CLS]", "john", "film", "##s", "in", "paris", "[UNK]", "film", "##ed", "[SEP]"]
    ids = {label: i for i, label in enumerate(LABELS)}
    assert feature["labels"] == [
        -100,
        ids["B-PER"],
        ids["O"],
        -100,
        ids["O"],
        ids["B-LOC"],
        ids["O"],
        ids["B-ORG"],
        -100,
        -100,
    ]
    assert feature["first_tokens"] == [1, 2, 4, 5, 6, 7] and feature["words"] == list(range(6))
    assert task.stats["words_without_subwords"] == 1 and task.stats["windowed_sentences"] == 0

    # predictions are read at the same first sub-words: one tag per word
    logits = np.zeros((len(tokens), len(LABELS)))
    for position, label in zip(feature["first_tokens"], example["tags"]):
        logits[position, ids[label]] = 5.0
    logits[3, ids["B-LOC"]] = 9.0  # a continuation sub-word must not matter
    [predicted] = task.postprocess([example], [feature], {"logits": [logits]})
    assert predicted == example["tags"]
    row = task.format_prediction(example, predicted)
    assert [(e["type"], e["text"]) for e in row["entities"]] == [("PER", "John"), ("LOC", "Paris"), ("ORG", "filmed")]


def test_window_plan_and_owners():
    assert plan_windows([1] * 10, 4) == [(0, 4), (2, 6), (4, 8), (6, 10)]
    assert plan_windows([1] * 10, 4, overlap=0) == [(0, 4), (4, 8), (8, 10)]
    assert plan_windows([1] * 10, 4, overlap=99) == plan_windows([1] * 10, 4)  # capped at half a window
    assert plan_windows([2, 9, 1], 4) == [(0, 1), (1, 2), (2, 3)]  # an over-long word gets a window of its own
    windows = plan_windows([1] * 10, 4)
    # word 2 has unlimited left context in window 0 (the sentence start) but none in window 1
    assert owners(windows, 10) == [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]


def test_long_sentence_is_split_into_windows_not_truncated(tokenizer):
    task = TaggingTask(12, options={"doc_stride": 3}, labels=LABELS)
    words = (
        "john visited paris and london with mary and obama , then met the google company in "
        "berlin , france and germany . johnsssssssssssss"
    ).split()
    tags = [
        "B-PER",
        "O",
        "B-LOC",
        "O",
        "B-LOC",
        "O",
        "B-PER",
        "O",
        "B-PER",
        "O",
        "O",
        "O",
        "O",
        "B-ORG",
        "I-ORG",
        "O",
        "B-LOC",
        "O",
        "B-LOC",
        "O",
        "B-LOC",
        "O",
        "B-PER",
    ]
    short = {"tokens": ["mary", "lives", "in", "paris"], "tags": ["B-PER", "O", "O", "B-LOC"]}
    examples = [short, {"tokens": words, "tags": tags}]
    features = task.preprocess(examples, tokenizer, train=True)
    assert task.stats["windowed_sentences"] == 1 and task.stats["features"] == len(features) > 3
    assert task.stats["words_cut"] == 1  # 14 sub-words do not fit in 10: only the first ones are kept
    assert all(len(f["input_ids"]) <= 12 for f in features)
    owned = sorted(w for f in features if f["example_index"] == 1 for w in f["words"])
    assert owned == list(range(len(words)))  # every word labelled exactly once
    assert sum(label != -100 for f in features for label in f["labels"]) == len(words) + 4

    # inference: every word gets exactly one tag, from the window that owns it
    outputs = {
        "logits": [
            np.random.default_rng(i).normal(size=(len(f["input_ids"]), len(LABELS))) for i, f in enumerate(features)
        ]
    }
    predictions = task.postprocess(examples, features, outputs)
    assert [len(p) for p in predictions] == [4, len(words)] and all(t in LABELS for p in predictions for t in p)


def test_reads_iob1_and_hub_ids(tmp_path):
    path = tmp_path / "eng.train"
    path.write_text(
        "-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP O\nGerman JJ I-NP I-MISC\n\n"
        "Paris NNP I-NP I-LOC\nLondon NNP I-NP B-LOC\n"
    )
    task = TaggingTask()
    examples = task.read(Source(str(path), path=path), "train")
    assert [ex["tags"] for ex in examples] == [["B-ORG", "O", "B-MISC"], ["B-LOC", "B-LOC"]]
    task.fit_labels(examples)  # reading leaves the task as it is: fitting stores the scheme training data used
    assert task.options["input_scheme"] == "IOB1"
    assert task.labels == ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG"]

    hub = Source("Hub", DATASETS["conll2003"], "train")
    examples = task.from_records([{"tokens": ["EU", "rejects"], "ner_tags": [3, 0]}], hub, "train", hub=True)
    assert examples == [{"tokens": ["EU", "rejects"], "tags": ["B-ORG", "O"]}]


# --- end to end through the CLI ------------------------------------------------------------
def test_ner_finetune_eval_predict(tmp_path, tiny_bert, run_cli, monkeypatch):
    train, dev = tmp_path / "train.txt", tmp_path / "dev.txt"
    write_conll(train, sentences(160, seed=1))
    write_conll(dev, sentences(40, seed=2))
    out = tmp_path / "ner"
    code, stdout, stderr = run_cli(
        "finetune",
        "ner",
        "--data",
        train,
        "--eval-data",
        dev,
        "--model",
        tiny_bert,
        "--output",
        out,
        "--epochs",
        8,
        "--lr",
        "5e-3",
        "--batch-size",
        16,
    )
    assert code == 0, stderr
    assert "f1" in stdout and "examples/s" in stdout
    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["task"]["task"] == "ner" and meta["task"]["labels"] == LABELS
    assert meta["task"]["options"] == {"input_scheme": "IOB2"}
    assert meta["preprocessing"]["train"]["windowed_sentences"] == 0
    assert meta["metrics"]["f1"] >= 0.8  # names are word identities: even a tiny random BERT learns them
    assert isinstance(meta["metrics"]["per_type"]["PER"]["f1"], float)

    from transformers import AutoModelForTokenClassification

    assert AutoModelForTokenClassification.from_pretrained(out).config.id2label[5] == "B-PER"

    code, stdout, stderr = run_cli("eval", out, "--data", dev, "--output", tmp_path / "metrics.json")
    assert code == 0, stderr
    report = json.loads((tmp_path / "metrics.json").read_text())
    assert report["examples"] == 40 and report["metrics"]["f1"] == pytest.approx(meta["metrics"]["f1"], abs=1e-6)
    assert set(report["metrics"]) == {"precision", "recall", "f1", "token_accuracy", "per_type", "loss"}
    assert set(report["metrics"]["per_type"]) == {"PER", "LOC", "ORG"}
    assert "f1 " in stdout and "per_type" not in stdout

    # raw text: CoNLL-style words with character offsets into the original line
    texts = ["John lives in Paris, France.", "  Mary  visited   Berlin and London!", "Obama films in Germany"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n\n")
    code, stdout, stderr = run_cli("predict", out, "--input", tmp_path / "in.txt")
    assert code == 0, stderr
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert [r["text"] for r in rows] == texts
    assert rows[0]["words"] == ["John", "lives", "in", "Paris", ",", "France", "."]
    entities = [e for r in rows for e in r["entities"]]
    assert len(entities) >= 5
    for row in rows:
        assert len(row["tags"]) == len(row["words"])
        for entity in row["entities"]:
            assert entity["text"] == row["text"][entity["start"] : entity["end"]]
    assert {"type": "LOC", "text": "Paris"}.items() <= next(
        e for e in rows[0]["entities"] if e["text"] == "Paris"
    ).items()

    # pre-tokenised JSONL, and a CoNLL file (gold tags ignored), give one row per sentence
    (tmp_path / "in.jsonl").write_text(json.dumps({"tokens": ["mary", "works", "for", "google"]}) + "\n")
    code, stdout, stderr = run_cli("predict", out, "--input", tmp_path / "in.jsonl")
    assert code == 0, stderr
    [row] = [json.loads(line) for line in stdout.splitlines()]
    assert row["words"] == ["mary", "works", "for", "google"] and len(row["tags"]) == 4
    code, stdout, stderr = run_cli("predict", out, "--input", dev)
    assert code == 0, stderr
    assert len(stdout.splitlines()) == 40

    # standard input: raw lines, a TAB inside a line is just whitespace
    monkeypatch.setattr(sys, "stdin", io.StringIO("Mary lives in\tLondon\n"))
    code, stdout, stderr = run_cli("predict", out, "--input", "-")
    assert code == 0, stderr
    [row] = [json.loads(line) for line in stdout.splitlines()]
    assert row["text"] == "Mary lives in\tLondon" and row["words"] == ["Mary", "lives", "in", "London"]


def test_tab_file_with_other_types_and_windows(tmp_path, tiny_bert, run_cli):
    """A 2-column TAB file with lower-case types works as is; long sentences are windowed."""
    rename = {"PER": "person", "LOC": "place", "ORG": "organisation"}
    data = sentences(60, seed=3)
    data.append([(w, "O") for w in "the film was very good".split()] * 4 + [("john", "B-PER")])  # 21 words
    train = tmp_path / "people.tsv"
    write_conll(train, data, sep="\t", rename=rename)
    out = tmp_path / "tab"
    code, stdout, stderr = run_cli(
        "finetune",
        "ner",
        "--data",
        train,
        "--eval-data",
        train,
        "--model",
        tiny_bert,
        "--output",
        out,
        "--epochs",
        1,
        "--max-length",
        16,
        "--batch-size",
        8,
    )
    assert code == 0, stderr
    meta = json.loads((out / "bertkit.json").read_text())
    assert "B-person" in meta["task"]["labels"] and "I-organisation" in meta["task"]["labels"]
    assert meta["preprocessing"]["train"]["windowed_sentences"] >= 1
    assert meta["preprocessing"]["train_features"] > 61
    assert set(meta["metrics"]["per_type"]) <= {"person", "place", "organisation"}

    long_text = "John visited Paris and London with Mary and Obama, then met the Google company in Berlin."
    (tmp_path / "long.jsonl").write_text(json.dumps({"text": long_text}) + "\n")
    code, stdout, stderr = run_cli("predict", out, "--input", tmp_path / "long.jsonl")
    assert code == 0, stderr
    [row] = [json.loads(line) for line in stdout.splitlines()]
    assert len(row["words"]) == len(row["tags"]) == 18
    assert all(tag == "O" or tag[2:] in rename.values() for tag in row["tags"])


# --- bad input -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ner_model(tiny_bert, tmp_path_factory):
    from bertkit import api
    from bertkit.config import TrainConfig

    root = tmp_path_factory.mktemp("ner-model")
    write_conll(root / "train.txt", sentences(40, seed=4))
    api.finetune(
        "ner",
        RunOptions(data=str(root / "train.txt"), model=str(tiny_bert), output=str(root / "model")),
        config=TrainConfig(epochs=1, batch_size=8),
    )
    return root / "model"


@pytest.mark.parametrize(
    "name, content, fragments",
    [
        ("cols.txt", "john B-PER\nlives O\nin x O\nparis B-LOC\n", ("cols.txt:3: 3 columns",)),
        (
            "empty.jsonl",
            '{"tokens": ["john"], "tags": ["B-PER"]}\n{"tokens": [], "tags": []}\n',
            ("record 1 has an empty token list",),
        ),
        ("bioes.txt", "john S-PER\nlives O\n", ("tag 'S-PER' is not O, B-TYPE or I-TYPE",)),
        ("types.txt", "john PER\nlives O\n", ("sentence 1, token 1: tag 'PER'",)),
        ("no-entities.txt", "john O\nlives O\n", ("no entities",)),
        ("sst.tsv", "sentence\tlabel\nthe film was good\t1\n", ("classification", "finetune cls")),
        ("cola.tsv", "gj04\t1\t\tOur friends won't buy this analysis.\n", ("classification",)),
        ("train.csv", "text,label\ngood film,pos\n", ("classification",)),
        (
            "squad.json",
            json.dumps({"data": [{"title": "t", "paragraphs": [{"context": "c", "qas": []}]}]}),
            ("question-answering",),
        ),
        ("cls.jsonl", '{"text": "good film", "label": "pos"}\n', ("no 'tokens' field", "classification")),
    ],
)
def test_bad_training_files(tmp_path, tiny_bert, run_cli, name, content, fragments):
    data = tmp_path / name
    data.write_text(content)
    out = tmp_path / "out"
    result = run_cli("finetune", "ner", "--data", data, "--model", tiny_bert, "--output", out, "--epochs", 1)
    assert_user_error(result, *fragments)
    assert not out.exists()


def test_bad_eval_and_predict_input(tmp_path, ner_model, run_cli):
    unseen = tmp_path / "unseen.txt"
    unseen.write_text("john B-PER\nin O\nthe B-MISC\nfilm I-MISC\n\nparis B-EVENT\n")
    assert_user_error(run_cli("eval", ner_model, "--data", unseen), "never seen in training: EVENT, MISC")
    squad = tmp_path / "dev-v1.1.json"
    squad.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": "c", "qas": []}]}]}))
    assert_user_error(run_cli("eval", ner_model, "--data", squad), "question-answering")
    assert_user_error(run_cli("predict", ner_model, "--input", squad), "question-answering")
    glue = tmp_path / "dev.tsv"
    glue.write_text("sentence\tlabel\nthe film\t1\n")
    assert_user_error(run_cli("eval", ner_model, "--data", glue), "classification")
    blank = tmp_path / "blank.txt"
    blank.write_text("john lives in paris\n   \nmary too\n")
    assert_user_error(
        run_cli("predict", ner_model, "--input", blank), "row 2 has no words"
    )  # text lines stream as rows
    bracket = tmp_path / "reuters.txt"  # a .txt of raw text is never mistaken for JSON
    bracket.write_text("[Reuters] john lives in paris\n")
    code, stdout, stderr = run_cli("predict", ner_model, "--input", bracket)
    assert code == 0 and json.loads(stdout)["words"][:3] == ["[", "Reuters", "]"], stderr
    fields = tmp_path / "fields.jsonl"
    fields.write_text('{"body": "john lives in paris"}\n')
    assert_user_error(run_cli("predict", ner_model, "--input", fields), "no 'text' or 'tokens' field (fields: body)")


def test_negative_doc_stride_is_refused():
    with pytest.raises(BertkitError, match="doc-stride"):
        TaggingTask(128, options={"doc_stride": -1})
