"""A cross-encoder loaded once to score (query, passage) pairs: `bertkit eval --rerank`.

A reranker is a sequence-classification model with ONE output logit read on the pair as one input
(``[CLS] query [SEP] passage [SEP]``), as sentence-transformers' CrossEncoder: a `finetune rerank`
directory, a CrossEncoder checkpoint or any transformers checkpoint saved with ``num_labels=1``.
It loads through bertkit's model loading (bertkit/models/: the same checks as every model), a
bertkit directory through the path eval and predict take (bertkit.inference.trained_model: a
``--save-adapter`` directory is its adapters merged over the base model it records), and runs
through the engine's one inference loop. Scores are the raw logits: CrossEncoder's sigmoid
would not change the order, only squeeze far-apart scores into ties.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bertkit.errors import BertkitError
from bertkit.model_dir import META_FILE, load_meta
from bertkit.models import choose_max_length, load_config, load_model, resolve_model
from bertkit.models.tokenizer import load_tokenizer
from bertkit.options import InferenceOptions

OUTPUT = "logits"
CLASS = "AutoModelForSequenceClassification"
MAX_LENGTH = 512  # CrossEncoder's usual; capped to the model's positions


class Reranker:
    def __init__(self, model: str, run: InferenceOptions | None = None):
        """``run``: batch size, precision and threads (validated here)."""
        self.run = (run or InferenceOptions()).validate("bertkit eval")
        self.model = model
        self.engine = self.network = self.tokenizer = self.config = None
        self.max_length = MAX_LENGTH

    def check(self) -> "Reranker":
        """The config only (no weights): a one-logit sequence classifier, or one line saying what it is."""
        if self.config is not None:
            return self
        reference = resolve_model(self.model)
        config = load_config(reference, self.model)
        labels = getattr(config, "num_labels", None)
        classifier = any(name.endswith("ForSequenceClassification") for name in config.architectures or ())
        if labels != 1 or not classifier:
            what = f"{', '.join(config.architectures)} with {labels} outputs" if config.architectures else "no head"
            raise BertkitError(
                f"--rerank {self.model} is not a reranker: it has {what}, where a reranker is a "
                "sequence classifier with one output logit",
                "give a `bertkit finetune rerank` directory or a cross-encoder checkpoint (num_labels 1)",
            )
        self.reference, self.config = reference, config
        self.max_length = choose_max_length(None, MAX_LENGTH, config, self.model)
        return self

    def load(self) -> "Reranker":
        if self.engine is not None:
            return self
        self.check()
        self.tokenizer = load_tokenizer(self.reference, self.model, self.config)
        from bertkit.engine import Engine  # heavy: torch + accelerate

        self.engine = Engine(self.run.precision, threads=self.run.threads)
        self.network = self.engine.prepare_model(self._weights())
        return self

    def _weights(self):
        """The model: a bertkit directory's as eval loads it (its methods', e.g. LoRA adapters over
        their base), any other checkpoint's own weights."""
        if (Path(self.reference) / META_FILE).is_file():
            from bertkit.inference import trained_model

            return trained_model(str(self.reference), CLASS, load_meta(self.reference), self.config)
        return load_model(CLASS, self.reference, self.model, trained=True)

    def scores(self, queries: list[str], passages: list[str]) -> np.ndarray:
        """One float32 score per (query, passage), in order; the longer text is cut first to fit."""
        self.load()
        if not queries:
            return np.zeros(0, dtype=np.float32)
        encoded = self.tokenizer(queries, passages, truncation="longest_first", max_length=self.max_length)
        names = [name for name in ("input_ids", "token_type_ids") if name in encoded]
        features = [{name: encoded[name][i] for name in names} for i in range(len(queries))]
        outputs = self.engine.infer(
            self.network,
            features,
            self.run.batch_size,
            (OUTPUT,),
            False,
            self.tokenizer.pad_token_id,
            description="rerank",
        )[OUTPUT]
        return np.array([float(np.ravel(row)[0]) for row in outputs], dtype=np.float32)
