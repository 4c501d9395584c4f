"""SetFit (Tunstall et al., 2022) as a training method: `bertkit finetune cls|pair --recipe setfit`.

The run is the spine's (api/finetuning.py): the same reading of the data, the same engine and
options (batch size, learning rate, epochs, seed, precision). What this method changes, in hooks:

1. what trains: the encoder (``load_network``) on contrastive pairs of the labelled rows
   (``training_features``; tasks/few_shot.py draws them) with the cosine-similarity loss
   (``training_spec``: the SETFIT_BODY recipe of networks/contrastive.py), not scored while training;
2. ``finish``: scikit-learn's LogisticRegression on the trained body's mean-pooled embeddings of the
   training rows (L2-normalised where the checkpoint's sentence-transformers modules normalise, as
   SetFit's body does: probing/setfit_files.py), scored once on the evaluation data.

The directory is a probe's (the encoder, ``probe_head.safetensors``, bertkit.json's ``probe``
section), so `eval`, `predict` and `serve` run it unchanged; SetFit's files beside it make it a
``SetFitModel.from_pretrained(DIR)`` with the same predictions. It composes with no other method: LoRA
would train adapters the pairs never reach, and a distilled SetFit body would need the teacher's
pair similarities, which bertkit does not compute.
"""

from __future__ import annotations

import numpy as np

from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.methods.base import FOLDS, RESUME, Method
from bertkit.model_dir import PROBE_HEAD_FILE
from bertkit.probing.setfit_files import CLASSIFIER, base_normalizes, fit_logistic_head, write_setfit_files
from bertkit.tasks.few_shot import DEFAULT_PAIRS, SETFIT, check_problem_type, check_rows, contrastive_pairs, recipe_of
from bertkit.tasks.learned import seen_in
from bertkit.tasks.training_spec import SETFIT_BODY, TrainingSpec

LOSS = "CosineSimilarityLoss: mean squared error of cos(u, v) against 1 (same label) or 0"
WHY = "the body trains on pairs with the cosine loss, then the head is fitted once"


