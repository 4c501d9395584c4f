"""`bertkit export onnx|openvino DIR [--int8]`: exported models with a parity check (bertkit.export;
the `onnx` and `openvino` extras)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from bertkit.cli.app import app
from bertkit.cli.common import require
from bertkit.cli.options import ModelDir

export_app = typer.Typer(no_args_is_help=True, help="Export a model directory to other runtimes.")
app.add_typer(export_app, name="export")

Int8 = Annotated[bool, typer.Option("--int8", help="Also write an int8 model (see README).")]
ParityData = Annotated[Optional[str], typer.Option("--data", help="Data for the parity check; default: the "
                                                   "model's eval data.", show_default=False)]
Samples = Annotated[int, typer.Option(help="Examples the parity check runs on.")]


@export_app.command("onnx")
def export_onnx(model_dir: ModelDir, int8: Int8 = False, data: ParityData = None, samples: Samples = 500):
    """Write DIR/onnx/model.onnx (and model.int8.onnx) and check parity with PyTorch."""
    require("onnx", "onnxruntime", extra="onnx")
    from bertkit.export.onnx import export_onnx as run_export

    _show(run_export(model_dir, int8=int8, data=data, samples=samples))


@export_app.command("openvino")
def export_openvino(model_dir: ModelDir, int8: Int8 = False, data: ParityData = None, samples: Samples = 500):
    """Write DIR/openvino/model.xml (and model.int8.xml) and check parity with PyTorch."""
    require("openvino", "nncf", extra="openvino")
    from bertkit.export.openvino import export_openvino as run_export

    _show(run_export(model_dir, int8=int8, data=data, samples=samples))


def _show(report: dict) -> None:
    torch = report["torch"]
    typer.echo(f"parity on {report['parity_examples']} examples of {report['parity_data']}; torch fp32 "
               f"{torch['examples_per_second']:,.0f} examples/s")
    for name in ("fp32", "int8"):
        if name in report:
            entry = report[name]
            line = (f"{name}: {entry['file']} ({entry['megabytes']} MB, computes in {entry['computes_in']}), "
                    f"max abs logit diff {entry['max_abs_diff']:.2e}, {entry['examples_per_second']:,.0f} "
                    f"examples/s ({entry['speedup_vs_torch_fp32']}x torch fp32)")
            if entry.get("value") is not None:
                line += (f", {torch['main_metric']} {entry['value']:.4f} (torch {torch['value']:.4f}, "
                         f"delta {entry['delta']:+.4f})")
            typer.echo(line)
    typer.echo(f"written to {report['written_to']}")
