"""`bertkit predict|embed ... --ray`: the checks the flags need, then bertkit.ray.run, then one line."""

from __future__ import annotations

import dataclasses

import typer

from bertkit.errors import BertkitError
from bertkit.options import StreamOptions

_CHUNK_ROWS = next(f.default for f in dataclasses.fields(StreamOptions) if f.name == "chunk_rows")


def check_ray_flags(stream: StreamOptions, per_word: bool = False, tool: str | None = None) -> None:
    """Refuse flag combinations that would be silently ignored, before anything loads."""
    if not stream.ray:
        if stream.ray_address is not None:
            raise BertkitError("--ray-address needs --ray", "add --ray to run on that cluster")
        if stream.actors is not None:  # None: not given
            raise BertkitError("--actors needs --ray", "add --ray, or leave out --actors")
        return
    for given, flag in (
        (stream.resume, "--resume"),
        (stream.chunk_rows != _CHUNK_ROWS, "--chunk-rows"),
        (per_word, "--per-word"),
        (tool is not None, "--format"),  # an annotation tool's file: Ray writes Parquet parts
    ):
        if given:
            raise BertkitError(
                f"{flag} does not apply with --ray (Ray streams the input in batches of its own)",
                f"leave out {flag} or --ray",
            )


def run_on_ray(command: str, model: str, stream: StreamOptions, options, run=None) -> dict:
    """``options``: the command's (PredictOptions, EmbeddingOptions: its input and output too);
    ``run``: predict's InferenceOptions."""
    from bertkit.ray import run as run_ray

    actors = stream.actor_count
    summary = run_ray(
        command,
        model,
        options.input,
        options.output,
        address=stream.ray_address,
        actors=actors,
        options=options,
        inference=run,
    )
    what = "predictions" if command == "predict" else "vectors"
    typer.echo(
        f"{summary['rows']:,} {what} written to {summary['output']} as Parquet files "
        f"({summary['rows_per_second'] or 0:,.0f} rows/s on {actors} Ray actor(s), {summary['address']} "
        f"cluster)",
        err=True,
    )
    return summary
