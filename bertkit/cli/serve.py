"""`bertkit serve DIR`: the HTTP JSON API (bertkit.serving; the `serve` extra)."""

from __future__ import annotations

import typer

from bertkit.cli.app import app
from bertkit.cli.common import require
from bertkit.cli.options import ModelDir, chosen, command, from_dataclass, positional
from bertkit.options import CoverageOptions, ServeOptions


def serve(model_dir: str, **values):
    """Serve predictions over HTTP: POST /predict, GET /health, GET /info."""
    options = chosen(values, ServeOptions).validate("bertkit serve")
    conformal = chosen(values, CoverageOptions).validate("bertkit serve")
    require("fastapi", "uvicorn", extra="serve")
    from bertkit.api.serving import served_predictor
    from bertkit.events import notice
    from bertkit.serving.app import check_address
    from bertkit.serving.app import serve as run_server

    check_address(options.host, options.port)
    predictor = served_predictor(model_dir, options.inference(), options.backend, conformal)
    # the work begins: what was decided (auto's backend and why, precision, threads, a busy machine) is said now
    notice("start", "", work="serve")
    run_server(
        predictor,
        options.host,
        options.port,
        announce=lambda line: typer.echo(line, err=True),
        max_inputs=options.max_inputs,
        max_request_bytes=options.max_request_bytes,
        max_batch_rows=options.batch_size,
        max_wait_ms=options.max_wait_ms,
    )


app.command("serve")(
    command(serve, from_dataclass(ServeOptions) + from_dataclass(CoverageOptions), (positional("model_dir", ModelDir),))
)
