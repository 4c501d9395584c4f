"""`bertkit finetune`: train a task model and save a self-contained model directory."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from bertkit.data.folds import split_fold
from bertkit.engine.history import FILE as HISTORY_FILE
from bertkit.engine.history import History
from bertkit.engine.run_identity import features_sha1
from bertkit.events import notice
from bertkit.inference import score, speed_up
from bertkit.methods import Run, planned_methods
from bertkit.methods.base import FOLDS, RESUME, SINGLE, TUNE
from bertkit.model_dir import ModelMeta, data_record, save_model_dir, staged_output, write_json
from bertkit.model_dir.run_config import write_run_config
from bertkit.model_dir.writer_lock import writes_outputs
from bertkit.models import choose_max_length, load_config, load_model, resolve_model
from bertkit.models.tokenizer import load_tokenizer
from bertkit.options import RunOptions, TrainConfig
from bertkit.tasks.base import EVAL, TRAIN
from bertkit.tasks.family_recipes import family_recipe
from bertkit.tasks.learned import Examples, seen_in, stats_of
from bertkit.training.plan import Driver, RunPlan, plan_run, resolved_options
from bertkit.training.result import FinetuneResult
from bertkit.training.results import (
    RESULTS_FILE,
    judged,
    prediction_rows,
    said,
    said_baseline_warnings,
    said_warnings,
    task_baselines,
    training_results,
    tuned_to_store,
    verdict_on,
)


@writes_outputs
def finetune(
    task: str, run: RunOptions, config: TrainConfig | None = None, driver: Driver | None = None
) -> FinetuneResult:
    """Fine-tune ``run.model`` on ``run.data`` for ``task`` and save a self-contained model directory
    at ``run.output``, with its model card, figures and report.html. ``run.report_to``: trackers
    (bertkit.engine.tracking). ``run.resume`` continues from the newest complete checkpoint of the
    output (``run.resume_from``: that checkpoint); the run's settings must be those of the checkpoint
    (engine/run_identity.py). ``driver``: how a wrapping command drives the run (training/plan.py:
    a fold, a callback after each evaluation, training methods it adds; bertkit/methods/ hooks run at
    the fixed points below).

    The order of events is the contract users rely on: every check that needs no model, then the
    data, then the model, then the work, then the directory written all at once."""
    # long: the order of events above is read top to bottom here, one call per step
    driver = driver or Driver()
    fold, on_evaluation = driver.fold, driver.on_evaluation
    plan = plan_run(task, run, config, fold)
    chosen = planned_methods(plan, driver.methods, run_modes(plan, on_evaluation))
    state = Run(plan, notices=plan.notices)
    state.adapter, state.train_examples, state.eval_examples, held = read_examples(
        plan.adapter, plan.train_source, plan.eval_source, plan.config, fold
    )
    for method in chosen:  # the data each method needs is checked before any model loads
        method.check_data(state)
    network = _load(state, chosen)
    _preprocess(state, plan.checkpoints)
    for method in chosen:  # a method's own targets, or other features to train on
        state.train_features = method.training_features(state.train_features, state)
    spec = state.adapter.training_spec()  # what the data taught (head bias, class weights) is known by now
    for method in chosen:
        spec = method.training_spec(spec)
    trained = _train(state, chosen, spec, network, on_evaluation, keep_predictions=fold is not None)
    from bertkit.networks import recipes

    finished = recipes.finish_model(spec, trained.network, state.model_ref, plan.model)
    sections = {}
    for method in chosen:  # each method's finishing, and what it records
        method.finish(finished, state)
        sections.update(method.sections(finished, state))
    adapter, result, meta = _record(state, chosen, finished.facts, sections, trained, held)
    result.report = _save(state, chosen, trained.report, finished, meta, resolved_options(plan, adapter), result)
    return result


def run_modes(plan: RunPlan, on_evaluation) -> tuple:
    """How this run is driven, for the methods' declarations (bertkit/methods/base.py MODES)."""
    modes = [FOLDS] if plan.fold else [SINGLE]
    if plan.checkpoints is not None:
        modes.append(RESUME)
    if on_evaluation is not None:
        modes.append(TUNE)
    return tuple(modes)


