"""`bertkit export onnx|openvino DIR [--int8]`: exported models with a parity check (bertkit.export;
the `onnx` and `openvino` extras)."""

from __future__ import annotations

from typing import Annotated

import typer

from bertkit.cli.app import app
from bertkit.cli.common import require
from bertkit.cli.options import ModelDir, chosen, command, from_dataclass, positional
from bertkit.options import DatasetOptions, ExportOptions


def _head_parameters() -> list:
    from bertkit.options.multihead import HeadExportOptions

    return from_dataclass(HeadExportOptions)


export_app = typer.Typer(no_args_is_help=True, help="Export a model directory to other runtimes.")
app.add_typer(export_app, name="export")
MODEL_DIR = (positional("model_dir", ModelDir),)


def export_onnx(model_dir: str, **values):
    """Write DIR/onnx/model.onnx (and model.int8.onnx) and check parity with PyTorch."""
    options = chosen(values, ExportOptions).validate("bertkit export onnx")
    require("onnx", "onnxruntime", extra="onnx")
    from bertkit.export.onnx import export_onnx as run_export

    _show(
        run_export(
            model_dir,
            int8=options.int8,
            data=options.data,
            samples=options.samples,
            threads=options.threads,
            dataset=_dataset(values),
        )
    )


def export_openvino(model_dir: str, **values):
    """Write DIR/openvino/model.xml (and model.int8.xml) and check parity with PyTorch."""
    options = chosen(values, ExportOptions).validate("bertkit export openvino")
    require("openvino", "nncf", extra="openvino")
    from bertkit.export.openvino import export_openvino as run_export

    _show(
        run_export(
            model_dir,
            int8=options.int8,
            data=options.data,
            samples=options.samples,
            threads=options.threads,
            dataset=_dataset(values),
        )
    )


def _dataset(values: dict):
    """--data-config and the split flags, for a --data that is a Hub dataset."""
    from bertkit.data.hub_datasets import DatasetChoice

    return DatasetChoice.of(chosen(values, DatasetOptions))


def _show(report: dict) -> None:
    torch = report["torch"]
    typer.echo(
        f"parity on {report['parity_examples']} examples of {report['parity_data']}; torch fp32 "
        f"{torch['examples_per_second']:,.0f} examples/s"
    )
    for name in ("fp32", "int8"):
        if name in report:
            entry = report[name]
            line = (
                f"{name}: {entry['file']} ({entry['megabytes']} MB, computes in {entry['computes_in']}), "
                f"max abs logit diff {entry['max_abs_diff']:.2e}, {entry['examples_per_second']:,.0f} "
                f"examples/s ({entry['speedup_vs_torch_fp32']}x torch fp32)"
            )
            if entry.get("value") is not None:
                line += (
                    f", {torch['main_metric']} {entry['value']:.4f} (torch {torch['value']:.4f}, "
                    f"delta {entry['delta']:+.4f})"
                )
            typer.echo(line)
    typer.echo(f"written to {report['written_to']}")


def export_head(model_dir: str, name: str, **values):
    """Write one head of a multi-head directory (`bertkit finetune multi`) as an ordinary one-task directory."""
    from bertkit.api.head_export import export_head as run_export
    from bertkit.options.multihead import HeadExportOptions

    report = run_export(model_dir, name, chosen(values, HeadExportOptions))
    typer.echo(f"head {name} ({report['meta']['task']['task']}) written to {report['written_to']}")


HEAD_NAME = positional("name", Annotated[str, typer.Argument(help="The head's name.", show_default=False)])
PARAMETERS = from_dataclass(ExportOptions) + from_dataclass(DatasetOptions)
export_app.command("head")(command(export_head, _head_parameters(), (*MODEL_DIR, HEAD_NAME)))
export_app.command("onnx")(command(export_onnx, PARAMETERS, MODEL_DIR))
export_app.command("openvino")(command(export_openvino, PARAMETERS, MODEL_DIR))
