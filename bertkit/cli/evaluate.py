"""`bertkit eval DIR`: score a saved model, print the metrics, write them as JSON, redraw figures."""

from __future__ import annotations

import typer

from bertkit.cli.app import app
from bertkit.cli.common import echo_notices, echo_runtime, format_metrics, is_main_process
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
from bertkit.options import DatasetOptions, EvalOptions, InferenceOptions, RunOptions
from bertkit.options.retrieval import RetrievalOptions

ABOUT = "Score a fine-tuned model; prints the metrics and writes them as JSON."


def _parameters(with_tasks: bool) -> list:
    """eval's own, the data directory (as finetune's), inference's, and every registered task's eval flags."""
    own = (
        from_dataclass(EvalOptions)
        + from_dataclass(RunOptions, only=("data_dir",))
        + from_dataclass(DatasetOptions)
        + from_dataclass(InferenceOptions)
        + from_dataclass(RetrievalOptions)
    )
    return own + (from_registry("eval", taken=(p.name for p in own)) if with_tasks else [])


def _eval(model_dir: str, **values):
    from bertkit import api

    task_options = task_values(values, set(values) - _OWN)
    run = chosen(values, InferenceOptions)  # validated by the api, as every options object it is handed
    options = chosen(values, EvalOptions)  # with --data-dir (RunOptions' flag, an EvalOptions field)
    options.dataset, options.task_options = chosen(values, DatasetOptions), task_options
    retrieval = chosen(values, RetrievalOptions)
    if retrieval_eval(model_dir, options, run, retrieval):
        return
    report = api.evaluate(model_dir, options, run)
    if "heads" in report:  # a multi-head directory: each head's metrics and their mean
        from bertkit.cli.multihead import show_heads_eval

        show_heads_eval(report)
        return
    _show(report)


def retrieval_eval(model_dir: str, options: EvalOptions, run: InferenceOptions, retrieval: RetrievalOptions) -> bool:
    """--data a BEIR directory: retrieval scored (True); else the retrieval flags are refused."""
    from bertkit.cli.retrieval import evaluate_beir
    from bertkit.data.beir import is_beir_dir
    from bertkit.errors import BertkitError

    if not is_beir_dir(options.data):
        given = retrieval.validate("bertkit eval").given_without_beir()
        if given:
            raise BertkitError(
                f"{', '.join(given)} apply only when --data is a BEIR directory (corpus.jsonl, queries.jsonl, qrels/)",
                f"drop {given[0]}, or pass --data with a BEIR directory",
            )
        return False
    evaluate_beir(model_dir, options, run, retrieval)
    return True


def _show(report: dict) -> None:
    if not is_main_process():
        return
    typer.echo(f"{report['data']}: {report['examples']} examples")
    echo_runtime(report["runtime"])
    echo_notices(report["preprocessing"], report)
    typer.echo(format_metrics(report["metrics"], report.get("baselines")))
    if report["metrics"].get("per_type"):
        typer.echo(per_type_table(report["metrics"]["per_type"]))
    repeated = report.get("repeats")
    if repeated:  # one run of several: how far apart the runs were at training
        what, section, runs, this = repeated
        spread = section["summary"].get(section["main_metric"], {})
        typer.echo(
            f"this model is {this} of {runs} ({this.split()[0]}s; the best on its evaluation data); at "
            f"training, {section['main_metric']} over the {this.split()[0]}s: {spread.get('mean', 0):.4f} ± "
            f"{spread.get('std', 0):.4f} (min {spread.get('min', 0):.4f}, max {spread.get('max', 0):.4f})"
        )
    for key, value in report.get("tuned", {}).items():
        if value is not None:
            typer.echo(f"tuned {key} = {value} (stored with the model)")
    typer.echo(f"written to {report['written_to']}")
    if report.get("predictions_written_to"):
        typer.echo(f"predictions (gold and predicted, one row per example): {report['predictions_written_to']}")


_OWN = {p.name for p in _parameters(with_tasks=False)}
_MODEL_DIR = (positional("model_dir", ModelDir),)
app.command("eval", help=ABOUT)(command(_eval, _parameters(with_tasks=False), _MODEL_DIR))
built_late("eval", lambda: single_command("eval", _eval, _parameters(with_tasks=True), _MODEL_DIR, ABOUT))


def per_type_table(per_type: dict) -> str:
    """Entity-level scores per type, as conlleval prints them (percentages)."""
    width = max(len("type"), *(len(name) for name in per_type))
    lines = [f"{'type':<{width}}  precision  recall      f1  support"]
    for name, row in sorted(per_type.items()):
        lines.append(
            f"{name:<{width}}  {100 * row['precision']:9.2f}  {100 * row['recall']:6.2f}  "
            f"{100 * row['f1']:6.2f}  {row['support']:7d}"
        )
    return "\n".join(lines)
