"""The importable API behind the CLI: each function validates, does the work, returns data.

Nothing here prints; the CLI formats what these functions return.
"""

from __future__ import annotations

import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bertkit.checkpoint import (META_FILE, check_output_dir, check_output_file, load_meta, save_model_dir,
                                staged_output, write_json)
from bertkit.config import PRECISIONS, TrainConfig
from bertkit.data import readers, registry
from bertkit.data.registry import Source
from bertkit.errors import BertkitError
from bertkit.history import FILE as HISTORY_FILE
from bertkit.history import History
from bertkit.models import (DEFAULT_MODEL, check_saved_model, choose_max_length, load_config, load_model,
                            load_tokenizer, resolve_model)
from bertkit.tasks import get_task_class, task_from_state
from bertkit.tasks.base import EVAL, PREDICT, TRAIN
from bertkit.threads import check as check_threads
from bertkit.training_state import Checkpoints, checkpoint_root, features_sha1


@dataclass
class FinetuneResult:
    output_dir: str
    metrics: dict
    throughput: dict
    history: list
    best_epoch: float | None
    train_examples: int
    eval_examples: int
    preprocessing: dict = field(default_factory=dict)
    report: dict = field(default_factory=dict)  # figures, report.html, model card (bertkit.reporting)
    runtime: dict = field(default_factory=dict)  # precision used (and why), threads
    best_step: int | None = None
    resumed_from: str | None = None  # the checkpoint this run continued from (--resume)
    notices: list = field(default_factory=list)


