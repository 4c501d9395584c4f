"""The hostile-input corpus around resuming and damaged files: `finetune --resume` with truncated,
corrupt or foreign checkpoints, `report`/`export`/`predict`/`serve` on a damaged bertkit.json or
ONNX file, `datasets`, `inspect` and `pretrain mlm` with bad flags. Same contract as
tests/corpus/test_bad_input_corpus.py (tests/hostile.py's run_case): ONE line `error: ... (hint: ...)`,
exit 2, no traceback, nothing written or removed in the case's folder or the shared models.

Resuming that succeeds (passing over an unreadable newest checkpoint) is in tests/cli/test_resume_fallbacks.py.

The checkpoints come from tests/checkpoint_corpus.py's short run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from checkpoint_corpus import (
    SHARED,
    STEPS,
    TEXTS,
    base_data,
    checkpoints,
    damaged,
    resume,  # noqa: F401
    resume_from,
    shared_root,  # noqa: F401  (the module's autouse fixture: the shared checkpointed run)
    train_command,
)
from hostile import CLS_CSV, NER_CONLL, PAIR_TSV, Case, Context, run_case

from bertkit.options import RunOptions

CORPUS = "the film was good . the plot was bad .\n\nit was a great film .\njohn lives in paris .\n" * 4


def changed_data(c: Context) -> list:
    """Checkpoints of a run on data.csv, then data.csv edited in place: same path, other rows."""
    from bertkit import api
    from bertkit.config import TrainConfig

    data = c.file("data.csv", CLS_CSV)
    api.finetune(
        "cls",
        RunOptions(data=str(data), model=str(c.tiny), output=str(c.tmp / "out")),
        config=TrainConfig(epochs=2, batch_size=4, save_every=2),
    )
    shutil.rmtree(c.tmp / "out")  # as if killed before the end
    data.write_text(CLS_CSV.replace("good", "fine"))
    return train_command(c, data, "--resume")


def copy_model(c: Context, task: str = "cls") -> Path:
    target = c.tmp / f"{task}-copy"
    shutil.copytree(c.trained(task), target)
    return target


def with_meta(c: Context, content: str | bytes) -> Path:
    model = copy_model(c)
    (model / "bertkit.json").write_bytes(content if isinstance(content, bytes) else content.encode())
    return model


def meta_without(c: Context, *keys: str) -> Path:
    meta = json.loads((c.trained("cls") / "bertkit.json").read_text())
    return with_meta(c, json.dumps({k: v for k, v in meta.items() if k not in keys}))


def meta_with(c: Context, **changes) -> Path:
    meta = json.loads((c.trained("cls") / "bertkit.json").read_text())
    return with_meta(c, json.dumps({**meta, **changes}))


def with_onnx(c: Context, content: bytes, name: str = "model.onnx") -> Path:
    model = copy_model(c)
    (model / "onnx").mkdir()
    (model / "onnx" / name).write_bytes(content)
    return model


def truncated_onnx(c: Context) -> Path:
    """A real export cut in half: what a copy or a full disk leaves."""
    source = SHARED["root"] / "exported"
    if not (source / "onnx" / "model.onnx").exists():
        from bertkit.export.onnx import export_onnx

        shutil.copytree(c.trained("cls"), source)
        export_onnx(str(source), data=str(base_data(c)))
    data = (source / "onnx" / "model.onnx").read_bytes()
    model = with_onnx(c, data[: len(data) // 2])
    shutil.copy(source / "onnx" / "export.json", model / "onnx")  # its record: the same weights, so it is loaded
    return model


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


PRETRAIN_HELP = "bertkit pretrain mlm --help"

CASES = [
    # --- finetune --resume: every checkpoint unreadable -------------------------------------------------
    Case(
        "resume-every-model-truncated",
        lambda c: resume(c, "model.safetensors"),
        ("no checkpoint under", "model.safetensors: truncated", "--overwrite"),
    ),
    Case(
        "resume-every-model-garbage",
        lambda c: resume(c, "model.safetensors", "garbage"),
        ("no checkpoint under", "model.safetensors"),
    ),
    Case(
        "resume-every-model-empty",
        lambda c: resume(c, "model.safetensors", "empty"),
        ("no checkpoint under", "model.safetensors: truncated"),
    ),
    Case(
        "resume-every-optimizer-truncated",
        lambda c: resume(c, "optimizer.pt"),
        ("no checkpoint under", "optimizer.pt: truncated"),
    ),
    Case(
        "resume-every-scheduler-garbage",
        lambda c: resume(c, "scheduler.pt", "garbage"),
        ("no checkpoint under", "scheduler.pt"),
    ),
    Case(
        "resume-every-rank-truncated", lambda c: resume(c, "rank-0.pt"), ("no checkpoint under", "rank-0.pt: truncated")
    ),
    Case(
        "resume-every-state-not-json",
        lambda c: resume(c, "state.json", "garbage"),
        ("no checkpoint under", "state.json: not valid JSON"),
    ),
    Case(
        "resume-every-rank-missing",
        lambda c: (
            lambda root: (
                [(root / f"step-{s}" / "rank-0.pt").unlink() for s in STEPS],
                train_command(c, None, "--resume"),
            )[1]
        )(checkpoints(c)),
        ("no checkpoint under", "no rank-0.pt"),
    ),
    Case(
        "resume-every-state-empty-object",
        lambda c: resume(c, "state.json", "json:{}"),
        ("no checkpoint under", "state.json: not a bertkit checkpoint state"),
    ),
    Case(
        "resume-every-state-other-version",
        lambda c: resume(c, "state.json", "json-edit:progress.warp=1"),
        ("no checkpoint under", "written by another bertkit version (progress: warp)"),
    ),
    Case(
        "resume-every-history-garbage",
        lambda c: resume(c, "history.jsonl", "garbage"),
        ("no checkpoint under", "history.jsonl: not valid JSON"),
    ),
    Case(
        "resume-every-rank-is-the-scheduler",
        lambda c: (
            lambda root: (
                [shutil.copy(root / f"step-{s}" / "scheduler.pt", root / f"step-{s}" / "rank-0.pt") for s in STEPS],
                train_command(c, None, "--resume"),
            )[1]
        )(checkpoints(c)),
        ("no checkpoint under", "rank-0.pt: not what bertkit saves there"),
    ),
    Case(
        "resume-checkpoints-path-is-a-file",
        lambda c: (c.file("out.checkpoints", "mine"), train_command(c, None, "--resume"))[1],
        ("out.checkpoints is a file", "another --output"),
    ),
    Case(
        "resume-step-dir-is-a-file",
        lambda c: (
            lambda root: (
                shutil.rmtree(root / "step-8"),
                (root / "step-8").write_text("x"),
                train_command(c, None, "--resume"),
            )[2]
        )(checkpoints(c)),
        ("holds step-8, which is not a checkpoint directory",),
    ),
    Case(
        "resume-optimizer-of-another-kind",
        lambda c: (
            lambda root: (
                shutil.copy(root / "step-8" / "scheduler.pt", root / "step-8" / "optimizer.pt"),
                train_command(c, None, "--resume"),
            )[1]
        )(checkpoints(c)),
        ("step-8: optimizer.pt does not fit this run", "--resume-from", "step-6"),
    ),
    Case(
        "resume-weights-of-another-model",
        lambda c: (
            lambda root: (
                shutil.copy(c.tiny / "model.safetensors", root / "step-8" / "model.safetensors"),
                train_command(c, None, "--resume"),
            )[1]
        )(checkpoints(c)),
        ("step-8: model.safetensors does not fit this run (Missing key", "step-6"),
    ),
    # --- --resume-from a damaged checkpoint: the previous readable one is named ----------------------------
    Case(
        "resume-from-model-truncated",
        lambda c: resume_from(c, 8, "model.safetensors"),
        ("step-8 cannot be read (model.safetensors: truncated", "--resume-from", "step-6"),
    ),
    Case(
        "resume-from-optimizer-truncated",
        lambda c: resume_from(c, 8, "optimizer.pt"),
        ("optimizer.pt: truncated", "step-6"),
    ),
    Case("resume-from-rank-truncated", lambda c: resume_from(c, 6, "rank-0.pt"), ("rank-0.pt: truncated", "step-4")),
    Case(
        "resume-from-oldest-damaged",
        lambda c: resume_from(c, 2, "model.safetensors"),
        ("step-2 cannot be read", "restore its files"),
    ),
    Case(
        "resume-from-missing-dir",
        lambda c: train_command(c, None, "--resume-from", c.tmp / "nowhere"),
        ("not a complete checkpoint",),
    ),
    Case(
        "resume-from-a-file",
        lambda c: train_command(c, None, "--resume-from", c.file("step.txt", "x")),
        ("not a complete checkpoint",),
    ),
    Case(
        "resume-from-half-written",
        lambda c: (
            lambda root: (
                (root / "step-8" / "state.json").unlink(),
                train_command(c, None, "--resume-from", root / "step-8"),
            )[1]
        )(checkpoints(c)),
        ("not a complete checkpoint (no state.json)",),
    ),
    Case(
        "resume-from-a-model-dir",
        lambda c: train_command(c, None, "--resume-from", copy_model(c)),
        ("not a complete checkpoint",),
    ),
    # --- checkpoints of another run: other task, model, data, settings -----------------------------------
    Case(
        "resume-other-task",
        lambda c: (
            checkpoints(c),
            [
                "finetune",
                "pair",
                "--data",
                c.file("p.tsv", PAIR_TSV),
                "--model",
                c.tiny,
                "--output",
                c.tmp / "out",
                "--epochs",
                2,
                "--batch-size",
                4,
                "--save-every",
                2,
                "--resume",
            ],
        )[1],
        ("cannot resume from", "task pair (checkpoint: cls)"),
    ),
    Case(
        "resume-other-model",
        lambda c: (
            checkpoints(c),
            shutil.copytree(c.tiny, c.tmp / "other-bert"),
            train_command(c, None, "--resume", "--model", c.tmp / "other-bert"),
        )[2],
        ("cannot resume from", "--model"),
    ),
    Case(
        "resume-other-data-file",
        lambda c: (checkpoints(c), train_command(c, c.file("t.csv", CLS_CSV), "--resume"))[1],
        ("cannot resume from", "--data"),
    ),
    Case(
        "resume-changed-data-content", lambda c: changed_data(c), ("cannot resume from", "training data content (sha1)")
    ),
    Case(
        "resume-other-lr",
        lambda c: (checkpoints(c), train_command(c, None, "--resume", "--lr", "1e-3"))[1],
        ("cannot resume from", "--lr 0.001"),
    ),
    Case(
        "resume-other-batch-size",
        lambda c: (checkpoints(c), train_command(c, None, "--resume", "--batch-size", 8))[1],
        ("cannot resume from", "--batch-size 8 (checkpoint: 4)"),
    ),
    Case(
        "resume-other-seed",
        lambda c: (checkpoints(c), train_command(c, None, "--resume", "--seed", 7))[1],
        ("cannot resume from", "--seed 7"),
    ),
    Case(
        "resume-after-the-run-finished",
        lambda c: (
            checkpoints(c),
            shutil.copytree(c.trained("cls"), c.tmp / "out"),
            train_command(c, None, "--resume"),
        )[2],
        ("exists and is not empty",),
    ),
    Case(
        "resume-keep-without-save",
        lambda c: [
            "finetune",
            "cls",
            "--data",
            base_data(c),
            "--model",
            c.tiny,
            "--output",
            c.tmp / "out",
            "--keep-checkpoints",
            2,
            "--resume",
        ],
        ("--keep-checkpoints applies only with --save-every",),
    ),
    Case(
        "resume-save-every-zero",
        lambda c: train_command(c, None, "--save-every", 0, "--resume"),
        ("--save-every must be >= 1", "bertkit finetune cls --help"),
    ),
    Case(
        "resume-earlier-run-without-resume",
        lambda c: (checkpoints(c), train_command(c, None))[1],
        ("holds checkpoints of an earlier run", "--resume"),
    ),
    # --- bertkit.json damaged: every command that reads it says the same ----------------------------------
    Case(
        "report-meta-empty-object",
        lambda c: ["report", with_meta(c, "{}")],
        ("bertkit.json is corrupt", "requires 'task'"),
    ),
    Case("report-meta-not-json", lambda c: ["report", with_meta(c, "{oops")], ("bertkit.json is corrupt",)),
    Case("report-meta-binary", lambda c: ["report", with_meta(c, b"\xff\xfe\x00\x01")], ("not UTF-8 JSON",)),
    Case("report-meta-null", lambda c: ["report", with_meta(c, "null")], ("not a JSON object",)),
    Case("report-meta-task-empty", lambda c: ["report", with_meta(c, '{"task": {}}')], ("task section has no 'task'",)),
    Case("report-meta-no-data", lambda c: ["report", meta_without(c, "data")], ("schema 2 requires 'data'",)),
    Case(
        "report-meta-no-kind",
        lambda c: ["report", meta_without(c, "kind", "config")],
        ("schema 2 requires 'kind', 'config'",),
    ),
    Case("report-meta-data-null", lambda c: ["report", meta_with(c, data=None)], ("data is null",)),
    Case("report-meta-config-list", lambda c: ["report", meta_with(c, config=[])], ("config is an array",)),
    Case("report-meta-history-object", lambda c: ["report", meta_with(c, history={})], ("history is an object",)),
    Case("report-meta-kind-alien", lambda c: ["report", meta_with(c, kind="alien")], ("kind 'alien'",)),
    Case("report-meta-schema-3", lambda c: ["report", meta_with(c, schema=3)], ("schema 3", "upgrade bertkit")),
    Case(
        "report-meta-max-length-text",
        lambda c: ["report", meta_with(c, task={"task": "cls", "max_length": "64"})],
        ("task.max_length is a string",),
    ),
    Case("report-missing-dir", lambda c: ["report", c.tmp / "nowhere"], ("not found",)),
    Case(
        "report-meta-a-directory",
        lambda c: (lambda m: ((m / "bertkit.json").unlink(), (m / "bertkit.json").mkdir(), ["report", m])[2])(
            copy_model(c)
        ),
        ("not a bertkit model",),
    ),
    Case(
        "predict-meta-no-max-length",
        lambda c: ["predict", meta_with(c, task={"task": "cls"}), "--input", c.file("in.txt", TEXTS)],
        ("task section has no 'max_length'",),
    ),
    Case(
        "predict-meta-labels-null",
        lambda c: [
            "predict",
            meta_with(c, task={"task": "cls", "max_length": 64, "labels": None}),
            "--input",
            c.file("in.txt", TEXTS),
        ],
        ("without its label names",),
    ),
    Case(
        "report-meta-ner-labels-empty",
        lambda c: [
            "report",
            with_meta(
                c,
                json.dumps(
                    {
                        **json.loads((c.trained("ner") / "bertkit.json").read_text()),
                        "task": {"task": "ner", "max_length": 64, "labels": []},
                    }
                ),
            ),
        ],
        ("a ner model without its label names",),
    ),
    Case(
        "eval-meta-binary",
        lambda c: ["eval", with_meta(c, b"\x89PNG\r\n"), "--data", c.file("e.csv", CLS_CSV)],
        ("not UTF-8 JSON",),
    ),
    Case("export-meta-no-task", lambda c: ["export", "onnx", meta_without(c, "task")], ("requires 'task'",)),
    Case("serve-meta-null", lambda c: ["serve", with_meta(c, "null"), "--port", "8765"], ("not a JSON object",)),
    Case("push-meta-empty", lambda c: ["push", with_meta(c, "{}"), "--repo", "me/model"], ("bertkit.json",)),
    # --- damaged ONNX files --------------------------------------------------------------------------------
    Case(
        "predict-onnx-empty",
        lambda c: ["predict", with_onnx(c, b""), "--input", c.file("in.txt", TEXTS), "--backend", "onnx"],
        ("model.onnx", "export onnx"),
    ),
    Case(
        "predict-onnx-truncated-export",
        lambda c: ["predict", truncated_onnx(c), "--input", c.file("in.txt", TEXTS), "--backend", "onnx"],
        ("model.onnx cannot be loaded by onnxruntime", "export onnx"),
    ),
    Case(
        "serve-onnx-truncated-export",
        lambda c: ["serve", truncated_onnx(c), "--backend", "onnx", "--port", "8765"],
        ("model.onnx cannot be loaded", "export onnx"),
    ),
    Case(
        "serve-onnx-empty",
        lambda c: ["serve", with_onnx(c, b""), "--backend", "onnx", "--port", "8765"],
        ("model.onnx",),
    ),
    # --- datasets -------------------------------------------------------------------------------------------
    Case(
        "datasets-unknown-argument",
        lambda c: ["datasets", "sst3"],
        ("Got unexpected extra argument", "bertkit datasets --help"),
    ),
    Case("datasets-data-dir-empty-string", lambda c: ["datasets", "--data-dir", ""], ("--data-dir",)),
    Case("datasets-data-dir-no-value", lambda c: ["datasets", "--data-dir"], ("requires an argument",)),
    # --- inspect --------------------------------------------------------------------------------------------
    Case(
        "inspect-tokens-max-length-zero",
        lambda c: ["inspect", "tokens", c.tiny, "--text", "good", "--max-length", "0"],
        ("--max-length",),
    ),
    Case(
        "inspect-attention-layer-zero",
        lambda c: ["inspect", "attention", c.tiny, "--text", "good", "--layer", "0", "--output", c.tmp / "a.png"],
        ("--layer",),
    ),
    Case(
        "inspect-attention-json-missing-dir",
        lambda c: ["inspect", "attention", c.tiny, "--text", "good", "--json", "--output", c.tmp / "no" / "a.json"],
        ("does not exist",),
    ),
    Case(
        "inspect-tokens-model-a-file",
        lambda c: ["inspect", "tokens", c.file("m.bin", "x"), "--text", "good"],
        ("m.bin",),
    ),
    Case(
        "inspect-tokens-meta-broken-model",
        lambda c: ["inspect", "tokens", c.tmp / "nowhere", "--text", "a"],
        ("nowhere",),
    ),
    # --- pretrain mlm: bad flags name `bertkit pretrain mlm --help`, never finetune's ----------------------------
    Case(
        "pretrain-epochs-zero",
        lambda c: pretrain(c, "--epochs", "0"),
        ("--epochs must be > 0", PRETRAIN_HELP),
        absent=("finetune",),
    ),
    Case(
        "pretrain-lr-negative",
        lambda c: pretrain(c, "--lr", "-1"),
        ("--lr must be > 0", PRETRAIN_HELP),
        absent=("finetune",),
    ),
    Case(
        "pretrain-warmup-one",
        lambda c: pretrain(c, "--warmup-ratio", "1"),
        ("--warmup-ratio", PRETRAIN_HELP),
        absent=("finetune",),
    ),
    Case(
        "pretrain-grad-accum-zero",
        lambda c: pretrain(c, "--grad-accum", "0"),
        ("--grad-accum", PRETRAIN_HELP),
        absent=("finetune",),
    ),
    Case(
        "pretrain-max-steps-zero",
        lambda c: pretrain(c, "--max-steps", "0"),
        ("--max-steps", PRETRAIN_HELP),
        absent=("finetune",),
    ),
    Case(
        "pretrain-max-length-four",
        lambda c: pretrain(c, "--max-length", "4"),
        ("--max-length", PRETRAIN_HELP),
        absent=("finetune",),
    ),
    Case(
        "pretrain-keep-without-save",
        lambda c: pretrain(c, "--keep-checkpoints", "1"),
        ("--save-every",),
        absent=("finetune",),
    ),
    Case(
        "pretrain-eval-share-one", lambda c: pretrain(c, "--eval-share", "1"), ("--eval-share",), absent=("finetune",)
    ),
    Case(
        "pretrain-epochs-text",
        lambda c: pretrain(c, "--epochs", "many"),
        ("'--epochs'", PRETRAIN_HELP),
        absent=("finetune",),
    ),
    Case(
        "pretrain-resume-from-damaged",
        lambda c: [
            "pretrain",
            "mlm",
            "--data",
            base_data(c),
            "--model",
            c.tiny,
            "--output",
            c.tmp / "out",
            "--epochs",
            2,
            "--batch-size",
            4,
            "--save-every",
            2,
            "--resume-from",
            damaged(c, "model.safetensors", steps=(8,)) / "step-8",
        ],
        ("cannot be read (model.safetensors: truncated",),
    ),
    Case(
        "pretrain-resume-a-cls-run",
        lambda c: (
            checkpoints(c),
            [
                "pretrain",
                "mlm",
                "--data",
                base_data(c),
                "--model",
                c.tiny,
                "--output",
                c.tmp / "out",
                "--epochs",
                2,
                "--batch-size",
                4,
                "--save-every",
                2,
                "--resume",
            ],
        )[1],
        ("cannot resume from", "task mlm (checkpoint: cls)"),
    ),
    Case(
        "pretrain-ner-file",
        lambda c: pretrain(c)[:3] + [c.file("n.txt", NER_CONLL)] + pretrain(c)[4:] + ["--epochs", "0"],
        ("--epochs must be > 0", PRETRAIN_HELP),
        absent=("finetune",),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_hostile_resume_fails_in_one_line_and_writes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys, SHARED["root"])


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 30 and len({case.id for case in CASES}) == len(CASES)
