"""`bertkit finetune multi`: several task heads trained over one encoder, saved as one directory.

A composition of the single-task units, not a second spine: each head is planned (training/plan.py),
read and fitted (the finetune spine's reading), preprocessed, given its training module and
collator (networks/recipes.py) and scored (inference.score) exactly as its task alone; the engine's
one loop trains them together, each batch one head's (engine/batching.GroupedBatches).
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from bertkit.api.finetuning import for_training, read_examples
from bertkit.api.multihead_record import directory_meta, replayable
from bertkit.engine.history import FILE as HISTORY_FILE
from bertkit.engine.history import History
from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.inference import score, speed_up
from bertkit.model_dir import staged_output, write_json
from bertkit.model_dir.files import check_output_dir, check_sibling_dir, checkpoint_root
from bertkit.model_dir.run_config import write_run_config
from bertkit.model_dir.writer_lock import writes_outputs
from bertkit.models import choose_max_length, load_config, load_model, resolve_model
from bertkit.models.tokenizer import load_tokenizer
from bertkit.options import LORA_FIELDS, RunOptions, TrainConfig, default_output
from bertkit.options.multihead import MultiOptions
from bertkit.tasks.family_recipes import family_recipe
from bertkit.tasks.multihead import MULTI, HeadSpec, combined_metrics
from bertkit.tasks.training_spec import FINE_TUNE
from bertkit.training.plan import plan_run


@dataclass
class Head:
    """One head as the run knows it: its spec, its checked plan, then its fitted task and data."""

    spec: HeadSpec
    plan: object  # training/plan.RunPlan
    adapter: object = None
    train: list = dataclasses.field(default_factory=list)
    eval: list = dataclasses.field(default_factory=list)
    train_features: list = dataclasses.field(default_factory=list)
    eval_features: list = dataclasses.field(default_factory=list)
    training_spec: object = None


@dataclass
class MultiResult:
    output_dir: str
    metrics: dict  # head/metric ..., mean: of the saved (best) evaluation
    heads: dict  # name -> that head's metrics
    history: list
    throughput: dict
    train_examples: dict  # name -> examples
    runtime: dict
    resumed_from: str | None = None
    report: dict = dataclasses.field(default_factory=dict)  # reporting/build.build_report: figures, notices


@writes_outputs
def finetune_multi(heads: MultiOptions, run: RunOptions, config: TrainConfig | None = None) -> MultiResult:
    """Train every head of ``heads`` over one ``run.model`` encoder and save one directory at
    ``run.output``: every check first (each head's data, the output), then the data, the model,
    the training, the directory all at once."""
    specs = heads.validate().specs()
    config = (config or TrainConfig()).validate("bertkit finetune multi")
    _check_training(config)
    config = dataclasses.replace(config, random_batches=False)  # each batch one head's rows, length-grouped
    run = dataclasses.replace(run, output=run.output or default_output("-".join(s.name for s in specs), "multi-"))
    check_output_dir(Path(run.output).expanduser().resolve(), run.overwrite)  # the run's, before any head's
    added = None
    if heads.from_dir is not None:  # new heads over a trained multi-head model's encoder (api/multihead_from.py)
        from bertkit.api.multihead_from import AddedHeads

        if run.model is not None:
            raise BertkitError("--from takes the encoder (and its heads) from DIR: no --model", "drop --model")
        if run.resume or run.resume_from or config.save_every:  # its scratch encoder is not in a checkpoint's identity
            raise BertkitError("--from does not compose with --save-every or --resume yet", "drop them")
        added = AddedHeads(heads.from_dir, [s.name for s in specs], run.output, heads.freeze_encoder)
        run = dataclasses.replace(run, model=heads.from_dir)
    try:
        return _train(heads, specs, run, config, added)
    finally:
        if added is not None:
            added.discard()


def _train(heads: MultiOptions, specs: list, run: RunOptions, config: TrainConfig, added) -> MultiResult:
    # long: the spine of a multi-head run, each step one call: plan, read, load, train, save
    planned = [Head(spec, _plan(spec, run, config)) for spec in specs]
    output_path = planned[0].plan.output_path
    checkpoints = _checkpoints(planned, run, config)
    for head in planned:
        head.adapter, head.train, head.eval, _ = _read(head)
    model_ref, tokenizer, engine, network = _load(planned, run, config, checkpoints, added)
    config = family_recipe(config, network.encoder.config)
    _preprocess(planned, tokenizer, checkpoints)
    if added is not None:  # DIR's heads join the encoder; scored before it trains
        added.join(network)
        added.score_before(engine, tokenizer, config.eval_batch_size, network.encoder)
    trainer, collator = _trainer(planned, network, tokenizer, heads, config)
    features = [f for head in planned for f in head.train_features]
    evaluate = _evaluation(planned, engine, tokenizer, config)
    with _packed_encoder(network.encoder, config, engine):
        trainer, report = engine.fit(
            trainer,
            features,
            config,
            tokenizer.pad_token_id,
            evaluate,
            "mean",
            collate_fn=collator,
            checkpoints=checkpoints,
        )
    model = _finished(planned, engine.unwrap(trainer), model_ref)
    if added is not None:
        model = added.finish(engine, tokenizer, config.eval_batch_size, model)
    best = next((h for h in report.history if h["step"] == report.best_step), report.history[-1])
    _store_tuned(planned, evaluate, best.get("metrics"), config)
    per_head = {h.spec.name: _of_head(best.get("metrics", {}), h.spec.name) for h in planned}
    result = MultiResult(
        str(output_path),
        best.get("metrics", {}),
        per_head,
        report.history,
        report.throughput(),
        {h.spec.name: len(h.train) for h in planned},
        engine.runtime(config.precision),
        report.resumed_from,
    )
    if engine.is_main_process:
        meta = directory_meta(planned, result, report, model, config)
        meta = added.merge_meta(meta) if added is not None else meta
        with staged_output(output_path) as staging:
            History(report.log).write(staging / HISTORY_FILE)
            write_run_config(staging, replayable(planned, run, config, heads, added))
            from bertkit.networks.multihead import save_multihead

            save_multihead(staging, model)
            tokenizer.save_pretrained(staging)
            from bertkit.reporting.build import build_report

            result.report = build_report(staging, meta, name=output_path.name)  # card, report.html, figures
            write_json(staging / "bertkit.json", meta)  # last: a directory with bertkit.json is complete
    engine.accelerator.wait_for_everyone()
    return result


@contextlib.contextmanager
def _packed_encoder(encoder, config: TrainConfig, engine):
    """--packing on: the shared encoder runs each batch's real tokens only, whichever head reads it
    (networks/packed_heads.py; auto and off: padded, as a task model's length-grouped batches)."""
    from bertkit.networks.packed_heads import pack_shared_encoder, unpack_this_encoder

    if config.packing == "on":
        said = pack_shared_encoder(encoder, engine.accelerator.device.type)
        if said:
            notice("runtime", said)
    try:
        yield
    finally:
        unpack_this_encoder(encoder)


def _check_training(config: TrainConfig) -> None:
    """The training options a multi-head run does not honour, refused in one line each."""
    given = [name for name in LORA_FIELDS if getattr(config, name) not in (None, False)]
    if given:  # every head fine-tunes the whole shared encoder
        flag = f"--{given[0].replace('_', '-')}"
        raise BertkitError(f"bertkit finetune multi does not compose with {flag}", f"drop {flag}")
    if config.random_batches:  # engine/batching.GroupedBatches: one head's rows a batch, length-grouped
        raise BertkitError(
            "bertkit finetune multi does not compose with --random-batches: each batch holds one head's rows, "
            "length-grouped",
            "drop --random-batches (or random_batches from the --config file)",
        )
    if config.calibrate or config.calibration_data:  # one temperature per head is not fitted (methods/calibration.py)
        raise BertkitError(
            "bertkit finetune multi does not compose with --calibrate yet",
            "drop --calibrate; calibrate an exported head (bertkit export head, then bertkit calibrate)",
        )


def _plan(spec: HeadSpec, run: RunOptions, config: TrainConfig):
    """The head's run plan (its data resolved and checked, the output checked), with the head's
    name on its first line of any refusal."""
    head_run = dataclasses.replace(
        run, data=spec.data, eval_data=spec.eval_data, output=run.output, resume=False, resume_from=None
    )
    head_config = dataclasses.replace(config, task_options=spec.task_options(), save_every=None)
    try:
        return plan_run(spec.task, head_run, head_config, None)
    except BertkitError as exc:
        raise BertkitError(f"head {spec.name}: {exc.message}", exc.hint) from None


def _read(head: Head) -> tuple:
    """(the head's task fitted on its data, train, eval, -): the finetune spine's reading, named."""
    plan = head.plan
    try:
        found = read_examples(plan.adapter, plan.train_source, plan.eval_source, plan.config)
    except BertkitError as exc:
        raise BertkitError(f"head {head.spec.name}: {exc.message}", exc.hint) from None
    if not found[1]:
        raise BertkitError(
            f"head {head.spec.name}: its data {head.spec.data} has no training examples",
            "give the head data with rows, or drop the head",
        )
    return found


def _checkpoints(planned: list, run: RunOptions, config: TrainConfig):
    """The run's one checkpoints directory (every head's data in its identity), or None."""
    if not (config.save_every or run.resume or run.resume_from):
        return None
    from bertkit.engine.checkpoints import Checkpoints
    from bertkit.training.plan import run_identity

    output_path = planned[0].plan.output_path
    check_sibling_dir(checkpoint_root(output_path), "checkpoints")
    identity = {"task": MULTI, "model": planned[0].plan.model, **config.to_dict()}
    identity["heads"] = [
        {
            **h.spec.record(),
            **run_identity(h.spec.task, h.plan.model, h.plan.config, h.plan.train_source, h.plan.eval_source),
        }
        for h in planned
    ]
    return Checkpoints.plan(output_path, config, identity, run.resume, run.resume_from, run.overwrite)


def _load(planned: list, run: RunOptions, config: TrainConfig, checkpoints, added=None):
    """(where the weights came from, the tokenizer, the engine, the multi-head model): every head's
    task model loaded from ``--model`` (``--from``: DIR's encoder), then all reading the first one's encoder."""
    model = planned[0].plan.model
    model_ref = added.encoder_checkpoint() if added is not None else resolve_model(model)
    model_config = load_config(model_ref, model)
    tokenizer = load_tokenizer(model_ref, model, model_config)
    from bertkit.engine import Engine

    # several processes: rank r takes batches r, r + world, ... of the one plan (engine/batching.shard_batches),
    # so one optimizer step sums world batches, of one head or several, as --grad-accum world does in one process
    engine = Engine(config.precision, config.seed, threads=run.threads, idle_weights=True)
    if checkpoints is not None:
        checkpoints.identity.update(processes=engine.accelerator.num_processes, precision_used=engine.precision)
        checkpoints.check_compatible()
    models = {}
    for head in planned:
        limit = choose_max_length(config.max_length, head.adapter.default_max_length, model_config, model)
        head.adapter = head.adapter.at_max_length(limit)
        head.adapter.check_model_config(model_config, model)
        adapter = head.adapter
        models[head.spec.name] = load_model(adapter.model_class, model_ref, model, **adapter.model_kwargs())
    from bertkit.networks.multihead import MultiHeadModel, share_encoder

    encoder, models = share_encoder(models)
    adapters = [h.adapter for h in planned] + (list(added.adapters.values()) if added is not None else [])
    if all(a.reads_first_token_only for a in adapters):  # every head (--from's too) reads [CLS] alone: the shortcut
        speed_up(planned[0].adapter, next(iter(models.values())))
    for_training(encoder, config)
    return model_ref, tokenizer, engine, MultiHeadModel(encoder, models)


def _preprocess(planned: list, tokenizer, checkpoints) -> None:
    from bertkit.networks.multihead import HEAD_KEY

    for index, head in enumerate(planned):
        head.train_features = head.adapter.preprocess(head.train, tokenizer, train=True)
        for feature in head.train_features:
            feature[HEAD_KEY] = index
        if head.eval:
            head.eval_features = head.adapter.preprocess(head.eval, tokenizer, train=False)
    if checkpoints is not None:
        from bertkit.engine.run_identity import features_sha1

        checkpoints.identity["train_data_sha1"] = [features_sha1(h.train_features, h.adapter.targets) for h in planned]
        checkpoints.check_compatible()


def _trainer(planned: list, network, tokenizer, heads: MultiOptions, config: TrainConfig):
    """The engine's module and collator: each head's training module and collator as its recipe makes them."""
    from bertkit.networks import recipes
    from bertkit.networks.multihead import MultiHeadCollator, MultiHeadTrainer, head_collator

    modules, collators = {}, []
    for head in planned:
        head.training_spec = head.adapter.training_spec()
        if head.training_spec.recipe != FINE_TUNE:
            raise BertkitError(
                f"head {head.spec.name}: its task trains with {head.training_spec.recipe}",
                "bertkit finetune multi trains fine-tuned heads only",
            )
        modules[head.spec.name] = recipes.training_network(head.training_spec, network.heads[head.spec.name])
        own = recipes.training_collator(head.training_spec, tokenizer, config.seed)
        collators.append(head_collator(own, tokenizer.pad_token_id, head.adapter.targets))
    trainer = MultiHeadTrainer(network.encoder, modules, [h.spec.weight for h in planned])
    return trainer, MultiHeadCollator(collators, heads.sampling, heads.temperature)


def _evaluation(planned: list, engine, tokenizer, config: TrainConfig):
    """Every head scored on its own evaluation data as its task alone is; ``mean`` selects."""
    from bertkit.networks.multihead import HeadView

    scored = [h for h in planned if h.eval]

    def evaluate(current) -> dict:
        trainer = engine.unwrap(current)
        per_head, tuned = {}, {}
        for head in scored:
            name = head.spec.name
            module = trainer.heads[name]
            view = HeadView(trainer.encoder, getattr(module, "model", module))  # a loss wrapper's model
            tunes = head.adapter.tunes_while_training  # a multi-label threshold, as the task alone tunes it
            per_head[name], tuned[name] = score(
                engine,
                head.adapter,
                view,
                head.eval,
                head.eval_features,
                config.eval_batch_size,
                tokenizer.pad_token_id,
                tune=tunes,
                apply_tuned=tunes,
            )
        trainer.train()
        mains = {h.spec.name: h.adapter.main_metric for h in scored}
        metrics = combined_metrics(per_head, mains, {h.spec.name: h.adapter.metric_scale for h in scored})
        evaluate.tuned.append((metrics, tuned))
        return metrics

    evaluate.tuned = []  # (metrics, {head: what it tuned}) per evaluation: the saved one's are stored
    return evaluate if scored else None


def _store_tuned(planned: list, evaluate, best_metrics, config: TrainConfig) -> None:
    """What each head tuned at the saved evaluation, stored in its task as the task alone stores it
    (training/results.tuned_to_store: only from its whole dev data)."""
    from bertkit.training.results import tuned_to_store

    found = next((t for m, t in getattr(evaluate, "tuned", ()) if m is best_metrics), {})
    for head in planned:
        stored, _ = tuned_to_store(found.get(head.spec.name) or {}, head.plan.eval_source, config)
        if stored:
            head.adapter = head.adapter.with_options(stored)


def _finished(planned: list, trainer, model_ref: str):
    """The model to save: each head finished by its recipe (a regression's scaling folded in)."""
    from bertkit.networks import recipes
    from bertkit.networks.multihead import MultiHeadModel

    models = {}
    for head in planned:
        finished = recipes.finish_model(head.training_spec, trainer.heads[head.spec.name], model_ref, head.plan.model)
        models[head.spec.name] = finished.model
    return MultiHeadModel(trainer.encoder, models).eval()


def _of_head(metrics: dict, name: str) -> dict:
    prefix = f"{name}/"
    return {k[len(prefix) :]: v for k, v in metrics.items() if k.startswith(prefix)}
