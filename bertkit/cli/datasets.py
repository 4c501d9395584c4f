"""`bertkit datasets`: the known dataset names, their task, and where each would load from."""

from __future__ import annotations

import typer

from bertkit.cli.app import app
from bertkit.cli.options import DataDir


@app.command()
def datasets(data_dir: DataDir = None):
    """List the known dataset names, their task, and where each would load from."""
    from bertkit.data.registry import describe_all

    rows = describe_all(data_dir)
    width = max(len(r["name"]) for r in rows)
    for row in rows:
        typer.echo(f"{row['name']:<{width}}  {row['task']:<4}  {row['source']}")
