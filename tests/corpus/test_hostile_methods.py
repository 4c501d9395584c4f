"""Training methods that do not compose, refused in ONE line naming both parts, exit 2, no traceback,
nothing written (tests/hostile.py's run_case), before any model loads. The three combinations the
last review found silently wrong are the first cases: `--recipe setfit --lora` (recorded LoRA it never
applied), `distill --recipe setfit` (never distilled), `--recipe setfit --long-text windows` (window
features paired with row labels); then a distilled student saved as adapter files (it reloaded the
wrong layers), a student told to read its input otherwise than its teacher, LoRA adapter files of a
listwise reranker, and methods given tasks they do not serve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostile import CLS_CSV, Case, Context, run_case

RERANK = "".join(
    json.dumps({"query": f"q{i}", "passage": text, "label": label}) + "\n"
    for i in range(3)
    for text, label in (("the answer", 1), ("nothing here", 0))
)
MLM = "".join(f"line {i} of some plain text for masked language modelling\n" for i in range(12))


def distill(c: Context, *extra) -> list:
    return ["distill", c.trained("cls"), "--data", c.file("t.csv", CLS_CSV), "--output", c.tmp / "out", *extra]


def trained_with(c: Context, name: str, *flags) -> Path:
    """A cls teacher trained here with finetune's ``flags`` (before the case's command runs)."""
    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.options import RunOptions

    options = {"lora": 4, "save_adapter": True} if "--lora" in flags else {}
    task_options = {"recipe": "setfit"} if "setfit" in flags else {}
    output = c.tmp / name
    config = TrainConfig(epochs=1, batch_size=8, max_length=32, task_options=task_options, **options)
    api.finetune(
        "cls", RunOptions(data=str(c.file("teach.csv", CLS_CSV)), model=str(c.tiny), output=str(output)), config
    )
    return output


def distill_from(c: Context, teacher: Path) -> list:
    return ["distill", teacher, "--data", c.file("t.csv", CLS_CSV), "--output", c.tmp / "out", "--student-layers", 1]


CASES = [
    Case(
        "setfit-with-lora",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--recipe", "setfit", "--lora", 8),
        ("--lora does not compose with --recipe setfit",),
    ),
    Case(
        "setfit-with-lora-save-adapter",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--recipe", "setfit", "--lora", 8, "--save-adapter"),
        ("--lora does not compose with --recipe setfit",),
    ),
    Case(
        "distill-with-setfit",
        lambda c: distill(c, "--recipe", "setfit", "--student-layers", 1),
        ("No such option: --recipe",),  # distill does not offer it (its api refuses it too)
    ),
    Case(
        "setfit-with-windows",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--recipe", "setfit", "--long-text", "windows"),
        ("--recipe setfit does not compose with --long-text windows",),
    ),
    Case(
        "distill-lora-save-adapter",
        lambda c: distill(c, "--lora", 4, "--save-adapter", "--student-layers", 1),
        ("No such option: --save-adapter",),  # distill does not offer it (its api refuses it too)
    ),
    Case(
        "distill-regression-student",
        lambda c: distill(c, "--problem-type", "regression"),
        ("No such option: --problem-type",),  # distill does not offer it (its api refuses it too)
    ),
    Case(
        "listwise-rerank-lora-save-adapter",
        lambda c: c.finetune("rerank", ("r.jsonl", RERANK), "--rerank-loss", "listwise", "--lora", 4, "--save-adapter"),
        ("--save-adapter does not compose with rerank",),
    ),
    Case(  # it loaded the adapter directory as full weights: "truncated or corrupt"
        "distill-an-adapter-teacher",
        lambda c: distill_from(c, trained_with(c, "adapter-teacher", "--lora")),
        ("was trained with --lora", "without --save-adapter"),
    ),
    Case(  # it loaded the SetFit body as a task model: "weights missing ... classifier.bias"
        "distill-a-setfit-teacher",
        lambda c: distill_from(c, trained_with(c, "setfit-teacher", "setfit")),
        ("was trained with --recipe setfit",),
    ),
    Case(
        "lora-on-pretraining",
        lambda c: [
            "pretrain",
            "mlm",
            "--data",
            c.file("t.txt", MLM),
            "--model",
            c.tiny,
            "--output",
            c.tmp / "o",
            "--lora",
            4,
        ],
        ("--lora",),
    ),
]


def test_the_corpus_names_each_case_once():
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_methods_that_do_not_compose_fail_in_one_line_and_write_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)
