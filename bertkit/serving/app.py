"""The FastAPI application: POST /predict, GET /health, GET /info.

``/predict`` takes one input row (a JSON object as in a JSONL file for ``bertkit predict``, or a
string: one line of a text file), a list of them, or ``{"inputs": [...]}``, and answers
``{"predictions": [rows]}`` with the rows ``bertkit predict`` prints. Every error, the
framework's own (404, 405) included, is JSON ``{"error": ..., "hint": ...}``: 400 bad JSON,
413 too large, 422 rows the model cannot read (that request alone: rows are validated before
they join a batch), 500 a bug (logged with its traceback, the body stays one line).
Each request is logged on one line: method, path, status, rows, latency.
"""

from __future__ import annotations

import json
import logging
import time
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from bertkit.data.readers import json_kind, parse_json
from bertkit.errors import BertkitError
from bertkit.options import INFERENCE_BATCH
from bertkit.serving.batcher import MicroBatcher

log = logging.getLogger("bertkit.serve")

MAX_REQUEST_BYTES = 1 << 20
MAX_INPUTS = 256


def create_app(
    predictor,
    max_request_bytes: int = MAX_REQUEST_BYTES,
    max_inputs: int = MAX_INPUTS,
    max_batch_rows: int = INFERENCE_BATCH,
    max_wait_ms: float = 5.0,
) -> FastAPI:
    """The app: a micro-batcher over ``predictor``, JSON errors, an access log, and the three routes."""
    limits = {
        "max_request_bytes": max_request_bytes,
        "max_inputs": max_inputs,
        "max_batch_rows": max_batch_rows,
        "max_wait_ms": max_wait_ms,
    }
    batcher = MicroBatcher(predictor.predict, max_batch_rows, max_wait_ms / 1000)

    @asynccontextmanager
    async def lifespan(_app):
        batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(title="bertkit", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    add_error_handlers(app)
    add_access_log(app)
    add_routes(app, predictor, batcher, limits)
    return app


def add_error_handlers(app: FastAPI) -> None:
    """Every error as JSON ``{"error", "hint"}``: the framework's (404, 405) and a bug's (500)."""

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        hint = {
            404: "the routes are POST /predict, POST /embed (embedding models), GET /health, GET /info",
            405: f"{request.url.path} does not take {request.method}",
        }.get(exc.status_code)
        return _error(exc.status_code, str(exc.detail), hint)

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception):  # one raised outside the access-log middleware
        return internal_error(request, exc)


def add_access_log(app: FastAPI) -> None:
    """One line per request: client, method, path, status, rows, latency."""

    @app.middleware("http")
    async def access_log(request: Request, call_next):
        started = time.perf_counter()
        request.state.rows, request.state.note = 0, ""
        try:
            response = await call_next(request)
        except Exception as exc:  # noqa: BLE001 (answered here: past this point starlette would
            # answer it too, then re-raise to uvicorn, which logs the traceback a second time)
            response = internal_error(request, exc)
        client = f"{request.client.host}:{request.client.port}" if request.client else "-"
        log.info(
            '%s "%s %s" %d rows=%d %.1f ms%s',
            client,
            request.method,
            request.url.path,
            response.status_code,
            request.state.rows,
            1000 * (time.perf_counter() - started),
            request.state.note,
        )
        return response


def add_routes(app: FastAPI, predictor, batcher: MicroBatcher, limits: dict) -> None:
    @app.get("/health")
    async def health():
        return {"status": "ok", **batcher.stats}

    @app.get("/info")
    async def info():
        return {**predictor.info(), "limits": limits}

    async def rows_of(request: Request, head: str | None = None) -> list | JSONResponse:
        body = await read_body(request, limits["max_request_bytes"])
        if isinstance(body, JSONResponse):
            return body
        records = parse_records(body, limits["max_inputs"])
        if isinstance(records, JSONResponse):
            return records
        try:  # rows are validated before they join a batch: a bad one fails its own request only
            examples = predictor.examples(records) if head is None else predictor.examples(records, head=head)
            request.state.rows = len(examples)
            return await batcher.submit(examples)
        except BertkitError as exc:
            return _error(422, exc.message, exc.hint)

    @app.post("/predict")
    async def predict(request: Request):
        rows = await rows_of(request)
        return rows if isinstance(rows, JSONResponse) else {"predictions": rows}

    if getattr(predictor, "names", None):  # a multi-head model (api/multihead_serving.py): one head alone

        @app.post("/predict/{head}")
        async def predict_head(request: Request, head: str):
            rows = await rows_of(request, head)
            return rows if isinstance(rows, JSONResponse) else {"predictions": rows}

    @app.post("/embed")
    async def embed(request: Request):
        """An embedding model's vectors, one per text: ``{"embeddings": [[...], ...]}``."""
        if "embedding" not in predictor.adapter.prediction_fields:
            return _error(
                400, f"/embed serves embedding models; this is a {predictor.adapter.name} model", "use POST /predict"
            )
        rows = await rows_of(request)
        if isinstance(rows, JSONResponse):
            return rows
        if any("embedding" not in row for row in rows):
            return _error(422, "/embed takes single texts (a pair gives its cosine)", "send pairs to POST /predict")
        return {"embeddings": [row["embedding"] for row in rows]}


