"""``bertkit probe``: a linear classifier on frozen features (embed + scikit-learn, no training loop).

The encoder is never updated: rows are embedded once through ``Engine.infer`` (the task's own
features, so the same truncation as finetune/eval/predict), then a scikit-learn
LogisticRegression is fit on standardised vectors, with C chosen on a stratified held-out part of
the training data and the model refit on all of it with that C.

The saved directory follows the finetune contract (``bertkit.json`` with task, labels, data,
metrics; tokenizer files), so ``bertkit eval`` and ``bertkit predict`` work on it:

* ``config.json`` + ``model.safetensors``: a copy of the frozen encoder (``AutoModel.from_pretrained(DIR)``);
* ``probe_head.safetensors``: ``weight`` (labels x dim) and ``bias`` (labels), the standardisation
  folded in, so ``logits = weight @ pool(encoder(x)) + bias`` and probabilities are their softmax;
* ``bertkit.json`` → ``probe``: the pooling mode, C, and the held-out score of every C tried.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from bertkit.model_dir import (PROBE_HEAD_FILE, ModelMeta, check_inputs_kept, check_output_dir, data_record,
                               save_model_dir, staged_output)
from bertkit.data import registry
from bertkit.errors import BertkitError
from bertkit.models import DEFAULT_MODEL, load_tokenizer, resolve_model
from bertkit.tasks import finetune_tasks, get_task_class
from bertkit.tasks.base import EVAL, TRAIN, CardText

C_GRID = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0)
MAX_ITER = 2000


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


def probe(task: str, data: str, output: str, model: str = DEFAULT_MODEL, eval_data: str | None = None,
          data_dir: str | None = None, pooling: str | None = None, max_length: int | None = None,
          batch_size: int = 64, max_train_samples: int | None = None, max_eval_samples: int | None = None,
          holdout: float = 0.1, seed: int = 42, precision: str = "auto", overwrite: bool = False,
          task_options: dict | None = None) -> ProbeResult:
    """Fit a logistic-regression head on frozen ``pooling`` vectors and save a model directory.

    Long on purpose, like api.finetune: the command's order of events (checks, embedding, the C
    search in fit_head, saving) read in one place."""

    from bertkit.networks.pooling import parse_pooling  # torch: kept out of the card's import path

    if not get_task_class(task).linear_probe:
        probed = [name for name in finetune_tasks() if get_task_class(name).linear_probe]
        raise BertkitError(f"bertkit probe supports {', '.join(probed)}, not {task!r}",
                           "token and span tasks need `bertkit finetune`")
    spec = parse_pooling(pooling)
    if not 0 < holdout < 1:
        raise BertkitError("--holdout must be between 0 and 1 (the share of training rows that chooses C)",
                           "e.g. --holdout 0.1")
    if batch_size < 1 or (max_length is not None and not 8 <= max_length <= 8192):
        raise BertkitError("--batch-size must be >= 1 and --max-length between 8 and 8192", "see bertkit probe --help")
    task_class = get_task_class(task)
    adapter = task_class(max_length or task_class.default_max_length, dict(task_options or {}))
    output_path = Path(output).expanduser().resolve()
    check_output_dir(output_path, overwrite)

    train_source = registry.resolve(data, "train", data_dir, task)
    check_inputs_kept(output_path, train_source, registry.eval_source(data, eval_data, data_dir, task), model)
    train_examples = adapter.read(train_source, TRAIN)[:max_train_samples or None]
    adapter.check_probe_data(train_source)
    adapter.fit_labels(train_examples)
    labels = np.array([adapter.labels.index(ex["label"]) for ex in train_examples])
    _check_holdout(labels, holdout, adapter.labels)
    eval_source = registry.eval_source(data, eval_data, data_dir, task)
    eval_examples = []
    if eval_source is not None:
        eval_examples = adapter.read(eval_source, EVAL)[:max_eval_samples or None]
        adapter.check_eval_examples(eval_examples, eval_source)

    from bertkit.networks import embedding

    model_ref = resolve_model(model)
    tokenizer = load_tokenizer(model_ref, model)
    embedding.check_encoder(model_ref, model, spec, adapter.max_length)
    train_features = adapter.preprocess(train_examples, tokenizer, train=False)
    eval_features = adapter.preprocess(eval_examples, tokenizer, train=False) if eval_examples else []

    from bertkit.engine import Engine  # heavy: torch + accelerate

    engine = Engine(precision, seed=seed)
    encoder = embedding.load_encoder(model_ref, model)
    # the saved encoder is the given one, not its bf16 rounding (prepare_model may cast it)
    original = {k: v.detach().clone() for k, v in encoder.state_dict().items()}
    network = engine.prepare_model(embedding.EmbeddingNetwork(encoder, spec))
    started = time.perf_counter()
    x_train = np.stack(embedding.run(engine, network, train_features, batch_size, tokenizer.pad_token_id))
    x_eval = np.stack(embedding.run(engine, network, eval_features, batch_size, tokenizer.pad_token_id)) \
        if eval_features else None
    embed_seconds = time.perf_counter() - started

    def holdout_score(rows, probabilities) -> float:
        predictions = [{"probabilities": p, "truncated": False} for p in probabilities]  # as postprocess gives
        return adapter.metrics([train_examples[i] for i in rows], predictions)[adapter.main_metric]

    started = time.perf_counter()
    weight, bias, best_c, search = fit_head(x_train, labels, len(adapter.labels), holdout, seed, holdout_score)
    fit_seconds = time.perf_counter() - started
    metrics = {}
    if x_eval is not None:
        outputs = {"logits": list(x_eval @ weight.T + bias)}
        predictions = adapter.postprocess(eval_examples, eval_features, outputs)
        metrics = {k: (round(v, 6) if isinstance(v, float) else v)
                   for k, v in adapter.metrics(eval_examples, predictions).items()}

    seconds = {"embed_seconds": round(embed_seconds, 3), "fit_seconds": round(fit_seconds, 3),
               "embedded_rows_per_s": round((len(train_features) + len(eval_features)) / max(embed_seconds, 1e-9), 2)}
    result = ProbeResult(str(output_path), metrics, best_c, search, spec.name, int(weight.shape[1]),
                         len(train_examples), len(eval_examples), seconds, engine.runtime(precision))
    meta = ModelMeta(
        kind="probe", task=adapter.state(), base_model=model, metrics=metrics, throughput=seconds,
        probe={"head": PROBE_HEAD_FILE, "pooling": spec.name, "C": best_c, "c_search": search, "holdout_share": holdout,
               "classifier": "sklearn LogisticRegression (lbfgs, L2) on standardised features, folded into the head",
               "encoder": "frozen copy of the base model in this directory"},
        data=data_record(train_source, eval_source, len(train_examples), len(eval_examples),
                         name=data if registry.is_known(data) else None, data_dir=registry.data_dir(data_dir)),
        config={"max_length": adapter.max_length, "batch_size": batch_size, "seed": seed, "precision": precision,
                "max_train_samples": max_train_samples, "max_eval_samples": max_eval_samples},
        runtime=result.runtime)
    if engine.is_main_process:
        from safetensors.numpy import save_file

        with staged_output(output_path) as staging:
            dtype = next(v.dtype for v in original.values() if v.is_floating_point())
            encoder = engine.unwrap(network).encoder.to(dtype)
            encoder.load_state_dict(original)
            save_model_dir(staging, encoder, tokenizer, meta)
            save_file({"weight": weight.astype(np.float32), "bias": bias.astype(np.float32)}, str(staging / PROBE_HEAD_FILE))
    engine.accelerator.wait_for_everyone()
    return result


def fit_head(features: np.ndarray, labels: np.ndarray, num_labels: int, holdout: float, seed: int, score) -> tuple:
    """(weight, bias, C, search): C from ``C_GRID`` by ``score(rows, probabilities)`` on a stratified
    held-out part (ties keep the smaller C), then a refit on every row. ``weight``/``bias`` act on
    raw vectors: the standardisation is folded in."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    features = features.astype(np.float64)
    mean, std = features.mean(0), features.std(0)
    std[std < 1e-12] = 1.0  # a constant dimension carries nothing; keep it from dividing by zero
    scaled = (features - mean) / std
    fit_rows, held_rows = train_test_split(np.arange(len(labels)), test_size=holdout, stratify=labels,
                                           random_state=seed)
    search, best_c, best_score = [], None, -math.inf
    for c in C_GRID:
        classifier = _fit(LogisticRegression, c, scaled[fit_rows], labels[fit_rows])
        value = float(score(held_rows, _probabilities(classifier, scaled[held_rows], num_labels)))
        search.append({"C": c, "holdout_score": round(value, 6)})
        if value > best_score:
            best_c, best_score = c, value
    classifier = _fit(LogisticRegression, best_c, scaled, labels)
    weight, bias = _full_head(classifier, num_labels)
    weight = weight / std
    return weight, bias - weight @ mean, best_c, search


