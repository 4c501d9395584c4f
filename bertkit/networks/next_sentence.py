"""BERT's pre-training networks (``bertkit pretrain bert``): masked LM + next-sentence prediction.

The masking is pretrain mlm's (networks/masking.py: the 80/10/10 rule, the seeded collator, the
held-out rows masked by their own ids); what is added here is the NSP half. The loss is
``BertForPreTraining``'s, the mean cross-entropy of the chosen tokens plus the mean NSP
cross-entropy, but the vocabulary projection runs at the chosen positions only (as pretrain mlm's).

Which checkpoints can: a model type whose transformers pre-training class takes a
``next_sentence_label`` (BERT, MobileBERT, Megatron-BERT, ERNIE...). RoBERTa, DistilBERT,
ModernBERT, DeBERTa were pre-trained without NSP and have no such head type; ALBERT's is sentence
order, ELECTRA's a replaced-token discriminator. They are refused before any work.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.errors import BertkitError
from bertkit.networks.masking import EVAL_SEED, IGNORE, VocabTables, mask_by_content, masked_stats
from bertkit.tasks.training_spec import MaskRule

LABEL = "next_sentence_label"  # the feature key (bertkit/tasks/bert_pretraining.py) and transformers' argument


def check_next_sentence_model(config, display_name: str) -> str:
    """The pre-training class of ``config``'s model type (e.g. BertForPreTraining); one error line
    naming why when that class has no next-sentence head."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_PRETRAINING_MAPPING_NAMES

    name = MODEL_FOR_PRETRAINING_MAPPING_NAMES.get(config.model_type)
    model_class = getattr(transformers, name, None) if name else None
    if model_class is None or LABEL not in inspect.signature(model_class.forward).parameters:
        what = f"its pre-training class is {name}" if name else "transformers has no pre-training class for it"
        raise BertkitError(
            f"--model {display_name} is a {config.model_type} model, which has no next-sentence-prediction head "
            f"({what}): it was pre-trained without NSP",
            "continue its pre-training with `bertkit pretrain mlm`, or give a BERT checkpoint",
        )
    return name


def checkpoint_heads(model_ref: str) -> dict | None:
    """Which pre-training heads the checkpoint's weights hold: {"masked_lm": bool, "next_sentence":
    bool, "pooler": bool}; None when its weight names cannot be read without loading it."""
    names = _weight_names(Path(model_ref))
    if names is None:
        return None
    return {
        "masked_lm": any(".predictions." in f".{n}" for n in names),
        "next_sentence": any("seq_relationship." in n for n in names),
        "pooler": any("pooler." in n for n in names),
    }


def _weight_names(directory: Path) -> list | None:
    from safetensors import safe_open

    index = directory / "model.safetensors.index.json"
    if index.is_file():
        return list(json.loads(index.read_text())["weight_map"])
    single = directory / "model.safetensors"
    if not single.is_file():
        return None
    with safe_open(str(single), "pt") as weights:
        return list(weights.keys())


def describe_heads(heads: dict | None) -> str:
    """One line for the user and the model directory: which heads start random."""
    if heads is None:
        return "the checkpoint's weight names could not be read: its heads may start random"
    fresh = [name for key, name in (("masked_lm", "masked-LM"), ("next_sentence", "NSP")) if not heads[key]]
    if not fresh:
        return "masked-LM and NSP heads loaded from the checkpoint"
    fresh += [] if heads["pooler"] else ["pooler"]
    heads_named = " and ".join(fresh) + (" heads" if len(fresh) > 1 else " head")
    return f"the checkpoint has no {heads_named}: {'they start' if len(fresh) > 1 else 'it starts'} random"


@dataclass
class PreTrainingOutput:
    loss: torch.Tensor


def pretraining_logits(model, input_ids, attention_mask, token_type_ids, selected) -> tuple:
    """(vocabulary logits at the ``selected`` positions, NSP logits per row). The LM head runs at
    the selected positions only when the model has BERT's layout (an encoder and ``cls`` holding
    ``predictions`` and ``seq_relationship``); otherwise through the model's own forward."""
    extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
    base = getattr(model, getattr(model, "base_model_prefix", ""), None)
    heads = getattr(model, "cls", None)
    if base is None or not hasattr(heads, "predictions") or not hasattr(heads, "seq_relationship"):
        out = model(input_ids=input_ids, attention_mask=attention_mask, **extra)
        return out.prediction_logits[selected], out.seq_relationship_logits
    encoded = base(input_ids=input_ids, attention_mask=attention_mask, **extra)
    return heads.predictions(encoded[0][selected]), heads.seq_relationship(encoded[1])


class PreTrainingTrainer(nn.Module):
    """Training wrapper: batches come masked (MaskingCollator, with the NSP label carried along); the
    loss is the chosen tokens' mean cross-entropy plus the pairs' mean NSP cross-entropy."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, labels, next_sentence_label, token_type_ids=None):
        selected = labels != IGNORE
        vocabulary, nsp = pretraining_logits(self.model, input_ids, attention_mask, token_type_ids, selected)
        nsp_loss = F.cross_entropy(nsp.float(), next_sentence_label)
        if vocabulary.shape[0] == 0:  # nothing chosen in this batch: the NSP loss alone, not NaN
            return PreTrainingOutput(loss=nsp_loss + vocabulary.sum() * 0.0)
        return PreTrainingOutput(loss=F.cross_entropy(vocabulary.float(), labels[selected]) + nsp_loss)


class PreTrainingScorer(nn.Module):
    """Held-out scoring through Engine.infer (token ids only): each row masked by its own ids, as
    pretrain mlm's scorer does; returns ``mlm_stats`` (rows, 3) and ``nsp_logits`` (rows, 2), which
    the task compares with each pair's label."""

    def __init__(self, model, rule: MaskRule, tables: VocabTables, seed: int = EVAL_SEED):
        super().__init__()
        self.model, self.rule, self.tables, self.seed = model, rule, tables, seed

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        masked, labels = mask_by_content(input_ids, attention_mask, self.rule, self.tables, self.seed)
        selected = labels != IGNORE
        vocabulary, nsp = pretraining_logits(self.model, masked, attention_mask, token_type_ids, selected)
        return {"mlm_stats": masked_stats(vocabulary.float(), labels, selected), "nsp_logits": nsp.float()}
