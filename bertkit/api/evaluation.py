"""`bertkit eval`: score a saved model on a dataset split or file."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from bertkit.api.multihead_inference import check_single_head, evaluate_multi, is_multi_head
from bertkit.api.reports import check_figures_dir
from bertkit.data import registry
from bertkit.data.hub_datasets import DatasetChoice
from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.inference import load_for_inference, score
from bertkit.model_dir import (
    check_inputs_kept,
    check_output_file,
    load_meta,
    recorded_eval_data,
    update_meta,
    write_json,
)
from bertkit.model_dir.files import probe_writable
from bertkit.model_dir.ownership import check_results_kept, results_record
from bertkit.options import EvalOptions, InferenceOptions
from bertkit.reporting.card_results import repeats
from bertkit.tasks import task_from_state
from bertkit.tasks.base import EVAL
from bertkit.tasks.learned import stats_of
from bertkit.training.results import (
    judged,
    prediction_rows,
    predictions_file,
    said_baseline_warnings,
    said_warnings,
    task_baselines,
    update_results,
    verdict_on,
    write_rows,
)


def evaluate(model_dir: str, options: EvalOptions | None = None, run: InferenceOptions | None = None) -> dict:
    """Score a saved model on a dataset split or file; writes the metrics as JSON and returns them.
    ``options.data`` defaults to what training evaluated on: the known dataset, or the recorded file.

    Decoding settings tuned on the data (the SQuAD v2 null threshold) are stored with the model
    only from a full evaluation on the model's own dev data, unless ``options.store_threshold``
    says otherwise; ``report["notices"]`` says when something tuned was not stored, or stored from
    other data. ``options.metric``: `evaluate` metric modules (names or local paths) scored next to
    the built-in ones; ``options.dataset``: a Hub dataset's config and split names (``split`` then
    picks train, dev or test); ``options.task_options``: the task's eval flags. ``run``: how the
    model runs (batch size, precision, threads)."""
    # checks: every option and output before the model is loaded
    run = (run or InferenceOptions()).validate("bertkit eval")
    options = (options or EvalOptions()).validate("bertkit eval")
    meta = load_meta(model_dir)  # the only read: everything below is handed this copy
    if is_multi_head(meta):  # every head scored as its task alone (api/multihead_inference.py)
        return evaluate_multi(model_dir, options, run)
    extra_metrics = _load_extra_metrics(options.metric or ())
    check_single_head(meta, options.head, "")
    adapter = task_from_state(meta["task"]).apply_options(options.task_options, "eval")
    plan = _plan(model_dir, meta, adapter, options)
    # read
    every_example = adapter.read(plan.source, EVAL)
    limit = options.max_eval_samples
    examples = every_example[:limit] if limit else every_example
    adapter.check_eval_examples(examples, plan.source)
    # load and run
    engine, report, kept, tuned = _score(model_dir, meta, adapter, examples, plan, run, extra_metrics)
    if tuned:
        partial = _partial_evaluation(meta, plan.data, plan.split, plan.source, len(examples), len(every_example))
        meta = _keep_tuned(
            model_dir,
            meta,
            adapter,
            tuned,
            partial,
            options.store_threshold,
            report,
            plan.read_only,
            engine.is_main_process,
        )
    # save
    if engine.is_main_process:
        _write(model_dir, meta, adapter, examples, kept, report, plan)
    report["written_to"] = str(plan.target)
    return report


@dataclass
class EvalPlan:
    """Where an evaluation reads and writes, settled before any work."""

    data: str
    split: str
    source: object  # the resolved data (registry.Source)
    target: Path  # the metrics JSON
    rows_file: Path | None  # the predictions file (None: the task lists none)
    read_only: str | None  # why the model directory cannot be written, or None


def _load_extra_metrics(extra_metrics) -> tuple:
    if not extra_metrics:
        return ()
    from bertkit.metrics.extra import load_metrics

    return load_metrics(extra_metrics)  # a missing module fails before the model is loaded


def _plan(model_dir, meta, adapter, options: EvalOptions) -> EvalPlan:
    data, split, output, max_eval_samples = options.data, options.split, options.output, options.max_eval_samples
    dataset = DatasetChoice.of(options.dataset)
    if data is None and not dataset.given():  # what training evaluated on: its dataset's config and splits too
        dataset = DatasetChoice.of(meta.get("config") or {})
    data = data or recorded_eval_data(meta)
    registry.check_choice(data, None, dataset)
    if split is not None and not registry.takes_split(data):
        raise BertkitError(
            f"--split {split} applies only to known datasets and Hub datasets, not to the file {data}",
            "drop --split, or pass --data with the file of that split",
        )
    split = split or "dev"
    target = Path(output) if output else Path(model_dir) / _eval_file_name(data, split, max_eval_samples)
    flag = "--output" if output else "the metrics file"
    check_output_file(target, flag)  # before the work, not after it
    rows_file = predictions_file(target) if adapter.prediction_fields else None  # masked LM: nothing to list
    if rows_file is not None:
        check_output_file(rows_file, "the predictions file")
    # --output elsewhere: a read-only model directory (a shared copy, a container's mount) is evaluated
    # all the same, without redrawing its report or storing what was tuned
    read_only = _read_only(Path(model_dir))
    if not read_only:
        check_figures_dir(Path(model_dir))
    # Without a data directory, a known dataset is looked up where training found it.
    data_dir = options.data_dir or (None if registry.data_dir() else meta.get("data", {}).get("data_dir"))
    source = registry.resolve(data, split, data_dir, adapter.name, command="eval", choice=dataset)
    check_inputs_kept(target, source)  # --output equal to --data would replace the data with the metrics
    if rows_file is not None:
        check_inputs_kept(rows_file, source, flag="the predictions file")
    # then: never over a file bertkit did not write for this model (the user's, another model's scores)
    check_results_kept(model_dir, target, flag, {rows_file: "the predictions file"} if rows_file else {})
    return EvalPlan(data, split, source, target, rows_file, read_only)


def _score(model_dir, meta, adapter, examples, plan: EvalPlan, run: InferenceOptions, extra_metrics):
    """(engine, report, kept: the predictions and details, tuned settings) of one scored run."""
    started = time.perf_counter()
    engine, network, tokenizer = load_for_inference(model_dir, adapter, run.precision, run.threads, meta=meta)
    loaded = time.perf_counter()
    features = adapter.preprocess(examples, tokenizer, train=False)
    for text in stats_of(features).get("notices", ()):  # truncations and windows: said before scoring
        notice("data", text)
    tokenized = time.perf_counter()
    kept = {}
    metrics, tuned = score(
        engine, adapter, network, examples, features, run.batch_size, tokenizer.pad_token_id, tune=True, keep=kept
    )
    timings = {
        "load_seconds": loaded - started,
        "preprocess_seconds": tokenized - loaded,
        "score_seconds": time.perf_counter() - tokenized,
    }  # score: model + decoding + metrics
    if extra_metrics:
        from bertkit.metrics.extra import score_extra

        metrics.update(score_extra(extra_metrics, adapter, examples, kept["predictions"]))
    report = {
        "model": str(model_dir),
        "data": plan.source.description,
        "examples": len(examples),
        "metrics": metrics,
        "preprocessing": stats_of(features),
        "tuned": {},
        "notices": [],
        "details": kept.get("details"),
        "runtime": engine.runtime(run.precision),
        "timings": {k: round(v, 3) for k, v in timings.items()},
        "repeats": repeats(meta),
    }  # --seeds/--folds: the spread at training, to read this evaluation against
    _judge(adapter, examples, features, kept, report)
    return engine, report, kept, tuned


def _judge(adapter, examples, features, kept: dict, report: dict) -> None:
    """The task's trivial baseline on these examples, in the report; a model that predicts one thing
    for everything, or beats no baseline, is said at once, and in the report."""
    if adapter.prediction_fields:
        kept["rows"] = prediction_rows(adapter, examples, kept["predictions"])
    verdict = verdict_on(adapter, examples, kept["predictions"], report["metrics"], kept.get("rows"))
    for text in said_warnings(verdict, "eval"):
        report["warnings"] = [{**verdict, "kind": "degenerate", "text": text, "verdict": verdict["kind"]}]
        report["notices"].append(text)
    report["baselines"] = judged(task_baselines(adapter, examples, features), report["metrics"])
    for entry in said_baseline_warnings(report["baselines"], "eval", verdict):
        report.setdefault("warnings", []).append(entry)
        report["notices"].append(entry["text"])


def _keep_tuned(model_dir, meta, adapter, tuned, partial, store_tuned, report, read_only, writes) -> dict:
    """Settings tuned on this data: stored with the model where that is right, else said; returns the meta."""
    if read_only:
        report["tuned_not_stored"] = tuned
        report["notices"].append(
            f"{_settings(tuned)} tuned on this data was NOT stored: the model directory is read-only ({read_only})"
        )
        return meta
    return _store_tuned(model_dir, meta, adapter, tuned, partial, store_tuned, report, writes)


def _write(model_dir, meta, adapter, examples, kept, report, plan: EvalPlan) -> None:
    """The predictions file, the metrics JSON, results.json, and the report and card redrawn."""
    if plan.rows_file is not None:
        write_rows(plan.rows_file, kept.get("rows") or prediction_rows(adapter, examples, kept["predictions"]))
        report["predictions_written_to"] = str(plan.rows_file)
    report["outputs"] = results_record(model_dir, *filter(None, [plan.rows_file]))  # whose, for the next eval
    write_json(plan.target, report)
    if plan.read_only:
        report["notices"].append(
            f"the model directory is read-only ({plan.read_only}): its report and card were not redrawn"
        )
        return
    report["results_written_to"] = str(update_results(Path(model_dir), plan.target, report))
    from bertkit.reporting.build import build_report

    drawn = build_report(model_dir, meta)  # redrawn with this evaluation's figures (those inside the directory)
    report["figures"] = drawn["figures"]
    report["notices"] += drawn["notices"]


def _store_tuned(
    model_dir, meta, adapter, tuned: dict, partial: str | None, store_tuned: bool | None, report: dict, writes: bool
) -> dict:
    """Store settings tuned on this data with the model (only from a full evaluation of its dev data,
    unless ``store_tuned`` says otherwise); the report says what happened. Returns the meta."""
    before = (
        _settings({key: adapter.options[key] for key in tuned if adapter.options.get(key) is not None}) or "its default"
    )
    if (partial is None) if store_tuned is None else store_tuned:
        adapter.options.update(tuned)  # stored for predict to reuse; this report's scores used `before`
        if writes:  # under a multi-process launch one process writes
            meta = update_meta(model_dir, {"task": adapter.as_stored().state()}, current=meta)
        report["tuned"] = tuned
        if partial:
            report["notices"].append(f"{_settings(tuned)} stored as asked, although {partial}")
    else:
        report["tuned_not_stored"] = tuned
        reason = partial or "storing was turned off (--no-store-threshold)"
        report["notices"].append(
            f"{_settings(tuned)} tuned on this data was NOT stored: {reason}; the model "
            f"keeps {before} (--store-threshold stores it anyway)"
        )
    return meta


def _partial_evaluation(meta, data, split, source, evaluated, available) -> str | None:
    """Why this evaluation is not the model's full dev data (None when it is)."""
    if evaluated < available:
        return f"only {evaluated} of {available} examples were evaluated (--max-eval-samples)"
    trained = meta.get("data", {})
    if trained.get("name") and data == trained["name"]:
        dev_split = registry.DATASETS[data].dev_split if registry.is_known(data) else "dev"
        return None if split == dev_split else f"this is the {split} split, not {dev_split}"
    recorded = trained.get("eval_file") or trained.get("eval")
    if recorded and (
        source.description == recorded
        or source.path is not None
        and Path(recorded).expanduser().resolve() == source.path.resolve()
    ):
        return None
    return f"{source.description} is not the model's dev data ({recorded or 'none recorded at training'})"


def _read_only(directory: Path) -> str | None:
    """Why ``directory`` cannot be written (e.g. "Read-only file system"), or None."""
    try:
        probe_writable(directory, str(directory))
    except BertkitError as exc:
        return str(exc.__cause__.strerror if isinstance(exc.__cause__, OSError) and exc.__cause__.strerror else exc)
    return None


def _settings(settings: dict) -> str:
    return ", ".join(  # a setting with no value (a multi-label model's thresholds before tuning) is not said
        f"{key} {value:.4f}" if isinstance(value, float) else f"{key} {value}"
        for key, value in settings.items()
        if value is not None
    )


def _eval_file_name(data: str, split: str, max_eval_samples: int | None = None) -> str:
    """``eval-sst2-dev.json``; a part of the data says which (``eval-sst2-dev-first200.json``), so
    it never replaces the whole split's scores."""
    name = f"eval-{data}-{split}" if registry.is_known(data) else f"eval-{Path(data).stem}"
    return f"{name}-first{max_eval_samples}.json" if max_eval_samples else f"{name}.json"
