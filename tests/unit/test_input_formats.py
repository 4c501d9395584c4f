"""The input-format registry (bertkit/data/formats.py): each suffix declared once, read whole and in
chunks alike, Parquet read as the JSONL reader reads the same rows, one error for an unknown suffix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertkit.data import formats, hub_datasets, streams
from bertkit.errors import BertkitError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

CLS_ROWS = [{"text": "good film", "label": "pos"}, {"text": "bad plot", "label": "neg"}]
NER_ROWS = [{"tokens": ["john", "lives", "in", "paris"], "tags": ["B-PER", "O", "O", "B-LOC"]}]
QA_ROWS = [
    {"id": "q1", "question": "who?", "context": "john lives", "answers": {"text": ["john"], "answer_start": [0]}}
]


def parquet(path: Path, rows: list[dict]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_every_suffix_is_declared_once_and_named_in_the_known_list():
    declared = [suffix for fmt in formats.formats() for suffix in fmt.suffixes]
    assert len(declared) == len(set(declared)) == len(formats.FORMATS)
    for fmt in formats.formats():
        assert fmt.parse_text or fmt.read_whole, f"{fmt.name} has no whole-file reader"
        assert all(suffix in formats.known() for suffix in fmt.suffixes)
    assert {".parquet", ".jsonl", ".json", ".csv", ".tsv", ".txt", ".conll"} <= set(declared)


def test_a_suffix_cannot_be_declared_twice():
    with pytest.raises(ValueError, match="'.csv'"):
        formats.register(formats.Format("another CSV", (".csv",), parse_text=lambda *a: []))


def test_the_other_users_ask_the_registry():
    assert set(formats.suffixes()) <= set(hub_datasets.FILE_SUFFIXES)
    assert hub_datasets.looks_like_dataset("owner/name", Path("owner/name"))
    assert not hub_datasets.looks_like_dataset("train.parquet", Path("train.parquet"))
    from bertkit.ray.inputs import INPUT_SUFFIXES

    assert set(INPUT_SUFFIXES) == {s for s, fmt in formats.FORMATS.items() if fmt.ray_read}


def test_an_unknown_suffix_names_the_known_formats(tmp_path):
    data = tmp_path / "train.xlsx"
    data.write_text("text,label\na,b\n")
    with pytest.raises(BertkitError) as raised:
        formats.read_records(data)
    assert "unknown input format '.xlsx'" in raised.value.message
    assert all(fmt.name in raised.value.hint for fmt in formats.formats())
    assert "\n" not in str(raised.value)


def test_a_file_without_a_suffix_is_sniffed(tmp_path):
    assert formats.read_records(jsonl(tmp_path / "rows", CLS_ROWS)) == CLS_ROWS
    (tmp_path / "lines").write_text("one\ntwo\n")
    assert formats.read_records(tmp_path / "lines") == [{"text": "one"}, {"text": "two"}]


@pytest.mark.parametrize("rows", [CLS_ROWS, NER_ROWS, QA_ROWS], ids=["cls", "ner", "qa"])
def test_parquet_reads_the_records_jsonl_reads(tmp_path, rows):
    assert formats.read_records(parquet(tmp_path / "d.parquet", rows)) == formats.read_records(
        jsonl(tmp_path / "d.jsonl", rows)
    )


@pytest.mark.parametrize("name", ["d.parquet", "d.jsonl", "d.csv", "d.tsv", "d.txt"])
def test_chunks_give_the_whole_files_records(tmp_path, name):
    path = tmp_path / name
    if path.suffix == ".parquet":
        parquet(path, CLS_ROWS)
    elif path.suffix == ".jsonl":
        jsonl(path, CLS_ROWS)
    elif path.suffix == ".txt":
        path.write_text("good film\nbad plot\n")
    else:
        sep = "\t" if path.suffix == ".tsv" else ","
        path.write_text(f"text{sep}label\n" + "".join(f"{r['text']}{sep}{r['label']}\n" for r in CLS_ROWS))
    fmt = formats.of(path)
    assert fmt.streams
    assert [record for _, record in fmt.read_chunks(path, None)] == formats.read_records(path)


def test_a_directory_of_parquet_and_jsonl_shards_streams_in_order(tmp_path):
    parquet(tmp_path / "a.parquet", CLS_ROWS)
    jsonl(tmp_path / "b.jsonl", CLS_ROWS[:1])
    (tmp_path / "notes.md").write_text("not data")
    stream = streams.InputStream(str(tmp_path))
    assert [p.name for p in stream.paths] == ["a.parquet", "b.jsonl"]
    assert [record for _, record, _, _ in stream.records()] == CLS_ROWS + CLS_ROWS[:1]
    assert streams.InputStream(str(tmp_path / "a.parquet")).total_rows() == 2
    assert stream.total_rows() is None  # JSONL has no row count without reading it


def test_a_corrupt_parquet_file_is_one_error(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1" + b"\x00" * 64)
    with pytest.raises(BertkitError, match="is not a readable Parquet file"):
        formats.read_records(bad)
    with pytest.raises(BertkitError, match="is not a readable Parquet file"):
        list(formats.PARQUET.read_chunks(bad, None))


def test_a_parquet_file_without_rows_names_its_columns(tmp_path):
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"text": pa.array([], pa.string()), "label": pa.array([], pa.string())}), empty)
    with pytest.raises(BertkitError) as raised:
        formats.read_records(empty)
    assert "no data rows" in raised.value.message and "text, label" in raised.value.hint


def test_a_new_format_is_one_entry(tmp_path, monkeypatch):
    """A format registered once is read by training's reader and streamed by predict's."""
    semicolons = formats.Format(
        "semicolon lines", (".scl",), parse_text=lambda text, source, layout: [{"text": t} for t in text.split(";")]
    )
    monkeypatch.setitem(formats.FORMATS, ".scl", semicolons)
    path = tmp_path / "d.scl"
    path.write_text("a;b")
    assert formats.read_records(path) == [{"text": "a"}, {"text": "b"}]
    assert [record for _, record, _, _ in streams.InputStream(str(tmp_path)).records()] == [
        {"text": "a"},
        {"text": "b"},
    ]


def test_conll_files_read_as_token_records(tmp_path):
    path = tmp_path / "d.conll"
    path.write_text("john B-PER\nlives O\n\nmary B-PER\n")
    assert formats.read_records(path) == [
        {"tokens": ["john", "lives"], "tags": ["B-PER", "O"]},
        {"tokens": ["mary"], "tags": ["B-PER"]},
    ]
