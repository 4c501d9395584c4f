"""``bertkit probe``: a linear classifier on frozen features (embed + scikit-learn, no training loop).

The encoder is never updated: rows are embedded once through ``Engine.infer`` (the task's own
features, so the same truncation as finetune/eval/predict), then a scikit-learn
LogisticRegression is fit on standardised vectors, with C chosen on a stratified held-out part of
the training data and the model refit on all of it with that C (classifier.py).

The saved directory follows the finetune contract (``bertkit.json`` with task, labels, data,
metrics; tokenizer files), so ``bertkit eval`` and ``bertkit predict`` work on it:

* ``config.json`` + ``model.safetensors``: a copy of the frozen encoder (``AutoModel.from_pretrained(DIR)``);
* ``probe_head.safetensors``: ``weight`` (labels x dim) and ``bias`` (labels), the standardisation
  folded in, so ``logits = weight @ pool(encoder(x)) + bias`` and probabilities are their softmax;
* ``bertkit.json`` → ``probe``: the pooling mode, C, and the held-out score of every C tried.

``probe`` is the spine: checks -> read -> load -> fit -> save, one named function per step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bertkit.data import registry
from bertkit.data.hub_datasets import DatasetChoice
from bertkit.errors import BertkitError
from bertkit.model_dir import (
    PROBE_HEAD_FILE,
    ModelMeta,
    check_inputs_kept,
    check_output_dir,
    data_record,
    save_model_dir,
    staged_output,
)
from bertkit.model_dir.writer_lock import writes_outputs
from bertkit.models import default_model, resolve_model
from bertkit.models.tokenizer import load_tokenizer
from bertkit.options import ProbeOptions, RunOptions, TrainConfig, default_output
from bertkit.probing.classifier import check_holdout, fit_head
from bertkit.tasks import finetune_tasks, get_task_class
from bertkit.tasks.base import EVAL, TRAIN

CLASSIFIER = "sklearn LogisticRegression (lbfgs, L2) on standardised features, folded into the head"


@dataclass
class ProbeResult:
    output_dir: str
    metrics: dict
    c: float
    c_search: list
    pooling: str
    dim: int
    train_examples: int
    eval_examples: int
    seconds: dict = field(default_factory=dict)
    runtime: dict = field(default_factory=dict)  # precision used (and why), threads


@dataclass
class ProbeArgs:
    """What ``probe`` reads of its options objects, in one place for its steps."""

    task: str
    data: str
    output: str
    model: str
    eval_data: str | None
    data_dir: str | None
    pooling: str | None
    max_length: int | None
    batch_size: int
    max_train_samples: int | None
    max_eval_samples: int | None
    holdout: float
    seed: int
    precision: str
    overwrite: bool
    task_options: dict | None
    threads: int | None = None
    dataset: DatasetChoice | None = None  # a Hub dataset's config and splits


@dataclass
class ProbeData:
    """What ``read`` gives: the task trained on the training rows' labels, the sources, the examples
    and the training rows' label indices."""

    task: object
    train_source: object
    eval_source: object
    train_examples: list
    eval_examples: list
    labels: np.ndarray


@dataclass
class Embedded:
    """What ``load`` and ``embed`` give: the engine, the network and every row's vector."""

    engine: object
    tokenizer: object
    network: object
    original: dict  # the encoder's weights as given (prepare_model may cast them to bf16)
    train_features: list
    eval_features: list
    x_train: np.ndarray | None = None
    x_eval: np.ndarray | None = None
    embed_seconds: float = 0.0


@dataclass
class Head:
    """What ``fit`` gives: the folded linear head, its C search and the eval metrics."""

    weight: np.ndarray
    bias: np.ndarray
    c: float
    search: list
    metrics: dict
    fit_seconds: float