def finetune(task: str, data: str, output: str, model: str = DEFAULT_MODEL, eval_data: str | None = None,
             data_dir: str | None = None, config: TrainConfig | None = None, overwrite: bool = False,
             report_to: str | None = None, threads: int | None = None, resume: bool = False,
             resume_from: str | None = None) -> FinetuneResult:
    """Fine-tune ``model`` on ``data`` for ``task`` and save a self-contained model directory, with
    its model card, figures and report.html. ``report_to``: trackers (bertkit.tracking).
    ``resume`` continues from the newest complete checkpoint of ``output`` (``resume_from``: that
    checkpoint); the run's settings must be those of the checkpoint (training_state.py)."""
    from bertkit.tracking import logging_dir, parse_report_to

    config = (config or TrainConfig()).validate()
    check_threads(threads, "finetune")
    trackers = parse_report_to(report_to)
    task_class = get_task_class(task)
    adapter = task_class(config.max_length or task_class.default_max_length, dict(config.task_options))
    output_path = Path(output).expanduser().resolve()
    check_output_dir(output_path, overwrite)

    train_source = registry.resolve(data, "train", data_dir, task)
    eval_source = _eval_source(data, eval_data, data_dir, task)
    _check_not_inside(output_path, train_source, eval_source)
    checkpoints = Checkpoints.plan(output_path, config, _run_identity(task, model, config, train_source, eval_source),
                                   resume, resume_from, overwrite)
    notices = []
    if checkpoints is not None and (resume or resume_from) and checkpoints.resume_from is None:
        notices.append(f"--resume: no checkpoint under {checkpoint_root(output_path)} yet, so training started "
                       "at step 0")
    train_examples = _first(adapter.read(train_source, TRAIN), config.max_train_samples)
    adapter.fit_labels(train_examples)
    eval_examples = []
    if eval_source is not None:
        eval_examples = _first(adapter.read(eval_source, EVAL), config.max_eval_samples)
        adapter.check_eval_examples(eval_examples, eval_source)

    model_ref = resolve_model(model)
    model_config = load_config(model_ref, model)  # an offline Hub name or an unsupported model fails here
    adapter.max_length = choose_max_length(config.max_length, task_class.default_max_length, model_config, model)
    tokenizer = load_tokenizer(model_ref, model, model_config)
    from bertkit.engine import Engine  # heavy: torch + accelerate

    engine = Engine(config.precision, config.seed, trackers,
                    str(logging_dir(output_path)) if trackers else None, threads=threads)
    runtime = engine.runtime(config.precision)
    if checkpoints is not None:
        checkpoints.identity.update(processes=engine.accelerator.num_processes, precision_used=engine.precision)
        checkpoints.check_compatible()
    # weights before preprocessing: a corrupt checkpoint fails before any expensive work
    network = _fast(adapter, load_model(adapter.model_class, model_ref, model, **adapter.model_kwargs()))
    _for_training(network, config)
    train_features = adapter.preprocess(train_examples, tokenizer, train=True)
    preprocessing = {"train": dict(adapter.stats), "train_features": len(train_features)}
    eval_features = adapter.preprocess(eval_examples, tokenizer, train=False) if eval_examples else []
    if eval_examples:
        preprocessing["eval"] = dict(adapter.stats)
    if checkpoints is not None:
        checkpoints.identity["train_data_sha1"] = features_sha1(train_features)
        checkpoints.check_compatible()

    evaluations = []  # (metrics, breakdown) per evaluation: the saved epoch's breakdown goes to the report

    def evaluate_epoch(current_model) -> dict:
        kept = {}
        metrics = _score(engine, adapter, current_model, eval_examples, eval_features, config.eval_batch_size,
                         tokenizer.pad_token_id, keep=kept)[0]
        evaluations.append((metrics, kept.get("details")))
        return metrics

    network, report = engine.fit(network, train_features, config, tokenizer.pad_token_id,
                                 evaluate_epoch if eval_examples else None, adapter.main_metric,
                                 checkpoints=checkpoints)
    best = next((h for h in report.history if h["step"] == report.best_step), report.history[-1])
    result = FinetuneResult(str(output_path), best.get("metrics", {}), report.throughput(), report.history,
                            report.best_epoch, len(train_examples), len(eval_examples), preprocessing,
                            runtime=runtime, best_step=report.best_step, resumed_from=report.resumed_from,
                            notices=notices)
    meta = {
        "bertkit_version": _version(), "task": adapter.state(), "base_model": model,
        "data": {"name": data if registry.is_known(data) else None, "train": train_source.description,
                 "data_dir": str(registry.data_dir(data_dir)) if registry.data_dir(data_dir) else None, "eval": eval_source.description if eval_source else None,
                 # absolute, so that `bertkit eval DIR` finds a file-based eval set from any directory
                 "eval_file": str(eval_source.path.resolve()) if eval_source and eval_source.path else None,
                 "train_examples": len(train_examples), "eval_examples": len(eval_examples)},
        "config": config.to_dict(), "metrics": result.metrics, "best_epoch": report.best_epoch,
        "best_step": report.best_step, "resumed_from": report.resumed_from,
        "history": report.history, "throughput": result.throughput, "preprocessing": preprocessing,
        "stopped_early": report.stopped_early, "runtime": _recorded(runtime), "versions": _versions(),
        "eval_details": next((d for m, d in evaluations if m is best.get("metrics")), None),
    }
    if engine.is_main_process:
        from bertkit.reporting.build import build_report

        with staged_output(output_path) as staging:
            History(report.log).write(staging / HISTORY_FILE)
            save_model_dir(staging, engine.unwrap(network), tokenizer, meta)
            result.report = build_report(staging, meta, name=output_path.name)
    engine.accelerator.wait_for_everyone()
    return result


