"""Packed rows' attention through CUDA's variable-length kernels (``--packing on`` on CUDA).

On the CPU a packed batch attends with bertkit's own training attention (engine/cpu_kernels.py:
each row on a padded grid of its group). On CUDA there are kernels that take the packed tokens as
they are, with the rows' boundaries as cumulative lengths: flash attention's (bf16 and fp16, head
sizes a multiple of 8 up to 256, Ampere and later) and the memory-efficient attention's (any
precision), both with attention-probability dropout and an autograd backward that replays the same
dropout mask. They are called here directly on the packed ``(tokens, heads, d)`` buffers, as torch's
SDPA on jagged nested tensors calls them (torch/nested/_internal/sdpa.py), without the nested
tensor: wrapping q, k and v as nested tensors costs milliseconds of Python a layer (the nested-tensor
version at 49c1879, a /tmp probe with the kernel stubbed out, 32 rows, 12 heads of 32, one thread:
2.5 ms forward and 4.7 ms forward and backward a layer call, against 0.2 and 0.7 ms on the dense
buffers), more than a small model's attention takes on a GPU, and torch's non-reentrant checkpoint
(``--save-memory``) cannot keep nested tensors. torch's ``varlen_attn`` has no dropout (BERT's recipe drops 10 % of the
attention probabilities), so it is not used.

Off CUDA (the tests' CPU) the same rows attend one by one through SDPA: a stand-in for the kernels
with the same inputs and outputs, so the tests check on the CPU that the packed rows, their
boundaries and the output's layout give the padded batch's logits, loss and gradients for every
head and family; the kernel calls themselves are checked by benchmarks/varlen_check.py on a GPU.

Only the attention changes: positions, segments, heads and the padded grid the heads read are
networks/packed.py's and networks/packed_heads.py's, the same as on the CPU. Without a packing
(a call the packed forward leaves padded) the attention is transformers' own SDPA.

Not yet run on a GPU (none was lent while this was written): ``--packing auto`` keeps CUDA's
batches padded, and ``--packing on`` is what turns this on there; benchmarks/device_packing.sh is
the check and the timing prepared for the next lent GPU.
"""

from __future__ import annotations

import torch

from bertkit.networks.packed import PACKING, VARLEN_ATTENTION, Packing

FLASH_DTYPES = (torch.float16, torch.bfloat16)
kernel_calls: dict = {}  # kernel name -> calls in this process (benchmarks/varlen_check.py reads it)


def varlen_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' attention signature: ``(1, heads, total, d)`` packed q/k/v -> ``(1, total, heads,
    d)``, each row attending to its own tokens only; a padded call goes to SDPA as before."""
    packing = kwargs.get(PACKING)
    if packing is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    dropout = dropout if module.training and torch.is_grad_enabled() else 0.0
    # (T, heads, d), packed tokens in row order: a layer's q/k/v are views of its (1, total, heads, d)
    # projection, so these are its first T tokens as they lie in memory
    real = [x[0].transpose(0, 1)[: len(packing.index)] for x in (query, key, value)]
    offsets, longest = row_offsets(packing)
    attend = _cuda_kernel if query.is_cuda else _row_by_row
    output = attend(*real, offsets, longest, scaling, dropout)
    spare = packing.total - output.shape[0]  # the packed row's bucket tokens: zeros, no row reads them
    return torch.nn.functional.pad(output, (0, 0, 0, 0, 0, spare)).unsqueeze(0), None


def row_offsets(packing: Packing) -> tuple[torch.Tensor, int]:
    """Where each row starts among the packed tokens and where the last ends (int32, as the kernels
    take them), and a bound on the longest row; worked out once a batch (every layer attends over
    the same rows)."""
    if "varlen" not in packing.plans:
        lengths = packing.keep.sum(1)
        offsets = torch.nn.functional.pad(lengths.cumsum(0), (1, 0)).to(torch.int32)
        # the padded width bounds every row (right-padded to the longest): no device-to-host read
        packing.plans["varlen"] = (offsets, packing.longest)
    return packing.plans["varlen"]


def _cuda_kernel(query, key, value, offsets, longest: int, scaling: float, dropout: float) -> torch.Tensor:
    """The packed rows through flash attention's variable-length kernel where it applies, else the
    memory-efficient one; ``(T, heads, d)`` in and out."""
    if _flash_fits(query):
        kernel_calls["flash"] = kernel_calls.get("flash", 0) + 1
        return torch.ops.aten._flash_attention_forward(
            query, key, value, offsets, offsets, longest, longest, dropout, False, False, scale=scaling
        )[0]
    kernel_calls["efficient"] = kernel_calls.get("efficient", 0) + 1
    needs_logsumexp = query.requires_grad or key.requires_grad or value.requires_grad  # the backward reads it
    output = torch.ops.aten._efficient_attention_forward(
        query[None], key[None], value[None], None, offsets, offsets, longest, longest, dropout, 0,
        needs_logsumexp, scale=scaling,
    )[0]  # fmt: skip
    return output[0]


def _flash_fits(query: torch.Tensor) -> bool:
    """Flash attention's conditions (torch's SDPA checks the same): half precision, a head size it
    has kernels for, an Ampere or later GPU, and not turned off (engine/gpu_attention.py)."""
    head = query.shape[-1]
    return (
        query.dtype in FLASH_DTYPES
        and head % 8 == 0
        and head <= 256
        and torch.backends.cuda.flash_sdp_enabled()
        and torch.cuda.get_device_capability(query.device)[0] >= 8
    )


def _row_by_row(query, key, value, offsets, longest: int, scaling: float, dropout: float) -> torch.Tensor:
    """The kernels' stand-in off CUDA: each row's tokens alone through SDPA, ``(T, heads, d)`` in and out."""
    kernel_calls["rows"] = kernel_calls.get("rows", 0) + 1
    bounds = offsets.tolist()
    rows = []
    for start, end in zip(bounds[:-1], bounds[1:]):
        q, k, v = (x[start:end].transpose(0, 1) for x in (query, key, value))
        rows.append(torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=dropout, scale=scaling))
    return torch.cat(rows, dim=1).transpose(0, 1)


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
        from bertkit.engine.cpu_kernels import attention_swappable

        self.model = model
        self.before = getattr(getattr(model, "config", None), "_attn_implementation", None)
        self.enabled = enabled and attention_swappable(model)  # the CPU kernels' rule and model types
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
