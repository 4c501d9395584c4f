"""A task's TrainingSpec (plain data, bertkit/tasks/training_spec.py) made into torch modules.

Tasks say what they train with; this module, which owns the torch classes, builds it: the module
the engine trains, the collator that makes each batch, the module evaluation runs, and the model
saved when training is done. One recipe per kind of training, each a small class of four builders;
``RECIPES`` maps the spec's ``recipe`` name to it (a new kind of training adds one entry).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from bertkit.networks.contrastive import SetFitBody
from bertkit.networks.losses import TrainingLoss, set_head_bias, with_loss
from bertkit.networks.masking import MaskedLMScorer, MaskedLMTrainer, MaskingCollator, VocabTables, carry_base_pooler
from bertkit.networks.next_sentence import (
    LABEL,
    PreTrainingScorer,
    PreTrainingTrainer,
    checkpoint_heads,
    describe_heads,
)
from bertkit.tasks.training_spec import (
    BI_ENCODER,
    FINE_TUNE,
    LISTWISE,
    MASKED_LM,
    NEXT_SENTENCE,
    SETFIT_BODY,
    TrainingSpec,
)


@dataclass
class Finished:
    """The model to save, and what finishing it did that the model directory records."""

    model: nn.Module
    facts: dict = field(default_factory=dict)
    save_weights: object = None  # writes the model's files instead of save_pretrained (LoRA's adapter files)


class FineTune:
    """The model's own forward; a loss wrapper when the spec's loss is not the model's own."""

    @staticmethod
    def training_network(spec: TrainingSpec, model):
        if spec.head_bias is not None:
            set_head_bias(model, spec.head_bias)
        return with_loss(model, spec.loss)

    @staticmethod
    def training_collator(spec: TrainingSpec, tokenizer, seed: int):
        return None  # the engine's padding collator

    @staticmethod
    def scoring_network(spec: TrainingSpec, model, tokenizer):
        return None  # the bare model

    @staticmethod
    def evaluation_network(spec: TrainingSpec, model, tokenizer, unwrap):
        return model  # a loss wrapper returns the model's own outputs

    @staticmethod
    def finish(spec: TrainingSpec, trained, model_ref: str, display_name: str) -> Finished:
        model = trained.model if isinstance(trained, TrainingLoss) else trained
        if spec.target_scaling is not None:
            fold_scaling(model, *spec.target_scaling)
        return Finished(model)


class MaskedLM:
    """Masked-LM pre-training: batches masked in the collator, a trainer that reads only the chosen
    positions, and a scorer that masks held-out text itself (Engine.infer hands it token ids only)."""

    @staticmethod
    def training_network(spec: TrainingSpec, model):
        return MaskedLMTrainer(model)

    @staticmethod
    def training_collator(spec: TrainingSpec, tokenizer, seed: int):
        tables = VocabTables.from_tokenizer(tokenizer, spec.mask_rule.whole_word)
        return MaskingCollator(tokenizer.pad_token_id, spec.mask_rule, tables, seed)

    @staticmethod
    def scoring_network(spec: TrainingSpec, model, tokenizer):
        return MaskedLMScorer(model, spec.mask_rule, VocabTables.from_tokenizer(tokenizer, spec.mask_rule.whole_word))

    @staticmethod
    def evaluation_network(spec: TrainingSpec, model, tokenizer, unwrap):
        # the held-out text is masked by the scorer itself, which shares the weights being trained
        return MaskedLM.scoring_network(spec, unwrap(model).model, tokenizer)

    @staticmethod
    def finish(spec: TrainingSpec, trained, model_ref: str, display_name: str) -> Finished:
        return Finished(trained.model, {"pooler": carry_base_pooler(trained.model, model_ref, display_name)})


