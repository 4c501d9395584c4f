"""The head of `bertkit finetune cls|pair --recipe setfit` and the files that make its directory a
SetFit model as well as a bertkit one.

The head is SetFit's: scikit-learn's LogisticRegression (C = 1) on the body's embeddings, which are
the mean-pooled vectors, L2-normalised where the starting checkpoint's sentence-transformers modules
end in ``Normalize`` (all-MiniLM-L6-v2's do): SetFit's body is that checkpoint as a
SentenceTransformer, so its head reads unit vectors there. On raw vectors (norm ~ 4 for MiniLM) the
same C regularises far less, and with 16 labelled rows that head scored 2.3 points under SetFit's
(SST-2, 8 seeds); normalised, the two agree.
bertkit runs it folded into a linear layer (``probe_head.safetensors``, as a probe's: softmax of
``weight @ vector + bias`` gives exactly ``predict_proba``); SetFit runs the pickled estimator
itself (``model_head.pkl``). The body is described to sentence-transformers in its classic layout
(``modules.json``: the Transformer at the root, mean pooling in ``1_Pooling``; the tokenizer cut at
the max length bertkit trained with), which sentence-transformers 2 to 6 and SetFit 1.x load.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from bertkit.probing.classifier import full_head

SETFIT_HEAD_FILE = "model_head.pkl"
SETFIT_CONFIG_FILE = "config_setfit.json"
POOLING_DIR = "1_Pooling"
HEAD_ITERATIONS = 1000  # sklearn's default 100 stops short on some embeddings (a warning, a worse head)
CLASSIFIER = "sklearn LogisticRegression (lbfgs, L2, C=1) on the mean-pooled embeddings, as SetFit's"
ST_MODULES = "modules.json"


def base_normalizes(model_ref: str) -> bool:
    """Whether ``model_ref`` (a directory or a Hub id, cached) is a sentence-transformers model
    whose last module is ``Normalize``: then SetFit's body gives unit vectors."""
    from transformers.utils import cached_file

    try:
        path = cached_file(model_ref, ST_MODULES, _raise_exceptions_for_missing_entries=False)
    except (OSError, ValueError):  # offline and not cached, or no such repository: a plain checkpoint
        return False
    if path is None:
        return False
    try:
        modules = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(modules) and isinstance(modules, list) and str(modules[-1].get("type", "")).endswith("Normalize")


def fit_logistic_head(vectors: np.ndarray, labels: np.ndarray, num_labels: int, seed: int) -> tuple:
    """(the fitted estimator, weight, bias): ``weight`` (labels x dim) and ``bias`` act on raw vectors."""
    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a rare non-convergence at 1000 iterations changes nothing visible
        classifier = LogisticRegression(max_iter=HEAD_ITERATIONS, random_state=seed).fit(vectors, labels)
    weight, bias = full_head(classifier, num_labels)
    return classifier, weight, bias


def write_setfit_files(
    directory: Path, classifier, labels: list, max_length: int, dim: int, normalize: bool = False
) -> list[str]:
    """What SetFitModel.from_pretrained(directory) reads besides the transformers files; the names."""
    import joblib  # scikit-learn's dependency

    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": POOLING_DIR, "type": "sentence_transformers.models.Pooling"},
    ]
    pooling = {
        "word_embedding_dimension": dim,
        "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    }
    _write(directory / "modules.json", modules)
    _write(directory / "sentence_bert_config.json", {"max_seq_length": max_length, "do_lower_case": False})
    (directory / POOLING_DIR).mkdir(exist_ok=True)
    _write(directory / POOLING_DIR / "config.json", pooling)
    _write(directory / "config_sentence_transformers.json", {"similarity_fn_name": "cosine", "prompts": {}})
    config = {"normalize_embeddings": normalize, "labels": [str(name) for name in labels]}
    _write(directory / SETFIT_CONFIG_FILE, config)  # SetFit normalises before its head when told to
    joblib.dump(classifier, directory / SETFIT_HEAD_FILE)
    return [
        "modules.json",
        "sentence_bert_config.json",
        f"{POOLING_DIR}/config.json",
        "config_sentence_transformers.json",
        SETFIT_CONFIG_FILE,
        SETFIT_HEAD_FILE,
    ]


def _write(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
