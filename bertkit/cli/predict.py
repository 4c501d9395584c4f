"""`bertkit predict DIR --input FILE`: one JSON line per input row, in input order."""

from __future__ import annotations

import typer

from bertkit.cli.app import app
from bertkit.cli.common import echo_notices, echo_runtime, is_main_process
from bertkit.cli.on_ray import check_ray_flags, run_on_ray
from bertkit.cli.options import (
    ModelDir,
    built_late,
    chosen,
    command,
    from_dataclass,
    from_registry,
    positional,
    single_command,
    task_values,
)
from bertkit.errors import BertkitError
from bertkit.options import CoverageOptions, InferenceOptions, PredictOptions, StreamOptions

ABOUT = "Predict for every input row; one JSON line per row, in input order, written chunk by chunk."
FAMILIES = (PredictOptions, CoverageOptions, InferenceOptions, StreamOptions)


def _parameters(with_tasks: bool) -> list:
    """predict's own, inference's, streaming's, and every registered task's predict flags (--top-k, --n-best)."""
    own = [p for family in FAMILIES for p in from_dataclass(family)]
    return own + (from_registry("predict", taken=(p.name for p in own)) if with_tasks else [])


def _predict(model_dir: str, **values):
    from bertkit import api
    from bertkit.model_dir import check_inputs_kept, check_output_file

    task_options = task_values(values, set(values) - _OWN)
    io = chosen(values, PredictOptions)
    io.task_options, io.conformal = task_options, chosen(values, CoverageOptions).validate("bertkit predict")
    # validated here, not only by the api: the Ray path below reads them first
    run = chosen(values, InferenceOptions).validate("bertkit predict")
    stream = chosen(values, StreamOptions).validate("bertkit predict")
    check_ray_flags(stream, tool=task_options.get("format"))
    multi = _multi_head(model_dir, io.head)
    if multi and stream.ray:  # streamed in one process (api/multihead_stream.py)
        raise BertkitError("predict on a multi-head model does not compose with --ray yet", "drop --ray")
    if multi and io.conformal.coverage is not None:  # no head's conformal scores are stored
        raise BertkitError("predict on a multi-head model does not compose with --coverage yet", "drop --coverage")
    if stream.ray and io.conformal.coverage is not None:
        raise BertkitError("--coverage does not compose with --ray", "drop --ray (or --coverage)")
    if stream.ray:
        run_on_ray("predict", model_dir, stream, io, run)
        return
    output = io.output
    target = None if output == "-" else check_output_file(output)  # before the work, not after it
    if target is not None:
        check_inputs_kept(target, io.input)  # --output equal to --input would replace the rows with predictions
        io.output = str(target)
    if multi:  # every head's answer per row (api/multihead_inference.py)
        from bertkit.cli.multihead import predict_heads

        stream.quiet, stream.long_lived = not is_main_process(), True
        predict_heads(model_dir, io, run, stream, target is not None)
        return
    stream.quiet, stream.long_lived = not is_main_process(), True
    summary = api.predict_stream(model_dir, io, run, stream)
    _show(summary, output, target is not None)


def _multi_head(model_dir: str, head: str | None) -> bool:
    """Whether the directory is a multi-head model; its kind peeked, so that a one-task directory's
    bertkit.json is loaded once, by the Predictor (--head is checked against the loaded one)."""
    from bertkit.api.multihead_inference import check_single_head, is_multi_head
    from bertkit.model_dir import load_meta
    from bertkit.model_dir.meta import directory_kind
    from bertkit.tasks.multihead import DIRECTORY_KIND

    if directory_kind(model_dir) != DIRECTORY_KIND and head is None:
        return False
    meta = load_meta(model_dir)
    check_single_head(meta, head, "")
    return is_multi_head(meta)


def _show(summary, output: str, written: bool) -> None:
    if not is_main_process():
        return
    if summary.runtime:
        echo_runtime(summary.runtime, err=True)
    echo_notices(summary.preprocessing, {"notices": summary.notices}, err=True)  # stdout stays pure JSONL
    if written:
        typer.echo(
            f"{summary.rows:,} predictions written to {output} ({summary.rows_per_second:,.0f} rows/s)", err=True
        )


_OWN = {p.name for p in _parameters(with_tasks=False)}
_MODEL_DIR = (positional("model_dir", ModelDir),)
app.command("predict", help=ABOUT)(command(_predict, _parameters(with_tasks=False), _MODEL_DIR))
built_late("predict", lambda: single_command("predict", _predict, _parameters(with_tasks=True), _MODEL_DIR, ABOUT))
