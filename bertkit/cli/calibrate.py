"""`bertkit calibrate DIR --data FILE`: fit a trained model's temperature on held-out labelled rows
(bertkit.api.calibration); ECE and Brier before and after, stored in its bertkit.json."""

from __future__ import annotations

import typer

from bertkit.cli.app import app
from bertkit.cli.common import echo_notices, is_main_process
from bertkit.cli.options import ModelDir, chosen, command, from_dataclass, positional
from bertkit.options import CalibrateOptions, InferenceOptions

ABOUT = "Calibrate a trained classifier's probabilities: one temperature fitted on held-out labelled rows."


def calibrate(model_dir: str, **values):
    from bertkit.api.calibration import calibrate as fit

    run = chosen(values, InferenceOptions)  # both validated by the api
    options = chosen(values, CalibrateOptions)
    record = fit(model_dir, options, run)
    if is_main_process():
        echo_notices(record, err=True)
        before, after = record["before"], record["after"]
        typer.echo(
            f"temperature {record['temperature']:.4f} on {record['examples']:,} rows: ECE {before['ece']:.4f} -> "
            f"{after['ece']:.4f}, Brier {before['brier']:.4f} -> {after['brier']:.4f}, NLL {before['nll']:.4f} -> "
            f"{after['nll']:.4f}; stored in {model_dir}/bertkit.json"
        )


app.command("calibrate", help=ABOUT)(
    command(
        calibrate,
        from_dataclass(CalibrateOptions) + from_dataclass(InferenceOptions),
        (positional("model_dir", ModelDir),),
    )
)
