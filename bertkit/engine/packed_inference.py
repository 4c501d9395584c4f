"""Prediction on the real tokens only, on the CPU, for a batch that is mostly padding (`serve`).

`eval` and `predict` sort their rows by length before batching, so their batches are nearly
unpadded; `serve` batches rows as they arrive, and a batch of a few long and many short rows is
padding for half its tokens (a served batch of 32 SST-2 sentences: about 50 %). Only `serve` turns
it on (``Engine.pack_padded``): in bf16 a packed row's numbers differ from the padded row's by
bf16's rounding, and predict, eval, select and a teacher's logits agree with one another when
none of them packs. Such a batch runs
packed as training does (networks/packed_heads.py: the encoder on the real tokens as one sequence,
attention row by row with the CPU training attention, engine/cpu_kernels.py; the head reads the
padded grid), with the padded batch's outputs up to float rounding (tests/unit/test_packed_inference.py).
A batch under ``PADDING_SHARE`` keeps SDPA, which is faster than the eager attention on a batch
with little padding. Only without targets: an evaluation loss may read the padding positions
(QA's softmax runs over the whole row), so `eval` keeps its padded batches.
"""

from __future__ import annotations

import torch

from bertkit.engine.cpu_kernels import ATTENTION, EAGER_TYPES, register_attention
from bertkit.networks.packed_heads import pack_encoder, task_model, unpack_encoder, why_padded

# Packed from this share of padding on; under it SDPA on the padded batch is as fast or faster.
# Measured: benchmarks/packed_inference.py (benchmarks/results/packed_inference.md).
PADDING_SHARE = 0.25


def padding_share(attention_mask: torch.Tensor) -> float:
    return 1.0 - float(attention_mask.sum()) / max(attention_mask.numel(), 1)


class PackedInference:
    """``run(network, inputs)``: ``network(**inputs)``, packed when the batch is mostly padding
    and the network can run packed on this device; ``packed_batches`` counts how often."""

    def __init__(self, network, device: torch.device, enabled: bool = True):
        model = task_model(network)
        config = getattr(model, "config", None)
        self.before = getattr(config, "_attn_implementation", None)
        self.usable = (
            enabled
            and device.type == "cpu"
            and why_padded(network) is None
            and self.before in ("sdpa", "eager")
            and getattr(config, "model_type", None) in EAGER_TYPES
            and hasattr(model, "set_attn_implementation")
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
        model = task_model(network)
        model.set_attn_implementation(ATTENTION)
        packed = pack_encoder(network)
        try:
            self.packed_batches += packed
            return network(**inputs)
        finally:
            unpack_encoder(network)
            model.set_attn_implementation(self.before)
