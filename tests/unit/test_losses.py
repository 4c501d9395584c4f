"""Class weights and the focal loss: torch's own losses where they exist, hand-computed values
where they do not, and the 'auto' weights' formulas on hand-made counts; QA's span loss without
its padding."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertkit.errors import BertkitError
from bertkit.networks.losses import class_loss, multi_label_loss, span_loss
from bertkit.tasks.loss_options import check_loss_options, class_weights


def test_weighted_cross_entropy_is_torchs_and_ignores_unlabelled_tokens():
    logits = torch.tensor([[[2.0, 0.5, -1.0], [0.1, 0.2, 0.3], [1.0, 1.0, 1.0]]])
    labels = torch.tensor([[0, -100, 2]])
    weight = torch.tensor([0.5, 1.0, 3.0])
    expected = F.cross_entropy(logits[0, [0, 2]], torch.tensor([0, 2]), weight=weight)
    assert torch.allclose(class_loss(logits, labels, weight), expected)


def test_focal_loss_by_hand():
    # one row, two classes, logits (0, ln 3): p = (1/4, 3/4); gold class 1: p_t = 3/4
    # focal(gamma=2) = -(1 - 3/4)^2 * ln(3/4) = -(1/16) * ln 0.75
    logits, labels = torch.tensor([[0.0, math.log(3.0)]]), torch.tensor([1])
    assert class_loss(logits, labels, gamma=2.0).item() == pytest.approx(-math.log(0.75) / 16, rel=1e-6)
    # gamma 0 is cross-entropy itself
    assert class_loss(logits, labels, gamma=0.0).item() == pytest.approx(-math.log(0.75), rel=1e-6)
    # weighted focal is a weighted mean: two rows, weights 1 and 3
    two = torch.tensor([[0.0, math.log(3.0)], [0.0, math.log(3.0)]])
    rows = [-(1 / 16) * math.log(0.75), -(9 / 16) * math.log(0.25)]  # gold 1 (p_t 3/4), gold 0 (p_t 1/4)
    weighted = class_loss(two, torch.tensor([1, 0]), torch.tensor([3.0, 1.0]), gamma=2.0).item()
    assert weighted == pytest.approx((1 * rows[0] + 3 * rows[1]) / 4, rel=1e-6)


def test_multi_label_loss_is_bce_with_pos_weight():
    logits = torch.tensor([[0.3, -1.2, 2.0], [-0.5, 0.0, 1.0]])
    targets = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    pos_weight = torch.tensor([1.0, 4.0, 0.5])
    expected = F.binary_cross_entropy_with_logits(logits, targets, pos_weight=pos_weight)
    assert torch.allclose(multi_label_loss(logits, targets, pos_weight), expected)
    # focal: each term times (1 - p_t)^gamma; one logit 0 (p 1/2), gold 1: ln 2 * (1/2)^2
    focal = multi_label_loss(torch.tensor([[0.0]]), torch.tensor([[1.0]]), gamma=2.0)
    assert focal.item() == pytest.approx(math.log(2) / 4, rel=1e-6)


def test_auto_weights_by_hand(tmp_path):
    # 6 rows: 4 of class a, 2 of b -> balanced: 6 / (2 * 4) = 0.75, 6 / (2 * 2) = 1.5
    weights = class_weights({"class_weights": "auto"}, np.array([4, 2]), ["a", "b"], False, 6)
    assert weights.tolist() == [0.75, 1.5]
    # multi-label, 10 rows: label x in 2, y in 5 -> pos_weight sqrt(negatives/positives): sqrt(8/2), sqrt(5/5)
    weights = class_weights({"class_weights": "auto"}, np.array([2, 5]), ["x", "y"], True, 10)
    assert weights.tolist() == [2.0, 1.0]
    assert class_weights({"class_weights": "none"}, np.array([4, 2]), ["a", "b"], False, 6) is None
    given = tmp_path / "w.json"
    given.write_text(json.dumps({"b": 2.5, "a": 1}))
    assert class_weights({"class_weights": str(given)}, np.array([4, 2]), ["a", "b"], False, 6).tolist() == [1.0, 2.5]
    given.write_text(json.dumps({"a": 1}))
    with pytest.raises(BertkitError, match="exactly the model's labels"):
        class_weights({"class_weights": str(given)}, np.array([4, 2]), ["a", "b"], False, 6)


@pytest.mark.parametrize(
    "options, fragment",
    [
        ({"loss": "hinge"}, "unknown --loss"),
        ({"loss": "focal", "focal_gamma": -1.0}, "--focal-gamma"),
        ({"class_weights": "nope.json"}, "not auto, none or an existing file"),
    ],
)
def test_loss_options_refused_before_any_data(options, fragment):
    with pytest.raises(BertkitError, match=fragment):
        check_loss_options(options, has_classes=True)


def test_regression_has_no_classes_to_weight():
    with pytest.raises(BertkitError, match="regression"):
        check_loss_options({"class_weights": "auto"}, has_classes=False)
    check_loss_options({"class_weights": "none"}, has_classes=False)  # says nothing


def test_fresh_heads_start_from_the_training_priors():
    from torch import nn

    from bertkit.networks.losses import set_head_bias
    from bertkit.tasks.multi_label import MultiLabel
    from bertkit.tasks.regression import Regression

    # 4 rows, label a in 1 of them, b in 3: log-odds ln(1/3), ln(3)
    bias = MultiLabel({}, ["a", "b"]).head_bias([[1, 0], [0, 1], [0, 1], [0, 1]])
    assert bias == pytest.approx([math.log(1 / 3), math.log(3)])
    assert Regression({}, None).head_bias([1.0, 2.0, 6.0]).tolist() == [3.0]
    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
    nn.init.zeros_(model[1].bias)
    set_head_bias(model, bias)
    assert model[1].bias.tolist() == pytest.approx(bias.tolist())
    model[1].bias.data.fill_(0.25)  # a trained head (not all zero) is left alone
    set_head_bias(model, bias)
    assert model[1].bias.tolist() == [0.25, 0.25]


@pytest.mark.parametrize("problem", ["regression", "multi_label_classification"])
def test_float_targets_train_through_the_fp32_loss_equal_to_transformers(tiny_bert, problem):
    """Regression and multi-label train through TrainingLoss (transformers' own MSE / BCE mix bf16
    logits with fp32 targets, which CUDA's backward refuses): the same loss as transformers' in
    fp32, and in bf16 the gradients come back to the bf16 weights."""
    from transformers import AutoModelForSequenceClassification

    from bertkit.networks.losses import TrainingLoss, loss_network

    labels = 1 if problem == "regression" else 3
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=labels, problem_type=problem)
    model.eval()  # no dropout: the two forward passes must see the same network
    target = "float" if problem == "regression" else "multi_hot"
    wrapped = loss_network(model, {}, target)
    assert isinstance(wrapped, TrainingLoss) and loss_network(model, {}, "class") is model
    ids = torch.randint(5, 60, (4, 7))
    targets = (
        torch.tensor([0.5, 3.25, 1.0, 4.75])
        if labels == 1
        else torch.tensor([[1.0, 0, 1], [0, 0, 0], [0, 1, 0], [1, 1, 1]])
    )
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    assert wrapped(labels=targets, **inputs).loss.item() == pytest.approx(
        model(labels=targets, **inputs).loss.item(), rel=1e-6
    )
    model.to(torch.bfloat16)
    loss = wrapped(labels=targets, **inputs).loss
    assert loss.dtype == torch.float32
    loss.backward()
    assert model.classifier.weight.grad.dtype == torch.bfloat16


def test_the_span_loss_leaves_padding_out_and_a_row_does_not_depend_on_its_batch():
    torch.manual_seed(0)
    start, end = torch.randn(2, 6), torch.randn(2, 6)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
    gold = torch.tensor([1, 2])
    alone = span_loss(start[:1, :4], end[:1, :4], gold[:1], gold[:1])  # row 0 unpadded, by itself
    padded = span_loss(start[:1], end[:1], gold[:1], gold[:1], mask[:1])
    assert torch.allclose(padded, alone)  # its two padding positions count for nothing
    unmasked = span_loss(start[:1], end[:1], gold[:1], gold[:1])
    assert not torch.allclose(unmasked, alone)  # transformers' loss: the padding joins the softmax
    beyond = span_loss(start, end, torch.tensor([1, 9]), torch.tensor([1, 9]), mask)  # 9: past the window, ignored
    assert torch.allclose(beyond, padded)
