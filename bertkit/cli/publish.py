"""`bertkit report DIR` (figures, report.html, model card) and `bertkit push DIR --repo NAME`."""

from __future__ import annotations

import typer

from bertkit.cli.app import app
from bertkit.cli.common import echo_notices
from bertkit.cli.options import ModelDir, chosen, command, from_dataclass, positional
from bertkit.options import PushOptions


@app.command()
def report(model_dir: ModelDir):
    """(Re)draw the figures and write report.html and the model card README.md."""
    from bertkit import api

    drawn = api.report(model_dir)
    for figure in drawn["figures"]:
        typer.echo(f"figure: {figure}")
    typer.echo(f"report: {drawn['report']}")
    typer.echo(f"model card: {drawn['card']}")
    echo_notices(drawn)


def push(model_dir: str, **values):
    """Upload the model directory (weights, tokenizer, model card, figures) to the Hugging Face Hub."""
    from bertkit.api.publishing import push as run_push

    options = chosen(values, PushOptions).validate()
    result = run_push(model_dir, options.repo, private=options.private, token=options.token)
    typer.echo(f"pushed to {result['url']}")


app.command("push")(command(push, from_dataclass(PushOptions), (positional("model_dir", ModelDir),)))
