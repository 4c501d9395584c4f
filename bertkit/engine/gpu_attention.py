"""Attention kernels on a GPU for batches whose lengths vary.

bertkit pads each batch only to its own longest row (dynamic padding, length-grouped batches), so
nearly every batch brings a sequence length not seen before. PyTorch's SDPA prefers cuDNN's
attention on recent NVIDIA GPUs, and cuDNN builds a new graph for every new shape on the host:
measured on an H200 (`bertkit finetune rerank`, MiniLM, bf16, 568 batches of 32;
torch.profiler over 60 of them), the cuDNN attention calls took 9 ms of host time each on average,
three quarters of the loop's CPU time, and the loop ran 33 s against sentence-transformers' 24 s.
Flash and memory-efficient attention need no per-shape graph, so on CUDA the forward passes run
with those two (and the math kernel as the last resort). Off CUDA this does nothing.
"""

from __future__ import annotations

import contextlib

import torch


def varying_shape_attention(device: torch.device):
    """A context for forward passes on ``device``: without cuDNN attention on CUDA."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])
