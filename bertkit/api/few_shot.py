"""`bertkit finetune cls|pair --recipe setfit`: few-shot classification as SetFit trains it.

The run is finetune's (api/finetuning.py hands its checked plan here): the same reading of the
data, the same engine and options (batch size, learning rate, epochs, seed, precision). What
differs is what is trained, in two stages:

1. the body: the encoder on contrastive pairs of the labelled rows (tasks/few_shot.py draws them;
   networks/contrastive.py holds the cosine-similarity loss, through the SETFIT_BODY recipe);
2. the head: scikit-learn's LogisticRegression on the trained body's mean-pooled embeddings of the
   training rows (L2-normalised where the checkpoint's sentence-transformers modules normalise, as
   SetFit's body does: probing/setfit_files.py), scored once on the evaluation data.

The directory is a probe's (the encoder, ``probe_head.safetensors``, bertkit.json's ``probe``
section), so `eval`, `predict` and `serve` run it unchanged; and SetFit's files beside it make it a
``SetFitModel.from_pretrained(DIR)`` with the same predictions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertkit.api.finetune_plan import RunPlan, resolved_options
from bertkit.api.finetune_result import FinetuneResult
from bertkit.api.results import RESULTS_FILE, training_results
from bertkit.data import registry
from bertkit.engine.history import FILE as HISTORY_FILE
from bertkit.engine.history import History
from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.model_dir import PROBE_HEAD_FILE, ModelMeta, data_record, save_model_dir, staged_output, write_json
from bertkit.model_dir.run_config import write_run_config
from bertkit.models import choose_max_length, load_config, load_tokenizer, resolve_model
from bertkit.probing.setfit_files import CLASSIFIER, base_normalizes, fit_logistic_head, write_setfit_files
from bertkit.tasks.base import EVAL, TRAIN
from bertkit.tasks.few_shot import (
    DEFAULT_PAIRS,
    check_problem_type,
    check_rows,
    contrastive_pairs,
)
from bertkit.tasks.learned import Examples, seen_in
from bertkit.tasks.training_spec import SETFIT_BODY, TrainingSpec

LOSS = "CosineSimilarityLoss: mean squared error of cos(u, v) against 1 (same label) or 0"


@dataclass
class _Body:
    engine: object
    tokenizer: object
    encoder: object  # the trained encoder, bare
    report: object  # the engine's TrainReport
    train_features: list
    eval_features: list
    pairs: list
    preprocessing: dict
    normalize: bool = False  # the head reads unit vectors (the checkpoint's sentence-transformers modules say so)


@dataclass
class _Head:
    classifier: object
    weight: np.ndarray
    bias: np.ndarray
    metrics: dict


def finetune_setfit(plan: RunPlan) -> FinetuneResult:
    """Train the body on pairs, fit the head, save the directory (all or nothing); ``plan``: finetune's."""
    check_plan(plan)
    adapter, train_examples, eval_examples = read(plan)
    body = train_body(plan, adapter, train_examples, eval_examples)
    head = fit_head(plan, adapter, body, train_examples, eval_examples)
    result, meta = record(plan, adapter, body, head, train_examples, eval_examples)
    result.report = save(plan, adapter, body, head, meta, result)
    return result


def check_plan(plan: RunPlan) -> None:
    """What --recipe setfit does not do, refused before any data is read."""
    options = plan.adapter.options
    check_problem_type(options.get("problem_type"))
    refused = [
        ("--class-weights", options.get("class_weights") not in (None, "none")),
        ("--loss", options.get("loss") not in (None, "cross-entropy")),
        ("--focal-gamma", options.get("focal_gamma") is not None),
        ("--folds", plan.fold is not None),
        ("--save-every/--resume", plan.checkpoints is not None),
        ("--eval-every", bool(plan.config.eval_every)),
        ("--patience", bool(plan.config.patience)),
    ]
    for flag, given in refused:
        if given:
            raise BertkitError(
                f"{flag} does not apply to --recipe setfit (the body trains on pairs with the cosine loss, "
                "then the head is fitted once)",
                f"drop {flag}, or use --recipe finetune",
            )


