"""Masked-LM masking and the two networks that read only the masked positions.

The rule is BERT's: choose ``rate`` (15 %) of the real, non-special tokens; of those, ``mask_share``
(80 %) become [MASK], ``random_share`` (10 %) a random non-special token, the rest stay as they
are; only chosen tokens are predicted. With ``whole_word`` a word's sub-words are chosen together
(WordPiece: a ``##`` piece belongs to the token before it); the 80/10/10 split stays per token.

Training masks in the collator with one seeded generator that advances batch after batch, so
every epoch masks differently and a rerun with the same seed masks identically. Held-out text is
masked per row with a generator seeded by the row's own token ids, so its score does not depend on
batching and every evaluation (and every model) is scored on the same masks.

Both networks run the encoder on all tokens but the vocabulary projection only at the chosen
positions (15 % of them): the same loss as ``AutoModelForMaskedLM(..., labels=...)``, for about half
of MiniLM's compute, whose 30k-word output layer costs about as much as its six layers.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers.modeling_outputs import MaskedLMOutput

from bertkit.errors import BertkitError
from bertkit.networks.collate import Collator
from bertkit.tasks.training_spec import MaskRule

IGNORE = -100
EVAL_SEED = 0  # fixed, so held-out scores of different runs and models use the same masks


@dataclass
class VocabTables:
    """Per-vocabulary lookups, built once from the tokenizer."""

    special: torch.Tensor  # bool [vocab]: never chosen, never drawn as a random replacement
    continuation: torch.Tensor  # bool [vocab]: a sub-word that continues the previous token's word
    random_ids: torch.Tensor  # long: the pool random replacements are drawn from
    mask_id: int

    @classmethod
    def from_tokenizer(cls, tokenizer, whole_word: bool = False) -> "VocabTables":
        if tokenizer.mask_token_id is None:
            raise BertkitError(
                "this tokenizer has no mask token, so it cannot do masked-LM training",
                "use a BERT-family (masked LM) checkpoint",
            )
        size = len(tokenizer)
        special = torch.zeros(size, dtype=torch.bool)
        special[torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long)] = True
        pieces = tokenizer.convert_ids_to_tokens(list(range(size)))
        continuation = torch.tensor([str(piece).startswith("##") for piece in pieces], dtype=torch.bool)
        if whole_word and not continuation.any():
            raise BertkitError(
                "--whole-word-masking needs a WordPiece vocabulary (## continuation pieces)",
                "leave out --whole-word-masking for this tokenizer",
            )
        return cls(special, continuation, torch.nonzero(~special).flatten(), int(tokenizer.mask_token_id))


def mask_tokens(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    rule: MaskRule,
    tables: VocabTables,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(masked input ids, labels): labels hold the original id at chosen positions, -100 elsewhere.
    CPU tensors; the generator's draws depend only on the batch shape, never on the ids."""
    ids = input_ids
    maskable = attention_mask.bool() & ~tables.special[ids]
    draws = torch.rand(ids.shape, generator=generator)
    if rule.whole_word:
        # A word starts at a non-## piece, or right after a token that cannot be chosen (a block may
        # begin mid-word). Every piece uses its word start's draw, so the word is chosen as a whole.
        before = torch.zeros_like(maskable)
        before[:, 1:] = maskable[:, :-1]
        starts = ~tables.continuation[ids] | ~before
        positions = torch.arange(ids.shape[1]).expand_as(ids)
        start_of = torch.where(starts, positions, torch.zeros_like(positions)).cummax(dim=1).values
        draws = draws.gather(1, start_of)
    chosen = maskable & (draws < rule.rate)
    action = torch.rand(ids.shape, generator=generator)
    picks = tables.random_ids[torch.randint(len(tables.random_ids), ids.shape, generator=generator)]
    to_mask = chosen & (action < rule.mask_share)
    to_random = chosen & (action >= rule.mask_share) & (action < rule.mask_share + rule.random_share)
    masked = torch.where(to_mask, torch.full_like(ids, tables.mask_id), ids)
    masked = torch.where(to_random, picks, masked)
    return masked, torch.where(chosen, ids, torch.full_like(ids, IGNORE))


class MaskingCollator:
    """Pads like the shared Collator, then masks; the generator carries on across batches and epochs."""

    def __init__(self, pad_token_id: int, rule: MaskRule, tables: VocabTables, seed: int, targets: dict | None = None):
        # ``targets``: feature keys carried into the batch besides the masked ids (the NSP label)
        self.pad = Collator(pad_token_id, targets)
        self.rule, self.tables = rule, tables
        self.generator = torch.Generator().manual_seed(seed)
        self.generators = {"masking": self.generator}  # saved with checkpoints, so a resumed run masks alike

    def __call__(self, features: list[dict]) -> dict:
        batch = self.pad(features)
        batch["input_ids"], batch["labels"] = mask_tokens(
            batch["input_ids"], batch["attention_mask"], self.rule, self.tables, self.generator
        )
        return batch


