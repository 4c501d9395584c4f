"""Faster training kernels on the CPU, with the same model and the same training semantics.

``CpuTrainingKernels(model)`` swaps in ``FastDropout`` and eager attention for the training loop
and back for evaluation (inference keeps SDPA, which is faster there).

Eager attention: in training, attention-probability dropout sends PyTorch's CPU SDPA to its math
path, which draws its mask with the slow Bernoulli loop and copies q/k/v; ``attention_for_training``
is the same math with its dropout done by ``fast_dropout``. Measured per MiniLM bf16 training step
together with sparse embedding gradients (``OMP_NUM_THREADS=1 python -m benchmarks.profile_step
--length 128 --variants autocast,kernels``): 2,848 -> 2,130 ms; at 384 tokens (batch 8) eager
attention with fast dropout alone took 39% less CPU time than SDPA.

Dropout with cheaper random masks:

PyTorch's CPU dropout draws one Bernoulli sample per element through a serial generator loop
(about 6 ns an element here, a tenth of a small bf16 training step). ``FastDropout`` draws 64-bit
words (``random_words``: numpy's SFC64) and cuts them into four 16-bit numbers, one per element: an element
is kept when its number is above the ``round(p * 65536)``-th smallest, so the dropout rate is ``p``
to within 1/65536 (0.1 -> 0.100006), and kept values are scaled by the inverse of the keep
probability, so the expected output is the input, as with ``nn.Dropout``. Each mask's generator is
seeded by one draw from torch's default generator, so ``set_seed`` and checkpointed RNG state make
runs repeatable as before.

The mask is a multiplier in the input's dtype (``dropout_multiplier``: 0 or the scale, made by
integer arithmetic on the random numbers), kept for the backward pass, so the forward and the
backward are one multiplication each. Its scale is rounded to that dtype as torch's own CPU dropout
rounds it (its noise tensor has the input's dtype: bf16 1/0.9 -> 1.109375). A boolean mask (one byte
an element, before) went through ``torch.where`` and a second pass for the scale: bf16, 670 x 384
(a CoNLL batch's hidden states), 2 threads, /tmp probe: mask 53 us, forward 169, backward 169, now
25, 26 and 26; fp32 633 -> 313 us in all. Whole MiniLM bf16 training steps, paired against the
boolean masks (python -m benchmarks.dropout_masks): 1.04x at 32 x 20 tokens, 1.05x at 32 x 40, 1.10x
at 8 x 128. A bf16 mask takes two bytes an element where the boolean took one.

GPUs already have a fused dropout kernel and fast attention: nothing here applies off the CPU.
"""

from __future__ import annotations

import functools
import math

import numpy
import torch
import torch.nn.functional as F

from bertkit.networks import attention_groups
from bertkit.networks.packed import PACKING, SWAPPABLE_ATTENTIONS, TRAINING_ATTENTION

LEVELS = 1 << 16


