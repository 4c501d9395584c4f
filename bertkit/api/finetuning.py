"""`bertkit finetune`: train a task model and save a self-contained model directory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bertkit.api.results import RESULTS_FILE, prediction_rows, training_results
from bertkit.config import TrainConfig
from bertkit.data import registry
from bertkit.data.folds import split_fold
from bertkit.engine.checkpoints import Checkpoints
from bertkit.engine.history import FILE as HISTORY_FILE
from bertkit.engine.history import History
from bertkit.engine.run_identity import features_sha1
from bertkit.engine.threads import check as check_threads
from bertkit.inference import score, speed_up
from bertkit.model_dir import (
    ModelMeta,
    check_inputs_kept,
    check_output_dir,
    check_sibling_dir,
    checkpoint_root,
    data_record,
    save_model_dir,
    staged_output,
    write_json,
)
from bertkit.model_dir.run_config import write_run_config
from bertkit.models import DEFAULT_MODEL, choose_max_length, load_config, load_model, load_tokenizer, resolve_model
from bertkit.tasks import finetune_tasks, get_task_class
from bertkit.tasks.base import EVAL, TRAIN
from bertkit.tasks.learned import Examples, seen_in, stats_of


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
    before: dict = field(default_factory=dict)  # the starting model's scores (tasks that ask for them)
    sections: dict = field(default_factory=dict)  # what the task adds to bertkit.json (Task.directory_sections)
    eval_rows: list | None = None  # --folds: the held-out fold's prediction rows (row: its place in the data)


def finetune(task: str, data: str, output: str, model: str = DEFAULT_MODEL, eval_data: str | None = None,
             data_dir: str | None = None, config: TrainConfig | None = None, overwrite: bool = False,
             report_to: str | None = None, threads: int | None = None, resume: bool = False,
             resume_from: str | None = None, on_evaluation=None, fold: tuple[int, int] | None = None) -> FinetuneResult:
    """Fine-tune ``model`` on ``data`` for ``task`` and save a self-contained model directory, with
    its model card, figures and report.html. ``report_to``: trackers (bertkit.engine.tracking).
    ``resume`` continues from the newest complete checkpoint of ``output`` (``resume_from``: that
    checkpoint); the run's settings must be those of the checkpoint (engine/run_identity.py).
    ``on_evaluation(number, metrics, main_metric)`` after each evaluation (tune's pruning: it may raise).
    ``fold`` (k, K): train on the other folds of ``data``, evaluate on fold k (bertkit.api.folds).

    Longer than the other functions on purpose: it is the command's order of events (checks that
    need no model, then the model, then the work), which is the contract users rely on, read in one
    place; the work itself is in _read_examples, _train and _save."""
    from bertkit.engine.tracking import logging_dir, parse_report_to

    # every check that needs no model comes first: a mistake costs seconds, not a training run
    command = f"bertkit {'finetune' if task in finetune_tasks() else 'pretrain'} {task}"
    config = (config or TrainConfig()).validate(command)
    check_threads(threads, "finetune")
    trackers = parse_report_to(report_to)
    adapter = get_task_class(task)(config.max_length, dict(config.task_options))
    output_path = Path(output).expanduser().resolve()
    check_output_dir(output_path, overwrite)
    train_source = registry.resolve(data, "train", data_dir, task)
    eval_source = None if fold else registry.eval_source(data, eval_data, data_dir, task)  # folds: data's own
    check_inputs_kept(output_path, train_source, eval_source, model)  # a local --model is an input too
    if config.save_every or resume or resume_from:
        check_sibling_dir(checkpoint_root(output_path), "checkpoints")
    if trackers:
        check_sibling_dir(logging_dir(output_path), "the trackers' logs")
    checkpoints = Checkpoints.plan(output_path, config, _run_identity(task, model, config, train_source, eval_source),
                                   resume, resume_from, overwrite)
    notices = checkpoints.passed_over() if checkpoints is not None else []
    if checkpoints is not None and (resume or resume_from) and checkpoints.resume_from is None:
        notices.append(f"--resume: no checkpoint under {checkpoint_root(output_path)} yet, so training started "
                       "at step 0")
    adapter, train_examples, eval_examples, held = _read_examples(adapter, train_source, eval_source, config, fold)

    model_ref = resolve_model(model)
    model_config = load_config(model_ref, model)  # an offline Hub name or an unsupported model fails here
    adapter.max_length = choose_max_length(config.max_length, adapter.default_max_length, model_config, model)
    tokenizer = load_tokenizer(model_ref, model, model_config)
    from bertkit.engine import Engine  # heavy: torch + accelerate
    from bertkit.networks import recipes

    engine = Engine(config.precision, config.seed, trackers,
                    str(logging_dir(output_path)) if trackers else None, threads=threads)
    if checkpoints is not None:
        checkpoints.identity.update(processes=engine.accelerator.num_processes, precision_used=engine.precision)
        checkpoints.check_compatible()
    # weights before preprocessing: a corrupt checkpoint fails before any expensive work
    network = speed_up(adapter, load_model(adapter.model_class, model_ref, model, **adapter.model_kwargs()))
    _for_training(network, config)
    train_features = adapter.preprocess(train_examples, tokenizer, train=True)
    preprocessing = {"train": stats_of(train_features), "train_features": len(train_features)}
    eval_features = adapter.preprocess(eval_examples, tokenizer, train=False) if eval_examples else []
    if eval_examples:
        preprocessing["eval"] = stats_of(eval_features)
    if checkpoints is not None:
        checkpoints.identity["train_data_sha1"] = features_sha1(train_features, adapter.targets)
        checkpoints.check_compatible()

    spec = adapter.training_spec()  # what the data taught (head bias, class weights) is known by now
    trained = _train(engine, adapter, spec, network, tokenizer, config, train_features, eval_examples,
                     eval_features, checkpoints, on_evaluation, keep_predictions=fold is not None)
    finished = recipes.finish_model(spec, trained.network, model_ref, model)
    network, report, adapter = finished.model, trained.report, adapter.finished()
    best = next((h for h in report.history if h["step"] == report.best_step), report.history[-1])
    stored, stored_notices = _tuned_to_store(trained.tuned_of(best.get("metrics")), eval_source, config)
    adapter, notices = adapter.with_options(stored) if stored else adapter, notices + stored_notices
    result = FinetuneResult(str(output_path), best.get("metrics", {}), report.throughput(), report.history,
                            report.best_epoch, len(train_examples), len(eval_examples), preprocessing,
                            runtime=engine.runtime(config.precision), best_step=report.best_step,
                            resumed_from=report.resumed_from, notices=notices, before=trained.before,
                            sections=adapter.directory_sections(finished.facts))
    held_out = f"{len(eval_examples)} held-out examples of the training data"
    held_out = held_out if eval_examples and not eval_source else None
    if fold:
        held_out = f"fold {fold[0] + 1} of {fold[1]} of the training data ({len(eval_examples)} examples)"
        predictions = trained.predictions_of(best.get("metrics"))
        result.eval_rows = [{**row, "row": held[i] + 1} for i, row in
                            enumerate(prediction_rows(adapter, eval_examples, predictions))]
    meta = ModelMeta(
        kind=adapter.directory_kind, task=adapter.state(), base_model=model, config=config.to_dict(),
        data=data_record(train_source, eval_source, len(train_examples), len(eval_examples),
                         name=data if registry.is_known(data) else None,
                         # where a known dataset was found, for `bertkit eval DIR` (a file needs none)
                         data_dir=registry.data_dir(data_dir) if registry.is_known(data) else None,
                         eval_description=held_out),
        before=trained.before or None, **result.sections, metrics=result.metrics, best_epoch=report.best_epoch,
        best_step=report.best_step, resumed_from=report.resumed_from, history=report.history,
        throughput=result.throughput, preprocessing=preprocessing, stopped_early=report.stopped_early,
        runtime=result.runtime, eval_details=trained.details_of(best.get("metrics")))
    options = _resolved_options(task, data, eval_data, data_dir, model, output_path, threads, report_to, config,
                                adapter, "finetune" if task in finetune_tasks() else "pretrain")
    result.report = _save(engine, output_path, report, network, tokenizer, meta, options, training_results(result))
    return result


def _tuned_to_store(tuned: dict, eval_source, config: TrainConfig) -> tuple[dict, list[str]]:
    """(settings to store, what was done): what the task tuned on the saved model's evaluation (a
    multi-label threshold) is stored with it, as `bertkit eval` stores it: only from the whole dev data."""
    if not tuned:
        return {}, []
    shown = ", ".join(f"{k} {v}" for k, v in tuned.items() if v is not None)
    if eval_source is None or config.max_eval_samples is not None:
        why = "held-out training examples" if eval_source is None else "part of it (--max-eval-samples)"
        return {}, [f"{shown} tuned on the evaluation data (the metrics above are at it) was NOT stored: it was "
                    f"{why}; `bertkit eval DIR` on the whole dev data stores it"]
    return tuned, [f"{shown} tuned on {eval_source.description} and stored with the model (the metrics above are "
                   "at it; dev data that chose it flatters it a little: score a test split with `bertkit eval DIR "
                   "--split test`)"]


def _read_examples(adapter, train_source, eval_source, config: TrainConfig, fold=None) -> tuple:
    """(the task as trained, train, eval, the eval examples' rows in the data when a fold is held
    out). Reading changes nothing; what the training examples (every fold's) teach is fitted and
    applied here, before the eval data is read (in the layout training learned) and checked."""
    read = adapter.read(train_source, TRAIN)
    seen, train_examples, eval_examples = seen_in(read), read, []
    if fold:
        train_examples = _first(read, config.max_train_samples)
        adapter = adapter.with_learned(adapter.fit(train_examples, seen))
        return (adapter, *split_fold(adapter, train_examples, fold, config.seed))
    if eval_source is None:  # a task may hold out part of its training data (masked LM: whole documents)
        train_examples, eval_examples = adapter.split_held_out(read, config.seed, train_source.description)
    train_examples = _first(train_examples, config.max_train_samples)
    adapter = adapter.with_learned(adapter.fit(train_examples, seen))
    if eval_source is not None:
        eval_examples = _first(adapter.read(eval_source, EVAL), config.max_eval_samples)
        adapter.check_eval_examples(eval_examples, eval_source)
    return adapter, train_examples, _first(eval_examples, config.max_eval_samples), []


@dataclass
class _Trained:
    network: object
    report: object
    before: dict
    evaluations: list  # (metrics, breakdown, tuned, predictions) per evaluation: the saved one's are kept

    def details_of(self, metrics) -> dict | None:
        return next((d for m, d, _, _ in self.evaluations if m is metrics), None)

    def tuned_of(self, metrics) -> dict:
        return next((t for m, _, t, _ in self.evaluations if m is metrics), None) or {}

    def predictions_of(self, metrics) -> list | None:
        return next((p for m, _, _, p in self.evaluations if m is metrics), None)


def _train(engine, adapter, spec, network, tokenizer, config, train_features, eval_examples, eval_features,
           checkpoints, on_evaluation=None, keep_predictions=False) -> _Trained:
    """The engine's loop with what the task's TrainingSpec makes (bertkit/networks/recipes.py): what
    it trains, how it collates, how it evaluates."""
    from bertkit.networks import recipes

    evaluations = []

    def evaluate(current_model) -> dict:
        kept = {}
        evaluated = recipes.evaluation_network(spec, current_model, tokenizer, engine.unwrap)
        metrics, tuned = score(engine, adapter, evaluated,
                               eval_examples, eval_features, config.eval_batch_size, tokenizer.pad_token_id,
                               tune=adapter.tunes_while_training, apply_tuned=adapter.tunes_while_training,
                               keep=kept)
        evaluations.append((metrics, kept.get("details"), tuned, kept["predictions"] if keep_predictions else None))
        if on_evaluation is not None:
            on_evaluation(len(evaluations), metrics, adapter.main_metric)
        return metrics

    network = recipes.training_network(spec, network)
    before = {}
    if adapter.evaluate_before_training and eval_examples:
        before = evaluate(network.to(engine.accelerator.device))
        evaluations.clear()
    network, report = engine.fit(network, train_features, config, tokenizer.pad_token_id,
                                 evaluate if eval_examples else None, adapter.main_metric,
                                 collate_fn=recipes.training_collator(spec, tokenizer, config.seed),
                                 checkpoints=checkpoints, targets=adapter.targets,
                                 greater_is_better=adapter.greater_is_better)
    return _Trained(network, report, before, evaluations)


def _save(engine, output_path: Path, report, network, tokenizer, meta: ModelMeta, options: dict | None,
          results: dict) -> dict:
    """The model directory, all or nothing, with its history, card, figures, report, results.json
    and the run's resolved options (one process)."""
    written = {}
    if engine.is_main_process:
        from bertkit.reporting.build import build_report

        with staged_output(output_path) as staging:
            History(report.log).write(staging / HISTORY_FILE)
            if options is not None:
                write_run_config(staging, options)
            write_json(staging / RESULTS_FILE, results)
            record = save_model_dir(staging, engine.unwrap(network), tokenizer, meta)
            written = build_report(staging, record, name=output_path.name)
    engine.accelerator.wait_for_everyone()
    return written


def _for_training(network, config: TrainConfig) -> None:
    if config.freeze_embeddings:
        network.get_input_embeddings().weight.requires_grad_(False)
    if config.save_memory:  # same numbers, far less memory for long sequences (bertkit.engine.attention_recompute)
        from bertkit.engine.attention_recompute import checkpoint_attention

        checkpoint_attention(network)


def _resolved_options(task, data, eval_data, data_dir, model, output_path, threads, report_to, config, adapter,
                      command: str) -> dict:
    """Every option of the run as `bertkit finetune|pretrain --config` reads it: local paths made
    absolute (a replay from another directory reads the same files), the task's options with their
    defaults."""
    def local(path):
        found = Path(path).expanduser()
        return str(found.resolve()) if found.exists() else path

    known = registry.is_known(data)
    directory = registry.data_dir(data_dir) if known else data_dir and Path(data_dir)
    train = config.to_dict()
    given = train.pop("task_options")
    task_options = {o.name: given.get(o.name, o.default) for o in adapter.options_for(command)}
    return {"task": task, "data": data if known else local(data), "eval_data": eval_data and local(eval_data),
            "data_dir": str(directory.resolve()) if directory else None, "model": local(model),
            "output": str(output_path), "threads": threads, "report_to": report_to or "none", **train, **task_options}


def _run_identity(task, model, config, train_source, eval_source) -> dict:
    """What a resumed run must share with its checkpoint (run_identity.MAY_CHANGE excepted)."""
    def where(source):
        return None if source is None else str(source.path.resolve()) if source.path else source.description

    local = Path(model).expanduser()
    return {"task": task, "model": str(local.resolve()) if local.exists() else model, "data": where(train_source),
            "eval_data": where(eval_source), **config.to_dict()}


def _first(examples: list, limit: int | None) -> list:
    return Examples(examples[:limit], seen_in(examples)) if limit else examples  # what reading saw stays
