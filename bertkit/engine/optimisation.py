"""One optimizer step and what surrounds it: AdamW over decay / no-decay groups, the linear
warmup/decay schedule, bf16 master weights, gradient clipping and the gradient norm."""

from __future__ import annotations

import re

import torch

from bertkit.engine.checkpoints import cpu_copy
from bertkit.engine.master_weights import MasterWeights, sparse_embedding_possible
from bertkit.engine.runtime_text import lazy_embeddings_refused
from bertkit.errors import BertkitError

NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")


# a transformer layer's parameters: encoder.layer.N (BERT, RoBERTa, ELECTRA, DeBERTa), transformer.layer.N
# (DistilBERT), layers.N (ModernBERT); ALBERT shares one layer among all depths and has no numbered ones
NUMBERED_LAYER = re.compile(r"(?:^|\.)layers?\.(\d+)\.")


def parameter_groups(model, weight_decay: float, lr: float | None = None, layer_decay: float = 1.0) -> list[dict]:
    """AdamW's groups: weight decay except on biases and norms; with ``layer_decay`` below 1, each
    depth its own rate (ELECTRA's layer-wise decay: ``lr * layer_decay ** (L + 1 - depth)``, the
    embeddings at depth 0, layer i at i + 1, the head and pooler at L + 1), the top groups first so
    that the first group's rate is the peak one."""
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    depths, top = _depths([name for name, _ in named]) if layer_decay < 1 else (None, 0)
    if layer_decay < 1 and depths is None:
        raise BertkitError(
            f"--layer-decay {layer_decay:g}: this model has no numbered layers to give decreasing rates "
            "(ALBERT shares one layer among all depths)",
            "drop --layer-decay, or give --layer-decay 1",
        )
    groups = {}
    for name, parameter in named:
        depth = depths[name] if depths else 0
        no_decay = name.endswith(NO_DECAY)
        groups.setdefault((depth, no_decay), []).append(parameter)
    ordered = sorted(groups.items(), key=lambda item: (-item[0][0], item[0][1]))
    if depths is None:  # the two groups, decay first, even when one is empty
        ordered = [((0, False), groups.get((0, False), [])), ((0, True), groups.get((0, True), []))]
    made = []
    for (depth, no_decay), params in ordered:
        group = {"params": params, "weight_decay": 0.0 if no_decay else weight_decay}
        if depths is not None:
            group["lr"] = lr * layer_decay ** (top - depth)
        made.append(group)
    return made


def _depths(names: list[str]) -> tuple[dict[str, int] | None, int]:
    """Each parameter's depth and the top depth L + 1 (the head's), or (None, 0) without numbered layers."""
    layers = {name: int(m.group(1)) for name in names if (m := NUMBERED_LAYER.search(name))}
    if not layers:
        return None, 0
    top = max(layers.values()) + 2  # the head and pooler, above the last layer (index L - 1, depth L)
    return {name: layers[name] + 1 if name in layers else 0 if "embeddings" in name else top for name in names}, top