def _fit(model_class, c: float, x: np.ndarray, y: np.ndarray):
    with warnings.catch_warnings():
        # Rare non-convergence at large C only shifts the held-out score; that score decides.
        warnings.simplefilter("ignore")
        return model_class(C=c, max_iter=MAX_ITER).fit(x, y)


def _full_head(classifier, num_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """One row of weights per label. A binary sklearn model has one row w: logits (0, w.x + b) give
    exactly its probabilities under softmax."""
    weight = np.zeros((num_labels, classifier.coef_.shape[1]))
    bias = np.zeros(num_labels)
    if len(classifier.classes_) == 2 and classifier.coef_.shape[0] == 1:
        weight[classifier.classes_[1]], bias[classifier.classes_[1]] = classifier.coef_[0], classifier.intercept_[0]
        return weight, bias
    weight[classifier.classes_] = classifier.coef_
    bias[classifier.classes_] = classifier.intercept_
    return weight, bias


def _probabilities(classifier, x: np.ndarray, num_labels: int) -> np.ndarray:
    full = np.zeros((len(x), num_labels))
    full[:, classifier.classes_] = classifier.predict_proba(x)
    return full


def _check_holdout(labels: np.ndarray, holdout: float, names: list) -> None:
    counts = np.bincount(labels, minlength=len(names))
    held = math.ceil(holdout * len(labels))
    if counts.min() < 2 or held < len(names) or len(labels) - held < len(names):
        rare = names[int(counts.argmin())]
        raise BertkitError(f"too few training rows to hold out {holdout:.0%} for choosing C ({len(labels)} rows, "
                           f"label {rare!r} has {counts.min()})", "give at least 2 rows per label and enough rows "
                           "that the held-out part has one per label, or change --holdout")


# A row's vector from the encoder's hidden states, as bertkit.networks.pooling computes it for each
# --pooling mode ("mask" is the attention mask, shaped to broadcast over the hidden size).
_MEAN_OF = "({} * mask).sum(1) / mask.sum(1)"
POOLING_CODE = {"cls": "hidden[-1][:, 0]", "mean": _MEAN_OF.format("hidden[-1]"),
                "max": 'hidden[-1].masked_fill(mask == 0, float("-inf")).amax(1)',
                "last4-concat": _MEAN_OF.format("torch.cat(hidden[-4:], -1)"),
                "last4-sum": _MEAN_OF.format("sum(hidden[-4:])")}
PROBE_SNIPPET = '''import torch
from safetensors.torch import load_file
from transformers import AutoModel, AutoTokenizer

# a local directory (huggingface_hub.snapshot_download(repo_id) fetches a pushed one)
MODEL_DIR = $model_dir
tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
encoder = AutoModel.from_pretrained(MODEL_DIR).eval()  # the frozen base model
head = load_file(f"{MODEL_DIR}/HEAD")  # the probe: logits = weight @ vector + bias
labels = $labels
inputs = tokenizer(INPUTS, truncation=True, max_length=$max_length, return_tensors="pt")
with torch.no_grad():
    hidden = encoder(**inputs, output_hidden_states=True).hidden_states
mask = inputs["attention_mask"][..., None]
vector = POOLED  # POOLING pooling, as at training time
probabilities = (vector @ head["weight"].T + head["bias"]).softmax(-1)[0]
print(labels[int(probabilities.argmax())], dict(zip(labels, probabilities.tolist())))'''


def card_text(probe_meta: dict, task_text: CardText) -> CardText:
    """A probe directory's model card text: its task's example and limitations, and code that runs
    what `bertkit predict` runs (encoder, the recorded pooling, the head) instead of a transformers
    pipeline, which would put a fresh random head on the encoder."""
    name = str(probe_meta.get("pooling") or "mean")
    layer = name.partition("layer:")[2]
    pooled = POOLING_CODE.get(name) or _MEAN_OF.format(f"hidden[{int(layer)}]")
    snippet = (PROBE_SNIPPET.replace("INPUTS", ", ".join(f"${field}" for field in task_text.example))
               .replace("POOLED", pooled).replace("POOLING", name)
               .replace("HEAD", str(probe_meta.get("head") or PROBE_HEAD_FILE)))
    return replace(task_text, pipeline=False, snippet=snippet,
                   does=f"{task_text.does} with a logistic-regression probe (fitted by `bertkit probe`) on "
                        f"frozen `{name}`-pooled vectors of its base model")
