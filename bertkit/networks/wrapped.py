"""The base of a training module built around one transformers model (a loss, a bi-encoder's towers,
SetFit's pairs, distillation, listwise ranking).

The engine looks at the model through the wrapper: its config (precision, CPU kernels), its input
embeddings (sparse gradients, bf16 master weights) and its attention implementation (the CPU
training attention of engine/cpu_kernels.py, which a wrapper must pass on: without it, the wrapped
model trained with SDPA, whose attention dropout takes PyTorch's slow path on a CPU).
"""

from __future__ import annotations

from torch import nn


class WrappedModel(nn.Module):
    """Subclasses keep the wrapped model as ``self.<wrapped_attribute>`` ("model" by default)."""

    wrapped_attribute = "model"
    # why its training calls run the wrapped model padded even where packing applies (None: they need not)
    padded_reason: str | None = None

    @property
    def wrapped(self) -> nn.Module:
        return getattr(self, self.wrapped_attribute)

    @property
    def config(self):
        return self.wrapped.config

    def get_input_embeddings(self):
        return self.wrapped.get_input_embeddings()

    def set_attn_implementation(self, name: str) -> None:
        self.wrapped.set_attn_implementation(name)