def _load(state: Run, chosen: list):
    """The network to train (the task at the model's max length, the tokenizer and engine in ``state``);
    the checkpoint to resume is checked against the engine before any expensive work."""
    plan, adapter = state.plan, state.adapter
    state.model_ref = resolve_model(plan.model)
    model_config = load_config(state.model_ref, plan.model)  # an offline Hub name or an unsupported model fails here
    plan.config = family_recipe(plan.config, model_config)
    limit = choose_max_length(plan.config.max_length, state.adapter.default_max_length, model_config, plan.model)
    state.adapter = adapter = state.adapter.at_max_length(limit)
    adapter.check_model_config(model_config, plan.model)
    state.tokenizer = load_tokenizer(state.model_ref, plan.model, model_config)
    from bertkit.engine import Engine  # heavy: torch + accelerate
    from bertkit.engine.tracking import logging_dir

    state.engine = Engine(
        plan.config.precision,
        plan.config.seed,
        plan.trackers,
        str(logging_dir(plan.output_path)) if plan.trackers else None,
        threads=plan.threads,
    )
    if plan.checkpoints is not None:
        plan.checkpoints.identity.update(
            processes=state.engine.accelerator.num_processes, precision_used=state.engine.precision
        )
        plan.checkpoints.check_compatible()
    # weights before preprocessing: a corrupt checkpoint fails before any expensive work
    network = next((n for n in (m.load_network(state) for m in chosen) if n is not None), None)
    if network is None:
        network = load_model(adapter.model_class, state.model_ref, plan.model, **adapter.model_kwargs())
    for method in chosen:  # the architecture a method trains (in the methods' order)
        network = method.adapt_network(network, state)
    network = speed_up(adapter, network)
    for_training(network, plan.config)
    return network


def _preprocess(state: Run, checkpoints) -> None:
    """The train and eval features and their stats into ``state``; a resumed state must see the
    training data it saw."""
    adapter, tokenizer = state.adapter, state.tokenizer
    state.train_features = adapter.preprocess(state.train_examples, tokenizer, train=True)
    state.preprocessing = {"train": stats_of(state.train_features), "train_features": len(state.train_features)}
    if state.eval_examples:
        state.eval_features = adapter.preprocess(state.eval_examples, tokenizer, train=False)
        state.preprocessing["eval"] = stats_of(state.eval_features)
    for part in ("train", "eval"):  # truncations, windows, the class weights: said before training
        for text in state.preprocessing.get(part, {}).get("notices", ()):
            notice("data", f"{part}: {text}", part=part)
    if checkpoints is not None:
        checkpoints.identity["train_data_sha1"] = features_sha1(state.train_features, adapter.targets)
        checkpoints.check_compatible()


def _record(state: Run, chosen: list, facts: dict, sections: dict, trained, held) -> tuple:
    """(the task as saved, the result, bertkit.json's contents) of a trained state."""
    plan, report, config = state.plan, trained.report, state.plan.config
    best = next((h for h in report.history if h["step"] == report.best_step), report.history[-1])
    metrics = state.metrics if state.metrics is not None else best.get("metrics", {})
    baselines, degenerate, below = _judged(state, chosen, trained, metrics, trained.verdict_of(best.get("metrics")))
    stored, stored_notices = tuned_to_store(trained.tuned_of(best.get("metrics")), plan.eval_source, config)
    adapter = state.adapter.finished()
    adapter = adapter.with_options(stored) if stored else adapter
    result = FinetuneResult(
        str(plan.output_path),
        metrics,
        report.throughput(),
        report.history,
        report.best_epoch,
        len(state.train_examples),
        len(state.eval_examples),
        state.preprocessing,
        runtime=state.engine.runtime(config.precision),
        best_step=report.best_step,
        resumed_from=report.resumed_from,
        notices=state.notices + said("tuned", stored_notices),  # a threshold stored or not: said now
        warnings=degenerate + [entry["text"] for entry in below],
        before=trained.before,
        baselines=baselines,
        degenerate=bool(degenerate),
        sections={**adapter.directory_sections(facts), **sections},
    )
    held_out = _held_out(plan, adapter, result, trained.predictions_of(best.get("metrics")), state.eval_examples, held)
    meta = ModelMeta(
        kind=adapter.directory_kind,
        task=adapter.state(),
        base_model=plan.model,
        config=config.to_dict(),
        data=data_record(
            plan.train_source,
            plan.eval_source,
            len(state.train_examples),
            len(state.eval_examples),
            name=plan.train_source.name,  # a known name, or any dataset (eval DIR reads it again)
            data_dir=plan.train_source.data_dir,  # where a known dataset was found (a file needs none)
            eval_description=held_out,
        ),
        before=trained.before or None,
        methods=[method.name for method in chosen],
        sections=result.sections,
        metrics=result.metrics,
        best_epoch=report.best_epoch,
        best_step=report.best_step,
        resumed_from=report.resumed_from,
        history=report.history,
        throughput=result.throughput,
        preprocessing=state.preprocessing,
        stopped_early=report.stopped_early,
        runtime=result.runtime,
        eval_details=trained.details_of(best.get("metrics")),
        warnings=[{"kind": "degenerate", "text": text} for text in degenerate] + below or None,
        baselines=baselines or None,
    )
    result.notices += result.warnings
    return adapter, result, meta


