"""Prediction on the real tokens only, on the CPU, for a batch that is mostly padding (`serve`).

`eval` and `predict` sort their rows by length before batching, so their batches are nearly
unpadded; `serve` batches rows as they arrive, and a batch of a few long and many short rows is
padding for half its tokens (a served batch of 32 SST-2 sentences: about 50 %). Only `serve` turns
it on (``Engine.pack_padded``): in bf16 a packed row's numbers differ from the padded row's by
bf16's rounding, and predict, eval, select and a teacher's logits agree with one another when
none of them packs. Such a batch runs packed as training does (networks/packed_heads.py: the
encoder on the real tokens as one sequence, attention row by row with the CPU training attention,
engine/cpu_kernels.py, short rows sharing grid rows, networks/attention_groups.py; the head reads
the padded grid), with the padded batch's outputs up to float rounding
(tests/unit/test_packed_inference.py).
A batch under ``PADDING_SHARE`` keeps SDPA, which is faster than the eager attention on a batch
with little padding. Only without targets: an evaluation loss may read the padding positions
(QA's softmax runs over the whole row), so `eval` keeps its padded batches.
"""

from __future__ import annotations

import torch

from bertkit.engine.cpu_kernels import ATTENTION, attention_swappable, register_attention
from bertkit.networks.packed_heads import (
    encoder_of,
    pack_this_encoder,
    task_model,
    unpack_this_encoder,
    why_encoder_padded,
)

# Packed from this share of padding on; under it SDPA on the padded batch is as fast or faster.
# Measured (MiniLM bf16, 2 threads, benchmarks/results/packing_inference{,_batch64}.md): packed 0.72-0.90x
# at 2-4 % padding, median 1.17x (batch 32) and 1.22x (batch 64) at 40-55 %; break-even near 0.3.
PADDING_SHARE = 0.3


def padding_share(attention_mask: torch.Tensor) -> float:
    return 1.0 - float(attention_mask.sum()) / max(attention_mask.numel(), 1)


def shared_encoder(network) -> torch.nn.Module | None:
    """The encoder under ``network``'s heads: a multi-head view's or shared pass's ``encoder``
    (networks/multihead.py), else the task model's base model (``model.bert``)."""
    encoder = getattr(network, "encoder", None)
    if isinstance(encoder, torch.nn.Module) and hasattr(encoder, "config"):
        return encoder
    return encoder_of(task_model(network))


class PackedInference:
    """``run(network, inputs)``: ``network(**inputs)``, packed when the batch is mostly padding
    and the network's encoder can run packed on this device; ``packed_batches`` counts how often."""

    def __init__(self, network, device: torch.device, enabled: bool = True):
        self.encoder = shared_encoder(network)
        config = getattr(self.encoder, "config", None)
        self.before = getattr(config, "_attn_implementation", None)
        self.usable = (
            enabled
            and device.type == "cpu"
            and self.encoder is not None
            and attention_swappable(self.encoder)
            and why_encoder_padded(config) is None  # its family, a decoder, its attention: training's rule
        )
        self.packed_batches = 0
        if self.usable:
            register_attention()

    def wants(self, inputs: dict) -> bool:
        mask = inputs.get("attention_mask")
        return self.usable and mask is not None and mask.dim() == 2 and padding_share(mask) >= PADDING_SHARE

    def run(self, network, inputs: dict):
        if not self.wants(inputs):
            return network(**inputs)
        self.encoder.set_attn_implementation(ATTENTION)
        pack_this_encoder(self.encoder)
        try:
            self.packed_batches += 1
            return network(**inputs)
        finally:
            unpack_this_encoder(self.encoder)
            self.encoder.set_attn_implementation(self.before)
