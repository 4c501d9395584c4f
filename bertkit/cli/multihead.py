"""`bertkit finetune multi`: several task heads over one encoder (bertkit/api/multihead.py)."""

from __future__ import annotations

import sys

import typer

from bertkit.cli.common import echo_notices, echo_runtime, is_main_process, show_spread
from bertkit.cli.options import chosen, config_file_parameter, from_dataclass, single_command, training_values
from bertkit.errors import BertkitError
from bertkit.options import RepeatOptions, RunOptions, TrainConfig, parse_seeds
from bertkit.options.multihead import MultiOptions

HELP = (
    "Fine-tune several task heads over one encoder (one directory, every head): each --task "
    "NAME:KIND:DATA is a head with its own data, labels, loss weight and metrics; each batch is one head's."
)
# --folds splits one training set; a multi-head run has one per head (docs: multi-head.md). --lora
# and the rest: bertkit/api/multihead.py
FOLDS_REFUSED = "bertkit finetune multi does not compose with --folds: each head has its own training data"


def multi_command():
    parameters = (
        from_dataclass(MultiOptions)
        + from_dataclass(RunOptions, exclude=("data", "eval_data"))
        + from_dataclass(TrainConfig)
        + from_dataclass(RepeatOptions, only=("seeds", "folds", "keep_all"))
        + [config_file_parameter("multi")]
    )
    return single_command("multi", _run, parameters, help=HELP)


def _run(**values) -> None:
    from bertkit.api.multihead import finetune_multi

    heads = chosen(values, MultiOptions)
    _, run, repeat, rest = training_values(values, (), RepeatOptions)
    repeat, config = RepeatOptions(**repeat), TrainConfig(**rest)
    if repeat.folds is not None:
        raise BertkitError(FOLDS_REFUSED, "drop --folds; --seeds N gives the spread over seeds")
    seeds = parse_seeds(repeat.seeds, config.seed)
    if repeat.keep_all and seeds is None:
        raise BertkitError("--keep-all applies only with --seeds", "add --seeds N")
    from bertkit.engine.interrupts import TrainingInterrupted

    try:
        run = RunOptions(data="", **run)
        if seeds is None:
            result, repeated = finetune_multi(heads, run, config), None
        else:
            from bertkit.api.multihead_seeds import finetune_multi_seeds

            shown = _show_seed if is_main_process() else None
            repeated = finetune_multi_seeds(heads, run, config, repeat, on_run=shown)
            result = repeated.best
    except TrainingInterrupted as stop:
        if is_main_process():
            typer.echo(f"interrupted: {stop}; to continue, run the same command with --resume", err=True)
        sys.exit(130)
    if not is_main_process():
        return
    if repeated is not None:
        show_spread(repeated)
    if result.resumed_from:
        typer.echo(f"resumed from {result.resumed_from}")
    for entry in result.history:
        shown = ", ".join(f"{k} {v:.4f}" for k, v in entry.get("metrics", {}).items() if isinstance(v, float))
        typer.echo(f"epoch {entry['epoch']}: train loss {entry['train_loss']:.4f}" + (f", {shown}" if shown else ""))
    counts = ", ".join(f"{name} {n}" for name, n in result.train_examples.items())
    typer.echo(f"train: {counts} examples, {result.throughput['train_seconds']:.1f}s")
    echo_runtime(result.runtime)
    for name, metrics in result.heads.items():
        shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if isinstance(v, float))
        typer.echo(f"head {name}: {shown or 'not evaluated'}")
    if "mean" in result.metrics:
        typer.echo(f"mean of the heads' main metrics: {result.metrics['mean']:.4f}")
    echo_notices(result.report)
    typer.echo(f"saved to {result.output_dir}")


def _show_seed(seed: int, result) -> None:
    mean = result.metrics.get("mean")
    shown = f"mean of the heads' main metrics {mean:.4f}" if isinstance(mean, float) else "not evaluated"
    typer.echo(f"seed {seed}: {shown} ({result.throughput.get('train_seconds', 0):.1f}s)", err=True)


def show_heads_eval(report: dict) -> None:
    for name, head in report["heads"].items():
        shown = ", ".join(f"{k} {v:.4f}" for k, v in head["metrics"].items() if isinstance(v, float))
        typer.echo(f"head {name} ({head['examples']} examples of {head['data']}): {shown}")
    if report.get("mean") is not None:
        typer.echo(f"mean of the heads' main metrics: {report['mean']:.4f}")
    typer.echo(f"written to {report['written_to']}")


def predict_heads(model_dir: str, io, run, stream, written: bool) -> None:
    from bertkit import api

    summary = api.predict_heads_stream(model_dir, io, run, stream)
    if not is_main_process():
        return
    echo_runtime(summary.runtime, err=True)
    for text in summary.notices:
        typer.echo(text, err=True)
    if written:
        typer.echo(
            f"{summary.rows:,} predictions ({', '.join(summary.heads)}) written to {io.output} "
            f"({summary.rows_per_second:,.0f} rows/s)",
            err=True,
        )
