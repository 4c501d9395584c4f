"""`bertkit pretrain bert` refuses what it cannot pre-train on, before any work: one document (a
random B must come from another document), no text, a checkpoint whose model type has no
next-sentence head (RoBERTa, DistilBERT, ModernBERT, ALBERT: built in-process), a --max-length with
no room for two segments, too few documents to hold some out. Same contract as the other hostile
corpora (tests/hostile.py's run_case): ONE line `error: ... (hint: ...)`, exit 2, no traceback,
nothing written or removed."""

from __future__ import annotations

import shutil

import pytest
from hostile import Case, Context, run_case
from tiny_models import build_family

DOCUMENTS = "".join(f"the film was good .\nthe plot was bad .\nit was a great {w} .\n\n" for w in "abcdef")
ONE_DOCUMENT = "the film was good .\nthe plot was bad .\nit was a great film .\n"


def pretrain(c: Context, data, *extra, model=None) -> list:
    if isinstance(data, tuple):
        data = c.file(*data)
    return ["pretrain", "bert", "--data", data, "--model", model or c.tiny, "--output", c.tmp / "out", *extra]


def bert_model(c: Context):
    """A `pretrain bert` output (trained once per session, copied per case)."""
    if not hasattr(bert_model, "path"):
        from bertkit.api.pretraining import pretrain_bert
        from bertkit.config import TrainConfig
        from bertkit.options import RunOptions

        root = c.trained.root.parent / "outputs-bert"
        root.mkdir(exist_ok=True)
        (root / "corpus.txt").write_text(DOCUMENTS)
        config = TrainConfig(epochs=1, batch_size=8, max_length=32)
        pretrain_bert(RunOptions(data=str(root / "corpus.txt"), output=str(root / "bert"), model=str(c.tiny)), config)
        bert_model.path = root / "bert"
    target = c.tmp / "bert-copy"
    shutil.copytree(bert_model.path, target)
    return target


def family(c: Context, name: str):
    return build_family(name, c.tmp / name)


CASES = [
    Case(
        "one-document",
        lambda c: pretrain(c, ("one.txt", ONE_DOCUMENT), "--eval-share", "0"),
        ("one.txt is one document", "another document", "blank lines"),
    ),
    Case(
        "one-document-jsonl",
        lambda c: pretrain(c, ("one.jsonl", '{"text": "the film was good .\\nit was bad ."}\n'), "--eval-share", "0"),
        ("is one document", "another document"),
    ),
    Case(
        "one-held-out-document",
        lambda c: pretrain(c, ("t.txt", DOCUMENTS), "--eval-data", c.file("held.txt", ONE_DOCUMENT)),
        ("held.txt is one document", "another document"),
    ),
    Case("empty-file", lambda c: pretrain(c, ("empty.txt", "")), ("empty",)),
    Case("blank-lines-only", lambda c: pretrain(c, ("blank.txt", "\n\n  \n")), ("file is empty",)),
    Case("empty-jsonl-texts", lambda c: pretrain(c, ("e.jsonl", '{"text": ""}\n{"text": " "}\n')), ("empty",)),
    Case(
        "three-documents-held-out",
        lambda c: pretrain(c, ("three.txt", "a film .\n\nthe plot .\n\njohn met mary .\n")),
        ("3 documents", "held-out pairs need 2 documents"),
        absent=("--eval-split",),
    ),
    Case(
        "roberta-checkpoint",
        lambda c: pretrain(c, ("t.txt", DOCUMENTS), model=family(c, "roberta")),
        ("roberta model, which has no next-sentence-prediction head", "RobertaForMaskedLM", "pretrain mlm"),
    ),
    Case(
        "distilbert-checkpoint",
        lambda c: pretrain(c, ("t.txt", DOCUMENTS), model=family(c, "distilbert")),
        ("distilbert model, which has no next-sentence-prediction head", "pretrain mlm"),
    ),
    Case(
        "modernbert-checkpoint",
        lambda c: pretrain(c, ("t.txt", DOCUMENTS), model=family(c, "modernbert")),
        ("modernbert model, which has no next-sentence-prediction head",),
    ),
    Case(
        "albert-checkpoint-sentence-order-is-not-nsp",
        lambda c: pretrain(c, ("t.txt", DOCUMENTS), model=family(c, "albert")),
        ("albert model, which has no next-sentence-prediction head", "AlbertForPreTraining"),
    ),
    Case("max-length-4", lambda c: pretrain(c, ("t.txt", DOCUMENTS), "--max-length", "4"), ("--max-length",)),
    Case(
        "max-length-above-positions",
        lambda c: pretrain(c, ("t.txt", DOCUMENTS), "--max-length", "600"),
        ("--max-length 600 is above the 512 positions",),
    ),
    Case("mask-rate-above-1", lambda c: pretrain(c, ("t.txt", DOCUMENTS), "--mask-rate", "1.5"), ("--mask-rate 1.5",)),
    Case(
        "eval-share-1",
        lambda c: pretrain(c, ("t.txt", DOCUMENTS), "--eval-share", "1"),
        ("--eval-share must be in [0, 1)",),
    ),
    Case(
        "export-a-pretrain-bert-output",
        lambda c: ["export", "onnx", bert_model(c)],
        ("`bertkit pretrain bert` output", "fine-tune it"),
    ),
    Case(
        "predict-with-a-pretrain-bert-output",
        lambda c: ["predict", bert_model(c), "--input", c.file("in.txt", "the film was good\n")],
        ("does not apply to a BERT pre-training checkpoint", "bertkit finetune pair --model"),
    ),
    Case(
        "serve-a-pretrain-bert-output",
        lambda c: ["serve", bert_model(c), "--port", 8799],
        ("does not apply to a BERT pre-training checkpoint",),
    ),
    Case(
        "a-classification-dataset",
        lambda c: pretrain(c, "sst2", "--eval-share", "0"),
        ("for the 'cls' task",),
    ),
]


def test_the_corpus_covers_the_issue():
    ids = {case.id for case in CASES}
    assert len(ids) == len(CASES) >= 18
    assert {"one-document", "empty-file", "roberta-checkpoint", "distilbert-checkpoint", "max-length-4"} <= ids


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_pretrain_bert_refuses_in_one_line_and_writes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys, seconds=60)
