"""`bertkit eval MODEL --data BEIR_DIR`'s own part: the flags that do not apply refused, the
retrieval run, its lines printed (cli/evaluate.py hands it over)."""

from __future__ import annotations

import dataclasses

import typer

from bertkit.cli.common import echo_notices, echo_runtime, format_metrics, is_main_process
from bertkit.errors import BertkitError


def evaluate_beir(model: str, options, run, retrieval, task_options: dict, dataset) -> None:
    from bertkit.api.retrieval import evaluate_retrieval

    _refuse_other_flags(options, task_options, dataset)
    report = evaluate_retrieval(
        model,
        options.data,
        split=options.split,
        output=options.output,
        rerank=retrieval.rerank,
        rerank_top=retrieval.rerank_top,
        similarity=retrieval.similarity,
        max_length=retrieval.max_length,
        corpus_chunk=retrieval.corpus_chunk,
        batch_size=run.batch_size,
        precision=run.precision,
        threads=run.threads,
    )
    if not is_main_process():
        return
    typer.echo(f"{report['data']} ({report['split']}): {report['queries']} queries, {report['corpus']} passages")
    echo_runtime(report["runtime"])
    echo_notices(report)
    if "retriever_metrics" in report:
        typer.echo(f"retriever: {format_metrics(report['retriever_metrics'])}")
        typer.echo(f"reranked (top {report['rerank']['top']}): {format_metrics(report['metrics'])}")
    else:
        typer.echo(format_metrics(report["metrics"]))
    typer.echo(f"run file: {report['run_written_to']}")
    typer.echo(f"written to {report['written_to']}")


def _refuse_other_flags(options, task_options: dict, dataset) -> None:
    """A task's and a Hub dataset's flags mean nothing to a BEIR directory: said, not ignored."""
    given = [f"--{name.replace('_', '-')}" for name in task_options]
    given += [f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(dataset) if getattr(dataset, f.name)]
    others = (
        ("--max-eval-samples", options.max_eval_samples),
        ("--metric", options.metric),
        ("--store-threshold", options.store_threshold),
    )
    given += [flag for flag, value in others if value is not None and value != []]
    if given:
        raise BertkitError(f"{', '.join(given)}: not for retrieval on a BEIR directory", f"drop {given[0]}")