def read(plan: RunPlan) -> tuple:
    """(the task as trained, train examples, eval examples): the labels checked for pairs."""
    adapter, config = plan.adapter, plan.config
    read_rows = adapter.read(plan.train_source, TRAIN)
    seen = seen_in(read_rows)
    check_problem_type(seen.get("problem_type"))
    train_examples = read_rows
    if config.max_train_samples:
        train_examples = Examples(read_rows[: config.max_train_samples], seen)
    adapter = adapter.with_learned(adapter.fit(train_examples, seen))
    check_rows([ex["label"] for ex in train_examples], adapter.labels)
    eval_examples = []
    if plan.eval_source is not None:
        eval_examples = adapter.read(plan.eval_source, EVAL)
        if config.max_eval_samples:
            eval_examples = Examples(eval_examples[: config.max_eval_samples], seen_in(eval_examples))
        adapter.check_eval_examples(eval_examples, plan.eval_source)
    return adapter, train_examples, eval_examples


def train_body(plan: RunPlan, adapter, train_examples, eval_examples) -> _Body:
    """The encoder trained on the pairs, through the engine's loop (its optimizer, schedule, precision)."""
    from bertkit.engine import Engine  # heavy: torch + accelerate
    from bertkit.engine.tracking import logging_dir
    from bertkit.networks import recipes
    from bertkit.networks.contrastive import pair_feature
    from bertkit.networks.embedding import load_encoder

    config = plan.config
    model_ref = resolve_model(plan.model)
    model_config = load_config(model_ref, plan.model)
    adapter.max_length = choose_max_length(config.max_length, adapter.default_max_length, model_config, plan.model)
    tokenizer = load_tokenizer(model_ref, plan.model, model_config)
    logs = str(logging_dir(plan.output_path)) if plan.trackers else None
    engine = Engine(config.precision, config.seed, plan.trackers, logs, threads=plan.threads)
    encoder = load_encoder(model_ref, plan.model)
    _for_training(encoder, config)
    train_features = adapter.preprocess(train_examples, tokenizer, train=False)
    eval_features = adapter.preprocess(eval_examples, tokenizer, train=False) if eval_examples else []
    per_row = int(adapter.options.get("pairs_per_example") or DEFAULT_PAIRS)
    pairs = contrastive_pairs([ex["label"] for ex in train_examples], per_row, config.seed)
    positive = sum(pair.similarity == 1.0 for pair in pairs)
    preprocessing = _preprocessing(train_features, eval_features, len(pairs))
    notice(
        "data",
        f"train: {len(pairs)} contrastive pairs from {len(train_examples)} labelled rows ({per_row} per row: "
        f"{positive} positive, {len(pairs) - positive} negative)",
        pairs=len(pairs),
        positive=positive,
    )
    features = [pair_feature(train_features[p.first], train_features[p.second], p.similarity) for p in pairs]
    spec = TrainingSpec(recipe=SETFIT_BODY)
    network, report = engine.fit(
        recipes.training_network(spec, encoder),
        features,
        config,
        tokenizer.pad_token_id,
        collate_fn=recipes.training_collator(spec, tokenizer, config.seed),
        targets={},
    )
    trained = recipes.finish_model(spec, engine.unwrap(network), model_ref, plan.model).model
    normalize = _head_normalizes(model_ref, plan.model)
    return _Body(engine, tokenizer, trained, report, train_features, eval_features, pairs, preprocessing, normalize)


def _head_normalizes(model_ref: str, display_name: str) -> bool:
    """Whether the head reads unit vectors (as SetFit's body gives them for this checkpoint), said."""
    normalize = base_normalizes(str(model_ref))
    if normalize:
        notice(
            "data",
            f"head: on L2-normalised embeddings ({display_name}'s sentence-transformers modules end in "
            "Normalize, so SetFit's body gives unit vectors)",
            normalize=True,
        )
    return normalize


def _for_training(encoder, config) -> None:
    """finetune's --freeze-embeddings and --save-memory, on the encoder both sides of a pair run."""
    if config.freeze_embeddings:
        encoder.get_input_embeddings().weight.requires_grad_(False)
    if config.save_memory:
        from bertkit.engine.attention_recompute import checkpoint_attention

        checkpoint_attention(encoder)


def _preprocessing(train_features, eval_features, pairs: int) -> dict:
    """finetune's preprocessing record (truncations said now), with the pairs as the training features."""
    from bertkit.tasks.learned import stats_of

    preprocessing = {"train": stats_of(train_features), "train_features": pairs}
    if eval_features:
        preprocessing["eval"] = stats_of(eval_features)
    for part in ("train", "eval"):
        for text in preprocessing.get(part, {}).get("notices", ()):
            notice("data", f"{part}: {text}", part=part)
    return preprocessing


