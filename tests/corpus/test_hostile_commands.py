"""The hostile-input corpus of the commands around finetune/eval/predict: embed, probe, pretrain,
inspect, report, export, push, datasets, serve and resume. Same contract as
tests/corpus/test_bad_input_corpus.py (tests/hostile.py's run_case): ONE line `error: ... (hint: ...)`,
exit 2, no traceback, nothing written or removed in the case's folder or the shared models."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hostile import CLS_CSV, NER_CONLL, PAIR_TSV, QA_JSONL, Case, Context, jsonl, run_case

TEXTS = "the film was good\nthe plot was bad\n"
CORPUS = "the film was good . the plot was bad .\n\nit was a great film .\njohn lives in paris .\n" * 4


def copy_model(c: Context, task: str = "cls") -> Path:
    """A private copy of a trained model that a case may damage."""
    target = c.tmp / f"{task}-copy"
    shutil.copytree(c.trained(task), target)
    return target


def with_meta(c: Context, text: str) -> Path:
    model = copy_model(c)
    (model / "bertkit.json").write_text(text)
    return model


def with_onnx(c: Context, content: bytes) -> Path:
    model = copy_model(c)
    (model / "onnx").mkdir()
    (model / "onnx" / "model.onnx").write_bytes(content)
    return model


def with_openvino(c: Context, xml: str) -> Path:
    model = copy_model(c)
    (model / "openvino").mkdir()
    (model / "openvino" / "model.xml").write_text(xml)
    (model / "openvino" / "model.bin").write_bytes(b"\x00" * 16)
    return model


def probe(c: Context, *extra) -> list:
    return ["probe", "cls", "--data", c.file("t.csv", CLS_CSV), "--model", c.tiny, "--output", c.tmp / "probe", *extra]


def pretrain(c: Context, *extra) -> list:
    return [
        "pretrain",
        "mlm",
        "--data",
        c.file("corpus.txt", CORPUS),
        "--model",
        c.tiny,
        "--output",
        c.tmp / "mlm",
        *extra,
    ]


def embed(c: Context, *extra, model=None) -> list:
    return ["embed", model or c.tiny, "--input", c.file("in.txt", TEXTS), "--output", c.tmp / "vectors.npy", *extra]


def tune(c: Context, *extra, eval_data: bool = True) -> list:
    data = c.file("t.csv", CLS_CSV)
    return [
        "tune",
        "cls",
        "--data",
        data,
        *(["--eval-data", data] if eval_data else []),
        "--model",
        c.tiny,
        "--output",
        c.tmp / "tuned",
        *extra,
    ]


def model_with_user_file(c: Context, name: str, content: str) -> Path:
    """A bertkit model directory the user also keeps a data file in."""
    model = copy_model(c)
    (model / name).write_text(content)
    return model


CASES = [
    # --- embed ----------------------------------------------------------------------------------------
    Case(
        "embed-output-is-input",
        lambda c: [
            "embed",
            c.tiny,
            "--input",
            c.file("in.jsonl", jsonl({"text": "a"})),
            "--output",
            c.tmp / "in.jsonl",
        ],
        ("is the input file",),
    ),
    Case(
        "embed-unknown-suffix",
        lambda c: ["embed", c.tiny, "--input", c.file("in.txt", TEXTS), "--output", c.tmp / "v.csv"],
        ("unknown format .csv",),
    ),
    Case("embed-per-word-npy", lambda c: embed(c, "--per-word"), ("ragged",)),
    Case(
        "embed-output-dir",
        lambda c: ["embed", c.tiny, "--input", c.file("in.txt", TEXTS), "--output", c.tmp],
        ("unknown format (no suffix)",),
    ),
    Case(
        "embed-output-missing-dir",
        lambda c: ["embed", c.tiny, "--input", c.file("in.txt", TEXTS), "--output", c.tmp / "no" / "v.npy"],
        ("does not exist",),
    ),
    Case(
        "embed-output-under-file",
        lambda c: ["embed", c.tiny, "--input", c.file("in.txt", TEXTS), "--output", c.file("x.txt", "x") / "v.npy"],
        ("under a file",),
    ),
    Case(
        "embed-input-missing",
        lambda c: ["embed", c.tiny, "--input", c.tmp / "nope.txt", "--output", c.tmp / "v.npy"],
        ("file not found",),
    ),
    Case(
        "embed-input-empty",
        lambda c: ["embed", c.tiny, "--input", c.file("in.txt", ""), "--output", c.tmp / "v.npy"],
        ("file is empty",),
    ),
    Case(
        "embed-input-latin1",
        lambda c: [
            "embed",
            c.tiny,
            "--input",
            c.file("in.txt", "caf\xe9\n".encode("latin-1")),
            "--output",
            c.tmp / "v.npy",
        ],
        ("not UTF-8",),
    ),
    Case(
        "embed-text-object",
        lambda c: [
            "embed",
            c.tiny,
            "--input",
            c.file("in.jsonl", jsonl({"text": {"a": 1}})),
            "--output",
            c.tmp / "v.npy",
        ],
        ("row 1: field 'text' is an object",),
    ),
    Case(
        "embed-text-surrogate",
        lambda c: [
            "embed",
            c.tiny,
            "--input",
            c.file("in.jsonl", '{"text": "a \\ud800"}\n'),
            "--output",
            c.tmp / "v.npy",
        ],
        ("unpaired UTF-16 surrogate",),
    ),
    Case(
        "embed-deep-json",
        lambda c: ["embed", c.tiny, "--input", c.file("in.jsonl", "[" * 5000 + "\n"), "--output", c.tmp / "v.npy"],
        ("nested too deeply",),
    ),
    Case("embed-bad-pooling", lambda c: embed(c, "--pooling", "median"), ("median",)),
    Case("embed-max-length-tiny", lambda c: embed(c, "--max-length", "2"), ("--max-length",)),
    Case("embed-missing-model", lambda c: embed(c, model=c.tmp / "nowhere"), ("nowhere",)),
    Case("embed-batch-size-zero", lambda c: embed(c, "--batch-size", "0"), ("--batch-size",)),
    Case(
        "embed-unknown-text-column",
        lambda c: [
            "embed",
            c.tiny,
            "--input",
            c.file("in.csv", CLS_CSV),
            "--output",
            c.tmp / "v.npy",
            "--text-column",
            "body",
        ],
        ("'body'",),
    ),
    # --- probe ----------------------------------------------------------------------------------------
    Case(
        "probe-overwrite-dir-holding-the-data",
        lambda c: [
            "probe",
            "cls",
            "--data",
            model_with_user_file(c, "train.csv", CLS_CSV) / "train.csv",
            "--model",
            c.tiny,
            "--output",
            c.tmp / "cls-copy",
            "--overwrite",
        ],
        ("holds files bertkit did not write (train.csv)", "would delete"),
    ),
    Case("tune-no-eval-data", lambda c: tune(c, eval_data=False), ("there is none",)),
    Case("tune-trials-zero", lambda c: tune(c, "--trials", "0"), ("--trials must be >= 1",)),
    Case("tune-space-missing", lambda c: tune(c, "--space", c.tmp / "nope.yaml"), ("does not exist",)),
    Case("tune-space-not-a-mapping", lambda c: tune(c, "--space", c.file("s.yaml", "- lr\n")), ("not a mapping",)),
    Case(
        "tune-space-unknown",
        lambda c: tune(c, "--space", c.file("s.yaml", "dropout: [0.1]\n")),
        ("not a hyperparameter",),
    ),
    Case("tune-storage-unknown", lambda c: tune(c, "--storage", "nosuchdb://x/y"), ("cannot open the study",)),
    Case("tune-output-is-a-file", lambda c: tune(c)[:-1] + [c.file("t.bin", "x")], ("is a file",)),
    Case("tune-resume", lambda c: tune(c, "--resume"), ("a tune study resumes by itself",)),
    Case(
        "tune-config-other-task", lambda c: tune(c, "--config", c.file("r.yaml", "task: ner\n")), ("is for task 'ner'",)
    ),
    Case("probe-output-is-a-file", lambda c: probe(c)[:-1] + [c.file("p.bin", "x")], ("is a file",)),
    Case("probe-output-under-a-file", lambda c: probe(c)[:-1] + [c.file("p.txt", "x") / "m"], ("under a file",)),
    Case(
        "probe-non-empty-without-overwrite",
        lambda c: probe(c)[:-1] + [c.file("d/notes.md", "x").parent],
        ("exists and is not empty",),
    ),
    Case(
        "probe-overwrite-user-directory",
        lambda c: probe(c)[:-1] + [c.file("u/notes.md", "x").parent, "--overwrite"],
        ("holds files bertkit did not write",),
    ),
    Case(
        "probe-missing-data",
        lambda c: ["probe", "cls", "--data", c.tmp / "no.csv", "--model", c.tiny],
        ("file not found",),
    ),
    Case("probe-unknown-dataset", lambda c: ["probe", "cls", "--data", "sst3", "--model", c.tiny], ("sst3",)),
    Case("probe-ner-task", lambda c: ["probe", "ner", "--data", c.file("t.txt", NER_CONLL)], ("'ner'",)),
    Case("probe-holdout-bad", lambda c: probe(c, "--holdout", "1.5"), ("--holdout",)),
    Case(
        "probe-one-label",
        lambda c: [
            "probe",
            "cls",
            "--data",
            c.file("t.csv", "text,label\na,x\nb,x\n"),
            "--model",
            c.tiny,
            "--output",
            c.tmp / "p",
        ],
        ("only one label",),
    ),
    Case(
        "probe-text-not-string",
        lambda c: [
            "probe",
            "cls",
            "--data",
            c.file("t.jsonl", jsonl({"text": ["a"], "label": "x"}, {"text": "b", "label": "y"})),
            "--model",
            c.tiny,
            "--output",
            c.tmp / "p",
        ],
        ("field 'text' is a list",),
    ),
    Case(
        "probe-pair-one-text",
        lambda c: ["probe", "pair", "--data", c.file("t.csv", CLS_CSV), "--model", c.tiny, "--output", c.tmp / "p"],
        ("two texts",),
    ),
    Case("probe-bad-pooling", lambda c: probe(c, "--pooling", "layer:x"), ("layer",)),
    # --- pretrain mlm ---------------------------------------------------------------------------------
    Case(
        "pretrain-overwrite-dir-holding-the-corpus",
        lambda c: [
            "pretrain",
            "mlm",
            "--data",
            model_with_user_file(c, "corpus.txt", CORPUS) / "corpus.txt",
            "--model",
            c.tiny,
            "--output",
            c.tmp / "cls-copy",
            "--overwrite",
        ],
        ("holds files bertkit did not write (corpus.txt)", "would delete"),
    ),
    Case(
        "pretrain-epochs-zero",
        lambda c: pretrain(c, "--epochs", "0"),
        ("--epochs must be > 0", "bertkit pretrain mlm --help"),
    ),
    Case("pretrain-batch-size-zero", lambda c: pretrain(c, "--batch-size", "0"), ("--batch-size must be >= 1",)),
    Case("pretrain-lr-text", lambda c: pretrain(c, "--lr", "fast"), ("Invalid value for '--lr'",)),
    Case(
        "pretrain-missing-corpus",
        lambda c: ["pretrain", "mlm", "--data", c.tmp / "no.txt", "--model", c.tiny],
        ("file not found",),
    ),
    Case(
        "pretrain-empty-corpus",
        lambda c: pretrain(c)[:3] + [c.file("e.txt", "\n\n")] + pretrain(c)[4:],
        ("file is empty",),
    ),
    Case("pretrain-output-is-a-file", lambda c: pretrain(c)[:-1] + [c.file("m.bin", "x")], ("is a file",)),
    Case("pretrain-unknown-option", lambda c: pretrain(c, "--label-column", "x"), ("No such option",)),
    Case(
        "pretrain-jsonl-text-object",
        lambda c: [
            "pretrain",
            "mlm",
            "--data",
            c.file("c.jsonl", jsonl({"text": {"a": 1}})),
            "--model",
            c.tiny,
            "--output",
            c.tmp / "m",
        ],
        ("field 'text' is an object",),
    ),
    Case(
        "pretrain-resume-from-missing",
        lambda c: pretrain(c, "--resume-from", c.tmp / "none"),
        ("not a complete checkpoint",),
    ),
    # --- inspect --------------------------------------------------------------------------------------
    Case(
        "inspect-attention-max-length-over-positions",
        lambda c: [
            "inspect",
            "attention",
            c.tiny,
            "--text",
            "good film",
            "--max-length",
            "1000",
            "--output",
            c.tmp / "a.png",
        ],
        ("1000",),
    ),
    Case(
        "inspect-attention-bad-layer",
        lambda c: ["inspect", "attention", c.tiny, "--text", "good", "--layer", "99", "--output", c.tmp / "a.png"],
        ("--layer",),
    ),
    Case(
        "inspect-attention-bad-head",
        lambda c: ["inspect", "attention", c.tiny, "--text", "good", "--head", "99", "--output", c.tmp / "a.png"],
        ("--head",),
    ),
    Case(
        "inspect-attention-output-missing-dir",
        lambda c: ["inspect", "attention", c.tiny, "--text", "good", "--output", c.tmp / "no" / "a.png"],
        ("does not exist",),
    ),
    Case(
        "inspect-attention-output-is-dir",
        lambda c: ["inspect", "attention", c.tiny, "--text", "good", "--output", c.tmp],
        ("a figure needs one of .png, .svg, .pdf",),
    ),
    Case(
        "inspect-attention-bad-suffix",
        lambda c: ["inspect", "attention", c.tiny, "--text", "good", "--output", c.tmp / "a.bmp"],
        (".bmp",),
    ),
    Case(
        "inspect-attention-empty-text",
        lambda c: ["inspect", "attention", c.tiny, "--text", " ", "--output", c.tmp / "a.png"],
        ("empty",),
    ),
    Case(
        "inspect-tokens-missing-model",
        lambda c: ["inspect", "tokens", c.tmp / "nowhere", "--text", "good"],
        ("nowhere",),
    ),
    Case("inspect-tokens-no-text", lambda c: ["inspect", "tokens", c.tiny], ("Missing option '--text'",)),
    Case("inspect-unknown-subcommand", lambda c: ["inspect", "heads", c.tiny], ("No such command",)),
    # --- report ---------------------------------------------------------------------------------------
    Case("report-meta-empty-object", lambda c: ["report", with_meta(c, "{}")], ("bertkit.json",)),
    Case("report-meta-not-json", lambda c: ["report", with_meta(c, "{not json")], ("bertkit.json",)),
    Case("report-meta-a-list", lambda c: ["report", with_meta(c, "[]")], ("bertkit.json",)),
    Case("report-missing-dir", lambda c: ["report", c.tmp / "nowhere"], ("not found",)),
    Case("report-not-a-model-dir", lambda c: ["report", c.file("d/x.txt", "x").parent], ("not a bertkit model",)),
    Case("report-a-file", lambda c: ["report", c.file("x.txt", "x")], ("x.txt",)),
    # --- export ---------------------------------------------------------------------------------------
    Case("export-missing-dir", lambda c: ["export", "onnx", c.tmp / "nowhere"], ("not found",)),
    Case(
        "export-not-a-model-dir", lambda c: ["export", "onnx", c.file("d/x.txt", "x").parent], ("not a bertkit model",)
    ),
    Case("export-meta-empty-object", lambda c: ["export", "onnx", with_meta(c, "{}")], ("bertkit.json",)),
    Case(
        "select-n-zero",
        lambda c: [
            "select",
            c.trained("cls"),
            "--input",
            c.file("pool.txt", "the film was good\n"),
            "--n",
            "0",
            "--output",
            c.tmp / "s.json",
        ],
        ("--n must be >= 1, got 0",),
    ),
    Case(
        "select-output-is-the-pool",  # the pool would be replaced by the rows chosen from it
        lambda c: [
            "select",
            c.trained("cls"),
            "--input",
            c.file("pool.jsonl", '{"text": "the film was good"}\n'),
            "--n",
            "1",
            "--output",
            c.tmp / "pool.jsonl",
        ],
        ("pool.jsonl",),
    ),
    Case("export-samples-zero", lambda c: ["export", "onnx", c.trained("cls"), "--samples", "0"], ("--samples",)),
    Case(
        "export-user-file-in-onnx-dir",
        lambda c: (
            lambda m: (
                (m / "onnx" / "notes.txt").write_text("mine"),
                ["export", "onnx", m, "--data", c.file("e.csv", CLS_CSV)],
            )[1]
        )(with_onnx(c, b"old")),
        ("holds files an export did not write (notes.txt)",),
    ),
    Case("export-unknown-format", lambda c: ["export", "tflite", c.trained("cls")], ("No such command",)),
    Case("export-openvino-missing-dir", lambda c: ["export", "openvino", c.tmp / "nowhere"], ("not found",)),
    Case(
        "export-openvino-samples-zero",
        lambda c: ["export", "openvino", c.trained("cls"), "--samples", "0"],
        ("--samples",),
    ),
    Case(
        "export-user-file-in-openvino-dir",
        lambda c: (
            lambda m: (
                (m / "openvino" / "notes.txt").write_text("mine"),
                ["export", "openvino", m, "--data", c.file("e.csv", CLS_CSV)],
            )[1]
        )(with_openvino(c, "<net/>")),
        ("holds files an export did not write (notes.txt)",),
    ),
    Case(
        "predict-openvino-garbage",
        lambda c: [
            "predict",
            with_openvino(c, "<not a model"),
            "--input",
            c.file("in.txt", TEXTS),
            "--backend",
            "openvino",
        ],
        ("model.xml",),
    ),
    Case(
        "predict-openvino-int8-not-exported",
        lambda c: [
            "predict",
            with_openvino(c, "<net/>"),
            "--input",
            c.file("in.txt", TEXTS),
            "--backend",
            "openvino-int8",
        ],
        ("bertkit export openvino",),
    ),
    Case(
        "predict-onnx-garbage",
        lambda c: [
            "predict",
            with_onnx(c, b"\x00garbage" * 10),
            "--input",
            c.file("in.txt", TEXTS),
            "--backend",
            "onnx",
        ],
        ("model.onnx",),
    ),
    Case(
        "predict-onnx-truncated",
        lambda c: [
            "predict",
            with_onnx(c, b"\x08\x07\x12\x07pytorch"),
            "--input",
            c.file("in.txt", TEXTS),
            "--backend",
            "onnx",
        ],
        ("model.onnx",),
    ),
    Case(
        "predict-onnx-missing",
        lambda c: ["predict", c.trained("cls"), "--input", c.file("in.txt", TEXTS), "--backend", "onnx"],
        ("export onnx",),
    ),
    # --- push -----------------------------------------------------------------------------------------
    Case("push-missing-dir", lambda c: ["push", c.tmp / "nowhere", "--repo", "me/model"], ("not found",)),
    Case(
        "push-not-a-model-dir",
        lambda c: ["push", c.file("d/x.txt", "x").parent, "--repo", "me/model"],
        ("not a bertkit model",),
    ),
    Case("push-bad-repo-id", lambda c: ["push", c.trained("cls"), "--repo", "a/b/c"], ("--repo",)),
    Case(
        "push-offline-without-card", lambda c: (c.offline(), ["push", copy_model(c), "--repo", "me/model"])[1], ("Hub",)
    ),
    Case("push-no-repo", lambda c: ["push", c.trained("cls")], ("Missing option '--repo'",)),
    # --- datasets -------------------------------------------------------------------------------------
    Case("datasets-data-dir-missing", lambda c: ["datasets", "--data-dir", c.tmp / "nowhere"], ("nowhere",)),
    Case("datasets-data-dir-a-file", lambda c: ["datasets", "--data-dir", c.file("x.txt", "x")], ("x.txt",)),
    Case("datasets-unknown-option", lambda c: ["datasets", "--all"], ("No such option",)),
    # --- serve (each fails before listening) ----------------------------------------------------------
    Case("serve-missing-dir", lambda c: ["serve", c.tmp / "nowhere", "--port", "8765"], ("not found",)),
    Case(
        "serve-not-a-model-dir",
        lambda c: ["serve", c.file("d/x.txt", "x").parent, "--port", "8765"],
        ("not a bertkit model",),
    ),
    Case("serve-port-out-of-range", lambda c: ["serve", c.trained("cls"), "--port", "70000"], ("--port 70000",)),
    Case(
        "serve-bad-backend",
        lambda c: ["serve", c.trained("cls"), "--backend", "tpu", "--port", "8765"],
        ("unknown --backend",),
    ),
    Case(
        "serve-onnx-not-exported",
        lambda c: ["serve", c.trained("cls"), "--backend", "onnx", "--port", "8765"],
        ("export onnx",),
    ),
    Case(
        "serve-onnx-garbage",
        lambda c: ["serve", with_onnx(c, b"garbage"), "--backend", "onnx", "--port", "8765"],
        ("model.onnx",),
    ),
    Case("serve-meta-empty", lambda c: ["serve", with_meta(c, "{}"), "--port", "8765"], ("bertkit.json",)),
    Case(
        "serve-max-inputs-zero",
        lambda c: ["serve", c.trained("cls"), "--max-inputs", "0", "--port", "8765"],
        ("--max-inputs",),
    ),
    Case(
        "serve-batch-size-zero",
        lambda c: ["serve", c.trained("cls"), "--batch-size", "0", "--port", "8765"],
        ("--batch-size",),
    ),
    # --- eval / predict on damaged model directories --------------------------------------------------
    Case(
        "eval-meta-empty-object",
        lambda c: ["eval", with_meta(c, "{}"), "--data", c.file("e.csv", CLS_CSV)],
        ("bertkit.json",),
    ),
    Case(
        "predict-meta-not-json",
        lambda c: ["predict", with_meta(c, "{oops"), "--input", c.file("in.txt", TEXTS)],
        ("bertkit.json",),
    ),
    Case(
        "predict-weights-missing",
        lambda c: (
            lambda m: ((m / "model.safetensors").unlink(), ["predict", m, "--input", c.file("in.txt", TEXTS)])[1]
        )(copy_model(c)),
        ("model.safetensors",),
    ),
    Case(
        "predict-weights-truncated",
        lambda c: (
            lambda m: (
                (m / "model.safetensors").write_bytes(b"\x10\x00"),
                ["predict", m, "--input", c.file("in.txt", TEXTS)],
            )[1]
        )(copy_model(c)),
        ("the weights cannot be loaded", "truncated"),
    ),
    Case(
        "predict-text-number",
        lambda c: ["predict", c.trained("cls"), "--input", c.file("in.jsonl", jsonl({"text": 5}))],
        ("field 'text' is a number",),
    ),
    Case(
        "predict-pair-text-pair-object",
        lambda c: [
            "predict",
            c.trained("pair"),
            "--input",
            c.file("in.jsonl", jsonl({"text": "a", "text_pair": {"b": 1}})),
        ],
        ("field 'text_pair' is an object",),
    ),
    Case(
        "predict-ner-text-list",
        lambda c: ["predict", c.trained("ner"), "--input", c.file("in.jsonl", jsonl({"text": ["john"]}))],
        ("field 'text' is a list",),
    ),
    Case(
        "predict-qa-question-object",
        lambda c: [
            "predict",
            c.trained("qa"),
            "--input",
            c.file("in.jsonl", jsonl({"question": {"q": 1}, "context": "john lives in paris ."})),
        ],
        ("field 'question' is an object",),
    ),
    Case(
        "finetune-qa-context-surrogate",
        lambda c: c.finetune(
            "qa",
            (
                "t.jsonl",
                '{"question": "who ?", "context": "j \\udc00", "answers": {"text": ["j"], "answer_start": [0]}}\n',
            ),
        ),
        ("unpaired UTF-16 surrogate",),
    ),
    Case(
        "finetune-pair-tsv-data-inside-output",
        lambda c: c.finetune("pair", ("m/t.tsv", PAIR_TSV), "--output", c.tmp / "m", "--overwrite"),
        ("holds files bertkit did not write",),
    ),
    Case("finetune-qa-jsonl-deep", lambda c: c.finetune("qa", ("t.jsonl", "[" * 3000 + "\n")), ("nested too deeply",)),
    Case(
        "eval-qa-text-true",
        lambda c: [
            "eval",
            c.trained("qa"),
            "--data",
            c.file("e.jsonl", jsonl({**json.loads(QA_JSONL.splitlines()[0]), "context": True})),
        ],
        ("field 'context' is true/false",),
    ),
]


def test_the_corpus_covers_every_command():
    import typer.main

    from bertkit.cli.app import app

    commands = set(typer.main.get_command(app).commands)
    covered = {case.id.split("-")[0] for case in CASES}
    # commands whose hostile cases live in a corpus file of their own
    import test_hostile_audit
    import test_hostile_calibration
    import test_hostile_distill
    import test_hostile_retrieval

    covered |= {"distill"} if test_hostile_distill.CASES else set()
    covered |= {"audit"} if test_hostile_audit.CASES else set()
    covered |= {case.id.split("-")[0] for case in test_hostile_calibration.CASES} & {"calibrate"}
    covered |= {case.id.split("-")[0] for case in test_hostile_retrieval.CASES} & {"mine"}
    assert commands - {"finetune", "eval", "predict"} <= covered | {"pretrain"}, commands - covered
    from test_bad_input_corpus import CASES as CORE

    assert len(CASES) + len(CORE) >= 150 and len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_hostile_input_fails_in_one_line_and_writes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)
