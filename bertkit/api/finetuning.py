"""`bertkit finetune`: train a task model and save a self-contained model directory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bertkit.api.finetune_plan import RunPlan, plan_run, resolved_options
from bertkit.api.finetune_result import FinetuneResult
from bertkit.api.results import (
    RESULTS_FILE,
    prediction_rows,
    said,
    said_warnings,
    training_results,
    tuned_to_store,
    verdict_on,
)
from bertkit.data import registry
from bertkit.data.folds import split_fold
from bertkit.engine.history import FILE as HISTORY_FILE
from bertkit.engine.history import History
from bertkit.engine.run_identity import features_sha1
from bertkit.events import notice
from bertkit.inference import score, speed_up
from bertkit.model_dir import ModelMeta, data_record, save_model_dir, staged_output, write_json
from bertkit.model_dir.run_config import write_run_config
from bertkit.models import DEFAULT_MODEL, choose_max_length, load_config, load_model, load_tokenizer, resolve_model
from bertkit.networks.lora import with_adapters  # torch-free to import: peft and torch load with --lora
from bertkit.options import TrainConfig
from bertkit.tasks.base import EVAL, TRAIN
from bertkit.tasks.few_shot import SETFIT, recipe_of
from bertkit.tasks.learned import Examples, seen_in, stats_of


def finetune(
    task: str,
    data: str,
    output: str,
    model: str = DEFAULT_MODEL,
    eval_data: str | None = None,
    data_dir: str | None = None,
    config: TrainConfig | None = None,
    overwrite: bool = False,
    report_to: str | None = None,
    threads: int | None = None,
    resume: bool = False,
    resume_from: str | None = None,
    on_evaluation=None,
    fold: tuple[int, int] | None = None,
    distill=None,
) -> FinetuneResult:
    """Fine-tune ``model`` on ``data`` for ``task`` and save a self-contained model directory, with
    its model card, figures and report.html. ``report_to``: trackers (bertkit.engine.tracking).
    ``resume`` continues from the newest complete checkpoint of ``output`` (``resume_from``: that
    checkpoint); the run's settings must be those of the checkpoint (engine/run_identity.py).
    ``on_evaluation(number, metrics, main_metric)`` after each evaluation (tune's pruning: it may raise).
    ``fold`` (k, K): train on the other folds of ``data``, evaluate on fold k (bertkit.api.folds).
    ``distill`` (bertkit.api.distillation.Distillation): train a student on a teacher's outputs.

    The order of events is the contract users rely on: every check that needs no model, then the
    data, then the model, then the work, then the directory written all at once."""
    # long: the order of events above is read top to bottom here, one call per step
    plan = plan_run(
        task, data, output, model, eval_data, data_dir, config, overwrite, report_to, threads, resume, resume_from, fold
    )
    if recipe_of(plan.adapter.options) == SETFIT:  # few-shot: the body on pairs, then a head (api/few_shot.py)
        from bertkit.api.few_shot import finetune_setfit

        return finetune_setfit(plan)
    adapter, train_examples, eval_examples, held = _read_examples(
        plan.adapter, plan.train_source, plan.eval_source, plan.config, fold
    )
    if distill is not None:  # the teacher's task and labels are the data's: checked before any model loads
        distill.check_task(adapter)
    adapter, loaded = _load(plan, adapter, distill)
    train_features, eval_features, preprocessing = _preprocess(
        adapter, loaded, train_examples, eval_examples, plan.checkpoints
    )
    if distill is not None:  # the teacher's logits (cached), and the text it labels
        train_features = distill.with_teacher(adapter, loaded.engine, loaded.tokenizer, train_features, preprocessing)
    spec = adapter.training_spec()  # what the data taught (head bias, class weights) is known by now
    trained = _train(
        loaded.engine,
        adapter,
        spec,
        loaded.network,
        loaded.tokenizer,
        plan.config,
        train_features,
        eval_examples,
        eval_features,
        plan.checkpoints,
        on_evaluation,
        keep_predictions=fold is not None,
        distill=distill,
    )
    from bertkit.networks import recipes

    finished = recipes.finish_model(spec, trained.network, loaded.model_ref, model)
    recipes.finish_lora(finished, loaded.lora, adapter.model_class)  # merged, or written as adapter files
    if distill is not None:  # what the student is, measured against its teacher
        finished.facts["sections"] = distill.sections(loaded.engine, finished.model, train_features)
    adapter, result, meta = _record(
        plan,
        adapter.finished(),
        finished.facts,
        trained,
        loaded.engine,
        preprocessing,
        train_examples,
        eval_examples,
        held,
    )
    result.report = _save(
        loaded.engine,
        plan.output_path,
        trained.report,
        finished,
        loaded.tokenizer,
        meta,
        resolved_options(plan, adapter),
        training_results(result),
    )
    return result


@dataclass
class _Loaded:
    model_ref: str
    tokenizer: object
    engine: object
    network: object
    lora: dict | None = None  # --lora: what add_adapters made (bertkit.json's lora section)


def _load(plan: RunPlan, adapter, distill=None) -> tuple:
    """(the task at the model's max length, the tokenizer, engine and weights); the checkpoint to resume
    is checked against the engine before any expensive work."""
    model_ref = resolve_model(plan.model)
    model_config = load_config(model_ref, plan.model)  # an offline Hub name or an unsupported model fails here
    adapter.max_length = choose_max_length(plan.config.max_length, adapter.default_max_length, model_config, plan.model)
    adapter.check_model_config(model_config, plan.model)
    tokenizer = load_tokenizer(model_ref, plan.model, model_config)
    from bertkit.engine import Engine  # heavy: torch + accelerate
    from bertkit.engine.tracking import logging_dir

    engine = Engine(
        plan.config.precision,
        plan.config.seed,
        plan.trackers,
        str(logging_dir(plan.output_path)) if plan.trackers else None,
        threads=plan.threads,
    )
    if plan.checkpoints is not None:
        plan.checkpoints.identity.update(processes=engine.accelerator.num_processes, precision_used=engine.precision)
        plan.checkpoints.check_compatible()
    # weights before preprocessing: a corrupt checkpoint fails before any expensive work
    network = load_model(adapter.model_class, model_ref, plan.model, **adapter.model_kwargs())
    network = speed_up(adapter, distill.student(network) if distill is not None else network)
    _for_training(network, plan.config)
    lora = with_adapters(network, plan.config, plan.model, adapter.directory_kind, plan.notices)  # --lora, or None
    return adapter, _Loaded(model_ref, tokenizer, engine, network, lora)


def _preprocess(adapter, loaded: _Loaded, train_examples, eval_examples, checkpoints) -> tuple:
    """(train features, eval features, their stats); a resumed run must see the training data it saw."""
    train_features = adapter.preprocess(train_examples, loaded.tokenizer, train=True)
    preprocessing = {"train": stats_of(train_features), "train_features": len(train_features)}
    eval_features = adapter.preprocess(eval_examples, loaded.tokenizer, train=False) if eval_examples else []
    if eval_examples:
        preprocessing["eval"] = stats_of(eval_features)
    for part in ("train", "eval"):  # truncations, windows, the class weights: said before training
        for text in preprocessing.get(part, {}).get("notices", ()):
            notice("data", f"{part}: {text}", part=part)
    if checkpoints is not None:
        checkpoints.identity["train_data_sha1"] = features_sha1(train_features, adapter.targets)
        checkpoints.check_compatible()
    return train_features, eval_features, preprocessing


def _record(
    plan: RunPlan, adapter, facts, trained, engine, preprocessing, train_examples, eval_examples, held
) -> tuple:
    """(the task as saved, the result, bertkit.json's contents) of a trained run."""
    report, config, eval_source = trained.report, plan.config, plan.eval_source
    best = next((h for h in report.history if h["step"] == report.best_step), report.history[-1])
    stored, stored_notices = tuned_to_store(trained.tuned_of(best.get("metrics")), eval_source, config)
    adapter = adapter.with_options(stored) if stored else adapter
    result = FinetuneResult(
        str(plan.output_path),
        best.get("metrics", {}),
        report.throughput(),
        report.history,
        report.best_epoch,
        len(train_examples),
        len(eval_examples),
        preprocessing,
        runtime=engine.runtime(config.precision),
        best_step=report.best_step,
        resumed_from=report.resumed_from,
        notices=plan.notices + said("tuned", stored_notices),  # a threshold stored or not: said now
        warnings=said_warnings(trained.verdict_of(best.get("metrics")), "finetune"),
        before=trained.before,
        sections={
            **adapter.directory_sections(facts),
            **facts.get("sections", {}),
            **({"lora": facts["lora"]} if "lora" in facts else {}),
        },
    )
    held_out = _held_out(plan, adapter, result, trained.predictions_of(best.get("metrics")), eval_examples, held)
    known = registry.is_known(plan.data)
    meta = ModelMeta(
        kind=adapter.directory_kind,
        task=adapter.state(),
        base_model=plan.model,
        config=config.to_dict(),
        data=data_record(
            plan.train_source,
            eval_source,
            len(train_examples),
            len(eval_examples),
            name=registry.dataset_name(plan.data),  # a known name, or any dataset (eval DIR reads it again)
            # where a known dataset was found, for `bertkit eval DIR` (a file needs none)
            data_dir=registry.data_dir(plan.data_dir) if known else None,
            eval_description=held_out,
        ),
        before=trained.before or None,
        **result.sections,
        metrics=result.metrics,
        best_epoch=report.best_epoch,
        best_step=report.best_step,
        resumed_from=report.resumed_from,
        history=report.history,
        throughput=result.throughput,
        preprocessing=preprocessing,
        stopped_early=report.stopped_early,
        runtime=result.runtime,
        eval_details=trained.details_of(best.get("metrics")),
        warnings=[{"kind": "degenerate", "text": text} for text in result.warnings] or None,
    )
    result.notices += result.warnings
    return adapter, result, meta


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
    verdicts: list = field(default_factory=list)  # (metrics, a degenerate model's verdict or None)

    def details_of(self, metrics) -> dict | None:
        return next((d for m, d, _, _ in self.evaluations if m is metrics), None)

    def tuned_of(self, metrics) -> dict:
        return next((t for m, _, t, _ in self.evaluations if m is metrics), None) or {}

    def predictions_of(self, metrics) -> list | None:
        return next((p for m, _, _, p in self.evaluations if m is metrics), None)

    def verdict_of(self, metrics) -> dict | None:
        return next((v for m, v in self.verdicts if m is metrics), None)


def _train(
    engine,
    adapter,
    spec,
    network,
    tokenizer,
    config,
    train_features,
    eval_examples,
    eval_features,
    checkpoints,
    on_evaluation=None,
    keep_predictions=False,
    distill=None,
) -> _Trained:
    """The engine's loop with what the task's TrainingSpec makes (bertkit/networks/recipes.py): what
    it trains, how it collates, how it evaluates."""
    from bertkit.networks import recipes

    evaluations, verdicts = [], []

    def evaluate(current_model) -> dict:
        kept = {}
        evaluated = recipes.evaluation_network(spec, current_model, tokenizer, engine.unwrap)
        metrics, tuned = score(
            engine,
            adapter,
            evaluated,
            eval_examples,
            eval_features,
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
    if distill is not None:  # the loss on the teacher's outputs; batches carry its logits
        network, collator = distill.training_network(network), distill.collator(tokenizer, adapter.targets)
    before = {}
    if adapter.evaluate_before_training and eval_examples:
        before = evaluate(network.to(engine.accelerator.device))
        evaluations.clear()
    network, report = engine.fit(
        network,
        train_features,
        config,
        tokenizer.pad_token_id,
        evaluate if eval_examples else None,
        adapter.main_metric,
        collate_fn=collator,
        checkpoints=checkpoints,
        targets=adapter.targets,
        greater_is_better=adapter.greater_is_better,
    )
    network = distill.trained_model(network) if distill is not None else network
    return _Trained(network, report, before, evaluations, verdicts)


def _save(
    engine, output_path: Path, report, finished, tokenizer, meta: ModelMeta, options: dict | None, results: dict
) -> dict:
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
            record = save_model_dir(staging, engine.unwrap(finished.model), tokenizer, meta, finished.save_weights)
            written = build_report(staging, record, name=output_path.name)
    engine.accelerator.wait_for_everyone()
    return written


def _for_training(network, config: TrainConfig) -> None:
    if config.freeze_embeddings:
        network.get_input_embeddings().weight.requires_grad_(False)
    if config.save_memory:  # same numbers, far less memory for long sequences (bertkit.engine.attention_recompute)
        from bertkit.engine.attention_recompute import checkpoint_attention

        checkpoint_attention(network)


def _first(examples: list, limit: int | None) -> list:
    return Examples(examples[:limit], seen_in(examples)) if limit else examples  # what reading saw stays
