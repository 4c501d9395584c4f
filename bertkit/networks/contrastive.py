"""SetFit's body training as torch modules: batches of row pairs and the cosine-similarity loss.

Each training feature is one pair (tasks/few_shot.py draws them): the first row's token ids under
the usual keys, the second's under ``*_b``, and ``similarity`` (1.0 same label, 0.0 not). Both rows
are mean-pooled as `bertkit embed` pools them (pooling.py; in length-sorted chunks on the CPU,
sorted_chunks.py), and the loss is SetFit's default,
sentence-transformers' CosineSimilarityLoss: the mean squared error between cos(u, v) and the
target. The engine trains it like any model: ``forward(**batch).loss``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from bertkit.networks.collate import Collator
from bertkit.networks.sorted_chunks import mean_pooled
from bertkit.networks.wrapped import WrappedModel

SECOND = "_b"  # the suffix of the second row's keys in a pair feature
SIMILARITY = "similarity"


@dataclass
class PairLoss:
    loss: torch.Tensor
    similarity: torch.Tensor


def pair_feature(first: dict, second: dict, similarity: float) -> dict:
    """One training feature from two rows' features (their token ids and segment ids)."""
    feature = {key: first[key] for key in ("input_ids", "token_type_ids") if key in first}
    feature.update({key + SECOND: second[key] for key in ("input_ids", "token_type_ids") if key in second})
    feature[SIMILARITY] = float(similarity)
    return feature


class PairCollator:
    """Each side padded to its own longest row (the padding collator, twice), and the targets."""

    # Random batches, as SetFit's: grouped by the first row's length, a batch would hold the pairs
    # of one or two anchor rows (each anchors --pairs-per-example of them).
    random_batches = True

    def __init__(self, pad_token_id: int):
        self.pad = Collator(pad_token_id, {})

    def __call__(self, features: list[dict]) -> dict:
        first = self.pad([{k: v for k, v in f.items() if not k.endswith(SECOND)} for f in features])
        second = self.pad([{k[: -len(SECOND)]: v for k, v in f.items() if k.endswith(SECOND)} for f in features])
        batch = {**first, **{key + SECOND: value for key, value in second.items()}}
        batch["labels"] = torch.tensor([f[SIMILARITY] for f in features], dtype=torch.float32)
        return batch


class CosineSimilarityTrainer(WrappedModel):
    """The encoder (``AutoModel``) trained so that cos(mean(u), mean(v)) meets each pair's target."""

    wrapped_attribute = "encoder"

    def __init__(self, encoder: nn.Module):
        super().__init__()
        self.encoder = encoder

    def embed(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
        return mean_pooled(self.encoder, {"input_ids": input_ids, "attention_mask": attention_mask, **extra})

    def forward(self, labels=None, **batch) -> PairLoss:
        first = self.embed(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
        second = self.embed(
            batch["input_ids" + SECOND], batch["attention_mask" + SECOND], batch.get("token_type_ids" + SECOND)
        )
        similarity = F.cosine_similarity(first.float(), second.float(), dim=-1)
        loss = F.mse_loss(similarity, labels.float()) if labels is not None else similarity.new_zeros(())
        return PairLoss(loss, similarity)


class SetFitBody:
    """The networks/recipes.py recipe of the body's training: pairs, the cosine loss, and the bare
    encoder as the finished model (the head is fitted afterwards, on its embeddings)."""

    @staticmethod
    def training_network(spec, model):
        return CosineSimilarityTrainer(model)

    @staticmethod
    def training_collator(spec, tokenizer, seed: int):
        return PairCollator(tokenizer.pad_token_id)

    @staticmethod
    def scoring_network(spec, model, tokenizer):
        return None  # a saved SetFit directory is scored as a probe (encoder + linear head)

    @staticmethod
    def evaluation_network(spec, model, tokenizer, unwrap):
        return None  # nothing is evaluated until the head is fitted

    @staticmethod
    def finish(spec, trained, model_ref: str, display_name: str) -> "FinishedBody":
        return FinishedBody(trained.encoder if isinstance(trained, CosineSimilarityTrainer) else trained)


@dataclass
class FinishedBody:
    """recipes.Finished's shape (recipes.py imports this module, so it cannot be imported here)."""

    model: nn.Module
    facts: dict = field(default_factory=dict)
    save_weights: object = None
