"""The training loss with class weights or a focal term, and for float targets (regression,
multi-label) always (bertkit/tasks/loss_options.py decides: a LossSpec), and the evaluation loss.

``TrainingLoss`` wraps a transformers model: the model runs without ``labels`` and the loss is
computed here from its logits, in fp32 (bf16 training gives bf16 logits). transformers' own MSE and
BCE losses mix bf16 logits with fp32 targets, which CUDA's backward refuses ("Found dtype Float but
expected BFloat16"); the CPU promotes to fp32 as this does. Outputs are the model's own, so
evaluation during training reads the same logits; the saved model is the inner one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.networks.wrapped import WrappedModel
from bertkit.tasks.base import SPAN
from bertkit.tasks.loss_options import loss_spec
from bertkit.tasks.training_spec import LossSpec

IGNORE = -100  # token positions without a label (sub-words after the first, specials, padding)


class TrainingLoss(WrappedModel):
    def __init__(self, model: nn.Module, target: str, weights=None, gamma: float = 0.0):
        """``target``: "class", "multi_hot" or "float" (label_kinds.LabelKind.target)."""
        super().__init__()
        self.model, self.target, self.gamma = model, target, float(gamma)
        weight = torch.as_tensor(weights, dtype=torch.float32) if weights is not None else None
        self.register_buffer("weight", weight, persistent=False)

    def forward(self, labels=None, **inputs):
        outputs = self.model(**inputs)
        if labels is not None:
            logits = outputs.logits.float()
            # bf16 training casts the module, buffers included: the weights go back to fp32 with the logits
            weight = self.weight.float() if self.weight is not None else None
            outputs.loss = target_loss(logits, labels, self.target, weight, self.gamma)
        return outputs


class SpanLoss(TrainingLoss):
    """QA's loss (``LossSpec(target="span")``): the mean of the start and end positions'
    cross-entropies, as transformers' QA heads compute it, over the window's real tokens only."""

    def __init__(self, model: nn.Module):
        super().__init__(model, SPAN)

    def forward(self, start_positions=None, end_positions=None, **inputs):
        outputs = self.model(**inputs)
        if start_positions is not None and end_positions is not None:
            logits = (outputs.start_logits.float(), outputs.end_logits.float())
            outputs.loss = span_loss(*logits, start_positions, end_positions, inputs.get("attention_mask"))
        return outputs


def span_loss(start_logits, end_logits, start_positions, end_positions, attention_mask=None):
    """transformers' QA loss with padding left out of each softmax: a padding position can never
    be an answer, and counting it made a window's loss depend on the longest window batched with
    it (the padding it got), which packed rows (networks/packed_heads.py) do not have. A position
    past the window is ignored, as transformers clamps and ignores it."""
    if attention_mask is not None:
        padding = attention_mask == 0
        start_logits = start_logits.masked_fill(padding, torch.finfo(start_logits.dtype).min)
        end_logits = end_logits.masked_fill(padding, torch.finfo(end_logits.dtype).min)
    ignored = start_logits.shape[1]
    start = F.cross_entropy(start_logits, start_positions.clamp(0, ignored), ignore_index=ignored)
    end = F.cross_entropy(end_logits, end_positions.clamp(0, ignored), ignore_index=ignored)
    return (start + end) / 2


def target_loss(logits, labels, target: str, weight=None, gamma: float = 0.0):
    """The loss of fp32 ``logits`` for a target kind: MSE over the one output for a number (as
    transformers' regression head), BCE per label for multi-hot, cross-entropy for a class or a
    token's class (-100 ignored); ``weight`` and ``gamma`` as ``class_loss`` / ``multi_label_loss``."""
    if target == "float":
        return F.mse_loss(logits.reshape(-1), labels.float().reshape(-1))
    if target == "multi_hot":
        return multi_label_loss(logits, labels.float(), weight, gamma)
    return class_loss(logits, labels, weight, gamma)


def class_loss(logits, labels, weight=None, gamma: float = 0.0):
    """Cross-entropy over classes (one per row, or per token with -100 ignored), weighted per
    class as torch's ``cross_entropy(weight=...)`` does (a weighted mean); with ``gamma`` > 0 the
    focal loss ``-(1 - p_t)^gamma * log p_t`` (Lin et al. 2017), the same weighted mean."""
    logits, labels = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
    if gamma == 0:
        return F.cross_entropy(logits, labels, weight=weight, ignore_index=IGNORE)
    kept = labels != IGNORE
    logits, labels = logits[kept], labels[kept]
    log_p = F.log_softmax(logits, dim=-1).gather(1, labels[:, None])[:, 0]
    per_row = -((1 - log_p.exp()) ** gamma) * log_p
    scale = weight[labels] if weight is not None else torch.ones_like(per_row)
    return (per_row * scale).sum() / scale.sum().clamp(min=1e-12)


def multi_label_loss(logits, targets, pos_weight=None, gamma: float = 0.0):
    """Binary cross-entropy with logits per label (``pos_weight`` as torch defines it), averaged
    over rows and labels; with ``gamma`` > 0 each term is scaled by ``(1 - p_t)^gamma``."""
    terms = F.binary_cross_entropy_with_logits(logits, targets, pos_weight=pos_weight, reduction="none")
    if gamma:
        p = torch.sigmoid(logits)
        p_t = p * targets + (1 - p) * (1 - targets)
        terms = terms * (1 - p_t) ** gamma
    return terms.mean()


def set_head_bias(model: nn.Module, bias) -> None:
    """Start a fresh classification head's output layer (the last Linear with one output per
    label; transformers initialises its bias to 0, a trained head's is not left alone) from
    ``bias``; a checkpoint resumed afterwards overwrites it as it does every weight."""
    bias = torch.as_tensor(bias, dtype=torch.float32)
    heads = [m for m in model.modules() if isinstance(m, nn.Linear) and m.out_features == len(bias)]
    if heads and heads[-1].bias is not None and not heads[-1].bias.detach().any():
        with torch.no_grad():
            heads[-1].bias.copy_(bias.to(heads[-1].bias.dtype))


def evaluation_loss(outputs, batch: dict, targets: dict):
    """A batch's plain loss from the model's outputs, in fp32: ``target_loss`` for the task's target
    kind; QA: ``span_loss`` (``batch["attention_mask"]``: the padding it leaves out). No class
    weights: the same number for `bertkit eval` as for the evaluations during training."""
    if "start_positions" in targets:
        logits = (outputs["start_logits"].float(), outputs["end_logits"].float())
        return span_loss(*logits, batch["start_positions"], batch["end_positions"], batch.get("attention_mask"))
    return target_loss(outputs["logits"].float(), batch["labels"], targets["labels"])


def with_loss(model: nn.Module, loss: LossSpec | None) -> nn.Module:
    """``model`` wrapped to train with ``loss`` (a task's LossSpec), or ``model`` itself for None."""
    if loss is None:
        return model
    if loss.target == SPAN:
        return SpanLoss(model)
    return TrainingLoss(model, loss.target, loss.class_weights, loss.focal_gamma)


def loss_network(model: nn.Module, options: dict, target: str = "class") -> nn.Module:
    """``model`` as it trains with a task's loss options (tasks/loss_options.py ``loss_spec``)."""
    return with_loss(model, loss_spec(options, target))
