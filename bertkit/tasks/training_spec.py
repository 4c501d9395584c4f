"""What a task trains with, as plain data: the networks layer (bertkit/networks/recipes.py) builds
the torch modules from it.

A task decides how its model trains (its loss and the options of that loss, the output bias its
training data taught, the masking rule of masked-LM pre-training) but sits below
``bertkit.networks`` and stays torch-free. So it says so in a ``TrainingSpec``, a frozen value; the
caller (bertkit/api/finetuning.py, bertkit/inference.py) hands that value to the networks layer,
which owns every torch class. Nothing here is bound or imported upwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from bertkit.errors import BertkitError

# How the model trains and scores: the plain fine-tuning loop (the model's own forward, perhaps a
# loss wrapper), masked-LM pre-training (a masking collator, a trainer and a scorer of masked text),
# or BERT's pre-training (the same masking, plus next-sentence prediction on sentence pairs).
FINE_TUNE, MASKED_LM, NEXT_SENTENCE = "fine-tune", "masked-lm", "masked-lm+nsp"
# Few-shot classification (--recipe setfit, tasks/few_shot.py): the encoder on contrastive pairs of rows.
SETFIT_BODY = "setfit-body"


@dataclass(frozen=True)
class MaskRule:
    """BERT's masking rule (networks/masking.py applies it): ``rate`` of the tokens are chosen; of
    those ``mask_share`` become [MASK], ``random_share`` a random token, the rest stay."""

    rate: float = 0.15
    mask_share: float = 0.8
    random_share: float = 0.1
    whole_word: bool = False

    def validate(self) -> "MaskRule":
        if not 0 < self.rate < 1:
            raise BertkitError(f"--mask-rate {self.rate} must be between 0 and 1", "BERT used 0.15")
        if self.mask_share < 0 or self.random_share < 0 or self.mask_share + self.random_share > 1:
            raise BertkitError(
                "--mask-token-share and --random-token-share must be >= 0 and add up to at most 1 "
                "(the rest of the chosen tokens stay unchanged)",
                "BERT used 0.8 and 0.1",
            )
        return self


@dataclass(frozen=True)
class LossSpec:
    """A loss computed outside the model (networks/losses.py ``TrainingLoss``): for a target kind
    (base.CLASS, TOKEN_CLASS, FLOAT, MULTI_HOT), with class weights and a focal term."""

    target: str = "class"
    class_weights: tuple | None = None  # one per label (multi-label: pos_weight), None: unweighted
    focal_gamma: float = 0.0  # 0: plain cross-entropy


@dataclass(frozen=True)
class TrainingSpec:
    """Everything the networks layer needs to train, evaluate and finish a task's model."""

    recipe: str = FINE_TUNE
    loss: LossSpec | None = None  # None: the model's own loss (the plain, fastest path)
    head_bias: tuple | None = None  # the output bias a fresh head starts from (what the data taught)
    target_scaling: tuple | None = None  # (mean, std) trained on, folded into the head when training is done
    mask_rule: MaskRule | None = None  # MASKED_LM, NEXT_SENTENCE: how tokens are chosen and replaced
    embedding: "EmbeddingLoss | None" = None  # BI_ENCODER: the similarity loss


# A bi-encoder (bertkit/networks/bi_encoder.py): two or three texts encoded by one encoder and pooled,
# trained on the similarity of their vectors; a cross-encoder reranker trained listwise.
BI_ENCODER = "bi-encoder"
LISTWISE = "listwise"  # a cross-encoder trained on each query's passages at once (networks/listwise.py)


@dataclass(frozen=True)
class EmbeddingLoss:
    """How a bi-encoder trains: ``objective`` a loss of the table in tasks/embedding_losses.py
    ("mnrl": in-batch negatives over (anchor, positive[, negative]) rows, "cosent": scored pairs,
    ...); ``options`` its own options as (name, value) pairs (``option``); ``scale`` multiplies the
    cosines (20, as sentence-transformers); ``symmetric`` adds the positive-to-anchor direction
    (mnrl); ``cache_batch``: GradCache mini-batch size (None: the whole batch at once); ``dims``:
    the Matryoshka dimensions the loss is summed over (None: the full vector only)."""

    objective: str = "mnrl"
    options: tuple = ()
    scale: float = 20.0
    symmetric: bool = False
    cache_batch: int | None = None
    dims: tuple | None = None
    pooling: str = "mean"
    max_length: int = 128  # what sentence-transformers truncates at (sentence_bert_config.json)

    def option(self, name: str, default=None):
        """The value of one of the loss's own options (``default`` when the spec has none)."""
        return dict(self.options).get(name, default)
