"""--packing's hostile values (bertkit/options/training.py: auto, on, off): one error line, exit 2, no
traceback, nothing written (tests/hostile.py's run_case), on every command that trains."""

from __future__ import annotations

import pytest
from hostile import CLS_CSV, Case, Context, run_case

MLM = "".join(f"line {i} of some plain text for masked language modelling\n" for i in range(12))
UNKNOWN = ("unknown --packing", "use one of auto, on, off")

CASES = [
    Case("packing-unknown", lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--packing", "sideways"), UNKNOWN),
    Case("packing-empty", lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--packing", ""), UNKNOWN),
    Case("packing-bool", lambda c: c.finetune("ner", ("t.csv", CLS_CSV), "--packing", "true"), UNKNOWN),
    Case(
        "packing-unknown-pretrain",
        lambda c: (
            ["pretrain", "mlm", "--data", c.file("t.txt", MLM), "--model", c.tiny, "--output", c.tmp / "o"]
            + ["--packing", "ON"]
        ),
        UNKNOWN,
    ),
]


def test_the_corpus_names_each_case_once():
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_a_hostile_packing_fails_in_one_line_and_writes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)