def _judged(state: Run, chosen: list, trained, metrics: dict, verdict) -> tuple[list, list, list]:
    """(the baselines judged, the degenerate warning, the baseline warnings), the warnings said now.
    What the saved model's metrics are read against on the same evaluation data: the task's trivial
    baseline, the starting model's score (tasks that compute it), each method's references (what
    a method's model is compared with). A degenerate model's warning names its baseline: said once."""
    from bertkit.metrics.baselines import starting_model

    found = list(trained.baselines) if metrics else []
    if metrics and trained.before:
        found.append(starting_model(trained.before, state.adapter.main_metric))
    for method in chosen if metrics else ():
        found += method.baselines(state)
    baselines = judged(found, metrics)
    degenerate = said_warnings(verdict, "finetune")
    return baselines, degenerate, said_baseline_warnings(baselines, "finetune", verdict)


def _held_out(plan: RunPlan, adapter, result: FinetuneResult, predictions, eval_examples, held) -> str | None:
    """What the evaluation data was when it came from the training data (held out, or a fold: the
    fold's prediction rows then go in ``result.eval_rows``)."""
    if plan.fold:
        rows = prediction_rows(adapter, eval_examples, predictions)
        result.eval_rows = [{**row, "row": held[i] + 1} for i, row in enumerate(rows)]
        return f"fold {plan.fold[0] + 1} of {plan.fold[1]} of the training data ({len(eval_examples)} examples)"
    if eval_examples and not plan.eval_source:
        return f"{len(eval_examples)} held-out examples of the training data"
    return None


def read_examples(adapter, train_source, eval_source, config: TrainConfig, fold=None) -> tuple:
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
    verdicts: list = field(default_factory=list)  # (metrics, a degenerate model's verdict or None)
    baselines: list = field(default_factory=list)  # the task's trivial baseline on the eval data (Task.baseline)

    def details_of(self, metrics) -> dict | None:
        return next((d for m, d, _, _ in self.evaluations if m is metrics), None)

    def tuned_of(self, metrics) -> dict:
        return next((t for m, _, t, _ in self.evaluations if m is metrics), None) or {}

    def predictions_of(self, metrics) -> list | None:
        return next((p for m, _, _, p in self.evaluations if m is metrics), None)

    def verdict_of(self, metrics) -> dict | None:
        return next((v for m, v in self.verdicts if m is metrics), None)