class Optimisation:
    """Built on the bare model before ``prepare``; ``accumulate`` after every backward, ``step`` at
    the end of each accumulation window. With ``bf16`` the model trains in bf16 and the optimizer
    updates fp32 masters (master_weights.MasterWeights)."""

    def __init__(self, model, config, total_steps: int, acc, bf16: bool):
        from transformers import get_linear_schedule_with_warmup

        self.acc, self.max_grad_norm, self.model = acc, config.max_grad_norm, model
        groups = parameter_groups(model, config.weight_decay, config.lr, getattr(config, "layer_decay", None) or 1.0)
        self.master = None
        one_process = acc.num_processes == 1  # DDP all-reduces dense gradients only, after the backward pass
        if bf16:
            self.master = MasterWeights(
                model.to(acc.device), groups, sparse_embeddings=one_process, early_gradients=one_process
            )
        elif _fp32_lazy(config.lazy_embeddings, model, acc):  # the weights are the flat masters: no copies
            self.master = MasterWeights(
                model, groups, dtype=torch.float32, sparse_embeddings=True, early_gradients=True
            )
        if self.master is not None:
            groups = self.master.groups
        # The fused kernel (CPU and CUDA) does one pass over the parameters instead of several.
        embeddings, rows = self.master.sparse_master() if self.master is not None else (None, None)
        self.lazy = _lazy(config.lazy_embeddings, embeddings is not None, acc.device.type)
        if self.lazy:
            from bertkit.engine.lazy_embeddings import LazyAdamW

            if embeddings is None:
                raise lazy_embeddings_refused()
            self.optimizer = LazyAdamW(groups, embeddings, rows, lr=config.lr, fused=True)
        else:
            self.optimizer = torch.optim.AdamW(groups, lr=config.lr, fused=True)
        # Not prepared: Accelerate's scheduler wrapper steps once per process, for its own sharding.
        self.scheduler = get_linear_schedule_with_warmup(
            self.optimizer, int(config.warmup_ratio * total_steps), total_steps
        )

    def prepare(self, model):
        """Wrap model and optimizer for this launch (DDP, device); after a checkpoint's optimizer
        state went in."""
        self.model, self.optimizer = self.acc.prepare(model, self.optimizer)
        return self.model

    def accumulate(self, sync: bool) -> None:
        # fp32 accumulation; with several processes only at sync, after DDP's all-reduce
        if self.master is not None and (sync or self.acc.num_processes == 1):
            self.master.accumulate()

    def step(self, want_norm: bool) -> tuple[float | None, float]:
        """Clip, step, schedule, clear. Returns the gradient norm before clipping (None when neither
        clipping nor ``want_norm`` needed it) and the learning rate this step used."""
        grad_norm = self._clip() if self.max_grad_norm > 0 else self._norm() if want_norm else None
        lr = self.scheduler.get_last_lr()[0]
        try:
            self.optimizer.step()
        finally:
            _bare(self.optimizer).grad_scale = None  # a clip folded in (clip_in_adamw) is for this step only
        if self.master is not None:
            self.master.publish(rows_only=self.lazy)
        if not self.optimizer.step_was_skipped:  # an fp16 overflow skips the step
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm, lr

    def _clip(self):
        if self.master is not None and not self.master.on_device:
            return clip_in_adamw(self.master, self.optimizer, self.max_grad_norm)
        if self.master is not None:
            return self.master.clip_(self.max_grad_norm)
        return self.acc.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)

    def _norm(self):
        if self.master is not None:
            return self.master.grad_norm()
        self.acc.unscale_gradients()  # fp16: the norm of the true gradients, not the scaled ones
        return torch.nn.utils.get_total_norm([p.grad for p in self.model.parameters() if p.grad is not None])

    @property
    def learning_rate(self) -> float:
        return self.scheduler.get_last_lr()[0]

    def weights(self) -> dict:
        """The model's weights on the CPU in fp32: a bf16 run's trained weights are its masters."""
        unwrapped = self.acc.unwrap_model(self.model)
        return self.master.state_dict(unwrapped) if self.master else cpu_copy(unwrapped)

    def trained_model(self):
        """The bare model in fp32 (a bf16 run's fp32 masters are its trained weights)."""
        model = self.acc.unwrap_model(self.model)
        if self.master is not None:
            self.master.to_fp32(model)
        return model


def clip_in_adamw(master: MasterWeights, optimizer, max_norm: float) -> torch.Tensor:
    """Clip the masters' gradients (``clip_grad_norm_``'s rule) inside the fused AdamW step instead of in
    a pass of their own: where the norm is over ``max_norm`` the optimizer gets ``grad_scale = 1 / coefficient``,
    which its fused kernel divides each gradient by as it reads it (and writes the clipped gradient back),
    and LazyAdamW's rows honour the same. Returns the norm before clipping; the caller clears ``grad_scale``
    after the step. A MiniLM bf16 step at 32 x 21 tokens that clips (paired, /tmp probe): the clipping
    phase 4.4 -> 2.1 ms, AdamW 0.2 ms longer."""
    norm = master.grad_norm()
    coefficient = max_norm / (float(norm) + 1e-6)
    if coefficient < 1.0:
        _bare(optimizer).grad_scale = torch.tensor(1.0 / coefficient, dtype=torch.float32)
    return norm


def _bare(optimizer):
    """The torch optimizer inside Accelerate's wrapper (the step reads ``grad_scale`` from it)."""
    return getattr(optimizer, "optimizer", optimizer)


def _fp32_lazy(asked: bool | None, model, acc) -> bool:
    """fp32 on one CPU process with a word-embedding table that can take sparse gradients: train it lazily
    (unless --no-lazy). Measured against the dense fp32 step (MiniLM, 32 x 16 and 32 x 24 tokens, oneDNN
    capped at AVX2, paired, /tmp probe): 1.085x and 1.05x the steps a second."""
    return (
        asked is not False and acc.device.type == "cpu" and acc.num_processes == 1 and sparse_embedding_possible(model)
    )


def _lazy(asked: bool | None, possible: bool, device_type: str) -> bool:
    """--lazy-embeddings: given, as given (refused by the caller where it cannot apply); unset, on where it
    applies on a CPU, where it was measured: SST-2 and CoNLL over 3 seeds the same accuracy and F1
    (0.7993 / 0.6053 against 0.7989 / 0.6063) at 1.19x / 1.07x the steps a second
    (benchmarks/results/lazy_seeds.md). On a GPU the fused AdamW over every row costs little."""
    if asked is not None:
        return asked
    return possible and device_type == "cpu"
