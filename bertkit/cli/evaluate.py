"""`bertkit eval DIR`: score a saved model, print the metrics, write them as JSON, redraw figures."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from bertkit.cli.app import app
from bertkit.cli.common import echo_notices, format_metrics, is_main_process, runtime_line
from bertkit.cli.options import (Precision, DATA_PANEL, OUTPUT_PANEL, BatchSize, DataDir, InferencePrecision, ModelDir,
                                  Threads)

SCORING_PANEL = "Scoring"


@app.command("eval")
def eval_command(
    model_dir: ModelDir,
    data: Annotated[Optional[str], typer.Option(
        help="Dataset name or file; default: what training evaluated on (the known dataset, or the "
             "--eval-data file).", rich_help_panel=DATA_PANEL, show_default=False)] = None,
    split: Annotated[Optional[str], typer.Option(
        help="Split of a known dataset: train, dev (default), test (mnli: dev_mismatched too).",
        rich_help_panel=DATA_PANEL, show_default=False)] = None,
    data_dir: DataDir = None,
    max_eval_samples: Annotated[Optional[int], typer.Option(help="Use only the first N examples.",
                                                            rich_help_panel=DATA_PANEL, show_default=False)] = None,
    output: Annotated[Optional[str], typer.Option(
        help="Metrics JSON file in an existing directory; default <model_dir>/eval-<name>-<split>.json (a file: "
             "eval-<file stem>.json).", rich_help_panel=OUTPUT_PANEL, show_default=False)] = None,
    strict: Annotated[bool, typer.Option("--strict", help="ner: strict IOB2 entity matching; default: conlleval "
                                         "rules.", rich_help_panel=SCORING_PANEL)] = False,
    store_threshold: Annotated[Optional[bool], typer.Option(
        "--store-threshold/--no-store-threshold", help="qa v2, multi-label: store the tuned "
        "threshold; default: only from a full evaluation of the model's dev data.", rich_help_panel=SCORING_PANEL, show_default=False)] = None,
    label_map: Annotated[Optional[str], typer.Option(
        help="cls/pair: read the data's labels as FILE=MODEL pairs (e.g. 0=neg,1=pos); labels that are the "
             "model's label ids are mapped without it.", rich_help_panel=SCORING_PANEL,
        show_default=False)] = None,
    tune_per_label: Annotated[bool, typer.Option(
        "--tune-per-label", help="multi-label: tune a threshold per label, not one for all.",
        rich_help_panel=SCORING_PANEL)] = False,
    metric: Annotated[Optional[list[str]], typer.Option(
        "--metric", metavar="NAME|PATH", help="Also score with an `evaluate` metric: a local script/directory (offline) or a Hub "
        "name; repeatable.", rich_help_panel=SCORING_PANEL, show_default=False)] = None,
    batch_size: BatchSize = 64,
    precision: InferencePrecision = Precision.auto,
    threads: Threads = None,
):
    """Score a fine-tuned model; prints the metrics and writes them as JSON."""
    from bertkit import api

    report = api.evaluate(model_dir, data, split=split, data_dir=data_dir, batch_size=batch_size,
                          max_eval_samples=max_eval_samples, output=output, precision=precision.value,
                          task_options={"strict": strict or None, "label_map": label_map,
                                        "tune_per_label": tune_per_label or None},
                          store_tuned=store_threshold,
                          extra_metrics=metric or (), threads=threads)
    if not is_main_process():
        return
    typer.echo(f"{report['data']}: {report['examples']} examples")
    typer.echo(runtime_line(report["runtime"]))
    echo_notices(report["preprocessing"], report)
    typer.echo(format_metrics(report["metrics"]))
    if report["metrics"].get("per_type"):
        typer.echo(per_type_table(report["metrics"]["per_type"]))
    repeated = report.get("repeats")
    if repeated:  # one run of several: how far apart the runs were at training
        what, section, runs, this = repeated
        spread = section["summary"].get(section["main_metric"], {})
        typer.echo(f"this model is {this} of {runs} ({this.split()[0]}s; the best on its evaluation data); at "
                   f"training, {section['main_metric']} over the {this.split()[0]}s: {spread.get('mean', 0):.4f} ± "
                   f"{spread.get('std', 0):.4f} (min {spread.get('min', 0):.4f}, max {spread.get('max', 0):.4f})")
    for key, value in report.get("tuned", {}).items():
        if value is not None:
            typer.echo(f"tuned {key} = {value} (stored with the model)")
    typer.echo(f"written to {report['written_to']}")
    if report.get("predictions_written_to"):
        typer.echo(f"predictions (gold and predicted, one row per example): {report['predictions_written_to']}")


def per_type_table(per_type: dict) -> str:
    """Entity-level scores per type, as conlleval prints them (percentages)."""
    width = max(len("type"), *(len(name) for name in per_type))
    lines = [f"{'type':<{width}}  precision  recall      f1  support"]
    for name, row in sorted(per_type.items()):
        lines.append(f"{name:<{width}}  {100 * row['precision']:9.2f}  {100 * row['recall']:6.2f}  "
                     f"{100 * row['f1']:6.2f}  {row['support']:7d}")
    return "\n".join(lines)
