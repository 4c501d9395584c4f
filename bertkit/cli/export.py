"""`bertkit export onnx DIR [--int8]`: ONNX models with a parity check (bertkit.export; the `onnx` extra)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from bertkit.cli.app import app
from bertkit.cli.common import require
from bertkit.cli.options import ModelDir

export_app = typer.Typer(no_args_is_help=True, help="Export a model directory to other runtimes.")
app.add_typer(export_app, name="export")


@export_app.command("onnx")
def export_onnx(
    model_dir: ModelDir,
    int8: Annotated[bool, typer.Option("--int8", help="Also write a dynamically quantised int8 model.")] = False,
    data: Annotated[Optional[str], typer.Option(help="Data for the parity check; default: the model's eval "
                                                "data.", show_default=False)] = None,
    samples: Annotated[int, typer.Option(help="Examples the parity check runs on.")] = 500,
):
    """Write DIR/onnx/model.onnx (and model.int8.onnx) and check parity with PyTorch."""
    require("onnx", "onnxruntime", extra="onnx")
    from bertkit.export.onnx import export_onnx as run_export

    report = run_export(model_dir, int8=int8, data=data, samples=samples)
    typer.echo(f"parity on {report['parity_examples']} examples of {report['parity_data']}")
    for name in ("fp32", "int8"):
        if name in report:
            entry = report[name]
            line = f"{name}: {entry['file']} ({entry['megabytes']} MB), max abs logit diff {entry['max_abs_diff']:.2e}"
            if entry.get("value") is not None:
                line += (f", {report['torch']['main_metric']} {entry['value']:.4f} (torch "
                         f"{report['torch']['value']:.4f}, delta {entry['delta']:+.4f})")
            typer.echo(line)
    typer.echo(f"written to {report['written_to']}")
