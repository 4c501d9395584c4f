"""`bertkit datasets`: the known dataset names, their task, and where each would load from; and that
any other `datasets` dataset works too."""

from __future__ import annotations

import typer

from bertkit.cli.app import app
from bertkit.cli.options import command, from_dataclass
from bertkit.options import RunOptions


def datasets(data_dir: str | None):
    """List the known dataset names, their task, and where each would load from."""
    from pathlib import Path

    from bertkit.data.registry import describe_all
    from bertkit.errors import BertkitError

    # an empty value (an unset shell variable) is no directory, not the current one nor the default
    if data_dir is not None and (not data_dir.strip() or not Path(data_dir).expanduser().is_dir()):
        raise BertkitError(f"--data-dir {data_dir} is not a directory", "point at the folder holding sst2/, squad/ ...")

    rows = describe_all(data_dir)
    width = max(len(r["name"]) for r in rows)
    for row in rows:
        task = row["task"] + (f" ({row['problem_type']})" if row["problem_type"] else "")
        typer.echo(f"{row['name']:<{width}}  {task:<17}  {row['source']}")
    typer.echo(ANY_DATASET)


ANY_DATASET = """
Any Hugging Face dataset works too: --data imdb or --data owner/name (--data-config NAME,
--train-split, --eval-split, --test-split; label names from its ClassLabel features), or a local
directory in the Hub's layout or written by save_to_disk. Offline: the datasets cache."""


app.command("datasets")(command(datasets, from_dataclass(RunOptions, only=("data_dir",))))
