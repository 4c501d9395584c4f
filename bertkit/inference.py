"""Loading a saved model directory for inference and scoring it: what eval, predict and
finetune's evaluations share."""

from __future__ import annotations

from pathlib import Path

from bertkit.methods import recorded_methods
from bertkit.model_dir import META_FILE, load_meta
from bertkit.models import check_saved_model, load_config, load_model
from bertkit.models.tokenizer import load_tokenizer


def load_for_inference(model_dir, adapter, precision, threads=None, meta=None):
    """``meta``: the model's bertkit.json when the caller has already loaded it."""
    from bertkit.engine import Engine

    model_config = load_config(str(model_dir), str(model_dir))
    meta = load_meta(model_dir) if meta is None else meta
    # a probe's directory holds the bare encoder; its head is probe_head.safetensors
    weights_class = "AutoModel" if meta.get("probe") else adapter.model_class
    check_saved_model(model_config, weights_class, adapter.max_length, str(model_dir))
    tokenizer = load_tokenizer(str(model_dir), str(model_dir), model_config)
    engine = Engine(precision, threads=threads)
    network = inference_network(str(model_dir), adapter, tokenizer, meta)
    if network is None:
        network = speed_up(adapter, trained_model(str(model_dir), adapter.model_class, meta, model_config))
    network = engine.prepare_model(network)
    return engine, network, tokenizer


def trained_model(model_dir: str, model_class: str, meta: dict, model_config):
    """The task model of a fine-tuned directory: its weights, or what the method that saved it in its
    own way loads (an adapter directory: its adapters merged over the base model it records)."""
    for method in recorded_methods(meta):
        model = method.load_trained(model_dir, meta, model_class, model_config)
        if model is not None:
            return model
    return load_model(model_class, model_dir, model_dir, trained=True)


def inference_network(model_dir: str, adapter, tokenizer, meta: dict | None = None):
    """The network eval/predict run for a directory that is not a plain transformers task model:
    a probe (frozen encoder + linear head), or a task that scores with a wrapper (masked LM).
    None for ordinary fine-tuned directories. ``meta``: its bertkit.json, when already loaded."""
    if meta is None and (Path(model_dir) / META_FILE).is_file():
        meta = load_meta(model_dir)
    if meta and meta.get("probe"):
        from bertkit.probing.network import load_probe  # torch: loaded for a probe directory only

        return load_probe(model_dir, meta["probe"])
    from bertkit.networks.recipes import scores_with_wrapper, scoring_network  # torch: when a model is loaded

    spec = adapter.training_spec()
    if scores_with_wrapper(spec):
        return scoring_network(spec, load_model(adapter.model_class, str(model_dir), str(model_dir)), tokenizer)
    return None


def score(
    engine, adapter, network, examples, features, batch_size, pad_token_id, tune=False, keep=None, apply_tuned=False
):
    """Metrics and tuned settings; ``keep`` (a dict) also receives the predictions and their
    breakdown for the figures. ``apply_tuned``: the metrics are those at the tuned settings (decoded
    by a copy of the task with them: the task's own options are left as they were)."""
    outputs = engine.infer(
        network,
        features,
        batch_size,
        adapter.output_names,
        adapter.per_token_outputs,
        pad_token_id,
        description="eval",
        targets=adapter.targets,
    )
    loss = outputs.pop("loss", None)
    tuned = adapter.tune(examples, features, outputs) if tune else {}
    decoder = adapter.with_options(tuned) if apply_tuned and tuned else adapter  # ``adapter`` stays as it is
    predictions = decoder.postprocess(examples, features, outputs)
    metrics = adapter.metrics(examples, predictions)
    if loss is not None and "loss" not in metrics:  # the plain loss on these examples (HF's eval_loss)
        metrics["loss"] = loss
    metrics = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in metrics.items()}
    if keep is not None:
        keep["predictions"] = predictions
        keep["details"] = adapter.breakdown(examples, predictions, metrics)
    return metrics, tuned


def speed_up(adapter, network):
    if adapter.reads_first_token_only:
        from bertkit.networks.first_token_head import first_token_only_last_layer

        first_token_only_last_layer(network)
    return network
