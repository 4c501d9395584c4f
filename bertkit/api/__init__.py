"""The importable API: one module per command, each function validates, does the work and returns
data; nothing here prints (the CLI formats what these functions return).

``from bertkit import api; api.finetune(...)``: names load their module on first use, so importing
the API costs nothing until a command runs.

One calling convention: a function takes its inputs, then the command's options objects from
bertkit.options (the dataclasses the CLI builds its flags from), each checked by its own
``validate()``; e.g. ``api.evaluate(model_dir, EvalOptions(data="sst2"), InferenceOptions(batch_size=32))``,
``api.predict_stream(model_dir, PredictOptions(input=..., output=...), run, stream)``,
``api.mine(model, MineOptions(...))``,
``api.finetune("cls", RunOptions(data="sst2", model="minilm"), TrainConfig())``. No function takes
more than five parameters
(tests/unit/test_api_convention.py).
"""

from __future__ import annotations

import importlib

_HOMES = {
    "audit": "auditing",
    "AuditResult": "auditing",
    "finetune": "finetuning",
    "FinetuneResult": "finetuning",
    "finetune_seeds": "seeds",
    "SeedsResult": "seeds",
    "finetune_folds": "folds",
    "FoldsResult": "folds",
    "tune": "tuning",
    "TuneResult": "tuning",
    "evaluate": "evaluation",
    "predict": "prediction",
    "predict_stream": "prediction",
    "Predictions": "prediction",
    "Predictor": "prediction",
    "report": "reports",
    "list_datasets": "datasets",
    "embed": "embedding",
    "embed_stream": "embedding",
    "Embeddings": "embedding",
    "Embedder": "embedder",
    "probe": "probing",
    "select": "selection",
    "calibrate": "calibration",
    "ProbeResult": "probing",
    "pretrain_mlm": "pretraining",
    "pretrain_bert": "pretraining",
    "PretrainResult": "pretraining",
    "push": "publishing",
    "evaluate_retrieval": "retrieval",
    "mine": "mining",
    "Mined": "mining",
    "Reranker": "reranker",
    "build_squad_retrieval": "datasets",
    "distill": "distillation",
    "DistillOptions": "distillation",
    "finetune_multi": "multihead",
    "finetune_multi_seeds": "multihead_seeds",
    "MultiResult": "multihead",
    "evaluate_multi": "multihead_inference",
    "predict_multi": "multihead_stream",
    "predict_heads_stream": "multihead_stream",
    "MultiHeadPredictor": "multihead_inference",
}
__all__ = list(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'bertkit.api' has no attribute {name!r}")
    return getattr(importlib.import_module(f"bertkit.api.{_HOMES[name]}"), name)
