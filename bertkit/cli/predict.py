"""`bertkit predict DIR --input FILE`: one JSON line per input row, in input order."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from bertkit.cli.app import app
from bertkit.cli.common import echo_notices, is_main_process, runtime_line
from bertkit.cli.options import (Precision, DATA_PANEL, OUTPUT_PANEL, Backend, BatchSize, InferencePrecision, ModelDir,
                                  Threads)


@app.command()
def predict(
    model_dir: ModelDir,
    input: Annotated[str, typer.Option(
        "--input", help="Text lines (pair: TAB between texts), JSONL, JSON, CSV, TSV; '-' = stdin.",
        rich_help_panel=DATA_PANEL, show_default=False)],
    output: Annotated[str, typer.Option(help="JSONL output file in an existing directory; '-' = stdout.",
                                        rich_help_panel=OUTPUT_PANEL)] = "-",
    n_best: Annotated[Optional[int], typer.Option(help="qa: also return the N best distinct answers.",
                                                  rich_help_panel=OUTPUT_PANEL, show_default=False)] = None,
    top_k: Annotated[Optional[int], typer.Option(help="cls/pair: give only the K most probable labels.",
                                                 rich_help_panel=OUTPUT_PANEL, show_default=False)] = None,
    batch_size: BatchSize = 64,
    precision: InferencePrecision = Precision.auto,
    threads: Threads = None,
    backend: Backend = "torch",
):
    """Predict for every input row; one JSON line per row, in input order."""
    from bertkit import api
    from bertkit.model_dir import check_inputs_kept, check_output_file, write_text

    target = None if output == "-" else check_output_file(output)  # before the work, not after it
    if target is not None:
        check_inputs_kept(target, input)  # --output equal to --input would replace the rows with predictions
    rows = api.predict(model_dir, input, batch_size=batch_size, precision=precision.value, n_best=n_best,
                       top_k=top_k, backend=backend, threads=threads)
    if not is_main_process():
        return
    if rows.runtime:
        typer.echo(runtime_line(rows.runtime), err=True)
    echo_notices(rows.preprocessing, err=True)  # stdout stays pure JSONL
    lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if target is None:
        sys.stdout.write(lines)
    else:
        write_text(target, lines)
        typer.echo(f"{len(rows)} predictions written to {output}", err=True)