def evaluate(model_dir: str, data: str | None = None, split: str | None = None, data_dir: str | None = None,
             batch_size: int = 64, max_eval_samples: int | None = None, output: str | None = None,
             precision: str = "auto", task_options: dict | None = None, store_tuned: bool | None = None,
             extra_metrics: list[str] | tuple = (), threads: int | None = None) -> dict:
    """Score a saved model on a dataset split or file; writes the metrics as JSON and returns them.
    ``data`` defaults to what training evaluated on: the known dataset, or the recorded file.

    Decoding settings tuned on the data (the SQuAD v2 null threshold) are stored with the model
    only from a full evaluation on the model's own dev data, unless ``store_tuned`` says otherwise;
    ``report["notices"]`` says when something tuned was not stored, or stored from other data.
    ``extra_metrics``: `evaluate` metric modules (names or local paths) scored next to the built-in ones.
    """
    _check_inference_args(batch_size, "eval", max_eval_samples, precision)
    check_threads(threads, "eval")
    if extra_metrics:
        from bertkit.extra_metrics import load_metrics

        extra_metrics = load_metrics(extra_metrics)  # a missing module fails before the model is loaded
    meta = load_meta(model_dir)
    data = data or _recorded_eval_data(meta)
    if split is not None and not registry.is_known(data):
        raise BertkitError(f"--split {split} applies only to known datasets, not to the file {data}",
                           "drop --split, or pass --data with the file of that split")
    split = split or "dev"
    target = Path(output) if output else Path(model_dir) / _eval_file_name(data, split)
    check_output_file(target, "--output" if output else "the metrics file")  # before the work, not after it
    if target.resolve() in {(Path(model_dir) / name).resolve() for name in (META_FILE, "config.json")}:
        raise BertkitError(f"--output {output} would replace the model's own {target.name}",
                           "write the metrics to another file")
    adapter = task_from_state(meta["task"])
    adapter.options.update({k: v for k, v in (task_options or {}).items() if k in adapter.option_names and v is not None})
    # Without a data directory, a known dataset is looked up where training found it.
    data_dir = data_dir or (None if registry.data_dir() else meta.get("data", {}).get("data_dir"))
    source = registry.resolve(data, split, data_dir, adapter.name, command="eval")
    every_example = adapter.read(source, EVAL)
    examples = _first(every_example, max_eval_samples)
    adapter.check_eval_examples(examples, source)
    started = time.perf_counter()
    engine, network, tokenizer = _load_for_inference(model_dir, adapter, precision, threads)
    loaded = time.perf_counter()
    features = adapter.preprocess(examples, tokenizer, train=False)
    tokenized = time.perf_counter()
    kept = {}
    metrics, tuned = _score(engine, adapter, network, examples, features, batch_size, tokenizer.pad_token_id, tune=True,
                            keep=kept)
    timings = {"load_seconds": loaded - started, "preprocess_seconds": tokenized - loaded,
               "score_seconds": time.perf_counter() - tokenized}  # score: model + decoding + metrics
    if extra_metrics:
        from bertkit.extra_metrics import score_extra

        metrics.update(score_extra(extra_metrics, adapter, examples, kept["predictions"]))
    report = {"model": str(model_dir), "data": source.description, "examples": len(examples), "metrics": metrics,
              "preprocessing": dict(adapter.stats), "tuned": {}, "notices": [], "details": kept.get("details"),
              "runtime": engine.runtime(precision), "timings": {k: round(v, 3) for k, v in timings.items()}}
    if tuned:
        partial = _partial_evaluation(meta, data, split, source, len(examples), len(every_example))
        before = _settings({key: adapter.options[key] for key in tuned if key in adapter.options}) or "its default"
        if (partial is None) if store_tuned is None else store_tuned:
            adapter.options.update(tuned)  # stored for predict to reuse; this report's scores used `before`
            meta["task"] = adapter.state()
            if engine.is_main_process:  # under a multi-process launch one process writes
                write_json(Path(model_dir) / META_FILE, meta)
            report["tuned"] = tuned
            if partial:
                report["notices"].append(f"{_settings(tuned)} stored as asked, although {partial}")
        else:
            report["tuned_not_stored"] = tuned
            reason = partial or "storing was turned off (--no-store-threshold)"
            report["notices"].append(f"{_settings(tuned)} tuned on this data was NOT stored: {reason}; the model "
                                     f"keeps {before} (--store-threshold stores it anyway)")
    if engine.is_main_process:
        write_json(target, report)
        from bertkit.reporting.build import build_report

        # redrawn with this evaluation's figures (only those inside the model directory count)
        drawn = build_report(model_dir)
        report["figures"] = drawn["figures"]
        report["notices"] += drawn["notices"]
    report["written_to"] = str(target)
    return report