async def read_body(request: Request, max_bytes: int) -> bytes | JSONResponse:
    """The request's body, or the answer that refuses it (too large, or the client went away)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        return _error(
            413, f"request body of {declared} bytes is over the limit of {max_bytes}", "send fewer inputs per request"
        )
    body = bytearray()
    try:
        async for chunk in request.stream():  # also bounds chunked bodies without a Content-Length
            body += chunk
            if len(body) > max_bytes:
                return _error(
                    413, f"request body is over the limit of {max_bytes} bytes", "send fewer inputs per request"
                )
    except ClientDisconnect:  # its access-log line says so: one line, no traceback
        request.state.note = f" (the client went away after {len(body)} bytes of its body)"
        return _error(400, "the client disconnected before the body was complete", None)
    return bytes(body)


def parse_records(body: bytes, max_inputs: int) -> list | JSONResponse:
    """The input rows of a body (one row, a list, or ``{"inputs": [...]}``), or the answer refusing it."""
    try:
        payload = parse_json(body.decode("utf-8-sig"))  # a BOM tolerated, as in files
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return _error(
            400,
            f"the body is not valid UTF-8 JSON ({getattr(exc, 'msg', None) or exc.reason})",
            'send e.g. {"inputs": [{"text": "..."}]}',
        )
    records = payload.get("inputs") if isinstance(payload, dict) and "inputs" in payload else payload
    if isinstance(records, (dict, str)):
        records = [records]
    if not isinstance(records, list):
        return _error(
            422,
            f"expected an object, a string or a list of them, got {json_kind(records)}",
            'send e.g. {"inputs": [{"text": "..."}]}',
        )
    if len(records) > max_inputs:
        return _error(
            413, f"{len(records)} inputs in one request, the limit is {max_inputs}", "split them over several requests"
        )
    return records


def internal_error(request: Request, exc: Exception) -> JSONResponse:
    """A bug: its traceback in the log, once, and a one-line 500 body for the client."""
    log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    return _error(500, f"internal error ({type(exc).__name__})", "the server log has the traceback")


def _error(status: int, message: str, hint: str | None) -> JSONResponse:
    return JSONResponse({"error": _utf8(message), "hint": hint and _utf8(hint)}, status_code=status)


def _utf8(text: str) -> str:
    """A message may quote the client's own JSON (a field name, say), where a lone surrogate is
    valid: written as \\ud800, so that the body can be encoded and the answer stays a 4xx."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def check_address(host: str, port: int) -> None:
    """Fail in one line before the model is loaded when the address cannot be bound."""
    import socket

    if not 1 <= port <= 65535:  # 0 would listen on a random port, announced as 0
        raise BertkitError(f"--port {port} is not a port number", "use 1..65535")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(infos[0][4])
    except OSError as exc:
        import errno

        # socket.gaierror (an unknown name) and EADDRNOTAVAIL (not this machine's address) are the host's fault
        host_wrong = isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL
        raise BertkitError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc})",
            "give --host an address of this machine (127.0.0.1, 0.0.0.0 for every interface)"
            if host_wrong
            else "choose another --port, or stop what uses it",
        ) from exc


def serve(predictor, host: str = "127.0.0.1", port: int = 8000, announce=print, **limits) -> None:
    import uvicorn

    app = create_app(predictor, **limits)
    if not log.handlers:  # one line per request on the console, as uvicorn's own access log
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    heads = ", POST /predict/<head>" if getattr(predictor, "names", None) else ""  # a multi-head model
    announce(
        f"serving {predictor.model_dir} ({predictor.task}, {predictor.backend}) on http://{host}:{port} "
        f"(POST /predict{heads}, GET /health, GET /info)"
    )
    server.run()