class NextSentence:
    """BERT's pre-training: pretrain mlm's masking collator carrying each pair's NSP label, a trainer
    adding the NSP loss, a scorer returning NSP logits beside the masked-LM statistics. The whole
    pre-training model is saved: the pooler that NSP trained is in it, for classifiers to read."""

    @staticmethod
    def training_network(spec: TrainingSpec, model):
        return PreTrainingTrainer(model)

    @staticmethod
    def training_collator(spec: TrainingSpec, tokenizer, seed: int):
        tables = VocabTables.from_tokenizer(tokenizer, spec.mask_rule.whole_word)
        return MaskingCollator(tokenizer.pad_token_id, spec.mask_rule, tables, seed, targets={LABEL: "class"})

    @staticmethod
    def scoring_network(spec: TrainingSpec, model, tokenizer):
        tables = VocabTables.from_tokenizer(tokenizer, spec.mask_rule.whole_word)
        return PreTrainingScorer(model, spec.mask_rule, tables)

    @staticmethod
    def evaluation_network(spec: TrainingSpec, model, tokenizer, unwrap):
        return NextSentence.scoring_network(spec, unwrap(model).model, tokenizer)

    @staticmethod
    def finish(spec: TrainingSpec, trained, model_ref: str, display_name: str) -> Finished:
        facts = {"pooler": "trained by next-sentence prediction", "heads": describe_heads(checkpoint_heads(model_ref))}
        return Finished(trained.model, facts)


class BiEncoder:
    """Sentence embeddings (networks/bi_encoder.py): towers padded apart, a similarity loss over
    pooled vectors, evaluation and scoring on the pooled vectors, a sentence-transformers directory."""

    @staticmethod
    def training_network(spec: TrainingSpec, model):
        from bertkit.networks.bi_encoder import BiEncoderTrainer

        return BiEncoderTrainer(model, spec.embedding)

    @staticmethod
    def training_collator(spec: TrainingSpec, tokenizer, seed: int):
        from bertkit.networks.bi_encoder import BiEncoderCollator

        return BiEncoderCollator(tokenizer.pad_token_id)

    @staticmethod
    def scoring_network(spec: TrainingSpec, model, tokenizer):
        from bertkit.networks.embedding import EmbeddingNetwork
        from bertkit.networks.pooling import parse_pooling

        return EmbeddingNetwork(model, parse_pooling(spec.embedding.pooling))

    @staticmethod
    def evaluation_network(spec: TrainingSpec, model, tokenizer, unwrap):
        return BiEncoder.scoring_network(spec, unwrap(model).encoder, tokenizer)

    @staticmethod
    def finish(spec: TrainingSpec, trained, model_ref: str, display_name: str) -> Finished:
        from bertkit.networks.bi_encoder import SentenceEncoder, base_modules, carried_modules, said_modules

        carried, dropped = carried_modules(base_modules(model_ref))  # the base's module list, kept where it can be
        said_modules(carried, dropped, display_name)
        encoder = SentenceEncoder(trained.encoder, spec.embedding.max_length, spec.embedding.pooling, carried)
        return Finished(encoder)


class Listwise:
    """A reranker trained on each query's passages at once (networks/listwise.py); the model, its
    evaluation and its scoring are the plain one-logit cross-encoder's."""

    @staticmethod
    def training_network(spec: TrainingSpec, model):
        from bertkit.networks.listwise import ListwiseTrainer

        return ListwiseTrainer(model)

    @staticmethod
    def training_collator(spec: TrainingSpec, tokenizer, seed: int):
        from bertkit.networks.listwise import ListwiseCollator

        return ListwiseCollator(tokenizer.pad_token_id)

    @staticmethod
    def scoring_network(spec: TrainingSpec, model, tokenizer):
        return model

    @staticmethod
    def evaluation_network(spec: TrainingSpec, model, tokenizer, unwrap):
        return unwrap(model).model

    @staticmethod
    def finish(spec: TrainingSpec, trained, model_ref: str, display_name: str) -> Finished:
        return Finished(trained.model)


RECIPES = {
    FINE_TUNE: FineTune,
    MASKED_LM: MaskedLM,
    NEXT_SENTENCE: NextSentence,
    SETFIT_BODY: SetFitBody,
    BI_ENCODER: BiEncoder,
    LISTWISE: Listwise,
}


def recipe(spec: TrainingSpec):
    return RECIPES[spec.recipe]


def training_network(spec: TrainingSpec, model):
    """The module the engine trains (a wrapper that computes the loss differently, or ``model``)."""
    return recipe(spec).training_network(spec, model)


def training_collator(spec: TrainingSpec, tokenizer, seed: int):
    """A collator that makes the targets per batch (None: the engine's padding collator)."""
    return recipe(spec).training_collator(spec, tokenizer, seed)


def evaluation_network(spec: TrainingSpec, model, tokenizer, unwrap):
    """The module evaluation runs during training; ``unwrap`` removes the engine's wrappers."""
    return recipe(spec).evaluation_network(spec, model, tokenizer, unwrap)


