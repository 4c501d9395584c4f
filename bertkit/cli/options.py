"""Options used by several commands, defined once (typing.Annotated aliases)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from bertkit.cli.common import PRECISION_HELP, THREADS_HELP, Precision

DATA_PANEL, MODEL_PANEL, TRAINING_PANEL, OUTPUT_PANEL = "Data", "Model and output", "Training", "Output"
INFERENCE_PANEL = "Inference"

ModelDir = Annotated[str, typer.Argument(help="A directory written by `bertkit finetune`.", show_default=False)]
DataDir = Annotated[Optional[str], typer.Option(
    help="Local data directory with the original files (<dir>/sst2/train.tsv ...); default $BERTKIT_DATA_DIR.",
    rich_help_panel=DATA_PANEL, show_default=False)]
BatchSize = Annotated[int, typer.Option(help="Inference batch size.", rich_help_panel=INFERENCE_PANEL)]
InferencePrecision = Annotated[Precision, typer.Option(help=PRECISION_HELP, rich_help_panel=INFERENCE_PANEL)]
Threads = Annotated[Optional[int], typer.Option(help=THREADS_HELP, rich_help_panel=INFERENCE_PANEL,
                                                show_default=False)]
Backend = Annotated[str, typer.Option(help="torch, onnx or onnx-int8 (after `bertkit export onnx`).",
                                      rich_help_panel=INFERENCE_PANEL)]
