"""Round 3 of the hostile corpora, streams and exports (issue #30 part 2, #31): one rule for inputs
and outputs (an output never one of the input's files, nor a file the input's directory or glob
would read next time, nor a model's file), exports refused once the weights changed under them,
and the hints and flags around them. Same contract as the other hostile corpora (tests/hostile.py's
run_case): ONE line `error: ... (hint: ...)`, exit 2, no traceback, nothing written or removed."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from hostile import CLS_CSV, Case, Context, run_case

ROWS = "".join(
    json.dumps({"id": f"r{i}", "text": f"the film was {w}"}) + "\n" for i, w in enumerate(["good", "bad"] * 3)
)


class Mounts:
    read_only = None


MOUNTS = Mounts()


def shards(c: Context, suffix: str = ".jsonl") -> Path:
    """sh/a<suffix>, sh/b<suffix>: two shards of rows, as JSONL or Parquet."""
    folder = c.tmp / "sh"
    folder.mkdir(exist_ok=True)
    for name in ("a", "b"):
        if suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            rows = [json.loads(line) for line in ROWS.splitlines()]
            pq.write_table(pa.Table.from_pylist(rows), folder / f"{name}.parquet")
        else:
            c.file(f"sh/{name}{suffix}", ROWS)
    return folder


def predict(c: Context, input, output, *extra, model=None) -> list:
    return ["predict", model or c.trained("cls"), "--input", input, "--output", output, *extra]


def embed(c: Context, input, output, *extra) -> list:
    return ["embed", c.tiny, "--input", input, "--output", output, *extra]


def copy_model(c: Context) -> Path:
    target = c.tmp / "cls-copy"
    shutil.copytree(c.trained("cls"), target, ignore=shutil.ignore_patterns("onnx", "openvino"))
    return target


def stale_onnx_model(c: Context) -> Path:
    """A model exported to ONNX, then given other weights (`cp other/model.safetensors M/`)."""
    from safetensors.torch import load_file, save_file

    from bertkit.export.onnx import export_onnx

    model = copy_model(c)
    export_onnx(str(model), data=str(c.file("e.csv", CLS_CSV)))
    weights = load_file(str(model / "model.safetensors"))
    name = next(iter(weights))
    weights[name] = weights[name] * 2
    save_file(weights, str(model / "model.safetensors"), metadata={"format": "pt"})
    return model


def needs(module: str):
    return pytest.mark.skipif(importlib.util.find_spec(module) is None, reason=f"{module} is not installed")


CASES = [
    # --- an output that is, or would become, one of the input's files ---------------------------------
    Case(
        "predict-output-is-a-glob-member",
        lambda c: (shards(c), predict(c, c.tmp / "sh" / "*.jsonl", c.tmp / "sh" / "b.jsonl"))[1],
        ("is the input file",),
    ),
    Case(
        "predict-parquet-output-is-a-glob-member",
        lambda c: (shards(c, ".parquet"), predict(c, c.tmp / "sh" / "*.parquet", c.tmp / "sh" / "b.parquet"))[1],
        ("is the input file",),
    ),
    Case(
        "predict-output-matches-the-glob",
        lambda c: (shards(c), predict(c, c.tmp / "sh" / "*.jsonl", c.tmp / "sh" / "preds.jsonl"))[1],
        ("matches the input pattern", "so it would be read as input"),
    ),
    Case(
        "predict-output-in-the-input-directory",
        lambda c: (shards(c), predict(c, c.tmp / "sh", c.tmp / "sh" / "preds.jsonl"))[1],
        ("is a data file in the input directory",),
    ),
    Case(
        "predict-parquet-output-in-the-input-directory",
        lambda c: (shards(c, ".parquet"), predict(c, c.tmp / "sh", c.tmp / "sh" / "preds.parquet"))[1],
        ("is a data file in the input directory",),
    ),
    Case(
        "embed-output-is-a-glob-member",
        lambda c: (shards(c), embed(c, c.tmp / "sh" / "*.jsonl", c.tmp / "sh" / "b.jsonl"))[1],
        ("is the input file",),
    ),
    Case(
        "embed-parquet-output-matches-the-glob",
        lambda c: (shards(c, ".parquet"), embed(c, c.tmp / "sh" / "*.parquet", c.tmp / "sh" / "v.parquet"))[1],
        ("matches the input pattern",),
    ),
    Case(
        "embed-output-in-the-input-directory",
        lambda c: (shards(c), embed(c, c.tmp / "sh", c.tmp / "sh" / "v.jsonl"))[1],
        ("is a data file in the input directory",),
    ),
    Case(
        "embed-per-word-output-is-a-glob-member",  # built in memory, not streamed: the same rule
        lambda c: (shards(c), embed(c, c.tmp / "sh" / "*.jsonl", c.tmp / "sh" / "a.jsonl", "--per-word"))[1],
        ("is the input file",),
    ),
    # --- an output that is a model's file -----------------------------------------------------------
    Case(
        "predict-output-inside-the-models-export",
        lambda c: (
            lambda m: ((m / "onnx").mkdir(), predict(c, c.file("in.jsonl", ROWS), m / "onnx" / "p.jsonl", model=m))[1]
        )(copy_model(c)),
        ("is one of the model's files",),
    ),
    # --- --ray: the output directory holds the input; no --overwrite to suggest ----------------------
    pytest.param(
        Case(
            "predict-ray-output-holds-the-input",
            lambda c: (shards(c, ".parquet"), predict(c, c.tmp / "sh" / "*.parquet", c.tmp / "sh", "--ray"))[1],
            ("already exists and is not empty",),
            ("--overwrite",),
        ),
        marks=needs("ray"),
    ),
    # --- exports: other weights under them, a read-only model, --threads ----------------------------
    pytest.param(
        Case(
            "predict-onnx-export-of-other-weights",
            lambda c: ["predict", stale_onnx_model(c), "--input", c.file("in.jsonl", ROWS), "--backend", "onnx"],
            (
                "onnx/model.onnx cannot be used",
                "model.safetensors changed since it was exported",
                "bertkit export onnx",
            ),
        ),
        marks=needs("onnxruntime"),
    ),
    pytest.param(
        Case(
            "export-read-only-model-dir-hint",
            lambda c: ["export", "onnx", MOUNTS.read_only(copy_model(c)), "--data", c.file("e.csv", CLS_CSV)],
            ("cannot write in", "copy"),
            ("choose a writable location",),
        ),
        marks=needs("onnx"),
    ),
    pytest.param(
        Case(
            "export-threads-zero",
            lambda c: ["export", "onnx", c.trained("cls"), "--threads", 0],
            ("--threads must be between 1",),
        ),
        marks=needs("onnx"),
    ),
    Case("serve-threads-zero", lambda c: ["serve", c.trained("cls"), "--threads", 0], ("--threads must be between 1",)),
]


def _id(case) -> str:
    return (case.values[0] if hasattr(case, "values") else case).id


@pytest.mark.parametrize("case", CASES, ids=[_id(case) for case in CASES])
def test_round3_stream_and_export_mistakes_fail_in_one_line_and_change_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys, read_only
):
    MOUNTS.read_only = read_only
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys, tmp_path, seconds=60)
