"""The bad-input corpus: malformed input for every task (cls, pair, ner, qa) and every command
(finetune, eval, predict). Each case must end in ONE line `error: ... (hint: ...)`, exit code 2, no
traceback, and write NOTHING: no output directory, no staging sibling, no eval JSON, no predictions,
no change to the model directory. Hints may name only flags the failing command has.

Validation runs before training and inference, so the finetune cases never train; eval and predict
cases use one tiny model per task, trained once per session (and only if a case needs it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostile import CLS_CSV, NER_CONLL, PAIR_TSV, QA_JSONL, QA_RECORD, Case, Context, jsonl, run_case


def cls_model(c: Context) -> Path:
    return c.trained("cls")


CASES = [
    # --- finetune: the command line itself ----------------------------------------------------------
    Case(
        "finetune-lr-not-a-number",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--lr", "fast"),
        ("Invalid value for '--lr'", "see `bertkit finetune cls --help`"),
    ),
    Case(
        "finetune-unknown-precision",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--precision", "fp8"),
        ("'fp8' is not one of 'auto', 'no', 'fp16', 'bf16'", "bertkit finetune cls --help"),
    ),
    Case(
        "finetune-missing-task",
        lambda c: ["finetune", "--data", c.file("t.csv", CLS_CSV)],
        ("Missing argument 'task'. Choose from: cls, pair, ner, qa",),
    ),
    Case(
        "finetune-unknown-task",
        lambda c: ["finetune", "sentiment", "--data", c.file("t.csv", CLS_CSV)],
        ("'sentiment' is not one of",),
    ),
    Case(
        "finetune-unknown-option",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--learning-rate", "1"),
        ("No such option: --learning-rate", "bertkit finetune cls --help"),
    ),
    Case(
        "finetune-option-without-value",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--epochs"),
        ("Option '--epochs' requires an argument", "bertkit finetune cls --help"),
    ),
    Case("finetune-missing-data", lambda c: ["finetune", "cls", "--model", c.tiny], ("Missing option '--data'",)),
    Case(
        "finetune-max-eval-samples-negative",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--max-eval-samples", "-5"),
        ("--max-eval-samples must be >= 1",),
    ),
    Case(
        "finetune-max-eval-samples-zero",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--max-eval-samples", "0"),
        ("--max-eval-samples must be >= 1",),
    ),
    Case(
        "finetune-batch-size-zero",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--batch-size", "0"),
        ("--batch-size must be >= 1",),
    ),
    Case(
        "finetune-epochs-zero",
        lambda c: c.finetune("pair", ("t.tsv", PAIR_TSV), "--epochs", "0"),
        ("--epochs must be > 0",),
    ),
    # --- finetune: where the model would go ---------------------------------------------------------
    Case(
        "finetune-output-under-a-file",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--output", c.file("notes.txt", "x") / "model"),
        ("is under a file",),
    ),
    Case(
        "finetune-output-is-a-file",
        lambda c: c.finetune("ner", ("t.txt", NER_CONLL), "--output", c.file("model.bin", "x")),
        ("is a file",),
    ),
    Case(
        "finetune-overwrite-user-directory",
        lambda c: c.finetune("cls", ("project/train.csv", CLS_CSV), "--output", c.tmp / "project", "--overwrite"),
        ("holds files bertkit did not write", "choose a new directory"),
    ),
    Case(
        "finetune-non-empty-without-overwrite",
        lambda c: c.finetune("qa", ("q.jsonl", QA_JSONL), "--output", c.file("dir/notes.md", "x").parent),
        ("exists and is not empty", "--overwrite"),
    ),
    # --- finetune cls / pair: the data --------------------------------------------------------------
    Case("cls-missing-file", lambda c: c.finetune("cls", c.tmp / "nope.csv"), ("file not found",)),
    Case("cls-empty-file", lambda c: c.finetune("cls", ("t.csv", "")), ("file is empty",)),
    Case("cls-header-only", lambda c: c.finetune("cls", ("t.csv", "text,label\n")), ("no data rows",)),
    Case(
        "cls-latin1",
        lambda c: c.finetune("cls", ("t.csv", "text,label\ncaf\xe9,pos\n".encode("latin-1"))),
        ("not UTF-8", "iconv"),
    ),
    Case(
        "cls-ambiguous-text-column",
        lambda c: c.finetune("cls", ("t.csv", "sentence,review,label\na,b,pos\nc,d,neg\n")),
        ("ambiguous text column", "--text-column"),
    ),
    Case(
        "cls-one-label",
        lambda c: c.finetune("cls", ("t.csv", "text,label\nthe film,pos\nthe plot,pos\n")),
        ("only one label",),
    ),
    Case(
        "cls-data-is-a-directory", lambda c: c.finetune("cls", c.file("d/x.csv", CLS_CSV).parent), ("is a directory",)
    ),
    Case("cls-unknown-dataset", lambda c: c.finetune("cls", "sst3"), ("not a known dataset", "sst2")),
    Case(
        "cls-eval-label-unseen",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--eval-data", c.file("d.csv", "text,label\nmeh,neutral\n")),
        ("never seen in training: neutral",),
    ),
    Case(
        "cls-unknown-label-column",
        lambda c: c.finetune("cls", ("t.csv", CLS_CSV), "--label-column", "verdict"),
        ("no column 'verdict' for --label-column", "columns found: text, label"),
    ),
    Case(
        "cls-tsv-ragged-row",
        lambda c: c.finetune("cls", ("t.tsv", "sentence\tlabel\na\tb\tc\n")),
        ("3 fields where the header has 2",),
    ),
    Case(
        "cls-known-dataset-offline",
        lambda c: (c.offline(), c.finetune("cls", "sst2", "--data-dir", c.file("empty/README", "").parent))[1],
        ("could not load sst2", "Hub is unreachable", "--data-dir"),
    ),
    Case("pair-dataset-for-cls", lambda c: c.finetune("pair", "sst2"), ("for the 'cls' task", "finetune cls")),
    Case(
        "pair-one-text-column",
        lambda c: c.finetune("pair", ("t.csv", CLS_CSV)),
        ("pair model needs two texts", "--text-pair-column"),
    ),
    Case(
        "pair-unknown-text-pair-column",
        lambda c: c.finetune("pair", ("t.tsv", PAIR_TSV), "--text-pair-column", "second"),
        ("no column 'second' for --text-pair-column",),
    ),
    # --- finetune ner -------------------------------------------------------------------------------
    Case("ner-classification-csv", lambda c: c.finetune("ner", ("t.csv", CLS_CSV)), ("sentence-level",)),
    Case(
        "ner-conll-missing-tag",
        lambda c: c.finetune("ner", ("t.txt", "john B-PER\nlives\nin O\n")),
        ("1 columns, but the first data line has 2",),
    ),
    Case(
        "ner-jsonl-length-mismatch",
        lambda c: c.finetune("ner", ("t.jsonl", jsonl({"tokens": ["john", "lives"], "tags": ["B-PER"]}))),
        ("2 tokens but 1 tags",),
    ),
    Case("ner-no-entities", lambda c: c.finetune("ner", ("t.txt", "the O\nfilm O\n\nit O\n")), ("no entities",)),
    Case(
        "ner-negative-doc-stride",
        lambda c: c.finetune("ner", ("t.txt", NER_CONLL), "--doc-stride", "-1"),
        ("--doc-stride -1 is invalid",),
    ),
    Case(
        "ner-latin1-conll", lambda c: c.finetune("ner", ("t.txt", "caf\xe9 B-LOC\n".encode("latin-1"))), ("not UTF-8",)
    ),
    # --- finetune qa --------------------------------------------------------------------------------
    Case(
        "qa-not-squad",
        lambda c: c.finetune("qa", ("t.json", json.dumps([{"text": "a", "label": 1}]))),
        ("neither SQuAD articles nor question records",),
    ),
    Case(
        "qa-empty-context",
        lambda c: c.finetune("qa", ("t.jsonl", jsonl({**QA_RECORD, "context": " "}))),
        ("with an empty context",),
    ),
    Case(
        "qa-no-answers",
        lambda c: c.finetune("qa", ("t.jsonl", jsonl({"question": "who ?", "context": "john"}))),
        ("without gold answers",),
    ),
    Case("qa-invalid-json", lambda c: c.finetune("qa", ("t.json", '[{"question": "who",')), ("invalid JSON",)),
    Case(
        "qa-max-answer-length-zero",
        lambda c: c.finetune("qa", ("t.jsonl", QA_JSONL), "--max-answer-length", "0"),
        ("--max-answer-length must be at least 1",),
    ),
    Case(
        "qa-doc-stride-too-large",
        lambda c: c.finetune("qa", ("t.jsonl", QA_JSONL), "--max-length", "16", "--doc-stride", "12"),
        ("--doc-stride 12 is too large",),
    ),
    Case(
        "qa-known-dataset-offline",
        lambda c: (c.offline(), c.finetune("qa", "squad_v2", "--data-dir", c.file("empty/README", "").parent))[1],
        ("train-v2.0.json", "Hub is unreachable"),
    ),
    # --- eval ---------------------------------------------------------------------------------------
    Case("eval-missing-model-dir", lambda c: ["eval", c.tmp / "nowhere"], ("model directory not found",)),
    Case(
        "eval-not-a-model-dir",
        lambda c: ["eval", c.file("d/x.txt", "x").parent, "--data", c.file("e.csv", CLS_CSV)],
        ("not a bertkit model",),
    ),
    Case("eval-missing-argument", lambda c: ["eval"], ("Missing argument 'model_dir'", "bertkit eval --help")),
    Case(
        "eval-unknown-precision",
        lambda c: ["eval", cls_model(c), "--precision", "fp8"],
        ("'fp8' is not one of", "bertkit eval --help"),
    ),
    Case(
        "eval-batch-size-zero",
        lambda c: ["eval", cls_model(c), "--data", c.file("e.csv", CLS_CSV), "--batch-size", "0"],
        ("--batch-size must be >= 1", "bertkit eval --help"),
    ),
    Case(
        "eval-batch-size-negative",
        lambda c: ["eval", cls_model(c), "--data", c.file("e.csv", CLS_CSV), "--batch-size", "-3"],
        ("--batch-size must be >= 1, got -3",),
    ),
    Case(
        "eval-max-eval-samples-negative",
        lambda c: ["eval", cls_model(c), "--data", c.file("e.csv", CLS_CSV), "--max-eval-samples", "-5"],
        ("--max-eval-samples must be >= 1, got -5",),
    ),
    Case(
        "eval-max-eval-samples-zero",
        lambda c: ["eval", cls_model(c), "--data", c.file("e.csv", CLS_CSV), "--max-eval-samples", "0"],
        ("--max-eval-samples must be >= 1",),
    ),
    Case(
        "eval-output-in-missing-directory",
        lambda c: ["eval", cls_model(c), "--data", c.file("e.csv", CLS_CSV), "--output", c.tmp / "no" / "m.json"],
        ("does not exist", "mkdir -p"),
    ),
    Case(
        "eval-output-is-a-directory",
        lambda c: ["eval", cls_model(c), "--data", c.file("e.csv", CLS_CSV), "--output", c.tmp],
        ("is a directory",),
    ),
    Case(
        "eval-output-is-the-model-meta",
        lambda c: ["eval", cls_model(c), "--data", c.file("e.csv", CLS_CSV), "--output", cls_model(c) / "bertkit.json"],
        ("bertkit.json is a file of the model in", "elsewhere"),
    ),
    Case("eval-nothing-recorded", lambda c: ["eval", cls_model(c)], ("without evaluation data", "--data FILE")),
    Case(
        "eval-file-without-labels",
        lambda c: ["eval", cls_model(c), "--data", c.file("e.csv", "text\ngood film\n")],
        ("missing label column", "name the label column one of"),
        ("--label-column",),
    ),
    Case(
        "eval-unlabelled-glue-test-split",
        lambda c: [
            "eval",
            cls_model(c),
            "--data",
            "sst2",
            "--split",
            "test",
            "--data-dir",
            c.file("data/sst2/test.tsv", "index\tsentence\n0\tgood\n").parents[1],
        ],
        ("split 'test' has no labels",),
        ("--label-column",),
    ),
    Case(
        "eval-dataset-of-another-task",
        lambda c: ["eval", cls_model(c), "--data", "conll2003"],
        ("for the 'ner' task, but this is a 'cls' model",),
        ("bertkit finetune",),
    ),
    Case(
        "eval-unknown-split",
        lambda c: ["eval", cls_model(c), "--data", "sst2", "--split", "validation"],
        ("has no split 'validation'",),
    ),
    Case(
        "eval-split-for-a-file",
        lambda c: ["eval", cls_model(c), "--data", c.file("e.csv", CLS_CSV), "--split", "test"],
        ("--split test applies only to known datasets",),
    ),
    Case(
        "eval-label-unseen",
        lambda c: ["eval", cls_model(c), "--data", c.file("e.csv", "text,label\nok,meh\n")],
        ("never seen in training: meh",),
    ),
    Case(
        "eval-pair-single-texts",
        lambda c: ["eval", c.trained("pair"), "--data", c.file("e.csv", CLS_CSV)],
        ("pair model needs two texts",),
        ("--text-pair-column",),
    ),
    Case(
        "eval-ner-unseen-entity-type",
        lambda c: ["eval", c.trained("ner"), "--data", c.file("e.txt", "google B-ORG\nworks O\n")],
        ("entity type(s) never seen in training: ORG",),
    ),
    Case(
        "eval-qa-without-answers",
        lambda c: ["eval", c.trained("qa"), "--data", c.file("e.jsonl", jsonl({"question": "who ?", "context": "j"}))],
        ("without gold answers",),
    ),
    # --- predict ------------------------------------------------------------------------------------
    Case(
        "predict-missing-input-option",
        lambda c: ["predict", cls_model(c)],
        ("Missing option '--input'", "bertkit predict --help"),
    ),
    Case(
        "predict-input-not-found",
        lambda c: ["predict", cls_model(c), "--input", c.tmp / "nope.txt"],
        ("file not found",),
    ),
    Case("predict-input-is-a-directory", lambda c: ["predict", cls_model(c), "--input", c.tmp], ("is a directory",)),
    Case(
        "predict-missing-model-dir",
        lambda c: ["predict", c.tmp / "gone", "--input", c.file("in.txt", "good\n")],
        ("model directory not found",),
    ),
    Case(
        "predict-batch-size-zero",
        lambda c: ["predict", cls_model(c), "--input", c.file("in.txt", "good\n"), "--batch-size", "0"],
        ("--batch-size must be >= 1", "bertkit predict --help"),
    ),
    Case(
        "predict-output-in-missing-directory",
        lambda c: ["predict", cls_model(c), "--input", c.file("in.txt", "good\n"), "--output", c.tmp / "no" / "p"],
        ("does not exist",),
    ),
    Case(
        "predict-output-is-a-directory",
        lambda c: ["predict", cls_model(c), "--input", c.file("in.txt", "good\n"), "--output", c.tmp],
        ("is a directory",),
    ),
    Case(
        "predict-empty-input",
        lambda c: ["predict", cls_model(c), "--input", c.file("in.txt", "\n\n")],
        ("file is empty",),
    ),
    Case(
        "predict-blank-row",
        lambda c: ["predict", cls_model(c), "--input", c.file("in.txt", "good\n\nbad\n")],
        ("1 row(s) with empty text (rows 2)",),
    ),
    Case(
        "predict-latin1",
        lambda c: ["predict", cls_model(c), "--input", c.file("in.txt", "caf\xe9\n".encode("latin-1"))],
        ("not UTF-8",),
    ),
    Case(
        "predict-n-best-for-cls",
        lambda c: ["predict", cls_model(c), "--input", c.file("in.txt", "good\n"), "--n-best", "3"],
        ("--n-best does not apply to a cls model",),
    ),
    Case(
        "predict-pair-single-texts",
        lambda c: ["predict", c.trained("pair"), "--input", c.file("in.txt", "good\n")],
        ("pair model needs two texts",),
        ("--text-pair-column",),
    ),
    Case(
        "predict-pair-csv-one-text-column",
        lambda c: ["predict", c.trained("pair"), "--input", c.file("in.csv", "question,notes\na,b\n")],
        ("pair model needs two texts", "found only question, notes"),
        ("--text-pair-column",),
    ),
    Case(
        "predict-csv-without-text-column",
        lambda c: ["predict", cls_model(c), "--input", c.file("in.csv", "body,id\ngood film,1\n")],
        ("missing text column (found columns: body, id)", "name the text column one of: sentence, text"),
        ("--text-column",),
    ),
    Case(
        "predict-ner-record-without-text",
        lambda c: ["predict", c.trained("ner"), "--input", c.file("in.jsonl", jsonl({"words": "john"}))],
        ("no 'text' or 'tokens' field",),
    ),
    Case(
        "predict-qa-without-context",
        lambda c: ["predict", c.trained("qa"), "--input", c.file("in.jsonl", jsonl({"question": "who ?"}))],
        ("neither SQuAD articles nor question records",),
    ),
    Case(
        "predict-qa-n-best-zero",
        lambda c: ["predict", c.trained("qa"), "--input", c.file("in.jsonl", QA_JSONL), "--n-best", "0"],
        ("--n-best must be at least 1",),
    ),
]


def test_the_corpus_is_broad():
    tasks = {"cls", "pair", "ner", "qa"}
    assert len(CASES) >= 40 and len({case.id for case in CASES}) == len(CASES)
    assert {case.id.split("-")[0] for case in CASES} >= tasks | {"finetune", "eval", "predict"}


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_fails_in_one_line_and_writes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)


# --- characters that are not line ends ------------------------------------------------------------
ODD_SEPARATORS = ["\u2028", "\u2029", "\x0c", "\x0b", "\x85", "\x1c", "\x1d", "\x1e"]


def test_text_lines_split_only_at_newlines():
    from bertkit.data.formats import parse_records

    lines = [f"row {i} has{sep}inside" for i, sep in enumerate(ODD_SEPARATORS)] + ["crlf row", "last"]
    records = parse_records("\r\n".join(lines[:-1]) + "\n" + lines[-1] + "\n\n", ".txt", "in.txt")
    assert [r["text"] for r in records] == lines  # 10 lines in, 10 rows out, \r dropped
    pairs = parse_records("a\u2028b\tc\x0cd\r\n", ".txt", "in.txt")
    assert pairs == [{"text": "a\u2028b", "text_pair": "c\x0cd"}]


def test_jsonl_and_csv_keep_odd_separators_inside_values():
    from bertkit.data.formats import parse_records

    values = [f"v{sep}w" for sep in ODD_SEPARATORS]
    text = "".join(json.dumps({"text": v}, ensure_ascii=False) + "\r\n" for v in values)
    assert [r["text"] for r in parse_records(text, ".jsonl", "in.jsonl")] == values
    csv_text = "text,label\n" + "".join(f"{v},{i % 2}\n" for i, v in enumerate(values))
    assert [r["text"] for r in parse_records(csv_text, ".csv", "in.csv")] == values
    tsv_text = "sentence\tlabel\n" + "".join(f"{v}\t{i % 2}\n" for i, v in enumerate(values))
    assert [r["sentence"] for r in parse_records(tsv_text, ".tsv", "in.tsv")] == values


def test_predict_keeps_one_row_per_line(tmp_path, trained, run_cli):
    lines = [f"good film{sep}bad plot" for sep in ODD_SEPARATORS] + ["great", "awful"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, stdout, stderr = run_cli("predict", trained("cls"), "--input", tmp_path / "in.txt")
    assert code == 0, stderr
    rows = [json.loads(line) for line in stdout.strip().split("\n")]
    assert [r["text"] for r in rows] == lines
