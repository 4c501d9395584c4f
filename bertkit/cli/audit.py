"""`bertkit audit --data FILE --output DIR (--folds K --task cls --model minilm | --from RUN_DIR |
--model DIR)`: the rows whose given label is probably wrong, ranked (bertkit.api.auditing)."""

from __future__ import annotations

import typer

from bertkit.cli.app import app
from bertkit.cli.common import echo_notices, is_main_process, require
from bertkit.cli.options import chosen, command, from_dataclass
from bertkit.options import TrainConfig
from bertkit.options.audit import FOLD_SETTINGS, AuditOptions

ABOUT = "Find the training rows whose label is probably wrong (cleanlab on out-of-fold probabilities)."
SHOWN = 5  # the most suspicious rows printed
HELPS = {"max_train_samples": "Audit only the first N rows of --data (with --folds: the rows the folds train on)."}


def audit(**values):
    require("cleanlab", extra="quality")
    from bertkit.api.auditing import audit as run_audit

    options = chosen(values, AuditOptions)
    config = chosen(values, TrainConfig)
    result = run_audit(options, config)
    if not is_main_process():
        return
    echo_notices(result.summary, err=True)
    summary = result.summary
    for warning in summary["warnings"]:
        typer.echo(f"warning: {warning}", err=True)
    typer.echo(
        f"{result.flagged:,} of {result.rows:,} rows flagged as probably mislabelled; estimated noise rate "
        f"{result.estimated_noise_rate:.1%} (of the {summary['noise_rate_of']})"
    )
    found = [
        f"{count:,} {what}"
        for count, what in (
            (summary["near_duplicates_with_other_labels"], "near-duplicate pair(s) with different labels"),
            (summary["outliers"], "outlier(s)"),
        )
        if count is not None
    ]
    if found:
        typer.echo(", ".join(found))
    check = summary["model_check"]
    typer.echo(
        f"the model's {_numbers(check['metrics'])} ({check['of']}); the {check['baseline']['name']} baseline "
        f"({check['baseline']['rule']}): {_numbers(check['baseline']['metrics'])}"
    )
    for row in result.top[:SHOWN]:
        if row["issue"]:
            typer.echo(
                f"  row {row['row']}: given {row['given']}, suggested {row['suggested']} (quality {row['quality']:.3f})"
            )
    files = ", ".join(("ranked.jsonl", "ranked.csv", "summary.json", *summary["relabel"]))
    typer.echo(f"written to {result.output} ({files})")


def _numbers(metrics: dict) -> str:
    return ", ".join(f"{name} {value:.4f}" for name, value in metrics.items())


app.command("audit", help=ABOUT)(
    command(audit, from_dataclass(AuditOptions) + from_dataclass(TrainConfig, only=FOLD_SETTINGS, helps=HELPS))
)
