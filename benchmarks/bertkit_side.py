"""The bertkit side, through the public API only (api.finetune / api.evaluate / api.predict and
TrainConfig), returning the same measurement keys as the HF side. Every number comes from what
the API returns (FinetuneResult.throughput, Predictions.timings, evaluate's "timings"); nothing of
bertkit is wrapped or patched.

Sides: bertkit (the defaults: precision auto, bf16 where the CPU computes it natively, and there lazy
embeddings; the task's batch order: random and packed for ner, length-grouped for the others),
bertkit_grouped (length-grouped batches for every task: --grouped), bertkit_fp32 (precision
"no"), bertkit_frozen (auto + frozen word embeddings),
bertkit_lazy (--lazy-embeddings), bertkit_dense (--no-lazy);
bertkit_packed (--packing on, length-grouped: the encoder runs each batch's real tokens only),
bertkit_padded (--packing auto, length-grouped: a task head's batches padded), bertkit_packed_random and
bertkit_padded_random (random batches: --random-batches); bertkit_eager and bertkit_compiled
(--compile off / on).
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
from pathlib import Path

from benchmarks.workloads import write_squad_split
from bertkit.options import RunOptions

SIDES = {
    "bertkit": {},
    "bertkit_grouped": {"random_batches": False},  # every task's order before ner's default became random
    "bertkit_fp32": {"precision": "no"},  # lazy embeddings on a CPU (the default where they apply)
    "bertkit_fp32_dense": {"precision": "no", "lazy_embeddings": False},
    "bertkit_frozen": {"freeze_embeddings": True},
    "bertkit_lazy": {"lazy_embeddings": True},
    "bertkit_dense": {"lazy_embeddings": False},  # every word-embedding row stepped (lazy is the CPU default)
    "bertkit_packed": {"packing": "on", "random_batches": False},
    "bertkit_padded": {"packing": "auto", "random_batches": False},
    "bertkit_packed_random": {"packing": "on", "random_batches": True},
    "bertkit_padded_random": {"packing": "auto", "random_batches": True},
    "bertkit_eager": {"compile": "off"},
    "bertkit_compiled": {"compile": "on"},
}
QA_OPTIONS = {"doc_stride": 128, "max_answer_length": 30}


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _prepare() -> None:
    """Import what bertkit imports lazily (accelerate, the model classes, the metric libraries)
    before any of its timers, as the HF side imports them before its own: timings measure work,
    not first imports, which show in the process wall time instead. Imports only, nothing patched."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import accelerate  # noqa: F401
    import seqeval.metrics  # noqa: F401
    import sklearn.metrics  # noqa: F401
    import transformers

    for name in (
        "AutoModelForSequenceClassification",
        "AutoModelForTokenClassification",
        "AutoModelForQuestionAnswering",
        "BertModel",
    ):
        getattr(transformers, name)
    transformers.logging.set_verbosity_error()


def train(
    workload: str,
    side: str,
    n_train: int | None,
    n_eval: int | None,
    root: str,
    hp: dict,
    expected: tuple[int, int] | None = None,
    save_dir: str | None = None,
) -> dict:
    """api.finetune on the workload's slice (SQuAD: the article split as two files); ``expected``:
    the (train, eval) counts the HF side gets, asserted; ``save_dir`` keeps the model."""
    from bertkit import api
    from bertkit.config import TrainConfig

    _prepare()
    qa = workload == "qa"
    config = TrainConfig(
        epochs=hp["epochs"],
        lr=hp["lr"],
        batch_size=hp["batch_size"],
        eval_batch_size=64,
        warmup_ratio=hp["warmup"],
        weight_decay=hp["weight_decay"],
        seed=hp["seed"],
        max_length=384 if qa else None,
        max_train_samples=n_train,
        max_eval_samples=n_eval,
        task_options=dict(QA_OPTIONS) if qa else {},
        **SIDES[side],
    )
    task, data = {"sst2": ("cls", "sst2"), "ner": ("ner", "conll2003"), "qa": ("qa", None)}[workload]
    with tempfile.TemporaryDirectory(prefix="bertkit-bench-") as tmp:
        data, eval_data = write_squad_split(tmp, root) if qa else (data, None)
        result = api.finetune(
            task,
            RunOptions(
                data=data,
                eval_data=eval_data,
                data_dir=root,
                model="minilm",
                output=save_dir or os.path.join(tmp, "model"),
                overwrite=True,
            ),
            config=config,
        )
    counts = (result.train_examples, result.eval_examples)
    if expected and counts != tuple(expected):
        raise AssertionError(f"bertkit used {counts} (train, eval) examples, the HF side {tuple(expected)}")
    counted = result.throughput
    metric = {"sst2": "accuracy", "ner": "f1", "qa": "f1"}[workload]
    return {
        "side": side,
        "precision": result.runtime.get("precision"),
        "n_train": counts[0],
        "n_eval": counts[1],
        # throughput["examples"] counts features (QA windows) over all epochs; ex/s uses n_train
        "train_seconds": counted["train_seconds"],
        "tokens": counted["tokens"],
        "token_pairs": counted["token_pairs"],
        "padding_share": counted["padding_share"],
        "eval_seconds": counted["eval_seconds"],
        "features": counted["examples"],
        "metrics": {k: v for k, v in result.metrics.items() if isinstance(v, (int, float))},
        "metric": result.metrics.get(metric),
        "exact_match": result.metrics.get("exact_match"),
        "peak_rss_mb": _peak_rss_mb(),
        "optimizer_steps": counted["optimizer_steps"],
        "compile": counted.get("compile", {}),
    }


