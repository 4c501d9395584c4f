"""The bad-input corpus for input FORMATS (bertkit/data/formats.py): a damaged Parquet file, a
Parquet file without the task's columns, a suffix no format declares. As in test_bad_input_corpus.py,
each case ends in ONE line `error: ... (hint: ...)`, exit code 2, and writes nothing."""

from __future__ import annotations

import io

import pytest
from hostile import CLS_CSV, Case, Context, run_case

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

KNOWN = "Parquet (.parquet), JSON Lines (.jsonl), JSON (.json), CSV (.csv), TSV (.tsv), text lines (.txt)"
DAMAGED = b"PAR1" + b"\x00" * 64  # Parquet's magic bytes, then nothing a reader can use


def parquet(*rows: dict) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(list(rows)), sink)
    return sink.getvalue()


NO_TEXT = parquet({"body": "the film was good", "label": "pos"}, {"body": "the film was bad", "label": "neg"})

CASES = [
    Case(
        "finetune-parquet-damaged",
        lambda c: c.finetune("cls", ("t.parquet", DAMAGED)),
        ("t.parquet is not a readable Parquet file", "check the file"),
    ),
    Case(
        "finetune-parquet-not-parquet",
        lambda c: c.finetune("cls", ("t.parquet", CLS_CSV)),
        ("t.parquet is not a readable Parquet file",),
    ),
    Case(
        "finetune-parquet-truncated",
        lambda c: c.finetune("cls", ("t.parquet", parquet({"text": "good", "label": "pos"})[:-12])),
        ("t.parquet is not a readable Parquet file",),
    ),
    Case(
        "finetune-parquet-empty-file",
        lambda c: c.finetune("cls", ("t.parquet", b"")),
        ("file is empty",),
    ),
    Case(
        "finetune-parquet-without-text-column",
        lambda c: c.finetune("cls", ("t.parquet", NO_TEXT)),
        ("missing text column (found columns: body, label)", "--text-column"),
    ),
    Case(
        "finetune-parquet-without-rows",
        lambda c: c.finetune("cls", ("t.parquet", _no_rows())),
        ("t.parquet has no data rows", "columns found: text, label"),
    ),
    Case(
        "finetune-ner-parquet-without-tokens",
        lambda c: c.finetune("ner", ("t.parquet", parquet({"words": ["john"], "ner": ["B-PER"]}))),
        ("t.parquet: records have no 'tokens' field", "fields: ner, words"),
    ),
    Case(
        "finetune-unknown-suffix",
        lambda c: c.finetune("cls", ("t.xlsx", CLS_CSV)),
        ("t.xlsx: unknown input format '.xlsx'", KNOWN),
    ),
    Case(
        "eval-unknown-suffix",
        lambda c: ["eval", c.trained("cls"), "--data", c.file("e.data", CLS_CSV)],
        ("e.data: unknown input format '.data'", KNOWN),
    ),
    Case(
        "predict-parquet-damaged",
        lambda c: ["predict", c.trained("cls"), "--input", c.file("in.parquet", DAMAGED)],
        ("in.parquet is not a readable Parquet file",),
    ),
    Case(
        "predict-parquet-without-text-column",
        lambda c: ["predict", c.trained("cls"), "--input", c.file("in.parquet", NO_TEXT)],
        ("missing text column (found columns: body, label)",),
        ("--text-column",),
    ),
    Case(
        "predict-unknown-suffix",
        lambda c: ["predict", c.trained("cls"), "--input", c.file("in.xml", "<rows/>")],
        ("in.xml: unknown input format '.xml'", KNOWN),
    ),
]


def _no_rows() -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"text": pa.array([], pa.string()), "label": pa.array([], pa.string())}), sink)
    return sink.getvalue()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_format_fails_in_one_line_and_writes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)
