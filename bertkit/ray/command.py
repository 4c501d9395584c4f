"""``bertkit predict|embed ... --ray``: read, predict or embed on a pool of actors, write Parquet."""

from __future__ import annotations

import functools
import logging
import os
import time
from pathlib import Path

from bertkit.data import formats
from bertkit.errors import BertkitError
from bertkit.model_dir.writer_lock import writes_outputs
from bertkit.options import PredictOptions
from bertkit.ray.actors import predictor
from bertkit.ray.datasets import check_pool, check_rows_apart, embed_dataset, predict_dataset, require_ray
from bertkit.ray.inputs import input_paths, read_input
from bertkit.ray.outputs import (
    check_output,
    check_target,
    discard_partial,
    is_url,
    output_filesystem,
    write_ordered,
)

COMMANDS = ("predict", "embed")


@writes_outputs  # a local --output: one run at a time (model_dir/writer_lock.py)
def run(
    command: str,
    model_dir: str,
    input: str,
    output: str,
    *,
    address: str | None = None,
    actors: int = 2,
    batch_size: int = 256,
    overwrite: bool = False,
    options=None,
    inference=None,
) -> dict:
    """``bertkit predict|embed MODEL --input IN --output OUT --ray``: read ``input`` with Ray's
    readers (a file, a directory, a glob, local or a URL such as s3://...; Parquet, JSONL, CSV,
    TSV or text lines), predict or embed on ``actors`` actors, write a directory of Parquet files
    to ``output`` (refused if it exists and is not empty, unless ``overwrite``). Connects to the
    cluster at ``address`` (None: RAY_ADDRESS, else a new local cluster, shut down at the end);
    an already initialised Ray is used as it is. ``options`` (PredictOptions, EmbeddingOptions) and
    ``inference`` (predict's InferenceOptions) go to ``predict_dataset`` / ``embed_dataset``.
    Returns {rows, seconds, rows_per_second, actors, output, ...}; ``seconds``
    counts from reading to the last file written (actor start-up included, cluster start-up not)."""
    if command not in COMMANDS:
        raise BertkitError(f"--ray runs {' or '.join(COMMANDS)}, not {command!r}", "use bertkit predict or embed")
    ray = require_ray()
    check_pool(actors, batch_size)
    work = functools.partial(predict_dataset, run=inference) if command == "predict" else embed_dataset
    _check_options(command, model_dir, options, inference)  # all before a cluster starts
    paths, suffix = input_paths(input)
    target = check_output(output, overwrite)
    _check_apart(target, paths, model_dir)
    started_ray = not ray.is_initialized()
    _quiet_ray()
    if started_ray:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        began = time.perf_counter()
        ds = read_input(ray, paths, suffix)
        lines = formats.lookup(suffix) is formats.TEXT_LINES  # a text file's lines: a TAB separates a pair
        out = work(ds, model_dir, actors=actors, batch_size=batch_size, options=options, _lines=lines)
        filesystem, path = output_filesystem(target)
        check_target(filesystem, path, output, overwrite)  # outside the try: a refusal deletes nothing
        try:
            rows = write_ordered(out, target)
        except Exception as exc:
            discard_partial(target)
            error = _user_error(exc)  # a bad row: the BertkitError an actor raised
            if error is None:
                raise
            raise error from None
        seconds = time.perf_counter() - began
    finally:
        if started_ray:
            ray.shutdown()
    return {
        "command": command,
        "rows": rows,
        "seconds": round(seconds, 3),
        "rows_per_second": round(float(rows / seconds), 1) if seconds > 0 else None,
        "actors": actors,
        "batch_size": batch_size,
        "input": input,
        "output": target,
        "address": address or ("local" if started_ray else "existing"),
    }


def _quiet_ray() -> None:
    """Ray Data logs each execution's plan and, when stderr is not a terminal, its progress every
    few seconds as INFO lines: pages of lines around bertkit's one. Warnings and errors still
    show; BERTKIT_DEBUG=1 shows everything."""
    if os.environ.get("BERTKIT_DEBUG"):
        return
    os.environ.setdefault("RAY_DATA_LOG_LEVEL", "WARNING")  # read when ray.data configures its logging
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # in case ray.data was imported already


def _check_apart(target: str, paths, model_dir: str) -> None:
    """The output directory (replaced with ``overwrite``) holds no input file and no model file,
    checked before a cluster starts; a URL output is the cluster's storage, not checked here."""
    if is_url(target):
        return
    from bertkit.api.streaming import check_model_kept
    from bertkit.model_dir import check_inputs_kept

    local = [path for path in ([paths] if isinstance(paths, str) else paths) if not is_url(path)]
    check_inputs_kept(Path(target), *local)
    check_model_kept(Path(target), model_dir)


def _check_options(command: str, model_dir: str, options, inference) -> None:
    if command == "predict":
        check_rows_apart(predictor(model_dir, options or PredictOptions(), inference))
    else:
        from bertkit.api.embedder import Embedder

        Embedder(model_dir, options)


def _user_error(exc: BaseException) -> BertkitError | None:
    """The BertkitError an actor raised, as a plain one (Ray re-raises it as a RayTaskError that
    is also a BertkitError, its ``cause`` the original)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        cause = getattr(exc, "cause", None)
        if isinstance(exc, BertkitError):
            source = cause if isinstance(cause, BertkitError) else exc
            return BertkitError(source.message, source.hint)
        exc = cause if isinstance(cause, BaseException) else (exc.__cause__ or exc.__context__)
    return None
