"""`bertkit predict|embed ... --ray`: the checks the flags need, then bertkit.ray.run, then one line."""

from __future__ import annotations

import typer

from bertkit.errors import BertkitError


def check_ray_flags(ray: bool, address: str | None, actors: int, *, chunk_rows: int, default_chunk_rows: int,
                    resume: bool, per_word: bool = False) -> None:
    """Refuse flag combinations that would be silently ignored, before anything loads."""
    if not ray:
        if address is not None:
            raise BertkitError("--ray-address needs --ray", "add --ray to run on that cluster")
        if actors != 2:
            raise BertkitError("--actors needs --ray", "add --ray, or leave out --actors")
        return
    for given, flag in ((resume, "--resume"), (chunk_rows != default_chunk_rows, "--chunk-rows"),
                        (per_word, "--per-word")):
        if given:
            raise BertkitError(f"{flag} does not apply with --ray (Ray streams the input in batches of its own)",
                               f"leave out {flag} or --ray")


def run_on_ray(command: str, model: str, input: str, output: str, *, address: str | None, actors: int,
               batch_size: int, **options) -> dict:
    from bertkit.ray import run

    summary = run(command, model, input, output, address=address, actors=actors, model_batch_size=batch_size,
                  **{name: value for name, value in options.items() if value is not None})
    what = "predictions" if command == "predict" else "vectors"
    typer.echo(f"{summary['rows']:,} {what} written to {summary['output']} as Parquet files "
               f"({summary['rows_per_second'] or 0:,.0f} rows/s on {actors} Ray actor(s), {summary['address']} "
               f"cluster)", err=True)
    return summary
