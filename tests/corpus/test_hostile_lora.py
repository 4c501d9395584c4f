"""finetune --lora's bad input (bertkit/networks/lora.py, options/training.py check_lora): targets
that match no layer (the real names listed), a rank, alpha or dropout out of range, a companion
flag without --lora, and an adapter directory whose base model is gone or whose adapter file is
damaged. Same contract as the other hostile corpora (tests/hostile.py's run_case): ONE line
`error: ... (hint: ...)`, exit 2, no traceback, nothing written or removed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hostile import CLS_CSV, NER_CONLL, QA_JSONL, Case, Context, jsonl, run_case

from bertkit.options import RunOptions

pytest.importorskip("peft")

TEXTS = "the film was good\nthe plot was bad\n"
PAIRS = jsonl(*({"anchor": a, "positive": b} for a, b in [("the film was good", "a great movie")] * 4))


def cls(c: Context, *extra) -> list:
    return c.finetune("cls", ("t.csv", CLS_CSV), *extra)


def adapter_dir(c: Context, base_gone: bool = False, damaged: bool = False) -> Path:
    """A --save-adapter model trained over a copy of the tiny model; then the copy removed, or the
    adapter file cut short."""
    from bertkit import api
    from bertkit.config import TrainConfig

    base = c.tmp / "base-copy"
    shutil.copytree(c.tiny, base)
    data = c.file("train.csv", CLS_CSV)
    config = TrainConfig(epochs=1, batch_size=8, max_length=64, lora=4, save_adapter=True)
    api.finetune("cls", RunOptions(data=str(data), model=str(base), output=str(c.tmp / "adapted")), config=config)
    if base_gone:
        shutil.rmtree(base)
    if damaged:
        weights = c.tmp / "adapted" / "adapter_model.safetensors"
        weights.write_bytes(weights.read_bytes()[:100])
    return c.tmp / "adapted"


CASES = [
    # --- targets: the names a model really has are listed ----------------------------------------------
    Case(
        "targets-match-no-layer",
        lambda c: cls(c, "--lora", 4, "--lora-targets", "q_proj,v_proj"),
        ("--lora-targets q_proj,v_proj matches no linear layer", "named dense, key, query, value", "--lora-targets"),
    ),
    Case(
        "one-target-of-two-matches-nothing",
        lambda c: cls(c, "--lora", 4, "--lora-targets", "query,v_lin"),
        ("--lora-targets v_lin matches no linear layer", "query, value"),
    ),
    Case(
        "target-is-the-head",
        lambda c: cls(c, "--lora", 4, "--lora-targets", "classifier"),
        ("--lora-targets classifier matches no linear layer", "dense, key, query, value"),
    ),
    Case(
        "ner-targets-match-no-layer",
        lambda c: c.finetune("ner", ("t.txt", NER_CONLL), "--lora", 2, "--lora-targets", "attn"),
        ("--lora-targets attn matches no linear layer",),
    ),
    Case(
        "qa-targets-match-no-layer",
        lambda c: c.finetune("qa", ("t.jsonl", QA_JSONL), "--lora", 2, "--lora-targets", "Wqkv"),
        ("--lora-targets Wqkv matches no linear layer",),
    ),
    # an embedding model is the bare encoder (AutoModel): its layers are named without the task model's prefix
    Case(
        "embedding-targets-match-no-layer",
        lambda c: c.finetune("embedding", ("p.jsonl", PAIRS), "--lora", 4, "--lora-targets", "q_proj"),
        (
            "--lora-targets q_proj matches no linear layer",
            "named dense, key, query, value",
            "--lora-targets query,value",
        ),
        ("e.g. --lora-targets q_proj",),
    ),
    Case(
        "embedding-one-target-of-two-matches-nothing",
        lambda c: c.finetune("embedding", ("p.jsonl", PAIRS), "--lora", 4, "--lora-targets", "query,v_lin"),
        ("--lora-targets v_lin matches no linear layer", "dense, key, query, value", "e.g. --lora-targets query,value"),
    ),
    Case("targets-empty", lambda c: cls(c, "--lora", 4, "--lora-targets", " , "), ("--lora-targets names no layer",)),
    # --- the numbers -----------------------------------------------------------------------------------
    Case("rank-zero", lambda c: cls(c, "--lora", 0), ("--lora is the adapters' rank", "got 0")),
    Case("rank-negative", lambda c: cls(c, "--lora", -8), ("--lora is the adapters' rank", "got -8")),
    Case("rank-not-a-number", lambda c: cls(c, "--lora", "eight"), ("Invalid value for '--lora'",)),
    Case("dropout-one", lambda c: cls(c, "--lora", 4, "--lora-dropout", 1), ("--lora-dropout must be in [0, 1)",)),
    Case(
        "dropout-negative", lambda c: cls(c, "--lora", 4, "--lora-dropout", -0.1), ("--lora-dropout must be in [0, 1)",)
    ),
    Case("dropout-nan", lambda c: cls(c, "--lora", 4, "--lora-dropout", "nan"), ("--lora-dropout must be in [0, 1)",)),
    Case("alpha-zero", lambda c: cls(c, "--lora", 4, "--lora-alpha", 0), ("--lora-alpha must be a finite number > 0",)),
    Case(
        "alpha-infinite",
        lambda c: cls(c, "--lora", 4, "--lora-alpha", "inf"),
        ("--lora-alpha must be a finite number",),
    ),
    # --- companions without --lora, or with what LoRA freezes ---------------------------------------------
    Case("save-adapter-without-lora", lambda c: cls(c, "--save-adapter"), ("--save-adapter applies only with --lora",)),
    Case(
        "alpha-and-targets-without-lora",
        lambda c: cls(c, "--lora-alpha", 16, "--lora-targets", "query"),
        ("--lora-alpha, --lora-targets applies only with --lora", "add --lora R"),
    ),
    Case(
        "lazy-embeddings-with-lora",
        lambda c: cls(c, "--lora", 4, "--lazy-embeddings"),
        ("--lazy-embeddings updates word embeddings that --lora freezes",),
    ),
    Case(
        "pretrain-has-no-lora",
        lambda c: ["pretrain", "mlm", "--data", c.file("c.txt", TEXTS * 8), "--model", c.tiny, "--lora", 4],
        ("No such option: --lora",),
    ),
    # --- an adapter directory whose base model is gone, or whose adapter file is damaged -------------------
    Case(
        "eval-adapter-base-gone",
        lambda c: ["eval", adapter_dir(c, base_gone=True), "--data", c.file("e.csv", CLS_CSV)],
        ("holds LoRA adapters over the base model", "base-copy", "cannot be loaded", "lora.base_model"),
        ("--model",),
    ),
    Case(
        "predict-adapter-base-gone",
        lambda c: ["predict", adapter_dir(c, base_gone=True), "--input", c.file("in.txt", TEXTS)],
        ("holds LoRA adapters over the base model", "cannot be loaded"),
        ("--model",),
    ),
    Case(
        "predict-adapter-file-damaged",
        lambda c: ["predict", adapter_dir(c, damaged=True), "--input", c.file("in.txt", TEXTS)],
        ("adapter_model.safetensors cannot be read",),
    ),
]


def test_the_corpus_covers_every_flag():
    assert len({case.id for case in CASES}) == len(CASES) >= 20


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_lora_input_fails_in_one_line_and_changes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)
