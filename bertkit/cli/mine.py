"""`bertkit mine MODEL`: hard negatives for (anchor, positive) pairs from the model's own ranking."""

from __future__ import annotations

from typing import Annotated

import typer

from bertkit.cli.app import app
from bertkit.cli.common import echo_notices, echo_runtime, is_main_process
from bertkit.cli.options import chosen, command, from_dataclass, positional
from bertkit.options.retrieval import MineOptions

ABOUT = (
    "Hard negatives: each pair's top passages from MODEL, minus copies of the positive, the first "
    "--skip-top and those within --margin of the positive; writes (anchor, positive, negative) triplets."
)
Model = Annotated[
    str,
    typer.Argument(help="Any model `bertkit embed` takes: a directory, a Hub name, or 'minilm'.", show_default=False),
]


def _mine(model: str, **values):
    from bertkit.api.mining import mine

    result = mine(model, chosen(values, MineOptions))  # validated by the api
    if not is_main_process():
        return
    echo_runtime(result.runtime or {})
    echo_notices({"notices": result.notices})
    typer.echo(
        f"{result.triplets} triplets from {result.pairs} pairs ({result.short_pairs} with fewer than asked); "
        f"written to {result.written_to}"
    )


_MODEL = (positional("model", Model),)
app.command("mine", help=ABOUT)(command(_mine, from_dataclass(MineOptions), _MODEL))
