"""`bertkit export onnx|openvino DIR [--int8]`: exported models with a parity check (bertkit.export;
the `onnx` and `openvino` extras)."""

from __future__ import annotations

from typing import Annotated

import typer

from bertkit.cli.app import app
from bertkit.cli.common import require
from bertkit.cli.options import ModelDir, chosen, command, from_dataclass, positional
from bertkit.errors import BertkitError
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
    from bertkit.export.onnx import ONNX
    from bertkit.export.onnx import export_onnx as run_export

    if _multi_head(model_dir):  # one graph, every head
        _show_heads(_export_heads(ONNX, model_dir, options, values))
        return
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
    from bertkit.export.openvino import OPENVINO
    from bertkit.export.openvino import export_openvino as run_export

    if _multi_head(model_dir):  # one graph, every head
        _show_heads(_export_heads(OPENVINO, model_dir, options, values))
        return
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


def _multi_head(model_dir: str) -> bool:
    from bertkit.api.multihead_inference import is_multi_head
    from bertkit.model_dir import load_meta

    return is_multi_head(load_meta(model_dir))


def _export_heads(fmt, model_dir: str, options, values: dict) -> dict:
    from bertkit.api.multihead_export import export_heads

    if _dataset(values).given():
        raise BertkitError(
            "--data-config and the split flags choose --data's rows; on a multi-head model each head reads its own",
            "drop them",
        )
    return export_heads(fmt, model_dir, options.int8, options.data, options.samples, threads=options.threads)


def _show_heads(report: dict) -> None:
    """Each head's parity: its rows, the largest output difference and its score under each file."""
    for name in report["heads"]:
        torch = report["torch"][name]
        value = f", {torch['main_metric']} {torch['value']:.4f}" if torch.get("value") is not None else ""
        typer.echo(f"head {name}: parity on {report['parity_data'][name]}; torch fp32{value}")
    for kind in ("fp32", "int8"):
        if kind in report:
            entry = report[kind]
            typer.echo(
                f"{kind}: {entry['file']} ({entry['megabytes']} MB, computes in {entry['computes_in']}), every head "
                f"from one encoder pass; max abs output diff {entry['max_abs_diff']:.2e}"
                + "".join(
                    f"; {name} {head['value']:.4f} (delta {head['delta']:+.4f})"
                    for name, head in entry["heads"].items()
                    if head.get("value") is not None
                )
            )
    typer.echo(f"written to {report['written_to']}")


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