@writes_outputs
def probe(
    task: str, run: RunOptions, config: TrainConfig | None = None, options: ProbeOptions | None = None
) -> ProbeResult:
    """Fit a logistic-regression head on frozen ``options.pooling`` vectors and save a model directory.
    ``run``: data, eval_data, data_dir, model, output (default runs/probe-<task>-<data>), overwrite;
    ``config``: max_train_samples, max_eval_samples, seed (of the held-out split), a Hub dataset's
    config and splits, the task's options (columns); ``options``: the probe's own."""
    options = (options or ProbeOptions()).validate("bertkit probe")
    config = config or TrainConfig()
    output = run.output or default_output(run.data, f"probe-{task}-")
    args = ProbeArgs(
        task,
        run.data,
        output,
        run.model or default_model(),
        run.eval_data,
        run.data_dir,
        options.pooling,
        options.max_length,
        options.batch_size,
        config.max_train_samples,
        config.max_eval_samples,
        options.holdout,
        config.seed,
        options.precision,
        run.overwrite,
        config.task_options,
        options.threads,
        DatasetChoice.of(config),
    )
    untrained, spec, output_path = check(args)
    read_data = read(args, untrained, output_path)
    adapter = read_data.task
    embedded = embed(args, load(args, adapter, spec, read_data))
    head = fit(args, adapter, read_data, embedded)
    result = result_of(args, read_data, embedded, head, output_path, spec.name)
    save(args, adapter, read_data, embedded, head, result)
    return result


def check(args: ProbeArgs):
    """(task adapter, pooling spec, output path) once every argument is known to be usable."""
    from bertkit.networks.pooling import parse_pooling  # torch: kept out of the card's import path

    if not get_task_class(args.task).linear_probe:
        probed = [name for name in finetune_tasks() if get_task_class(name).linear_probe]
        raise BertkitError(
            f"bertkit probe supports {', '.join(probed)}, not {args.task!r}",
            "token and span tasks need `bertkit finetune`",
        )
    spec = parse_pooling(args.pooling)
    if not 0 < args.holdout < 1:
        raise BertkitError(
            "--holdout must be between 0 and 1 (the share of training rows that chooses C)", "e.g. --holdout 0.1"
        )
    task_class = get_task_class(args.task)
    adapter = task_class(args.max_length or task_class.default_max_length, dict(args.task_options or {}))
    output_path = Path(args.output).expanduser().resolve()
    check_output_dir(output_path, args.overwrite)
    return adapter, spec, output_path


def read(args: ProbeArgs, adapter, output_path: Path) -> ProbeData:
    """The training and eval examples, checked, and the task with the labels of the training rows."""
    choice = registry.check_choice(args.data, args.eval_data, args.dataset or DatasetChoice())
    limits = args.max_train_samples, args.max_eval_samples  # a Hub dataset's rows past them are not read
    train_source = registry.resolve(args.data, "train", args.data_dir, args.task, choice=choice, limit=limits[0])
    eval_source = registry.eval_source(args.data, args.eval_data, args.data_dir, args.task, choice, limits[1])
    check_inputs_kept(output_path, train_source, eval_source, args.model)
    train_examples = adapter.read(train_source, TRAIN)[: args.max_train_samples or None]
    adapter.check_probe_data(train_source, train_examples)
    adapter = adapter.with_learned(adapter.fit(train_examples))
    labels = np.array([adapter.labels.index(ex["label"]) for ex in train_examples])
    check_holdout(labels, args.holdout, adapter.labels)
    eval_examples = []
    if eval_source is not None:
        eval_examples = adapter.read(eval_source, EVAL)[: args.max_eval_samples or None]
        adapter.check_eval_examples(eval_examples, eval_source)
    return ProbeData(adapter, train_source, eval_source, train_examples, eval_examples, labels)


def load(args: ProbeArgs, adapter, spec, read_data: ProbeData) -> Embedded:
    """Tokenizer, features, engine and the frozen encoder behind its pooling (config checks first)."""
    from bertkit.engine import Engine  # heavy: torch + accelerate
    from bertkit.networks import embedding

    model_ref = resolve_model(args.model)
    tokenizer = load_tokenizer(model_ref, args.model)
    embedding.check_encoder(model_ref, args.model, spec, adapter.max_length)
    train_features = adapter.preprocess(read_data.train_examples, tokenizer, train=False)
    eval_features = (
        adapter.preprocess(read_data.eval_examples, tokenizer, train=False) if read_data.eval_examples else []
    )
    engine = Engine(args.precision, seed=args.seed, threads=args.threads)
    encoder = embedding.load_encoder(model_ref, args.model)
    original = {k: v.detach().clone() for k, v in encoder.state_dict().items()}
    network = engine.prepare_model(embedding.EmbeddingNetwork(encoder, spec))
    return Embedded(engine, tokenizer, network, original, train_features, eval_features)