def keep_threshold(p: float) -> tuple[int, float]:
    """The int16 value at or above which an element is kept, and the scale of kept elements
    (``0 < p < 1``; a rate that would drop all 65,536 values drops all but one)."""
    dropped = min(round(p * LEVELS), LEVELS - 1)
    return -(LEVELS // 2) + dropped, LEVELS / (LEVELS - dropped)


_SAME_SIZE_INT = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def dropout_multiplier(shape: torch.Size, p: float, dtype: torch.dtype) -> torch.Tensor:
    """``shape`` multipliers in ``dtype``: 0 where an element is dropped, else the keep probability's
    inverse rounded to ``dtype``. Made from the int16 random numbers without a boolean: clamped to
    [threshold - 1, threshold] and shifted, each is 1 (kept) or 0 (dropped); times the scale's bit
    pattern, read as ``dtype``, that is the scale or 0.0 (+0.0's bits are all zero)."""
    count = math.prod(shape)
    threshold, scale = keep_threshold(p)
    if threshold == -(LEVELS // 2):  # nothing dropped at this resolution (p < 1/131072)
        return torch.ones(shape, dtype=dtype)
    bits = random_words((count + 3) // 4).view(torch.int16)[:count].view(shape)
    # out of place first: torch.compile's functionalization fails on in-place ops through the int64 -> int16 view
    kept = bits.clamp(threshold - 1, threshold).sub_(threshold - 1)
    as_int, pattern = _bits_of(scale, dtype)
    return (kept if as_int is torch.int16 else kept.to(as_int)).mul_(pattern).view(dtype)


@functools.lru_cache(maxsize=64)
def _bits_of(scale: float, dtype: torch.dtype) -> tuple[torch.dtype, int]:
    """The integer dtype of ``dtype``'s size, and ``scale`` rounded to ``dtype`` read as that integer."""
    as_int = _SAME_SIZE_INT[dtype.itemsize]
    return as_int, int(torch.tensor(scale, dtype=dtype).view(as_int))


def random_words(count: int) -> torch.Tensor:
    """``count`` uniform int64 words, from a numpy SFC64 generator seeded by one draw from torch's default
    generator, so ``set_seed``, checkpointed RNG state and a recomputed forward (``--save-memory``) repeat
    every mask. torch's CPU generator fills a tensor in one serial loop at about 3.4 ns a word here; SFC64
    fills 1.5-2 ns a word, on one thread faster than torch's on two (measured 60k-8M words, /tmp probe:
    0.09 ms against 0.19 ms at 60k words, 1.6 against 3.3 at 1M, 8.8 against 13.6 at 4M (torch on two
    threads)). numpy holds the GIL while it fills, so halves on two threads gain nothing."""
    seed = int(torch.randint(0, 1 << 62, ()))
    return torch.from_numpy(numpy.random.SFC64(seed).random_raw(count).view(numpy.int64))


class _Masked(torch.autograd.Function):
    """``x * multiplier``, keeping only the multiplier for the backward pass (not ``x``)."""

    @staticmethod
    def forward(ctx, x, multiplier):
        ctx.save_for_backward(multiplier)
        return x * multiplier

    @staticmethod
    def backward(ctx, grad):
        (multiplier,) = ctx.saved_tensors
        return grad * multiplier, None


class FastDropout(torch.nn.Dropout):
    """``nn.Dropout`` with ``keep_mask``'s masks in training; identical in evaluation."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0 or x.device.type != "cpu" or not x.is_floating_point():
            return super().forward(x)
        if self.p == 1:
            return x * 0
        multiplier = dropout_multiplier(x.shape, self.p, x.dtype)
        return x.mul_(multiplier) if self.inplace else _Masked.apply(x, multiplier)


def use_fast_dropout(model: torch.nn.Module) -> int:
    """Swap the model's ``nn.Dropout`` modules for ``FastDropout`` on the CPU; returns how many.
    Dropout has no weights, so nothing saved changes."""
    swapped = 0
    for module in model.modules():
        if type(module) is torch.nn.Dropout:
            module.__class__ = FastDropout
            swapped += 1
    return swapped


def restore_dropout(model: torch.nn.Module) -> None:
    for module in model.modules():
        if type(module) is FastDropout:
            module.__class__ = torch.nn.Dropout


# Attention written the eager way (the same math), with FastDropout's masks on the probabilities.
ATTENTION = TRAINING_ATTENTION
# model types whose attention goes through transformers' AttentionInterface with BERT's signature
# each checked in tests/unit/test_cpu_training.py
EAGER_TYPES = ("bert", "roberta", "xlm-roberta", "electra", "albert", "distilbert")


def fast_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    return _Masked.apply(x, dropout_multiplier(x.shape, p, x.dtype))


def attention_for_training(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    packing = kwargs.get(PACKING)
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    dropout = dropout if module.training else 0.0
    # no gradients and nothing to drop: prediction (engine/packed_inference.py) runs SDPA's fused kernel. A
    # no-grad pass that drops (GradCache's first pass, networks/bi_encoder.py) must draw the masks its
    # second pass, with gradients, replays: the eager path below.
    if not torch.is_grad_enabled() and dropout == 0:

        def fused(query, key, value, mask):
            return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling)

        if packing is not None:
            return _packed_attention(packing, query, key, value, fused), None
        return fused(query, key, value, attention_mask).transpose(1, 2).contiguous(), None
    if packing is not None:  # rows packed into one (networks/packed.py): attend within each row

        def eager(query, key, value, mask):
            return _attend(query, key, value, mask, scaling, dropout)[0]

        return _packed_attention(packing, query, key, value, eager), None
    rows, heads, queries = query.shape[:3]
    chunks = attention_groups.padded_chunks(rows, heads, queries, key.shape[2], query.element_size())
    if chunks == 1:
        output, weights = _attend(query, key, value, attention_mask, scaling, dropout)
        return output.transpose(1, 2).contiguous(), weights
    masks = (
        attention_mask.tensor_split(chunks)
        if attention_mask is not None and attention_mask.shape[0] == rows
        else [attention_mask] * chunks
    )
    parts = zip(query.tensor_split(chunks), key.tensor_split(chunks), value.tensor_split(chunks), masks)
    return torch.cat([_attend(*part, scaling, dropout)[0].transpose(1, 2) for part in parts]), None


def _attend(query, key, value, mask, scaling: float, dropout: float):
    """Eager attention with ``fast_dropout`` on the probabilities: ``(rows, heads, queries, d)`` out, and the
    probabilities."""
    weights = masked_softmax(torch.matmul(query * scaling, key.transpose(2, 3)), mask)  # scaling q: d, not length
    if dropout > 0:
        weights = fast_dropout(weights, dropout)
    return torch.matmul(weights, value), weights


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """``softmax(scores + mask)`` over the keys (the last axis). ATen's CPU softmax and its backward
    run a row of fewer keys than one vector register holds (``vector_elements``: bf16 32, fp32 16 on
    AVX-512) element by element: 5 ns an element at 21 keys against 0.6 at 32 (bf16, forward and
    backward). Such rows are padded to one vector with keys nobody sees (the dtype's lowest value:
    probability exactly 0), the mask too, and cut back to a contiguous tensor after (strided, the
    dropout and the matmul after it ran slower). Measured: eager attention forward and backward, 32
    rows x 12 heads, bf16, AVX-512, paired (/tmp probe, before the contiguous copy): 1.25x at 13
    keys, 1.36x at 21, 1.61x at 31, fp32 1.19x at 9 and 1.49x at 15; whole `finetune` runs, 4
    alternating rounds each: CoNLL-2003 3,000 sentences 1.044x the training time, SST-2 4,000
    1.023x. From 32 keys on, padding to the next multiple of 32 was mostly slower (0.70-1.11x; faster
    only for remainders of 28 or more), so only rows under one vector are padded."""
    keys, vector = scores.shape[-1], vector_elements(scores.dtype)
    if keys >= vector:
        return torch.softmax(scores if mask is None else scores + mask, dim=-1)
    spare, lowest = (0, vector - keys), torch.finfo(scores.dtype).min
    if mask is None:
        padded = F.pad(scores, spare, value=lowest)
    elif mask.shape[-1] == keys:  # the mask padded too: the addition runs on whole vectors as well
        padded = F.pad(scores, spare) + F.pad(mask, spare, value=torch.finfo(mask.dtype).min)
    else:  # a mask broadcast over the keys
        padded = F.pad(scores + mask, spare, value=lowest)
    return torch.softmax(padded, dim=-1)[..., :keys].contiguous()


@functools.lru_cache(maxsize=8)
def vector_elements(dtype: torch.dtype) -> int:
    """``dtype`` elements in one vector register of ATen's CPU kernels where that was measured (64 bytes
    on AVX-512, 32 on AVX2); 0 elsewhere (no padding)."""
    register = {"AVX512": 64, "AVX2": 32}.get(torch.backends.cpu.get_cpu_capability(), 0)
    return register // dtype.itemsize


def _packed_attention(packing, query, key, value, attend) -> torch.Tensor:
    """``(1, heads, total, d)`` packed q/k/v -> ``(1, total, heads, d)``, each row attending to its own tokens,
    rows in attention_groups' groups and bins where those pay; ``attend(q, k, v, additive mask)`` attends on
    a ``(rows, heads, longest, d)`` grid."""
    groups = attention_groups.row_groups(packing, query.shape[1], query.element_size())
    if groups is None:
        grid = [packing.padded(x) for x in (query, key, value)]
        return packing.packed(attend(*grid, packing.additive_mask(query.dtype)).transpose(1, 2))
    grids = [
        group.flat(attend(*[group.padded(x) for x in (query, key, value)], group.additive_mask(query.dtype)))
        for group in groups
    ]
    grid = grids[0] if len(grids) == 1 else torch.cat(grids)
    return grid.index_select(0, attention_groups.places(packing, query.shape[1], query.element_size())).unsqueeze(0)


def register_attention() -> None:
    from transformers.masking_utils import AttentionMaskInterface, eager_mask
    from transformers.modeling_utils import AttentionInterface

    AttentionInterface.register(ATTENTION, attention_for_training)
    AttentionMaskInterface.register(ATTENTION, eager_mask)


def attention_swappable(model: torch.nn.Module) -> bool:
    """Whether ``model``'s attention can be swapped for a registered one (this module's, or CUDA's
    variable-length one, engine/varlen_attention.py) and back: an SDPA or eager attention of a type
    in ``EAGER_TYPES``, through ``set_attn_implementation``."""
    config = getattr(model, "config", None)
    return (
        getattr(config, "_attn_implementation", None) in SWAPPABLE_ATTENTIONS
        and getattr(config, "model_type", None) in EAGER_TYPES
        and hasattr(model, "set_attn_implementation")
    )


class CpuTrainingKernels:
    """FastDropout and eager attention with fast dropout while training on the CPU: ``apply()``
    before training, ``undo()`` before evaluating or giving the model back (SDPA is faster in
    inference)."""

    def __init__(self, model: torch.nn.Module, enabled: bool = True):
        """``enabled=False`` (not on a CPU): apply() and undo() do nothing."""
        self.model, self.enabled = model, enabled
        self.config = getattr(model, "config", None)
        self.before = getattr(self.config, "_attn_implementation", None)
        self.attention = enabled and attention_swappable(model)
        if self.attention:
            register_attention()

    def apply(self) -> None:
        if not self.enabled:
            return
        use_fast_dropout(self.model)
        if self.attention:
            self.model.set_attn_implementation(ATTENTION)

    def undo(self) -> None:
        if not self.enabled:
            return
        restore_dropout(self.model)
        if self.attention:
            self.model.set_attn_implementation(self.before)
