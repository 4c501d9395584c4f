"""`bertkit eval MODEL --data BEIR_DIR`'s own part: the retrieval run (bertkit.api.retrieval, which
refuses the flags that do not apply), its lines printed (cli/evaluate.py hands it over)."""

from __future__ import annotations

import typer

from bertkit.cli.common import echo_notices, echo_runtime, format_metrics, is_main_process


def evaluate_beir(model: str, options, run, retrieval) -> None:
    from bertkit.api.retrieval import evaluate_retrieval

    report = evaluate_retrieval(model, options, retrieval, run)
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