def _train(state: Run, chosen: list, spec, network, on_evaluation=None, keep_predictions=False) -> _Trained:
    """The engine's loop with what the TrainingSpec makes (bertkit/networks/recipes.py) and what the
    methods wrap around it: what it trains, how it collates, how it evaluates."""
    from bertkit.networks import recipes

    engine, adapter, tokenizer, config = state.engine, state.adapter, state.tokenizer, state.plan.config
    eval_examples = state.eval_examples if all(m.evaluates_while_training for m in chosen) else []
    evaluations, verdicts = [], []

    def evaluate(current_model) -> dict:
        kept = {}
        evaluated = recipes.evaluation_network(spec, current_model, tokenizer, engine.unwrap)
        metrics, tuned = score(
            engine,
            adapter,
            evaluated,
            eval_examples,
            state.eval_features,
            config.eval_batch_size,
            tokenizer.pad_token_id,
            tune=adapter.tunes_while_training,
            apply_tuned=adapter.tunes_while_training,
            keep=kept,
        )
        evaluations.append((metrics, kept.get("details"), tuned, kept["predictions"] if keep_predictions else None))
        verdicts.append((metrics, verdict_on(adapter, eval_examples, kept["predictions"], metrics)))
        if on_evaluation is not None:
            on_evaluation(len(evaluations), metrics, adapter.main_metric)
        return metrics

    network = recipes.training_network(spec, network)
    collator = recipes.training_collator(spec, tokenizer, config.seed)
    targets = adapter.targets
    for method in chosen:  # a method's loss around the network, its batches
        network, collator = method.training_network(network, state), method.collator(collator, state)
        targets = method.training_targets(targets)
    baselines = task_baselines(adapter, state.eval_examples, state.eval_features)  # before training: fails early
    before = {}
    if adapter.evaluate_before_training and eval_examples:
        notice("baseline", f"scoring the model before training on the {len(eval_examples)} evaluation examples")
        before = evaluate(network.to(engine.accelerator.device))
        evaluations.clear()
        said = f"before training (zero-shot): {_shown(before)}: the score training must beat"
        notice("baseline", said, before=before)
    with _packed_rows(spec, network, config, engine):
        network, report = engine.fit(
            network,
            state.train_features,
            config,
            tokenizer.pad_token_id,
            evaluate if eval_examples else None,
            adapter.main_metric,
            collate_fn=collator,
            checkpoints=state.plan.checkpoints,
            targets=targets,
            greater_is_better=adapter.greater_is_better,
        )
    for method in reversed(chosen):
        network = method.trained_network(network)
    return _Trained(network, report, before, evaluations, verdicts, baselines)


def _save(state: Run, chosen: list, report, finished, meta: ModelMeta, options: dict | None, result) -> dict:
    """The model directory, all or nothing, with its history, card, figures, report, results.json,
    the state's resolved options and each method's own files (one process)."""
    written, engine, output_path = {}, state.engine, state.plan.output_path
    if engine.is_main_process:
        from bertkit.reporting.build import build_report

        with staged_output(output_path) as staging:
            History(report.log).write(staging / HISTORY_FILE)
            if options is not None:
                write_run_config(staging, options)
            write_json(staging / RESULTS_FILE, training_results(result))
            model = engine.unwrap(finished.model)
            for method in chosen:  # beside the model's: bertkit.json, written last, completes the directory
                method.save_files(staging, finished, state)
            record = save_model_dir(staging, model, state.tokenizer, meta, finished.save_weights)
            written = build_report(staging, record, name=output_path.name)
    engine.accelerator.wait_for_everyone()
    return written


@contextlib.contextmanager
def _packed_rows(spec, network, config: TrainConfig, engine):
    """Training batches run packed where they can (networks/packed_heads.py), said once where "on"
    cannot or packs on CUDA; the model given back runs its own forward."""
    from bertkit.networks import recipes

    device = engine.accelerator.device.type
    said = recipes.pack_rows(spec, network, device, config.packing, config.random_batches)
    if said:
        notice("runtime", said)
    try:
        yield
    finally:
        recipes.unpack_rows(network)


def for_training(network, config: TrainConfig) -> None:
    """--freeze-embeddings and --save-memory on the network (or encoder) to train."""
    if config.freeze_embeddings:
        network.get_input_embeddings().weight.requires_grad_(False)
    if config.save_memory:  # same numbers, far less memory for long sequences (bertkit.engine.attention_recompute)
        from bertkit.engine.attention_recompute import checkpoint_attention

        checkpoint_attention(network)


def _shown(metrics: dict) -> str:
    return ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if isinstance(v, float))


def _first(examples: list, limit: int | None) -> list:
    return Examples(examples[:limit], seen_in(examples)) if limit else examples  # what reading saw stays
