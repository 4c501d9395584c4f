"""`bertkit predict DIR --input FILE`: one JSON line per input row, in input order."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from bertkit.cli.app import app
from bertkit.cli.common import echo_notices, is_main_process, runtime_line
from bertkit.cli.on_ray import check_ray_flags, run_on_ray
from bertkit.cli.options import (DATA_PANEL, OUTPUT_PANEL, Actors, Backend, BatchSize, ChunkRows, InferencePrecision,
                                  ModelDir, Precision, Ray, RayAddress, Resume, Threads)

CHUNK_ROWS = 10_000


@app.command()
def predict(
    model_dir: ModelDir,
    input: Annotated[str, typer.Option(
        "--input", help="Text lines (pair: TAB between texts), JSONL, JSON, CSV, TSV, Parquet; a directory or glob "
        "of shards; '-' = stdin.", rich_help_panel=DATA_PANEL, show_default=False)],
    output: Annotated[str, typer.Option(help="JSONL (or .parquet) output file in an existing directory; '-' = stdout "
                                        "(--ray: a directory of Parquet files).",
                                        rich_help_panel=OUTPUT_PANEL)] = "-",
    n_best: Annotated[Optional[int], typer.Option(help="qa: also return the N best distinct answers.",
                                                  rich_help_panel=OUTPUT_PANEL, show_default=False)] = None,
    top_k: Annotated[Optional[int], typer.Option(help="cls/pair: give only the K most probable labels.",
                                                 rich_help_panel=OUTPUT_PANEL, show_default=False)] = None,
    batch_size: BatchSize = 64,
    precision: InferencePrecision = Precision.auto,
    threads: Threads = None,
    backend: Backend = "torch",
    chunk_rows: ChunkRows = CHUNK_ROWS,
    resume: Resume = False,
    ray: Ray = False,
    ray_address: RayAddress = None,
    actors: Actors = 2,
):
    """Predict for every input row; one JSON line per row, in input order, written chunk by chunk."""
    from bertkit import api
    from bertkit.model_dir import check_inputs_kept, check_output_file

    check_ray_flags(ray, ray_address, actors, chunk_rows=chunk_rows, default_chunk_rows=CHUNK_ROWS, resume=resume)
    if ray:
        run_on_ray("predict", model_dir, input, output, address=ray_address, actors=actors, batch_size=batch_size,
                   precision=precision.value, n_best=n_best, top_k=top_k, backend=backend, threads=threads)
        return
    target = None if output == "-" else check_output_file(output)  # before the work, not after it
    if target is not None:
        check_inputs_kept(target, input)  # --output equal to --input would replace the rows with predictions
    summary = api.predict_stream(model_dir, input, None if target is None else str(target), chunk_rows=chunk_rows,
                                 resume=resume, batch_size=batch_size, precision=precision.value, n_best=n_best,
                                 top_k=top_k, backend=backend, threads=threads, quiet=not is_main_process(),
                                 long_lived=True)
    if not is_main_process():
        return
    if summary.runtime:
        typer.echo(runtime_line(summary.runtime), err=True)
    echo_notices(summary.preprocessing, {"notices": summary.notices}, err=True)  # stdout stays pure JSONL
    if target is not None:
        typer.echo(f"{summary.rows:,} predictions written to {output} ({summary.rows_per_second:,.0f} rows/s)", err=True)
