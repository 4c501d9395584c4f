"""The listwise reranker loss against a hand computation, and its batches (bertkit/networks/listwise.py)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from bertkit.networks.listwise import ListwiseCollator, listwise_loss  # noqa: E402


def test_listwise_loss_is_the_cross_entropy_of_relevance_shares_and_each_querys_softmax():
    logits = torch.tensor([2.0, 0.0, -1.0, 0.5, 1.5])
    group = torch.tensor([0, 0, 0, 1, 1])
    relevance = torch.tensor([1.0, 0.0, 1.0, 0.0, 2.0])

    def log_softmax(values, i):
        return values[i] - math.log(sum(math.exp(v) for v in values))

    first = -(0.5 * log_softmax([2.0, 0.0, -1.0], 0) + 0.5 * log_softmax([2.0, 0.0, -1.0], 2))
    second = -(1.0 * log_softmax([0.5, 1.5], 1))
    assert float(listwise_loss(logits, group, relevance)) == pytest.approx((first + second) / 2, rel=1e-6)


def test_the_collator_pads_every_querys_pairs_together_and_says_whose_they_are():
    features = [
        {"input_ids": [1, 2, 3], "pairs": [{"input_ids": [1, 2, 3]}, {"input_ids": [1, 2]}], "relevance": [1.0, 0.0]},
        {
            "input_ids": [1, 5],
            "pairs": [{"input_ids": [1, 5]}, {"input_ids": [7]}, {"input_ids": [8]}],
            "relevance": [0, 1, 0],
        },
    ]
    batch = ListwiseCollator(pad_token_id=0)(features)
    assert batch["input_ids"].shape == (5, 3)
    assert batch["group"].tolist() == [0, 0, 1, 1, 1]
    assert batch["relevance"].tolist() == [1.0, 0.0, 0.0, 1.0, 0.0]
    assert batch["attention_mask"].sum(1).tolist() == [3, 2, 2, 1, 1]
