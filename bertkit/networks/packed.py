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
``Packing`` passed along by the model) or, on CUDA under ``--packing on``, the variable-length
attention (engine/varlen_attention.py) and for the model types in ``POSITIONS``, each with the
position ids its padded forward gives a row's tokens; anything else runs padded, as before. The
task models' heads (cls, pair, ner, rerank) run packed through packed_heads.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

# The CPU training attention (engine/cpu_kernels.py registers it under this name) and the keyword
# that carries a Packing down to it through the model's forward.
TRAINING_ATTENTION = "bertkit_cpu_train"
VARLEN_ATTENTION = "bertkit_varlen"  # CUDA's variable-length kernels (engine/varlen_attention.py)
PACKING_ATTENTIONS = (TRAINING_ATTENTION, VARLEN_ATTENTION)  # the attentions that read a Packing
# the attentions a model may be loaded with for training to swap in one of those and back (others,
# flash or flex attention loaded through the API, keep their own attention: such a model runs padded)
SWAPPABLE_ATTENTIONS = ("sdpa", "eager")
PACKING = "bertkit_packing"
SHAPE_BUCKET = 32  # the packed row's length is a multiple of this (Packing says why)


@dataclass
class Packing:
    """Where each packed token sits in the padded ``rows x longest`` grid (``index``: flat
    positions of the real tokens, in row order). The packed row is ``total`` tokens long: the
    ``T = len(index)`` real ones, then spare ones up to a multiple of ``SHAPE_BUCKET`` that no row
    attends to or reads. Why: oneDNN builds a kernel per matrix shape, and a new shape cost about 3x
    a cached one (bf16 linear forward and backward, 1,000-1,040 rows x 384 -> 1536, 1 thread: 50-63
    ms a new shape, 18-23 ms a cached one, 19-21 ms in buckets of 32); nearly every batch's T is
    new, while a padded batch's rows x longest repeat."""

    index: torch.Tensor
    rows: int
    longest: int
    keep: torch.Tensor  # rows x longest, True on real tokens
    total: int = 0  # the packed row's length, spare tokens included
    plans: dict = field(default_factory=dict, repr=False)  # row_groups' answers, the gathers' indices
    masks: dict = field(default_factory=dict, repr=False, compare=False)  # additive_mask's by dtype: every layer asks

    def padded(self, x: torch.Tensor) -> torch.Tensor:
        """``(1, heads, total, d)`` packed -> ``(rows, heads, longest, d)``: one gather; a padding cell holds
        a copy of token 0 (finite: masked as a key, never read as a query, so its gradient is exactly 0)."""
        if "sources" not in self.plans:  # each grid cell's packed token
            cells = torch.zeros(self.rows * self.longest, dtype=torch.long, device=self.index.device)
            self.plans["sources"] = cells.index_copy_(0, self.index, torch.arange(len(self.index), device=cells.device))
        grid = x[0].transpose(0, 1).index_select(0, self.plans["sources"])
        return grid.view(self.rows, self.longest, *grid.shape[1:]).transpose(1, 2)

    def packed(self, x: torch.Tensor) -> torch.Tensor:
        """``(rows, longest, heads, d)`` -> ``(1, total, heads, d)``: the real tokens, zeros after them."""
        real = x.reshape(self.rows * self.longest, *x.shape[2:]).index_select(0, self.index)
        return torch.nn.functional.pad(real, (0, 0, 0, 0, 0, self.total - len(self.index))).unsqueeze(0)

    @classmethod
    def of(cls, attention_mask: torch.Tensor) -> "Packing":
        """The packing of a right-padded batch (``attention_mask``: rows x longest, 1 on real tokens)."""
        keep = attention_mask.bool()
        rows, longest = keep.shape
        index = keep.flatten().nonzero().squeeze(1)
        total = -(-len(index) // SHAPE_BUCKET) * SHAPE_BUCKET
        return cls(index=index, rows=rows, longest=longest, keep=keep, total=total)

    def tokens(self, x: torch.Tensor, spare: int = 0) -> torch.Tensor:
        """``(rows, longest)`` ids -> ``(1, total)``: the real tokens in row order, then ``spare``."""
        return self.spread(x.flatten()[self.index], spare)

    def spread(self, real: torch.Tensor, spare: int = 0) -> torch.Tensor:
        """The ``T`` real tokens' values -> ``(1, total)``, ``spare`` on the spare tokens."""
        return torch.nn.functional.pad(real, (0, self.total - len(self.index)), value=spare).unsqueeze(0)

    def grid(self, x: torch.Tensor) -> torch.Tensor:
        """``(1, total, hidden)`` packed -> ``(rows, longest, hidden)``, zeros on padding (what a head reads)."""
        grid = x.new_zeros(self.rows * self.longest, x.shape[-1]).index_copy(0, self.index, x[0, : len(self.index)])
        return grid.view(self.rows, self.longest, -1)

    def additive_mask(self, dtype: torch.dtype) -> torch.Tensor:
        if dtype not in self.masks:
            self.masks[dtype] = additive_mask(self.keep, dtype)
        return self.masks[dtype]


def additive_mask(keep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``keep`` (rows x longest, True on real tokens) -> ``(rows, 1, 1, longest)``: 0 on real keys,
    the dtype's lowest value on padding."""
    mask = torch.zeros(keep.shape, dtype=dtype, device=keep.device)
    return mask.masked_fill_(~keep, torch.finfo(dtype).min)[:, None, None, :]


def _columns(config, packing: Packing) -> torch.Tensor:
    """BERT, ELECTRA, ALBERT, DistilBERT: a token's position is its column (0, 1, ... in each row)."""
    return packing.index % packing.longest


def _after_padding_id(config, packing: Packing) -> torch.Tensor:
    """RoBERTa, XLM-R: padding_idx + 1 + the token's place among its row's real tokens (transformers'
    create_position_ids_from_input_ids; counting from 0 here was transformers #47496's bug)."""
    keep = packing.keep.long()
    return (keep.cumsum(1) * keep + config.pad_token_id).flatten()[packing.index]


# model type -> the position ids its padded forward gives the real tokens; each type is checked
# against its padded batch in tests/unit/test_packed.py and tests/unit/test_packed_heads.py
# (DeBERTa's relative positions and ModernBERT's local attention windows are not handled: they run padded)
POSITIONS = {
    "bert": _columns,
    "electra": _columns,
    "albert": _columns,
    "distilbert": _columns,
    "roberta": _after_padding_id,
    "xlm-roberta": _after_padding_id,
}
PACKED_TYPES = tuple(POSITIONS)


PACKING_OFF = "_bertkit_packing_off"  # set on an encoder by --packing off (networks/recipes.pack_rows)


def can_pack(encoder) -> bool:
    config = getattr(encoder, "config", None)
    return (
        not getattr(encoder, PACKING_OFF, False)
        and getattr(config, "_attn_implementation", None) in PACKING_ATTENTIONS
        and getattr(config, "model_type", None) in POSITIONS
        and not getattr(config, "is_decoder", False)
    )


def packed_inputs(config, packing: Packing, input_ids: torch.Tensor, token_type_ids=None) -> dict:
    """The keyword arguments that run a padded batch's real tokens as one row through the encoder.

    The all-ones mask is there to be skipped: without a mask, transformers 5.x reads restarting
    position ids as packed sequences and builds their block-diagonal mask, total x total (a QA
    batch of 8,896 tokens: 79M entries), which the training attention never reads (it attends
    within each row on the padded grid, ``Packing.additive_mask``). Measured, MiniLM bf16, 32 rows,
    forward and backward (python -m benchmarks.packed_mask): 8.01 -> 7.34 s a step at 360-384 tokens a
    row, 6.32 -> 6.25 s at 100-384."""
    extra = {"token_type_ids": packing.tokens(token_type_ids)} if token_type_ids is not None else {}
    positions = packing.spread(POSITIONS[config.model_type](config, packing))
    ids = packing.tokens(input_ids, spare=config.pad_token_id or 0)  # as a padded batch's padding
    mask = torch.ones_like(ids)  # no padding to mask: the mask builders return None for it
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions, **extra, PACKING: packing}


def packed_mean(encoder, inputs: dict) -> torch.Tensor:
    """``encoder(**inputs)``'s last layer mean-pooled over each row's real tokens, computed on the
    real tokens alone. ``inputs`` are right-padded (the Collator's)."""
    packing = Packing.of(inputs["attention_mask"])
    out = encoder(**packed_inputs(encoder.config, packing, inputs["input_ids"], inputs.get("token_type_ids")))
    tokens = out.last_hidden_state[0, : len(packing.index)]
    by_row = packing.index // packing.longest
    sums = tokens.new_zeros(packing.rows, tokens.shape[-1]).index_add(0, by_row, tokens)
    return sums / packing.keep.sum(1).clamp(min=1).to(tokens.dtype)[:, None]
