"""The first-token shortcut must give the stock model's logits, gradients and saved weights."""

from __future__ import annotations

import torch

from bertkit.networks.first_token_head import first_token_only_last_layer


def _model(tiny_bert):
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=3)


def _batch():
    ids = torch.tensor([[2, 10, 11, 12, 13, 3], [2, 14, 15, 3, 0, 0], [2, 16, 3, 0, 0, 0]])
    return {"input_ids": ids, "attention_mask": (ids != 0).long(), "labels": torch.tensor([0, 2, 1])}


def test_same_logits_and_gradients_as_the_stock_model(tiny_bert, tmp_path):
    stock, fast = _model(tiny_bert), _model(tiny_bert)
    assert first_token_only_last_layer(fast)
    stock.eval(), fast.eval()
    batch = _batch()
    out_stock, out_fast = stock(**batch), fast(**batch)
    assert torch.allclose(out_stock.logits, out_fast.logits, atol=1e-5)
    out_stock.loss.backward()
    out_fast.loss.backward()
    for (name, p_stock), p_fast in zip(stock.named_parameters(), fast.parameters()):
        assert torch.allclose(p_stock.grad, p_fast.grad, atol=1e-5), name

    fast.save_pretrained(tmp_path / "saved")  # saved weights are the plain model's
    from transformers import AutoModelForSequenceClassification

    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / "saved").eval()
    assert torch.allclose(reloaded(**batch).logits, out_fast.logits, atol=1e-5)


def test_other_architectures_are_left_alone(tiny_bert):
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    model = DistilBertForSequenceClassification(
        DistilBertConfig(vocab_size=50, dim=32, n_layers=1, n_heads=2, hidden_dim=64)
    )
    assert not first_token_only_last_layer(model)
