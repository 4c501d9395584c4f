"""NER token accuracy is conlleval's "accuracy" on (the gold file as given, what `predict` writes).

conlleval counts, for every token line, ``if ( $correct eq $guessed and $guessedType eq
$correctType ) { $correctTags++; } $tokenCounter++;`` and prints ``100*$correctTags/$tokenCounter``:
the share of tokens whose tag string equals the gold one, O included, on the tags exactly as
they are in its input. So `eval` counts on predict's written tags (repaired; IOB1 for IOB1 gold),
and `predict` given an IOB1 file writes IOB1. Set CONLLEVAL=/path/to/conlleval(.pl) to also run
the real script (perl) on the same files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bertkit.data.registry import Source
from bertkit.decoding.tags import iob1_to_iob2, iob2_to_iob1, repair_bio, tags_as_written
from bertkit.metrics.tagging import tagging_scores
from bertkit.tasks.base import EVAL, PREDICT
from bertkit.tasks.tagging import TaggingTask

WORDS = [["John", "Smith", "in", "Paris"], ["the", "Acme", "Corp", "board"], ["Berlin", "Bonn", "."]]
IOB2_GOLD = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG", "I-ORG", "O"], ["B-LOC", "B-LOC", "O"]]
IOB1_GOLD = [["I-PER", "I-PER", "O", "I-LOC"], ["O", "I-ORG", "I-ORG", "O"], ["I-LOC", "B-LOC", "O"]]
# Raw model output, invalid IOB2 twice: I-PER starts a sentence, I-ORG follows O (and runs one word too far).
RAW = [["I-PER", "I-PER", "O", "B-LOC"], ["O", "I-ORG", "I-ORG", "I-ORG"], ["B-LOC", "B-LOC", "O"]]


def conlleval_accuracy(gold: list[list[str]], written: list[list[str]]) -> float:
    """conlleval's token loop for the accuracy line, transliterated (boundary lines not counted)."""
    correct_tags = token_counter = 0
    for gold_tags, guessed_tags in zip(gold, written):
        for correct_tag, guessed_tag in zip(gold_tags, guessed_tags):
            guessed, _, guessed_type = guessed_tag.partition("-")
            correct, _, correct_type = correct_tag.partition("-")
            correct_tags += correct == guessed and guessed_type == correct_type
            token_counter += 1
    return correct_tags / token_counter


def test_iob2_gold_counts_the_repaired_tags_predict_writes():
    # Written: [B-PER I-PER O B-LOC] 4/4, [O B-ORG I-ORG I-ORG] 3/4 (last word), [B-LOC B-LOC O] 3/3 -> 10/11.
    # (On the raw tags it was 2 fewer: I-PER and the first I-ORG -> 8/11.)
    written = [tags_as_written(tags, "IOB2") for tags in RAW]
    assert written == [repair_bio(tags) for tags in RAW]
    assert tagging_scores(IOB2_GOLD, RAW)["token_accuracy"] == pytest.approx(10 / 11)
    assert tagging_scores(IOB2_GOLD, RAW, strict=True)["token_accuracy"] == pytest.approx(10 / 11)
    assert conlleval_accuracy(IOB2_GOLD, written) == pytest.approx(10 / 11)


def test_iob1_gold_counts_the_predictions_in_iob1():
    # Written in IOB1: [I-PER I-PER O I-LOC] 4/4, [O I-ORG I-ORG I-ORG] 3/4, [I-LOC B-LOC O] 3/3 -> 10/11.
    # Before: IOB2 written tags against this file gave 6/11 under conlleval, and eval said 8/11.
    written = [tags_as_written(tags, "IOB1") for tags in RAW]
    assert written == [["I-PER", "I-PER", "O", "I-LOC"], ["O", "I-ORG", "I-ORG", "I-ORG"], ["I-LOC", "B-LOC", "O"]]
    assert tagging_scores(IOB1_GOLD, RAW)["token_accuracy"] == pytest.approx(10 / 11)
    assert conlleval_accuracy(IOB1_GOLD, written) == pytest.approx(10 / 11)
    assert conlleval_accuracy(IOB1_GOLD, [repair_bio(t) for t in RAW]) == pytest.approx(6 / 11)
    # Entity scores do not depend on the scheme the gold is written in.
    iob1, iob2 = tagging_scores(IOB1_GOLD, RAW), tagging_scores(IOB2_GOLD, RAW)
    assert (iob1["precision"], iob1["recall"], iob1["f1"]) == (iob2["precision"], iob2["recall"], iob2["f1"])


def test_iob2_to_iob1_inverts_the_conversion():
    for sentence in IOB1_GOLD:
        assert iob2_to_iob1(iob1_to_iob2(sentence)) == sentence
    assert iob2_to_iob1(["B-PER", "B-LOC", "I-LOC", "B-LOC", "O", "B-LOC"]) == [
        "I-PER",
        "I-LOC",
        "I-LOC",
        "B-LOC",
        "O",
        "I-LOC",
    ]


def write_conll(path: Path, tags: list[list[str]], extra: list[list[str]] | None = None) -> Path:
    lines = []
    for s, sentence in enumerate(tags):
        for w, tag in enumerate(sentence):
            lines.append(" ".join([WORDS[s][w], tag] + ([extra[s][w]] if extra else [])))
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


def task_with_labels() -> TaggingTask:
    return TaggingTask(32, labels=["O"] + [f"{p}-{t}" for t in ("LOC", "ORG", "PER") for p in ("B", "I")])


def run_conlleval(tmp_path: Path, gold: list[list[str]], written: list[list[str]]) -> float | None:
    script = os.environ.get("CONLLEVAL")
    if not script or not shutil.which("perl"):
        return None
    both = write_conll(tmp_path / "both.txt", gold, written)
    out = subprocess.run(["perl", script], stdin=both.open(), capture_output=True, text=True, check=True).stdout
    return float(out.split("accuracy:")[1].split("%")[0]) / 100


@pytest.mark.parametrize("gold", [IOB2_GOLD, IOB1_GOLD], ids=["IOB2", "IOB1"])
def test_eval_accuracy_equals_conlleval_on_the_gold_file_and_predicts_rows(tmp_path, gold):
    gold_file = write_conll(tmp_path / "gold.conll", gold)
    task = task_with_labels()
    eval_examples = task.read(Source(str(gold_file), path=gold_file), EVAL)
    accuracy = task.metrics(eval_examples, RAW)["token_accuracy"]
    assert accuracy == pytest.approx(10 / 11)

    predict_examples = task.read(Source(str(gold_file), path=gold_file), PREDICT)
    rows = [task.format_prediction(ex, raw) for ex, raw in zip(predict_examples, RAW)]
    written = [row["tags"] for row in rows]
    assert conlleval_accuracy(gold, written) == accuracy
    assert [[e["text"] for e in row["entities"]] for row in rows] == [
        ["John Smith", "Paris"],
        ["Acme Corp board"],
        ["Berlin", "Bonn"],
    ]
    real = run_conlleval(tmp_path, gold, written)
    if real is not None:
        assert real == pytest.approx(accuracy, abs=5e-5)  # conlleval prints 2 decimals of a percentage


def test_predict_on_untagged_input_writes_iob2(tmp_path):
    task = task_with_labels()
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({"tokens": words}) + "\n" for words in WORDS))
    examples = task.read(Source(str(plain), path=plain), PREDICT)
    assert [task.format_prediction(ex, raw)["tags"] for ex, raw in zip(examples, RAW)] == [
        repair_bio(tags) for tags in RAW
    ]