def report(model_dir: str) -> dict:
    """(Re)draw the figures, write report.html and the model card of a model directory."""
    from bertkit.reporting.build import build_report

    meta = load_meta(model_dir)
    return build_report(model_dir, meta, require_figures=True)


class Predictions(list):
    """The rows of ``predict`` (a plain list) plus ``preprocessing``: the task's facts about the
    input, with human-readable ``notices`` (truncated texts, windows...)."""

    preprocessing: dict
    runtime: dict  # precision used (and why), threads
    timings: dict  # seconds: load_seconds, preprocess_seconds, model_seconds, postprocess_seconds


def predict(model_dir: str, input_path: str, batch_size: int = 64, precision: str = "auto", backend: str = "torch",
            threads: int | None = None, **options) -> Predictions:
    """One output row per input row, in input order. ``input_path`` '-' reads standard input.
    ``backend``: torch, or onnx / onnx-int8 after `bertkit export onnx` (bertkit.predictor)."""
    from bertkit.predictor import Predictor

    _check_inference_args(batch_size, "predict", None, precision)
    check_threads(threads, "predict")
    predictor = Predictor(model_dir, backend=backend, batch_size=batch_size, precision=precision, threads=threads,
                          **options)
    adapter = predictor.adapter
    if input_path == "-":
        records = readers.parse_records(sys.stdin.read(), "", "<stdin>")
        examples = adapter.from_records(records, Source("<stdin>"), PREDICT)
    else:
        path = Path(input_path).expanduser()
        examples = adapter.read(Source(str(path), path=path), PREDICT)
    rows = Predictions(predictor.predict(examples))
    rows.preprocessing = predictor.stats
    rows.runtime = predictor.runtime()
    rows.timings = dict(predictor.timings)
    return rows


def list_datasets(data_dir: str | None = None) -> list[dict]:
    return registry.describe_all(data_dir)


# --- helpers ------------------------------------------------------------------------------------
def _score(engine, adapter, network, examples, features, batch_size, pad_token_id, tune=False, keep=None):
    """Metrics and tuned settings; ``keep`` (a dict) also receives the predictions and their
    breakdown for the figures."""
    outputs = engine.infer(network, features, batch_size, adapter.output_names, adapter.per_token_outputs,
                           pad_token_id, description="eval")
    tuned = adapter.tune(examples, features, outputs) if tune else {}
    predictions = adapter.postprocess(examples, features, outputs)
    metrics = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in adapter.metrics(examples, predictions).items()}
    if keep is not None:
        from bertkit.reporting.details import breakdown

        keep["predictions"] = predictions
        keep["details"] = breakdown(adapter.name, adapter.labels, examples, predictions, metrics)
    return metrics, tuned


def _partial_evaluation(meta, data, split, source, evaluated, available) -> str | None:
    """Why this evaluation is not the model's full dev data (None when it is)."""
    if evaluated < available:
        return f"only {evaluated} of {available} examples were evaluated (--max-eval-samples)"
    trained = meta.get("data", {})
    if trained.get("name") and data == trained["name"]:
        dev_split = registry.DATASETS[data].dev_split
        return None if split == dev_split else f"this is the {split} split, not {dev_split}"
    recorded = trained.get("eval_file") or trained.get("eval")
    if recorded and (source.description == recorded or
                     source.path is not None and Path(recorded).expanduser().resolve() == source.path.resolve()):
        return None
    return f"{source.description} is not the model's dev data ({recorded or 'none recorded at training'})"


def _settings(settings: dict) -> str:
    return ", ".join(f"{key} {value:.4f}" if isinstance(value, float) else f"{key} {value}"
                     for key, value in settings.items())


