"""Knowledge distillation's torch side: the student made from the teacher's own layers, the loss
that mixes the teacher's softened outputs with the gold labels, and the collator that puts the
cached teacher logits into each batch.

The loss per scored row (cls/pair: a feature; ner: a token whose label is not -100):

    alpha * T^2 * KL(softmax(teacher / T) || softmax(student / T)) + (1 - alpha) * CE(student, gold)

and the soft term alone for a row the teacher labelled (``soft_only``: --unlabelled text); the mean
over rows. T^2 keeps the soft term's gradients on the scale of the hard term's whatever T is
(Hinton et al. 2015). ``hidden`` adds the mean squared error (or 1 - cosine) between the hidden
states of each student layer and the teacher layer it stands for, over real tokens.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.networks.collate import IGNORED, Collator
from bertkit.networks.wrapped import WrappedModel

TEACHER_KEY, SOFT_ONLY_KEY = "teacher_logits", "soft_only"


def chosen_layers(teacher_layers: int, student_layers: int) -> list[int]:
    """The teacher layers (0-based) a student of ``student_layers`` starts from: i * L // N, evenly
    spaced from the first (6 of 12: 0, 2, ..., 10, DistilBERT's every other layer; 3 of 6: 0, 2, 4)."""
    return [i * teacher_layers // student_layers for i in range(student_layers)]


def mapped_layers(teacher_layers: int, student_layers: int) -> list[int]:
    """For the hidden-state loss: the teacher layer (1-based, 0 = embeddings) whose output student
    layer j's output matches: the last of the block of teacher layers it replaces, (j+1) * L // N."""
    return [(j + 1) * teacher_layers // student_layers for j in range(student_layers)]


def encoder_layers(model) -> nn.ModuleList:
    """The encoder's list of transformer layers (BERT's encoder.layer, DistilBERT's transformer.layer, ...):
    the ModuleList whose length is the config's layer count."""
    count = model.config.num_hidden_layers
    lists = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.ModuleList) and len(m) == count]
    for name, module in lists:
        if name.rsplit(".", 1)[-1] in ("layer", "layers"):
            return module
    if lists:
        return lists[0][1]
    raise ValueError(f"no list of {count} layers in {type(model).__name__}")


def drop_layers(model, keep: list[int]):
    """Keep only the encoder layers ``keep`` (in order), in place; the config says the new count, so
    the saved directory loads as an ordinary model of that depth."""
    layers = encoder_layers(model)
    kept = nn.ModuleList([layers[i] for i in keep])
    for parent in model.modules():
        for name, child in parent.named_children():
            if child is layers:
                setattr(parent, name, kept)
    for index, layer in enumerate(kept):  # attention modules that know their position (caches)
        for module in layer.modules():
            if hasattr(module, "layer_idx"):
                module.layer_idx = index
    config = model.config
    if isinstance(getattr(config, "layer_types", None), list):
        config.layer_types = [config.layer_types[i] for i in keep]
    config.num_hidden_layers = len(keep)
    return model


def parameter_count(model) -> int:
    return sum(p.numel() for p in model.parameters())


def measure_speed(models, features: list[dict], pad_token_id: int, device, batch_size: int = 32) -> list[float]:
    """Examples per second through each of ``models`` (no gradients, batches padded to their longest):
    passes alternate between the models and each keeps its best of three, so a machine busy for a
    moment slows none of them more than the others. What the card's speed ratio compares."""
    import time

    collate = Collator(pad_token_id, {})
    inputs = [
        {k: v.to(device) for k, v in collate(features[i : i + batch_size]).items()}
        for i in range(0, len(features), batch_size)
    ]
    best = [float("inf")] * len(models)
    with torch.inference_mode():
        for model in models:
            model.eval()
            model(**inputs[0])  # warm-up
        for _ in range(3):
            for index, model in enumerate(models):
                started = time.perf_counter()
                for batch in inputs:
                    model(**batch)
                best[index] = min(best[index], time.perf_counter() - started)
    return [len(features) / seconds if inputs and seconds else 0.0 for seconds in best]


def distillation_loss(student, teacher, labels, temperature: float, alpha: float, soft_only=None):
    """The loss of the module docstring; ``student``/``teacher`` [rows, classes] or [rows, tokens,
    classes], ``labels`` [rows] or [rows, tokens] (-100: not scored), ``soft_only`` [rows] bool."""
    classes = student.shape[-1]
    student, teacher = student.float().reshape(-1, classes), teacher.float().reshape(-1, classes)
    labels = labels.reshape(-1)
    soft_only = torch.zeros_like(labels, dtype=torch.bool) if soft_only is None else soft_only.reshape(-1).bool()
    scored = (labels != IGNORED) | soft_only
    student, teacher, labels, soft_only = student[scored], teacher[scored], labels[scored], soft_only[scored]
    if not len(labels):
        return student.sum() * 0.0
    log_student = F.log_softmax(student / temperature, dim=-1)
    log_teacher = F.log_softmax(teacher / temperature, dim=-1)
    soft = (log_teacher.exp() * (log_teacher - log_student)).sum(-1) * temperature**2
    hard = F.cross_entropy(student, labels.clamp(min=0), reduction="none")
    per_row = torch.where(soft_only, soft, alpha * soft + (1 - alpha) * hard)
    return per_row.mean()


def hidden_state_loss(student_states, teacher_states, layer_map, attention_mask, kind: str = "mse"):
    """Mean over the mapped layers and real tokens of the squared error per hidden unit (mse) or of
    1 - cosine (cosine); ``student_states[j + 1]`` is matched with ``teacher_states[layer_map[j]]``."""
    losses = []
    for j, t in enumerate(layer_map):
        # a classifier's last layer may compute its first token only (bertkit.networks.first_token_head)
        tokens = min(student_states[j + 1].shape[1], teacher_states[t].shape[1])
        mask = attention_mask[:, :tokens].bool()
        s_h, t_h = student_states[j + 1][:, :tokens][mask].float(), teacher_states[t][:, :tokens][mask].float()
        if kind == "cosine":
            losses.append((1 - F.cosine_similarity(s_h, t_h, dim=-1)).mean())
        else:
            losses.append(F.mse_loss(s_h, t_h))
    return torch.stack(losses).mean()


class DistillationLoss(WrappedModel):
    """The student with the distillation loss; ``teacher`` (frozen, for --hidden-loss only: its
    hidden states are too big to cache) runs forward on every batch. Without teacher logits (the
    evaluations during training) it returns the student's own outputs."""

    def __init__(self, model, temperature: float, alpha: float, teacher=None, hidden=None, hidden_weight=1.0):
        super().__init__()
        self.model, self.temperature, self.alpha = model, float(temperature), float(alpha)
        self.hidden, self.hidden_weight, self.layer_map = hidden, float(hidden_weight), None
        self.teacher = teacher
        if teacher is not None:
            teacher.requires_grad_(False)
            teacher.eval()
            self.layer_map = mapped_layers(teacher.config.num_hidden_layers, model.config.num_hidden_layers)

    @property
    def padded_reason(self) -> str | None:
        if self.teacher is None:
            return None
        return "--hidden-loss compares every layer's hidden states, which packed calls do not return"

    def train(self, mode: bool = True):
        super().train(mode)
        if self.teacher is not None:
            self.teacher.eval()  # no dropout in the targets
        return self

    def forward(self, labels=None, teacher_logits=None, soft_only=None, **inputs):
        hidden = self.teacher is not None and teacher_logits is not None
        outputs = self.model(**inputs, output_hidden_states=True) if hidden else self.model(**inputs)
        if teacher_logits is None:
            return outputs
        outputs.loss = distillation_loss(
            outputs.logits, teacher_logits, labels, self.temperature, self.alpha, soft_only
        )
        if hidden:
            with torch.no_grad():
                teacher_states = self.teacher(**inputs, output_hidden_states=True).hidden_states
            outputs.loss = outputs.loss + self.hidden_weight * hidden_state_loss(
                outputs.hidden_states, teacher_states, self.layer_map, inputs["attention_mask"], self.hidden
            )
        return outputs


class DistillCollator:
    """The engine's padding collator, plus each feature's cached teacher logits (per token: padded
    with zeros, never scored) and which rows carry no gold label (their ``labels`` are -100)."""

    def __init__(self, pad_token_id: int, targets: dict | None):
        self.padding = Collator(pad_token_id, targets)

    def __call__(self, features: list[dict]) -> dict:
        batch = self.padding([{k: v for k, v in f.items() if k != TEACHER_KEY} for f in features])
        logits = [torch.as_tensor(f[TEACHER_KEY], dtype=torch.float32) for f in features]
        if logits[0].dim() == 2:  # per token: [tokens, classes]
            longest = batch["input_ids"].shape[1]
            logits = [F.pad(t, (0, 0, 0, longest - t.shape[0])) for t in logits]
        batch[TEACHER_KEY] = torch.stack(logits)
        if any(f.get(SOFT_ONLY_KEY) for f in features):
            batch[SOFT_ONLY_KEY] = torch.tensor([bool(f.get(SOFT_ONLY_KEY)) for f in features])
        return batch
