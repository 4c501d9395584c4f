"""`bertkit calibrate DIR --data FILE`: fit the temperature of a model already trained (what
`finetune --calibrate` does after training: bertkit/methods/calibration.py), and the conformal
quantile that `predict --coverage` and `select --strategy prediction-set` give each row's label set
from (bertkit/metrics/calibration.py).

calibrate writes bertkit.json once, all or nothing (``update_meta``): its ``calibration`` section,
the task's ``temperature`` option that decoding reads, and ``calibrate`` among its methods (for the
card); then the report and card are redrawn with the reliability diagram, as eval redraws them.
Weights, tokenizer and every other file stay as they are. Every check runs before the model loads.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.methods.calibration import (
    SECTION,
    check_calibrates,
    check_sets,
    fit_record,
    read_labelled,
    summary_line,
)
from bertkit.metrics.calibration import conformal_quantile
from bertkit.model_dir import load_meta, update_meta
from bertkit.model_dir.files import probe_writable
from bertkit.options import CalibrateOptions, CoverageOptions, InferenceOptions
from bertkit.tasks import task_from_state


def calibrate(model_dir: str, options: CalibrateOptions, run: InferenceOptions | None = None) -> dict:
    """Fit ``model_dir``'s temperature on the labelled rows of ``options.data`` and store it; returns
    the calibration section written (temperature, ECE/Brier/NLL before and after, rows) with the
    figures redrawn. A model calibrated before is refitted from its uncalibrated probabilities."""
    from bertkit.inference import load_for_inference

    run = (run or InferenceOptions()).validate("bertkit calibrate")
    options = options.validate()
    started = time.perf_counter()
    meta = load_meta(model_dir)
    adapter = task_from_state(meta["task"])
    check_calibrates(adapter, "bertkit calibrate")
    probe_writable(Path(model_dir), "bertkit calibrate")
    examples = read_labelled(adapter, options.data, "--data")
    engine, network, tokenizer = load_for_inference(model_dir, adapter, run.precision, run.threads, meta=meta)
    features = adapter.preprocess(examples, tokenizer, train=False)
    outputs = engine.infer(
        network, features, run.batch_size, adapter.output_names, adapter.per_token_outputs, tokenizer.pad_token_id
    )
    record = fit_record(adapter, examples, adapter.postprocess(examples, features, outputs), str(options.data))
    notice("calibration", summary_line(record), before=record["before"], after=record["after"])
    changes = {
        "task": adapter.with_options({"temperature": record["temperature"]}).as_stored().state(),
        SECTION: record,
    }
    methods = meta.get("methods")
    if methods and "calibrate" not in methods:  # older directories name none: the section says it (recorded_in)
        changes["methods"] = [*methods, "calibrate"]
    written = {"figures": [], "notices": []}
    if engine.is_main_process:
        from bertkit.reporting.build import build_report

        written = build_report(model_dir, update_meta(model_dir, changes, current=meta))
    return {
        **record,
        "model_dir": str(model_dir),
        "figures": written["figures"],
        "notices": written["notices"],
        "seconds": time.perf_counter() - started,
    }


def set_quantile(predictor, conformal: CoverageOptions, command: str) -> dict | None:
    """The conformal quantile of ``conformal.coverage`` for ``predictor``'s model (None: no
    --coverage), from the rows of ``conformal.calibration_data`` (run through the loaded model now)
    or the scores bertkit.json stores; ``predictor.adapter`` then gives each row its set. Returns
    what the sets were computed from."""
    conformal = conformal.validate(command)
    if conformal.coverage is None:
        return None
    adapter = predictor.adapter
    check_sets(adapter, "--coverage")
    if conformal.calibration_data is not None:
        examples = read_labelled(adapter, conformal.calibration_data, "--calibration-data")
        scores, source = _scores(predictor.load(), examples), str(conformal.calibration_data)
    else:
        stored = ((predictor.meta.get(SECTION) or {}).get("conformal") or {}).get("scores")
        if not stored:
            first = " (or calibrate the model first: bertkit calibrate DIR --data FILE)" if adapter.calibrates else ""
            raise BertkitError(
                "--coverage needs conformal scores, and this model has none stored",
                f"pass --calibration-data FILE (held-out labelled rows){first}",
            )
        scores, source = np.asarray(stored, dtype=np.float64), predictor.meta[SECTION].get("data", "calibration")
    quantile = conformal_quantile(scores, conformal.coverage)
    predictor.adapter = adapter.with_options({"set_quantile": quantile if np.isfinite(quantile) else 1.0})
    return {"coverage": conformal.coverage, "quantile": quantile, "calibration_rows": int(len(scores)), "from": source}


def _scores(predictor, examples: list[dict]) -> np.ndarray:
    adapter = predictor.adapter
    features, outputs = predictor.outputs_of(examples)
    predictions = adapter.postprocess(examples, features, outputs)
    probabilities = np.stack([np.asarray(p["probabilities"], dtype=np.float64) for p in predictions])
    return adapter.conformal_scores(probabilities, [ex["label"] for ex in examples])


def set_line(facts: dict, sets: dict) -> str:
    """The one line predict says of its sets: coverage asked, mean size, empty and full rates."""
    rows = max(sets.get("set_rows", 0), 1)
    return (
        f"--coverage {facts['coverage']:g} (split conformal, {facts['calibration_rows']:,} calibration rows of "
        f"{facts['from']}): mean set size {sets.get('set_labels', 0) / rows:.3f}, empty sets "
        f"{sets.get('empty_sets', 0) / rows:.1%}, full sets {sets.get('full_sets', 0) / rows:.1%}"
    )