def _load_for_inference(model_dir, adapter, precision, threads=None):
    from bertkit.engine import Engine
    from bertkit.probe import inference_network  # probes and masked LMs run as wrappers around their model

    model_config = load_config(str(model_dir), str(model_dir))
    # a probe's directory holds the bare encoder; its head is probe_head.safetensors
    weights_class = "AutoModel" if load_meta(model_dir).get("probe") else adapter.model_class
    check_saved_model(model_config, weights_class, adapter.max_length, str(model_dir))
    tokenizer = load_tokenizer(str(model_dir), str(model_dir), model_config)
    engine = Engine(precision, threads=threads)
    network = inference_network(str(model_dir), adapter, tokenizer)
    if network is None:
        network = _fast(adapter, load_model(adapter.model_class, str(model_dir), str(model_dir), trained=True))
    network = engine.prepare_model(network)
    return engine, network, tokenizer


def _fast(adapter, network):
    if adapter.reads_first_token_only:
        from bertkit.speedups import first_token_only_last_layer

        first_token_only_last_layer(network)
    return network


def _for_training(network, config: TrainConfig) -> None:
    if config.freeze_embeddings:
        network.get_input_embeddings().weight.requires_grad_(False)
    if config.save_memory:  # same numbers, far less memory for long sequences (bertkit.memory)
        from bertkit.memory import checkpoint_attention

        checkpoint_attention(network)


def _eval_source(data, eval_data, data_dir, task) -> Source | None:
    if eval_data:
        return registry.resolve(eval_data, "dev", data_dir, task)
    if registry.is_known(data):
        return registry.resolve(data, registry.DATASETS[data].dev_split, data_dir, task)
    return None


def _check_inference_args(batch_size: int, command: str, max_eval_samples: int | None = None,
                          precision: str = "auto") -> None:
    if precision not in PRECISIONS:
        raise BertkitError(f"unknown --precision {precision!r}", f"use one of {', '.join(PRECISIONS)}")
    if batch_size < 1:
        raise BertkitError(f"--batch-size must be >= 1, got {batch_size}", f"see `bertkit {command} --help`")
    if max_eval_samples is not None and max_eval_samples < 1:
        raise BertkitError(f"--max-eval-samples must be >= 1, got {max_eval_samples}",
                           "leave it out to use every example")


def _recorded_eval_data(meta: dict) -> str:
    recorded = meta.get("data", {})
    if recorded.get("name"):
        return recorded["name"]
    eval_file = recorded.get("eval_file") or recorded.get("eval")  # older models recorded only "eval"
    if not eval_file:
        raise BertkitError("this model was trained on a file without evaluation data, so there is nothing "
                           "recorded to evaluate on", "pass --data FILE")
    if not Path(eval_file).is_file():
        raise BertkitError(f"the evaluation file recorded at training time is gone: {eval_file}",
                           "pass --data FILE")
    return eval_file


def _eval_file_name(data: str, split: str) -> str:
    return f"eval-{data}-{split}.json" if registry.is_known(data) else f"eval-{Path(data).stem}.json"


def _run_identity(task, model, config, train_source, eval_source) -> dict:
    """What a resumed run must share with its checkpoint (training_state.MAY_CHANGE excepted)."""
    def where(source):
        return None if source is None else str(source.path.resolve()) if source.path else source.description

    local = Path(model).expanduser()
    return {"task": task, "model": str(local.resolve()) if local.exists() else model, "data": where(train_source),
            "eval_data": where(eval_source), **config.to_dict()}


def _check_not_inside(output: Path, *sources) -> None:
    """--overwrite replaces the output directory: it must not hold the data being trained on."""
    for source in sources:
        if source is not None and source.path is not None and source.path.resolve().is_relative_to(output):
            raise BertkitError(f"the data file {source.path} is inside --output {output}, which the new model "
                               "would replace", "choose an --output directory outside the data's directory")


def _recorded(runtime: dict) -> dict:
    """The runtime facts worth keeping with the model (not the passing load notice)."""
    return {k: v for k, v in runtime.items() if k != "notice"}


def _first(examples: list, limit: int | None) -> list:
    return examples[:limit] if limit else examples


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bertkit")
    except PackageNotFoundError:
        return "unknown"


def _versions() -> dict:
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__}