def _accuracy(model_dir: str, predicted: list, labels: list) -> float:
    names = json.loads((Path(model_dir) / "bertkit.json").read_text())["task"]["labels"]
    return sum(names.index(p) == y for p, y in zip(predicted, labels)) / len(labels)


BACKEND_SIDES = {"bertkit_openvino_int8": "openvino-int8", "bertkit_onnx_int8": "onnx-int8"}


def export_backends(model_dir: str, root: str, samples: int = 500) -> dict:
    """The int8 exports the backend sides predict with: ONNX Runtime's and OpenVINO's (NNCF,
    calibrated on SST-2 training rows, which the predict sentences are not)."""
    from bertkit.export.onnx import export_onnx
    from bertkit.export.openvino import export_openvino

    data = os.path.join(root, "sst2", "train.tsv")
    return {
        "onnx": export_onnx(model_dir, int8=True, data=data, samples=samples),
        "openvino": export_openvino(model_dir, int8=True, data=data, samples=samples),
    }


def predict(side: str, model_dir: str, sentences: list, labels: list, batch_size: int = 64) -> dict:
    """api.predict over a one-sentence-per-line file; seconds = preprocess + model + postprocess
    (Predictions.timings), the load apart. The BACKEND_SIDES predict with an exported model."""
    from bertkit import api
    from bertkit.options import InferenceOptions, PredictOptions

    _prepare()
    with tempfile.TemporaryDirectory(prefix="bertkit-bench-predict-") as tmp:
        path = os.path.join(tmp, "sentences.txt")
        Path(path).write_text("\n".join(s.replace("\n", " ").replace("\t", " ") for s in sentences) + "\n")
        rows = api.predict(
            model_dir,
            PredictOptions(input=path, backend=BACKEND_SIDES.get(side, "torch")),
            InferenceOptions(batch_size=batch_size),
        )
    if len(rows) != len(sentences):
        raise AssertionError(f"api.predict returned {len(rows)} rows for {len(sentences)} sentences")
    t = rows.timings
    accuracy = _accuracy(model_dir, [r["label"] for r in rows], labels)
    return {
        "side": side,
        "precision": rows.runtime.get("precision"),
        "batch_size": batch_size,
        "n": len(rows),
        "backend": rows.runtime.get("backend", "torch"),
        "load_seconds": t["load_seconds"],
        "timings": dict(t),
        "metrics": {"accuracy": accuracy},
        "seconds": t["preprocess_seconds"] + t["model_seconds"] + t["postprocess_seconds"],
        "metric": accuracy,
        "peak_rss_mb": _peak_rss_mb(),
    }


def evaluate(side: str, model_dir: str, root: str, n_eval: int | None, batch_size: int = 64) -> dict:
    """api.evaluate on SST-2 dev; seconds = preprocess + score (tokenise, forward, accuracy)."""
    from bertkit import api
    from bertkit.options import EvalOptions, InferenceOptions

    _prepare()
    with tempfile.TemporaryDirectory(prefix="bertkit-bench-eval-") as tmp:
        report = api.evaluate(
            model_dir,
            EvalOptions(
                data="sst2", split="dev", data_dir=root, max_eval_samples=n_eval, output=os.path.join(tmp, "eval.json")
            ),
            InferenceOptions(batch_size=batch_size),
        )
    t = report["timings"]
    return {
        "side": side,
        "precision": report["runtime"].get("precision"),
        "batch_size": batch_size,
        "n": report["examples"],
        "load_seconds": t["load_seconds"],
        "timings": dict(t),
        "seconds": t["preprocess_seconds"] + t["score_seconds"],
        "metrics": report["metrics"],
        "metric": report["metrics"].get("accuracy"),
        "peak_rss_mb": _peak_rss_mb(),
    }