def embed(args: ProbeArgs, embedded: Embedded) -> Embedded:
    """Every training and eval row's vector, through ``Engine.infer``."""
    from bertkit.networks.embedding import run as run_network

    def vectors(features):
        return np.stack(
            run_network(embedded.engine, embedded.network, features, args.batch_size, embedded.tokenizer.pad_token_id)
        )

    started = time.perf_counter()
    embedded.x_train = vectors(embedded.train_features)
    embedded.x_eval = vectors(embedded.eval_features) if embedded.eval_features else None
    embedded.embed_seconds = time.perf_counter() - started
    return embedded


def fit(args: ProbeArgs, adapter, read_data: ProbeData, embedded: Embedded) -> Head:
    """The head (C chosen by the task's main metric on the held-out rows) and its eval metrics."""

    def holdout_score(rows, probabilities) -> float:
        predictions = [{"probabilities": p, "truncated": False} for p in probabilities]  # as postprocess gives
        return adapter.metrics([read_data.train_examples[i] for i in rows], predictions)[adapter.main_metric]

    started = time.perf_counter()
    weight, bias, best_c, search = fit_head(
        embedded.x_train, read_data.labels, len(adapter.labels), args.holdout, args.seed, holdout_score
    )
    fit_seconds = time.perf_counter() - started
    metrics = {}
    if embedded.x_eval is not None:
        outputs = {"logits": list(embedded.x_eval @ weight.T + bias)}
        predictions = adapter.postprocess(read_data.eval_examples, embedded.eval_features, outputs)
        metrics = {
            k: (round(v, 6) if isinstance(v, float) else v)
            for k, v in adapter.metrics(read_data.eval_examples, predictions).items()
        }
    return Head(weight, bias, best_c, search, metrics, fit_seconds)


def result_of(
    args: ProbeArgs, read_data: ProbeData, embedded: Embedded, head: Head, output_path: Path, pooling: str
) -> ProbeResult:
    rows = len(embedded.train_features) + len(embedded.eval_features)
    seconds = {
        "embed_seconds": round(embedded.embed_seconds, 3),
        "fit_seconds": round(head.fit_seconds, 3),
        "embedded_rows_per_s": round(rows / max(embedded.embed_seconds, 1e-9), 2),
    }
    return ProbeResult(
        str(output_path),
        head.metrics,
        head.c,
        head.search,
        pooling,
        int(head.weight.shape[1]),
        len(read_data.train_examples),
        len(read_data.eval_examples),
        seconds,
        embedded.engine.runtime(args.precision),
    )


def save(args: ProbeArgs, adapter, read_data: ProbeData, embedded: Embedded, head: Head, result: ProbeResult):
    """The directory: the encoder as given, the head and bertkit.json (main process only)."""
    engine = embedded.engine
    if engine.is_main_process:
        from safetensors.numpy import save_file

        with staged_output(Path(result.output_dir)) as staging:
            dtype = next(v.dtype for v in embedded.original.values() if v.is_floating_point())
            encoder = engine.unwrap(embedded.network).encoder.to(dtype)
            encoder.load_state_dict(embedded.original)
            save_model_dir(staging, encoder, embedded.tokenizer, meta_of(args, adapter, read_data, head, result))
            save_file(
                {"weight": head.weight.astype(np.float32), "bias": head.bias.astype(np.float32)},
                str(staging / PROBE_HEAD_FILE),
            )
    engine.accelerator.wait_for_everyone()


def meta_of(args: ProbeArgs, adapter, read_data: ProbeData, head: Head, result: ProbeResult) -> ModelMeta:
    """The directory's bertkit.json: the finetune contract plus the ``probe`` section."""
    probe_section = {
        "head": PROBE_HEAD_FILE,
        "pooling": result.pooling,
        "C": head.c,
        "c_search": head.search,
        "holdout_share": args.holdout,
        "classifier": CLASSIFIER,
        "encoder": "frozen copy of the base model in this directory",
    }
    data = data_record(
        read_data.train_source,
        read_data.eval_source,
        len(read_data.train_examples),
        len(read_data.eval_examples),
        name=registry.dataset_name(args.data),
        data_dir=registry.data_dir(args.data_dir),
    )
    config = {
        "max_length": adapter.max_length,
        "batch_size": args.batch_size,
        "seed": args.seed,
        "precision": args.precision,
        "max_train_samples": args.max_train_samples,
        "max_eval_samples": args.max_eval_samples,
    }
    return ModelMeta(
        kind="probe",
        task=adapter.as_stored().state(),
        base_model=args.model,
        metrics=head.metrics,
        throughput=result.seconds,
        probe=probe_section,
        data=data,
        config=config,
        runtime=result.runtime,
    )