def scoring_network(spec: TrainingSpec, model, tokenizer):
    """What eval runs on a saved model instead of the bare model (None: the model itself)."""
    return recipe(spec).scoring_network(spec, model, tokenizer)


def scores_with_wrapper(spec: TrainingSpec) -> bool:
    """Whether eval scores a saved model through ``scoring_network`` (so it loads the model for it)."""
    return recipe(spec) is not FineTune


def finish_model(spec: TrainingSpec, trained, model_ref: str, display_name: str) -> Finished:
    """The model to save from what ``training_network`` trained, and what finishing it did."""
    return recipe(spec).finish(spec, trained, model_ref, display_name)


def pack_rows(spec: TrainingSpec, network, device: str, packing: str, random_batches: bool = False) -> str | None:
    """Where ``network`` trains on packed rows (``packing``: TrainConfig.packing; ``device``: the
    training device's type): the bi-encoder's and SetFit's towers pack unless "off"
    (networks/sorted_chunks.py); a task model's encoder packs under "on", and under "auto" on a CPU
    when its batches are random (``random_batches``: ner's default, --random-batches, where packing was
    measured 1.6-1.7x the padded step; networks/packed_heads.py). On CUDA only "on" packs (through
    engine/varlen_attention.py, not yet measured on a GPU). Returns the line to say once: why "on",
    or "auto" with random batches on a CPU, runs padded, or that it packs on CUDA
    (networks/packed_heads.PACKED_ON_CUDA); else None (length-grouped batches under "auto" run padded
    without a word)."""
    from bertkit.networks.packed import PACKING_OFF
    from bertkit.networks.packed_heads import (
        PACKED_ON_CUDA,
        pack_encoder,
        task_model,
        why_encoder_padded,
        why_padded_on,
    )

    on_cuda = PACKED_ON_CUDA if packing == "on" and device == "cuda" else None
    if recipe(spec) in (BiEncoder, SetFitBody):
        towers = task_model(network)
        setattr(towers, PACKING_OFF, packing == "off")
        if packing != "on":
            return None
        reason = why_padded_on(device) or why_encoder_padded(getattr(towers, "config", None))
        return f"training batches run padded: {reason}" if reason else on_cuda
    if not (packing == "on" or (packing == "auto" and random_batches and device == "cpu")):
        return None
    if packing == "auto" and recipe(spec) not in (FineTune, Listwise):  # no padding to pack away: nothing to say
        return None
    reason = _why_padded_rows(spec, network, device)
    if reason is None and not pack_encoder(network):
        reason = "training batches run padded: this model cannot run packed"
    if packing == "on":
        return reason or on_cuda
    # auto, random batches on a CPU: padded ones ran at 0.50x the length-grouped speed (packing_steps_gathers)
    return f"{reason}; random batches padded train at about half the speed of --grouped ones" if reason else None


def _why_padded_rows(spec: TrainingSpec, network, device: str) -> str | None:
    """Why a task model's training batches cannot run packed, or None when they can."""
    from bertkit.networks.packed_heads import why_padded, why_padded_on

    if recipe(spec) in (MaskedLM, NextSentence):
        return "training batches run padded: pre-training's rows are full blocks of --max-length tokens already"
    if recipe(spec) not in (FineTune, Listwise):
        return "training batches run padded: this recipe trains no task head over an encoder"
    reason = why_padded_on(device) or why_padded(network)
    return f"training batches run padded: {reason}" if reason is not None else None


def unpack_rows(network) -> None:
    """Undo ``pack_rows``: the model given back runs its own forward, its towers as by default."""
    from bertkit.networks.packed import PACKING_OFF
    from bertkit.networks.packed_heads import task_model, unpack_encoder

    unpack_encoder(network)
    vars(task_model(network)).pop(PACKING_OFF, None)


def fold_scaling(model, mean: float, std: float) -> None:
    """Fold a regression's target scaling into its output layer (w' = std w, b' = std b + mean), so
    the saved directory predicts the original scale in plain transformers too."""
    head = [m for m in model.modules() if isinstance(m, nn.Linear) and m.out_features == 1][-1]
    with torch.no_grad():
        head.weight.mul_(std)
        head.bias.mul_(std).add_(mean)
