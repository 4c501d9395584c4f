"""`bertkit select MODEL --input POOL --n N --strategy margin --output FILE`: the pool rows the model
is least sure of, as annotation-tool tasks with its predictions (bertkit.api.selection)."""

from __future__ import annotations

import typer

from bertkit.cli.app import app
from bertkit.cli.common import echo_notices, is_main_process
from bertkit.cli.options import ModelDir, chosen, command, from_dataclass, positional
from bertkit.options import CoverageOptions, InferenceOptions, SelectOptions

ABOUT = "Choose what to label next: the N pool rows the model is least sure of, as Label Studio or doccano tasks."


def select(model_dir: str, **values):
    from bertkit.api.selection import select as select_rows

    run = chosen(values, InferenceOptions)  # both validated by the api
    options = chosen(values, SelectOptions)
    options.conformal = chosen(values, CoverageOptions)
    summary = select_rows(model_dir, options, run)
    if is_main_process():
        echo_notices(summary, err=True)
        typer.echo(
            f"{summary['selected']:,} of {summary['rows']:,} rows selected ({summary['strategy']}), "
            f"written to {summary['output']} as {options.format} tasks"
        )


app.command("select", help=ABOUT)(
    command(
        select,
        from_dataclass(SelectOptions) + from_dataclass(CoverageOptions) + from_dataclass(InferenceOptions),
        (positional("model_dir", ModelDir),),
    )
)
