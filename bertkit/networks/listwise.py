"""Listwise reranker training (``finetune rerank --rerank-loss listwise``): a training feature is
one query with its passages; the loss is the cross-entropy between the query's relevance shares
(label / the sum of its labels) and the softmax of its passages' logits (ListNet's top-one
probability, Cao et al. 2007), averaged over the batch's queries. The model is the plain one-logit
cross-encoder, so evaluation, saving and scoring are those of the pointwise reranker."""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F

from bertkit.networks.collate import Collator
from bertkit.networks.wrapped import WrappedModel


class ListwiseCollator:
    """The batch's queries' pairs, padded together, with each pair's query (``group``) and target."""

    def __init__(self, pad_token_id: int):
        self.pad = Collator(pad_token_id)

    def __call__(self, features: list[dict]) -> dict:
        pairs = [pair for f in features for pair in f["pairs"]]
        batch = self.pad([{k: v for k, v in pair.items() if k in ("input_ids", "token_type_ids")} for pair in pairs])
        batch["group"] = torch.tensor([i for i, f in enumerate(features) for _ in f["pairs"]], dtype=torch.long)
        batch["relevance"] = torch.tensor([t for f in features for t in f["relevance"]], dtype=torch.float32)
        return batch


def listwise_loss(logits: torch.Tensor, group: torch.Tensor, relevance: torch.Tensor) -> torch.Tensor:
    """Mean over queries of -sum_p share_p log softmax(logits)_p, within each query's passages."""
    losses = []
    for g in torch.unique(group):
        mine = group == g
        share = relevance[mine] / relevance[mine].sum()
        losses.append(-(share * F.log_softmax(logits[mine].float(), dim=0)).sum())
    return torch.stack(losses).mean()


class ListwiseTrainer(WrappedModel):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, group, relevance, **inputs):
        logits = self.model(**inputs).logits.reshape(-1)
        return types.SimpleNamespace(loss=listwise_loss(logits, group, relevance))