class SetFit(Method):
    name = "setfit"
    flag = "--recipe setfit"
    tasks = ("cls", "pair")
    replaces_training = True
    evaluates_while_training = False
    refused_modes = (FOLDS, RESUME)
    refused_task_options = {"long_text": ("windows",)}  # a row's windows would each be paired as a row
    section = "probe"
    owned_files = ("config_setfit.json", "model_head.pkl", PROBE_HEAD_FILE)

    @classmethod
    def requested(cls, config) -> bool:
        return recipe_of(config.task_options) == SETFIT

    def check_plan(self, plan) -> None:
        super().check_plan(plan)
        options, config = plan.adapter.options, plan.config
        check_problem_type(options.get("problem_type"))
        refused = [
            ("--class-weights", options.get("class_weights") not in (None, "none")),
            ("--loss", options.get("loss") not in (None, "cross-entropy")),
            ("--focal-gamma", options.get("focal_gamma") is not None),
            ("--eval-every", bool(config.eval_every)),
            ("--patience", bool(config.patience)),
        ]
        for flag, given in refused:
            if given:
                raise BertkitError(
                    f"{flag} does not apply to --recipe setfit ({WHY})", f"drop {flag}, or use --recipe finetune"
                )

    def check_data(self, run) -> None:
        check_problem_type(seen_in(run.train_examples).get("problem_type"))
        check_rows([ex["label"] for ex in run.train_examples], run.adapter.labels)

    def load_network(self, run):
        from bertkit.networks.embedding import load_encoder

        return load_encoder(run.model_ref, run.plan.model)

    def training_features(self, features: list, run) -> list:
        from bertkit.networks.contrastive import pair_feature

        per_row = int(run.adapter.options.get("pairs_per_example") or DEFAULT_PAIRS)
        self.rows = features  # the head is fitted on the rows' vectors once the body is trained
        self.pairs = contrastive_pairs([ex["label"] for ex in run.train_examples], per_row, run.plan.config.seed)
        positive = sum(pair.similarity == 1.0 for pair in self.pairs)
        run.preprocessing["train_features"] = len(self.pairs)
        notice(
            "data",
            f"train: {len(self.pairs)} contrastive pairs from {len(run.train_examples)} labelled rows ({per_row} per "
            f"row: {positive} positive, {len(self.pairs) - positive} negative)",
            pairs=len(self.pairs),
            positive=positive,
        )
        return [pair_feature(features[p.first], features[p.second], p.similarity) for p in self.pairs]

    def training_spec(self, spec):
        return TrainingSpec(recipe=SETFIT_BODY)

    def training_targets(self, targets: dict) -> dict:
        return {}  # a pair batch's similarity is collated by the recipe's own collator

    def finish(self, finished, run) -> None:
        """SetFit's head on the trained body's embeddings of the training rows; its eval metrics."""
        finished.model = finished.model.float()  # the saved weights are fp32 whatever precision trained them
        self.normalize = _head_normalizes(run.model_ref, run.plan.model)
        vectors = _embedder(run, finished.model, self.normalize)
        labels = np.array([run.adapter.labels.index(ex["label"]) for ex in run.train_examples])
        self.classifier, self.weight, self.bias = fit_logistic_head(
            vectors(self.rows), labels, len(run.adapter.labels), run.plan.config.seed
        )
        run.metrics = {}
        if run.eval_examples:
            outputs = {"logits": list(vectors(run.eval_features) @ self.weight.T + self.bias)}
            predictions = run.adapter.postprocess(run.eval_examples, run.eval_features, outputs)
            scored = run.adapter.metrics(run.eval_examples, predictions)
            run.metrics = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in scored.items()}

    def sections(self, finished, run) -> dict:
        positive = sum(pair.similarity == 1.0 for pair in self.pairs)
        return {
            "probe": {
                "head": PROBE_HEAD_FILE,
                "pooling": "mean",
                "classifier": CLASSIFIER,
                "normalize": self.normalize,
                "encoder": "trained on contrastive pairs of the labelled rows (--recipe setfit)",
                "setfit": {
                    "pairs_per_example": int(run.adapter.options.get("pairs_per_example") or DEFAULT_PAIRS),
                    "pairs": len(self.pairs),
                    "positive_pairs": positive,
                    "negative_pairs": len(self.pairs) - positive,
                    "loss": LOSS,
                },
            }
        }

    def save_files(self, staging, finished, run) -> None:
        """The head (bertkit's safetensors) and SetFit's files (probing/setfit_files.py)."""
        from safetensors.numpy import save_file

        weights = {"weight": self.weight.astype(np.float32), "bias": self.bias.astype(np.float32)}
        save_file(weights, str(staging / PROBE_HEAD_FILE))
        dim = int(self.weight.shape[1])
        labels, max_length = run.adapter.labels, run.adapter.max_length
        write_setfit_files(staging, self.classifier, labels, max_length, dim, self.normalize)

    @classmethod
    def ordinary_weights(cls, meta: dict) -> bool:
        return False  # a sentence-transformers body and a separate head

    @classmethod
    def recorded_in(cls, meta: dict) -> bool:
        return bool((meta.get("probe") or {}).get("setfit"))


def _embedder(run, encoder, normalize: bool):
    """features -> the body's mean-pooled vectors (float64, unit length when ``normalize``)."""
    from bertkit.networks.embedding import EmbeddingNetwork, l2_normalize
    from bertkit.networks.embedding import run as run_network
    from bertkit.networks.pooling import parse_pooling

    embedder = EmbeddingNetwork(encoder, parse_pooling("mean"))
    batch, pad = run.plan.config.eval_batch_size, run.tokenizer.pad_token_id

    def vectors(features) -> np.ndarray:
        found = np.stack(run_network(run.engine, embedder, features, batch, pad))
        return (l2_normalize(found) if normalize else found).astype(np.float64)

    return vectors


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