def masked_logits(model, input_ids, attention_mask, token_type_ids, selected: torch.Tensor) -> torch.Tensor:
    """Vocabulary logits ``(selected positions, vocab)``; the output layer runs only there when the
    model's encoder and LM head are separate modules (BERT: ``bert``/``cls``, RoBERTa: ``lm_head``)."""
    extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
    base = getattr(model, getattr(model, "base_model_prefix", ""), None)
    head = next((getattr(model, name) for name in ("cls", "lm_head") if getattr(model, name, None) is not None), None)
    if base is None or head is None:
        return model(input_ids=input_ids, attention_mask=attention_mask, **extra).logits[selected]
    hidden = base(input_ids=input_ids, attention_mask=attention_mask, **extra)[0]
    return head(hidden[selected])


class MaskedLMTrainer(nn.Module):
    """Training wrapper: batches come masked from MaskingCollator; the loss is the mean cross-entropy
    over the chosen positions, as in HF, but computed only there."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, labels, token_type_ids=None):
        selected = labels != IGNORE
        logits = masked_logits(self.model, input_ids, attention_mask, token_type_ids, selected)
        if logits.shape[0] == 0:  # nothing chosen in this batch: a zero loss, not NaN
            return MaskedLMOutput(loss=logits.sum() * 0.0)
        return MaskedLMOutput(loss=F.cross_entropy(logits.float(), labels[selected]))


class MaskedLMScorer(nn.Module):
    """Held-out scoring through Engine.infer: masks each row deterministically (by its ids) and returns
    ``{"mlm_stats": (rows, 3)}`` = summed loss, chosen tokens, correct top-1 predictions per row."""

    def __init__(self, model, rule: MaskRule, tables: VocabTables, seed: int = EVAL_SEED):
        super().__init__()
        self.model, self.rule, self.tables, self.seed = model, rule, tables, seed

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        masked, labels = mask_by_content(input_ids, attention_mask, self.rule, self.tables, self.seed)
        selected = labels != IGNORE
        logits = masked_logits(self.model, masked, attention_mask, token_type_ids, selected).float()
        return {"mlm_stats": masked_stats(logits, labels, selected)}


def mask_by_content(input_ids, attention_mask, rule: MaskRule, tables: VocabTables, seed: int = EVAL_SEED) -> tuple:
    """(masked ids, labels) for held-out rows: each row masked by a generator seeded from its own
    token ids, so a row's masks do not depend on its batch, its padding or the model scoring it."""
    masked, labels = input_ids.clone(), torch.full_like(input_ids, IGNORE)
    for row, length in enumerate(attention_mask.sum(1).tolist()):
        ids = input_ids[row, :length].cpu()
        generator = torch.Generator().manual_seed(zlib.crc32(ids.numpy().astype(np.int64).tobytes()) ^ seed)
        row_masked, row_labels = mask_tokens(
            ids[None], torch.ones(1, length, dtype=torch.long), rule, tables, generator
        )
        masked[row, :length] = row_masked[0].to(masked.device)
        labels[row, :length] = row_labels[0].to(labels.device)
    return masked, labels


def masked_stats(logits: torch.Tensor, labels: torch.Tensor, selected: torch.Tensor) -> torch.Tensor:
    """``(rows, 3)``: summed cross-entropy, chosen tokens and correct top-1 predictions per row, from
    the logits at the ``selected`` positions (in row-major order)."""
    targets = labels[selected]
    rows = selected.nonzero()[:, 0]
    stats = torch.zeros(labels.shape[0], 3, device=labels.device)
    stats[:, 0].index_add_(0, rows, F.cross_entropy(logits, targets, reduction="none"))
    stats[:, 1].index_add_(0, rows, torch.ones_like(targets, dtype=stats.dtype))
    stats[:, 2].index_add_(0, rows, (logits.argmax(-1) == targets).to(stats.dtype))
    return stats


def carry_base_pooler(masked_lm, model_ref: str, display_name: str) -> str:
    """BERT's pooler (trained by NSP, read by sequence classifiers) is not part of a masked-LM
    model: put the base checkpoint's pooler back, so fine-tuning from the output starts from it
    rather than from a random one. Returns what happened, for the report."""
    from bertkit.models import load_model

    base = getattr(masked_lm, masked_lm.base_model_prefix, None)
    if base is None or getattr(base, "pooler", False) is not None:
        return "none in the base model"
    encoder, info = load_model("AutoModel", model_ref, display_name, with_loading_info=True)
    pooler = getattr(encoder, "pooler", None)
    if pooler is None or any(key.startswith("pooler.") for key in info.get("missing_keys", ())):
        return "none in the base model"
    base.pooler = pooler.to(next(masked_lm.parameters()).device)
    return "kept from the base model (not trained: no NSP)"
