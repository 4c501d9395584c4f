"""`bertkit distill`'s bad input: a teacher that is no teacher for this data (another task, another
label set, not a bertkit directory, a qa or regression model), a student that cannot be one (another
vocabulary, not fewer layers, two students, a width the hidden loss cannot compare), loss settings
out of range, unlabelled text that is missing or empty, an output that is the teacher. Same contract
as the other hostile corpora (tests/hostile.py's run_case): ONE line `error: ... (hint: ...)`, exit 2,
no traceback, nothing written or removed (no student, no teacher-logits cache)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile import CLS_CSV, NER_CONLL, Case, Context, run_case

OTHER_LABELS = CLS_CSV.replace(",pos", ",good").replace(",neg", ",bad")


def distill(c: Context, teacher: str | Path, data: tuple | str | Path = ("train.csv", CLS_CSV), *extra) -> list:
    """A distill command line writing to <tmp>/student; ``teacher``: a task name (the shared tiny model)."""
    if isinstance(data, tuple):
        data = c.file(*data)
    teacher = c.trained(teacher) if teacher in ("cls", "pair", "ner", "qa") else teacher
    return ["distill", teacher, "--data", data, "--output", c.tmp / "student", "--epochs", 1, *extra]


def other_vocabulary(c: Context) -> Path:
    """A tiny BERT whose WordPiece vocabulary is not the teacher's."""
    from transformers import BertConfig, BertModel, BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "film", "good", "bad", "the", "was"]
    directory = c.tmp.parent / "other-vocab"
    if not directory.exists():
        BertTokenizer(vocab={t: i for i, t in enumerate(vocab)}).save_pretrained(directory)
        config = BertConfig(
            vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
        )
        BertModel(config).save_pretrained(directory)
    return directory


def narrower(c: Context) -> Path:
    """A tiny BERT with the teacher's vocabulary but 16 wide (the teacher: 32)."""
    import shutil

    from transformers import BertConfig, BertModel

    directory = c.tmp.parent / "narrow"
    if not directory.exists():
        shutil.copytree(c.tiny, directory, ignore=shutil.ignore_patterns("*.safetensors", "config.json"))
        from transformers import AutoTokenizer

        vocab = len(AutoTokenizer.from_pretrained(c.tiny))
        config = BertConfig(
            vocab_size=vocab, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
        )
        BertModel(config).save_pretrained(directory)
    return directory


CASES = [
    Case(
        "teacher-other-task",
        lambda c: distill(c, "ner", ("train.csv", CLS_CSV)),
        ("train.csv", "not token tagging"),
    ),
    Case(
        "teacher-other-task-known-dataset",
        lambda c: distill(c, "cls", "conll2003"),
        ("conll2003",),
    ),
    Case(
        "teacher-other-labels",
        lambda c: distill(c, "cls", ("train.csv", OTHER_LABELS)),
        ("the data's labels ['bad', 'good'] are not the teacher's ['neg', 'pos']",),
    ),
    Case(
        "teacher-more-labels",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV + "the film was fine,mixed\n")),
        ("are not the teacher's",),
    ),
    Case("teacher-not-bertkit", lambda c: distill(c, c.tiny), ("not a bertkit model directory",)),
    Case("teacher-missing", lambda c: distill(c, c.tmp / "nowhere"), ("not a bertkit model directory",)),
    Case("teacher-qa", lambda c: distill(c, "qa"), ("distill takes cls, pair and ner", "qa: not supported")),
    Case(
        "student-other-vocabulary",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--student", other_vocabulary(c)),
        ("another vocabulary than the teacher", "tokens only the teacher has"),
    ),
    Case(
        "student-layers-not-fewer",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--student-layers", 2),
        ("--student-layers 2 must be below the teacher's 2 layers",),
    ),
    Case(
        "student-layers-more",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--student-layers", 5),
        ("must be below the teacher's 2 layers",),
    ),
    Case(
        "student-layers-zero",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--student-layers", 0),
        ("--student-layers must be >= 1",),
    ),
    Case(
        "student-layers-negative",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--student-layers", -1),
        ("--student-layers must be >= 1",),
    ),
    Case(
        "two-students",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--student", c.tiny, "--student-layers", 1),
        ("--student and --student-layers name two students",),
    ),
    Case(
        "hidden-loss-other-width",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--student", narrower(c), "--hidden-loss", "mse"),
        ("the teacher's are 32 wide", "16"),
    ),
    Case(
        "hidden-loss-unknown",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--hidden-loss", "l1"),
        ("--hidden-loss",),
    ),
    Case(
        "temperature-zero",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--temperature", 0),
        ("--temperature must be > 0",),
    ),
    Case(
        "temperature-negative",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--temperature", -2),
        ("--temperature must be > 0",),
    ),
    Case(
        "temperature-nan",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--temperature", "nan"),
        ("--temperature must be > 0",),
    ),
    Case(
        "alpha-above-one",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--alpha", 1.5),
        ("--alpha must be between 0 and 1",),
    ),
    Case(
        "alpha-negative",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--alpha", -0.1),
        ("--alpha must be between 0 and 1",),
    ),
    Case(
        "hidden-weight-negative",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--hidden-weight", -1),
        ("--hidden-weight must be >= 0",),
    ),
    Case(
        "unlabelled-missing",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--unlabelled", c.tmp / "absent.txt"),
        ("--unlabelled", "no such file"),
    ),
    Case(
        "unlabelled-empty",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--unlabelled", c.file("empty.txt", "")),
        ("--unlabelled", "is empty"),
    ),
    Case(
        "unlabelled-blank-lines",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--unlabelled", c.file("blank.txt", "\n  \n\n")),
        ("--unlabelled", "is empty"),
    ),
    Case(
        "unlabelled-directory",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--unlabelled", c.tmp),
        ("--unlabelled", "no such file"),
    ),
    Case(
        "unlabelled-for-ner",
        lambda c: distill(c, "ner", ("train.txt", NER_CONLL), "--unlabelled", c.file("more.txt", "john lives\n")),
        ("--unlabelled applies to cls and pair",),
    ),
    Case(
        "option-of-another-task",
        lambda c: distill(c, "cls", ("train.csv", CLS_CSV), "--doc-stride", 32),
        ("--doc-stride: not an option of the teacher's task (cls)",),
    ),
    Case(
        "output-is-the-teacher",
        lambda c: ["distill", c.trained("cls"), "--data", c.file("train.csv", CLS_CSV), "--output", c.trained("cls")],
        ("--output",),
    ),
]


def test_the_corpus_covers_every_distill_rule():
    assert len(CASES) >= 25 and len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_distill_input_fails_in_one_line_and_writes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    context = Context(work, tiny_bert, trained, monkeypatch)
    context.offline()  # the known dataset of another task is read from the data directory, never the Hub
    run_case(case, context, run_cli, capsys, seconds=60)
