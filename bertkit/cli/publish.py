"""`bertkit report DIR` (figures, report.html, model card) and `bertkit push DIR --repo NAME`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from bertkit.cli.app import app
from bertkit.cli.common import echo_notices
from bertkit.cli.options import ModelDir


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


@app.command()
def push(
    model_dir: ModelDir,
    repo: Annotated[
        str, typer.Option(help="Hub repository id: NAME or OWNER/NAME (created if missing).", show_default=False)
    ],
    private: Annotated[bool, typer.Option("--private", help="Create the repository as private.")] = False,
    token: Annotated[
        Optional[str], typer.Option(help="Hub token; default: the one `hf auth login` saved.", show_default=False)
    ] = None,
):
    """Upload the model directory (weights, tokenizer, model card, figures) to the Hugging Face Hub."""
    from bertkit.api.publishing import push as run_push

    result = run_push(model_dir, repo, private=private, token=token)
    typer.echo(f"pushed to {result['url']}")