def fit_head(plan: RunPlan, adapter, body: _Body, train_examples, eval_examples) -> _Head:
    """SetFit's head on the trained body's embeddings of the training rows; its eval metrics."""
    from bertkit.networks.embedding import EmbeddingNetwork, l2_normalize
    from bertkit.networks.embedding import run as run_network
    from bertkit.networks.pooling import parse_pooling

    embedder = EmbeddingNetwork(body.encoder, parse_pooling("mean"))
    batch, pad = plan.config.eval_batch_size, body.tokenizer.pad_token_id

    def vectors(features) -> np.ndarray:
        found = np.stack(run_network(body.engine, embedder, features, batch, pad))
        return (l2_normalize(found) if body.normalize else found).astype(np.float64)

    labels = np.array([adapter.labels.index(ex["label"]) for ex in train_examples])
    classifier, weight, bias = fit_logistic_head(
        vectors(body.train_features), labels, len(adapter.labels), plan.config.seed
    )
    metrics = {}
    if eval_examples:
        outputs = {"logits": list(vectors(body.eval_features) @ weight.T + bias)}
        predictions = adapter.postprocess(eval_examples, body.eval_features, outputs)
        metrics = {
            k: (round(v, 6) if isinstance(v, float) else v)
            for k, v in adapter.metrics(eval_examples, predictions).items()
        }
    return _Head(classifier, weight, bias, metrics)


def record(plan: RunPlan, adapter, body: _Body, head: _Head, train_examples, eval_examples) -> tuple:
    """(the result, bertkit.json's contents)."""
    report, config = body.report, plan.config
    last = report.history[-1] if report.history else {}
    epoch, step = last.get("epoch"), last.get("step")
    result = FinetuneResult(
        str(plan.output_path),
        head.metrics,
        report.throughput(),
        report.history,
        epoch,
        len(train_examples),
        len(eval_examples),
        body.preprocessing,
        runtime=body.engine.runtime(config.precision),
        best_step=step,
        notices=list(plan.notices),
    )
    positive = sum(pair.similarity == 1.0 for pair in body.pairs)
    probe = {
        "head": PROBE_HEAD_FILE,
        "pooling": "mean",
        "classifier": CLASSIFIER,
        "normalize": body.normalize,
        "encoder": "trained on contrastive pairs of the labelled rows (--recipe setfit)",
        "setfit": {
            "pairs_per_example": int(adapter.options.get("pairs_per_example") or DEFAULT_PAIRS),
            "pairs": len(body.pairs),
            "positive_pairs": positive,
            "negative_pairs": len(body.pairs) - positive,
            "loss": LOSS,
        },
    }
    meta = ModelMeta(
        kind="finetune",
        task=adapter.finished().state(),
        base_model=plan.model,
        config=config.to_dict(),
        data=data_record(
            plan.train_source,
            plan.eval_source,
            len(train_examples),
            len(eval_examples),
            name=registry.dataset_name(plan.data),
            data_dir=registry.data_dir(plan.data_dir) if registry.is_known(plan.data) else None,
        ),
        metrics=head.metrics,
        best_epoch=epoch,
        best_step=step,
        history=report.history,
        throughput=result.throughput,
        preprocessing=body.preprocessing,
        runtime=result.runtime,
        probe=probe,
    )
    return result, meta


def save(plan: RunPlan, adapter, body: _Body, head: _Head, meta: ModelMeta, result: FinetuneResult) -> dict:
    """The directory, all or nothing: bertkit's files (encoder, head, bertkit.json, history, card,
    report) and SetFit's (probing/setfit_files.py); main process only."""
    written = {}
    if body.engine.is_main_process:
        from safetensors.numpy import save_file

        from bertkit.reporting.build import build_report

        encoder = body.encoder.float()  # the saved weights are fp32 whatever precision trained them
        with staged_output(Path(plan.output_path)) as staging:
            History(body.report.log).write(staging / HISTORY_FILE)
            write_run_config(staging, resolved_options(plan, adapter))
            write_json(staging / RESULTS_FILE, training_results(result))
            record_ = save_model_dir(staging, encoder, body.tokenizer, meta)
            weights = {"weight": head.weight.astype(np.float32), "bias": head.bias.astype(np.float32)}
            save_file(weights, str(staging / PROBE_HEAD_FILE))
            dim = int(head.weight.shape[1])
            write_setfit_files(staging, head.classifier, adapter.labels, adapter.max_length, dim, body.normalize)
            written = build_report(staging, record_, name=plan.output_path.name)
    body.engine.accelerator.wait_for_everyone()
    return written
