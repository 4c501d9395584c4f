"""A tower's rows run without padding: packed into one sequence, attention still row by row.

A bi-encoder's batch is random (in-batch negatives, SetFit's pairs), so each tower is padded to its
longest row: 16 STS-B sentences average 11 tokens and are padded to about 18, so over a third of the
encoder's work is spent on padding. Everything in a BERT layer but attention acts on each token
alone (the linear layers, GELU, LayerNorm, dropout), so here the real tokens of all rows are packed
into ONE row of ``T`` tokens (each keeping its own position and segment ids) and only attention
puts them back into their rows (padded, masked, as before) and packs its output again. The mean
over each row's tokens is taken from the packed tokens. The vectors are the padded batch's, up to
float rounding; only the work on padding is gone (the idea of transformers' padding-free
collator, which needs flash attention; this works with the CPU training attention). Measured: both
towers' forward and backward 222 -> 188 ms a step (eager attention padded -> packed, MiniLM bf16,
16 STS-B pairs); with this and the CPU training attention the bi-encoder had lacked (244 ms with
SDPA), STS-B CoSENT's loop went from 1.27x to 1.48x sentence-transformers' speed (README, 6 seeds).

It applies while the CPU training kernels are on (engine/cpu_kernels.py: their attention reads the
``Packing`` passed along by the model) and for model types whose position ids count from 0 in each
row; anything else runs padded, as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PACKED_TYPES = ("bert", "electra")  # position ids 0..n-1 per row; each checked in tests/unit/test_packed.py
# The CPU training attention (engine/cpu_kernels.py registers it under this name) and the keyword
# that carries a Packing down to it through the model's forward.
TRAINING_ATTENTION = "bertkit_cpu_train"
PACKING = "bertkit_packing"


@dataclass
class Packing:
    """Where each packed token sits in the padded ``rows x longest`` grid (``index``: flat
    positions of the real tokens, in row order)."""

    index: torch.Tensor
    rows: int
    longest: int
    keep: torch.Tensor  # rows x longest, True on real tokens

    def padded(self, x: torch.Tensor) -> torch.Tensor:
        """``(1, heads, T, d)`` packed -> ``(rows, heads, longest, d)`` with zeros on padding."""
        heads, dim = x.shape[1], x.shape[3]
        grid = x.new_zeros(self.rows * self.longest, heads, dim).index_copy(0, self.index, x[0].transpose(0, 1))
        return grid.view(self.rows, self.longest, heads, dim).transpose(1, 2)

    def packed(self, x: torch.Tensor) -> torch.Tensor:
        """``(rows, longest, heads, d)`` -> ``(1, T, heads, d)``: the real tokens only."""
        return x.reshape(self.rows * self.longest, *x.shape[2:]).index_select(0, self.index).unsqueeze(0)

    def additive_mask(self, dtype: torch.dtype) -> torch.Tensor:
        """0 on real keys, the dtype's lowest value on padding: ``(rows, 1, 1, longest)``."""
        mask = torch.zeros(self.keep.shape, dtype=dtype, device=self.keep.device)
        return mask.masked_fill_(~self.keep, torch.finfo(dtype).min)[:, None, None, :]


def can_pack(encoder) -> bool:
    config = getattr(encoder, "config", None)
    return (
        getattr(config, "_attn_implementation", None) == TRAINING_ATTENTION
        and getattr(config, "model_type", None) in PACKED_TYPES
        and not getattr(config, "is_decoder", False)
    )


def packed_mean(encoder, inputs: dict) -> torch.Tensor:
    """``encoder(**inputs)``'s last layer mean-pooled over each row's real tokens, computed on the
    real tokens alone. ``inputs`` are right-padded (the Collator's)."""
    keep = inputs["attention_mask"].bool()
    rows, longest = keep.shape
    lengths = keep.sum(1)
    index = keep.flatten().nonzero().squeeze(1)
    positions = (index % longest).unsqueeze(0)
    packing = Packing(index=index, rows=rows, longest=longest, keep=keep)
    extra = (
        {"token_type_ids": inputs["token_type_ids"].flatten()[index].unsqueeze(0)} if "token_type_ids" in inputs else {}
    )
    out = encoder(
        input_ids=inputs["input_ids"].flatten()[index].unsqueeze(0),
        position_ids=positions,
        **extra,
        **{PACKING: packing},
    )
    tokens = out.last_hidden_state[0]
    sums = tokens.new_zeros(rows, tokens.shape[-1]).index_add(0, index // longest, tokens)  # by row
    return sums / lengths.clamp(min=1).to(tokens.dtype)[:, None]
