"""Packed rows' attention through torch's variable-length kernels (``--packing on`` on CUDA).

On the CPU a packed batch attends with bertkit's own training attention (engine/cpu_kernels.py:
each row on a padded grid of its group). On CUDA there are kernels that take the packed tokens
as they are, with the rows' boundaries as cumulative lengths: flash attention's and the
memory-efficient attention's varlen forms. torch reaches both through SDPA on a jagged nested
tensor (``torch.nested.nested_tensor_from_jagged``): bf16 and fp16 go to flash, fp32 to the
memory-efficient kernel, each with attention-probability dropout and a backward pass. torch's own
``torch.nn.attention.varlen.varlen_attn`` was the other candidate; it has no dropout (BERT's
recipe drops 10 % of the attention probabilities), so it is not used. On the CPU the same call
runs SDPA's math kernel row by row: that is how the tests check, without a GPU, that a packed
batch here gives the padded batch's logits, loss and gradients for every head and family.

Only the attention changes: positions, segments, heads and the padded grid the heads read are
networks/packed.py's and networks/packed_heads.py's, the same as on the CPU. Without a packing
(a call the packed forward leaves padded) the attention is transformers' own SDPA.

Not yet measured on a GPU (none was lent while this was written): ``--packing auto`` keeps CUDA's
batches padded, and ``--packing on`` is what turns this on there; benchmarks/device_packing.sh is
the check and the timing prepared for the next lent GPU.
"""

from __future__ import annotations

import torch

from bertkit.networks.packed import PACKING, VARLEN_ATTENTION, Packing

# model types whose attention goes through transformers' AttentionInterface with BERT's signature
# (the CPU training attention's list, engine/cpu_kernels.EAGER_TYPES)
VARLEN_TYPES = ("bert", "roberta", "xlm-roberta", "electra", "albert", "distilbert")


def varlen_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' attention signature: ``(1, heads, total, d)`` packed q/k/v -> ``(1, total, heads,
    d)``, each row attending to its own tokens only; a padded call goes to SDPA as before."""
    packing = kwargs.get(PACKING)
    if packing is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    dropout = dropout if module.training and torch.is_grad_enabled() else 0.0
    rows = [_jagged(x, packing) for x in (query, key, value)]
    output = torch.nn.functional.scaled_dot_product_attention(*rows, dropout_p=dropout, scale=scaling)
    real = output.transpose(1, 2).values()  # (T, heads, d), the rows one after another
    spare = packing.total - real.shape[0]  # the packed row's bucket tokens: zeros, no row reads them
    return torch.nn.functional.pad(real, (0, 0, 0, 0, 0, spare)).unsqueeze(0), None


def _jagged(x: torch.Tensor, packing: Packing) -> torch.Tensor:
    """``(1, heads, total, d)`` -> a jagged ``(rows, heads, row's length, d)`` over the real tokens."""
    offsets, longest = _row_offsets(packing)
    # (T, heads, d), packed tokens in row order; a layer's q/k/v are this already (a view of its
    # (1, total, heads, d) projection), and SDPA on jagged rows takes nothing else
    real = x[0].transpose(0, 1)[: len(packing.index)].contiguous()
    rows = torch.nested.nested_tensor_from_jagged(real, offsets, min_seqlen=1, max_seqlen=longest)
    return rows.transpose(1, 2)


def _row_offsets(packing: Packing) -> tuple[torch.Tensor, int]:
    """Where each row starts among the packed tokens (and where the last ends), and the longest row;
    worked out once a batch (every layer attends over the same rows)."""
    if "varlen" not in packing.plans:
        lengths = packing.keep.sum(1)
        offsets = torch.nn.functional.pad(lengths.cumsum(0), (1, 0))
        # the padded width bounds every row (right-padded to the longest): no device-to-host read
        packing.plans["varlen"] = (offsets, packing.longest)
    return packing.plans["varlen"]


def register_attention() -> None:
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    from transformers.modeling_utils import AttentionInterface

    AttentionInterface.register(VARLEN_ATTENTION, varlen_attention)
    AttentionMaskInterface.register(VARLEN_ATTENTION, sdpa_mask)


class VarlenAttention:
    """``apply()`` before training, ``undo()`` before evaluating or giving the model back, as
    engine/cpu_kernels.CpuTrainingKernels: while applied, a packed encoder (networks/packed_heads.py)
    attends through the variable-length kernels. ``enabled=False``: both do nothing."""

    def __init__(self, model: torch.nn.Module, enabled: bool = True):
        self.model = model
        self.config = getattr(model, "config", None)
        self.before = getattr(self.config, "_attn_implementation", None)
        self.enabled = (
            enabled
            and self.before in ("sdpa", "eager")
            and getattr(self.config, "model_type", None) in VARLEN_TYPES
            and hasattr(model, "set_attn_implementation")
        )
        if self.enabled:
            register_attention()

    def apply(self) -> None:
        if self.enabled:
            self.model.set_attn_implementation(VARLEN_ATTENTION)

    def undo(self) -> None:
        if self.enabled:
            self.model.set_attn_implementation(self.before)


def training_kernels(model: torch.nn.Module, device_type: str, packing: str):
    """What the training loop applies to ``model`` and undoes for evaluation: the CPU training kernels
    on a CPU, the variable-length attention on CUDA under ``--packing on``, nothing elsewhere."""
    from bertkit.engine.cpu_kernels import CpuTrainingKernels

    if device_type == "cpu":
        return CpuTrainingKernels(model)
    return VarlenAttention(model, enabled=device_type == "cuda" and packing == "on")
