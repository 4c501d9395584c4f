"""The importable API behind the CLI: each function validates, does the work, returns data.

Nothing here prints; the CLI formats what these functions return.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bertkit.checkpoint import META_FILE, check_output_dir, load_meta, save_model_dir, staged_output, write_json
from bertkit.config import TrainConfig
from bertkit.data import readers, registry
from bertkit.data.registry import Source
from bertkit.models import DEFAULT_MODEL, load_model, load_tokenizer, resolve_model
from bertkit.tasks import get_task_class, task_from_state
from bertkit.tasks.base import EVAL, PREDICT, TRAIN


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


def finetune(task: str, data: str, output: str, model: str = DEFAULT_MODEL, eval_data: str | None = None,
             data_dir: str | None = None, config: TrainConfig | None = None, overwrite: bool = False) -> FinetuneResult:
    """Fine-tune ``model`` on ``data`` for ``task`` and save a self-contained model directory."""
    config = (config or TrainConfig()).validate()
    task_class = get_task_class(task)
    adapter = task_class(config.max_length or task_class.default_max_length, dict(config.task_options))
    output_path = Path(output).expanduser().resolve()
    check_output_dir(output_path, overwrite)

    train_source = registry.resolve(data, "train", data_dir, task)
    train_examples = _first(adapter.read(train_source, TRAIN), config.max_train_samples)
    adapter.fit_labels(train_examples)
    eval_source = _eval_source(data, eval_data, data_dir, task)
    eval_examples = []
    if eval_source is not None:
        eval_examples = _first(adapter.read(eval_source, EVAL), config.max_eval_samples)
        adapter.check_eval_examples(eval_examples, eval_source)

    model_ref = resolve_model(model)
    tokenizer = load_tokenizer(model_ref, model)
    from bertkit.engine import Engine  # heavy: torch + accelerate

    engine = Engine(config.precision, config.grad_accum, config.seed)
    train_features = adapter.preprocess(train_examples, tokenizer, train=True)
    preprocessing = {"train": dict(adapter.stats), "train_features": len(train_features)}
    eval_features = adapter.preprocess(eval_examples, tokenizer, train=False) if eval_examples else []
    if eval_examples:
        preprocessing["eval"] = dict(adapter.stats)
    network = _fast(adapter, load_model(adapter.model_class, model_ref, model, **adapter.model_kwargs()))

    def evaluate_epoch(current_model) -> dict:
        return _score(engine, adapter, current_model, eval_examples, eval_features, config.eval_batch_size,
                      tokenizer.pad_token_id)[0]

    network, report = engine.fit(network, train_features, config, tokenizer.pad_token_id,
                                 evaluate_epoch if eval_examples else None, adapter.main_metric)
    best = next((h for h in report.history if h["epoch"] == report.best_epoch), report.history[-1])
    result = FinetuneResult(str(output_path), best.get("metrics", {}), report.throughput(), report.history,
                            report.best_epoch, len(train_examples), len(eval_examples), preprocessing)
    meta = {
        "bertkit_version": _version(), "task": adapter.state(), "base_model": model,
        "data": {"name": data if registry.is_known(data) else None, "train": train_source.description,
                 "data_dir": str(registry.data_dir(data_dir)) if registry.data_dir(data_dir) else None, "eval": eval_source.description if eval_source else None,
                 "train_examples": len(train_examples), "eval_examples": len(eval_examples)},
        "config": config.to_dict(), "metrics": result.metrics, "best_epoch": report.best_epoch,
        "history": report.history, "throughput": result.throughput, "preprocessing": preprocessing,
        "stopped_early": report.stopped_early, "versions": _versions(),
    }
    if engine.is_main_process:
        with staged_output(output_path) as staging:
            save_model_dir(staging, engine.unwrap(network), tokenizer, meta)
    engine.accelerator.wait_for_everyone()
    return result


def evaluate(model_dir: str, data: str, split: str = "dev", data_dir: str | None = None, batch_size: int = 64,
             max_eval_samples: int | None = None, output: str | None = None, precision: str = "no",
             task_options: dict | None = None) -> dict:
    """Score a saved model on a dataset split or file; writes the metrics as JSON and returns them."""
    meta = load_meta(model_dir)
    adapter = task_from_state(meta["task"])
    adapter.options.update({k: v for k, v in (task_options or {}).items() if k in adapter.option_names and v is not None})
    # Without a data directory, a known dataset is looked up where training found it.
    data_dir = data_dir or (None if registry.data_dir() else meta.get("data", {}).get("data_dir"))
    source = registry.resolve(data, split, data_dir, adapter.name)
    examples = _first(adapter.read(source, EVAL), max_eval_samples)
    adapter.check_eval_examples(examples, source)
    engine, network, tokenizer = _load_for_inference(model_dir, adapter, precision)
    features = adapter.preprocess(examples, tokenizer, train=False)
    metrics, tuned = _score(engine, adapter, network, examples, features, batch_size, tokenizer.pad_token_id, tune=True)
    report = {"model": str(model_dir), "data": source.description, "examples": len(examples), "metrics": metrics,
              "preprocessing": dict(adapter.stats), "tuned": tuned}
    if tuned:  # decoding settings tuned on this data are stored for predict to reuse
        meta["task"] = adapter.state()
        write_json(Path(model_dir) / META_FILE, meta)
    target = Path(output) if output else Path(model_dir) / f"eval-{Path(data).stem}-{split}.json"
    write_json(target, report)
    report["written_to"] = str(target)
    return report


def predict(model_dir: str, input_path: str, batch_size: int = 64, precision: str = "no", **options) -> list[dict]:
    """One output row per input row, in input order. ``input_path`` '-' reads standard input."""
    meta = load_meta(model_dir)
    adapter = task_from_state(meta["task"])
    adapter.options.update({k: v for k, v in options.items() if v is not None})
    if input_path == "-":
        records = readers.parse_records(sys.stdin.read(), "", "<stdin>")
        examples = adapter.from_records(records, Source("<stdin>"), PREDICT)
    else:
        path = Path(input_path).expanduser()
        examples = adapter.read(Source(str(path), path=path), PREDICT)
    engine, network, tokenizer = _load_for_inference(model_dir, adapter, precision)
    features = adapter.preprocess(examples, tokenizer, train=False)
    outputs = engine.infer(network, features, batch_size, adapter.output_names, adapter.per_token_outputs,
                           tokenizer.pad_token_id)
    predictions = adapter.postprocess(examples, features, outputs)
    return [adapter.format_prediction(ex, p) for ex, p in zip(examples, predictions)]


def list_datasets(data_dir: str | None = None) -> list[dict]:
    return registry.describe_all(data_dir)


# --- helpers ------------------------------------------------------------------------------------
def _score(engine, adapter, network, examples, features, batch_size, pad_token_id, tune=False):
    outputs = engine.infer(network, features, batch_size, adapter.output_names, adapter.per_token_outputs,
                           pad_token_id, description="eval")
    tuned = adapter.tune(examples, features, outputs) if tune else {}
    predictions = adapter.postprocess(examples, features, outputs)
    metrics = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in adapter.metrics(examples, predictions).items()}
    return metrics, tuned


def _load_for_inference(model_dir, adapter, precision):
    from bertkit.engine import Engine
    from bertkit.probe import inference_network  # probes and masked LMs run as wrappers around their model

    tokenizer = load_tokenizer(str(model_dir), str(model_dir))
    engine = Engine(precision)
    network = inference_network(str(model_dir), adapter, tokenizer)
    if network is None:
        network = _fast(adapter, load_model(adapter.model_class, str(model_dir), str(model_dir)))
    network = engine.prepare_model(network)
    return engine, network, tokenizer


def _fast(adapter, network):
    if adapter.reads_first_token_only:
        from bertkit.speedups import first_token_only_last_layer

        first_token_only_last_layer(network)
    return network


def _eval_source(data, eval_data, data_dir, task) -> Source | None:
    if eval_data:
        return registry.resolve(eval_data, "dev", data_dir, task)
    if registry.is_known(data):
        return registry.resolve(data, registry.DATASETS[data].dev_split, data_dir, task)
    return None


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
