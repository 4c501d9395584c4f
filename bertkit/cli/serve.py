"""`bertkit serve DIR`: the HTTP JSON API (bertkit.serving; the `serve` extra)."""

from __future__ import annotations

from typing import Annotated

import typer

from bertkit.cli.app import app
from bertkit.cli.common import require
from bertkit.cli.options import Backend, ModelDir
from bertkit.errors import BertkitError

SERVER_PANEL, LIMITS_PANEL = "Server", "Batching and limits"
MAX_WAIT_MS = 10_000


@app.command()
def serve(
    model_dir: ModelDir,
    host: Annotated[str, typer.Option(help="Address to listen on (0.0.0.0: every interface; there is no "
                                      "authentication).", rich_help_panel=SERVER_PANEL)] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.", rich_help_panel=SERVER_PANEL)] = 8000,
    backend: Backend = "auto",
    batch_size: Annotated[int, typer.Option(help="Largest model batch; concurrent requests are batched "
                                            "together.", rich_help_panel=LIMITS_PANEL)] = 64,
    max_wait_ms: Annotated[float, typer.Option(help="How long a request waits for others to batch with.",
                                               rich_help_panel=LIMITS_PANEL)] = 5.0,
    max_inputs: Annotated[int, typer.Option(help="Most input rows in one request (more: HTTP 413).",
                                            rich_help_panel=LIMITS_PANEL)] = 256,
    max_request_bytes: Annotated[int, typer.Option(help="Largest request body (more: HTTP 413).",
                                                   rich_help_panel=LIMITS_PANEL)] = 1 << 20,
):
    """Serve predictions over HTTP: POST /predict, GET /health, GET /info."""
    require("fastapi", "uvicorn", extra="serve")
    from bertkit.api.prediction import Predictor
    from bertkit.serving.app import check_address, serve as run_server

    for name, value in (("--max-inputs", max_inputs), ("--max-request-bytes", max_request_bytes)):
        if value < 1:
            raise BertkitError(f"{name} must be >= 1, got {value}", "see `bertkit serve --help`")
    if not 0 <= max_wait_ms <= MAX_WAIT_MS:  # also nan; inf would hold every request until a batch fills
        raise BertkitError(f"--max-wait-ms must be between 0 and {MAX_WAIT_MS}, got {max_wait_ms}",
                           "a few milliseconds is usual: see `bertkit serve --help`")
    check_address(host, port)
    predictor = Predictor(model_dir, backend=backend, batch_size=batch_size, quiet=True).load()
    run_server(predictor, host, port, announce=lambda line: typer.echo(line, err=True), max_inputs=max_inputs,
               max_request_bytes=max_request_bytes, max_batch_rows=batch_size, max_wait_ms=max_wait_ms)
