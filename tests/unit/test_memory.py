"""bertkit.engine.attention_recompute: recomputing self-attention in backward gives the same loss and gradients, dropout
included (the same random state replays the same masks)."""

from __future__ import annotations

import pytest
import torch

from bertkit.engine.attention_recompute import checkpoint_attention


def _loss_and_grads(model, batch, seed):
    torch.manual_seed(seed)
    model.zero_grad(set_to_none=True)
    loss = model(**batch).loss
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.fixture(params=["stock attention", "cpu kernels"])
def kernels(request, monkeypatch):
    """The stock attention, or bertkit's CPU training attention in chunks of rows with numpy-drawn dropout
    masks (the paths a recomputation must replay alike)."""
    if request.param == "cpu kernels":
        from bertkit.engine import cpu_kernels
        from bertkit.networks import attention_groups

        monkeypatch.setattr(attention_groups, "SCORE_BYTES", 1)
        yield cpu_kernels.CpuTrainingKernels
    else:
        yield None


def test_checkpointed_attention_is_exact_with_dropout(tiny_bert, kernels):
    from transformers import BertForQuestionAnswering

    model = BertForQuestionAnswering.from_pretrained(
        tiny_bert, attention_probs_dropout_prob=0.3, hidden_dropout_prob=0.3
    )
    model.train()
    if kernels is not None:
        kernels(model).apply()
    ids = torch.randint(5, 60, (4, 24))
    batch = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "start_positions": torch.tensor([1, 2, 3, 4]),
        "end_positions": torch.tensor([5, 6, 7, 8]),
    }
    plain_loss, plain_grads = _loss_and_grads(model, batch, seed=7)
    other_seed_loss, _ = _loss_and_grads(model, batch, seed=8)
    assert other_seed_loss != plain_loss  # dropout is really on, so the masks matter

    assert checkpoint_attention(model) == 2  # one block per layer of the 2-layer tiny BERT
    assert checkpoint_attention(model) == 0  # never wrapped twice
    loss, grads = _loss_and_grads(model, batch, seed=7)
    assert loss == plain_loss
    assert grads.keys() == plain_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(grad, plain_grads[name], rtol=0, atol=1e-6, msg=name)
    model.eval()  # inference is not wrapped: no recomputation, same outputs
    with torch.no_grad():
        assert model(input_ids=ids).start_logits.shape == (4, 24)
