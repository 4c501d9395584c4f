"""``bertkit pretrain mlm`` as an API: continued masked-LM pre-training on raw text.

It is finetune with the ``mlm`` task, through the same engine (``Engine.fit`` with the task's
masking collator) and the same all-or-nothing model directory. It differs from ``api.finetune``
in two places only: batches are masked in the collator, and evaluation scores a wrapper
(``MaskedLMScorer``) that masks held-out text itself, because ``Engine.infer`` hands a model
nothing but token ids. The held-out text is scored once before training too, so the report
says how much pre-training changed it.

The output directory holds an ``AutoModelForMaskedLM`` checkpoint that ``bertkit finetune --model
DIR``, ``bertkit embed`` and plain transformers load. BERT's pooler (the dense layer on [CLS] that
sequence classifiers use) is not part of a masked-LM model; the base model's pooler is carried
over unchanged, so fine-tuning from DIR starts from it rather than from a random one.

``pretrain_bert`` is BERT's own pre-training, masked LM + next-sentence prediction (the ``bert``
task): the same path, with sentence pairs instead of blocks. Its output is the whole pre-training
model (``BertForPreTraining``), whose pooler NSP trained; ``finetune --model DIR`` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from bertkit.api.finetuning import finetune
from bertkit.options import RunOptions, TrainConfig
from bertkit.options.training import PRETRAIN_RECIPE
from bertkit.training.run_args import output_of

PRETRAIN_LR = PRETRAIN_RECIPE["lr"]  # BERT's pre-training recipe, not fine-tuning's 2e-5..5e-5


def pretraining_config(config: TrainConfig | None) -> TrainConfig:
    """``config`` with BERT's pre-training recipe where it leaves a value to the model family's."""
    config = config or TrainConfig()
    return replace(config, **{k: v for k, v in PRETRAIN_RECIPE.items() if getattr(config, k) is None})


RECIPE = (
    "BERT's pre-training: peak lr 1e-4, linear warmup over 10,000 of 1,000,000 steps, then linear decay, "
    "weight decay 0.01; the warmup is scaled to this run's length as a share of its steps"
)


@dataclass
class PretrainResult:
    output_dir: str
    before: dict  # held-out metrics of the starting model
    metrics: dict  # held-out metrics of the saved epoch
    history: list
    best_epoch: float | None
    throughput: dict
    preprocessing: dict = field(default_factory=dict)
    pooler: str = ""
    best_step: int | None = None
    resumed_from: str | None = None
    runtime: dict = field(default_factory=dict)  # precision used (and why), threads
    notices: list = field(default_factory=list)  # checkpoints passed over, ...
    baselines: list = field(default_factory=list)  # unigram / chance and the starting model, judged
    warnings: list = field(default_factory=list)  # a baseline not beaten, said


# the masking rule and the held-out share: the mlm task's pretrain options, given to every run
MASKING = {"mask_rate": 0.15, "mask_token_share": 0.8, "random_token_share": 0.1, "whole_word_masking": False}
EVAL_SHARE = 0.1


def pretrain_mlm(run: RunOptions, config: TrainConfig | None = None, task: str = "mlm") -> PretrainResult:
    """Continue masked-LM pre-training of ``run.model`` on the text in ``run.data``; save a model
    directory (``run.output``, default runs/mlm-<data>). ``finetune`` with the mlm task: the same
    options, checkpoints and ``run.resume``. ``config.task_options``: the masking rule (mask_rate,
    mask_token_share, random_token_share, whole_word_masking) and eval_share; ``config`` defaults
    to TrainConfig() with PRETRAIN_RECIPE (pretraining_config)."""
    from bertkit.events import notice

    config = pretraining_config(config)
    notice(
        "recipe",
        f"pre-training with peak lr {config.lr:g}, warmup {config.warmup_ratio:.0%} of the steps, weight decay "
        f"{config.weight_decay:g} ({RECIPE})",
    )
    options = {**MASKING, "eval_share": EVAL_SHARE, **config.task_options}
    config = replace(config, task_options=options)
    result = finetune(task, replace(run, output=output_of(run, f"{task}-")), config)
    return PretrainResult(
        result.output_dir,
        result.before,
        result.metrics,
        result.history,
        result.best_epoch,
        result.throughput,
        result.preprocessing,
        result.sections.get("pretraining", {}).get("pooler") or "",
        result.best_step,
        result.resumed_from,
        result.runtime,
        result.notices,
        result.baselines,
        result.warnings,
    )


def pretrain_bert(run: RunOptions, config: TrainConfig | None = None) -> PretrainResult:
    """BERT's pre-training of ``run.model`` on the documents in ``run.data``: masked LM + next-sentence
    prediction on sentence pairs (the ``bert`` task); every option of ``pretrain_mlm``. A model type
    without a next-sentence head (RoBERTa, DistilBERT, ModernBERT...) is refused before any work;
    which heads start random (a bare encoder such as MiniLM has neither) is said before training."""
    from bertkit.events import notice
    from bertkit.models import default_model, load_config, resolve_model
    from bertkit.networks.next_sentence import check_next_sentence_model, checkpoint_heads, describe_heads

    config = pretraining_config(config)
    model = run.model or default_model()
    run = replace(run, model=model)
    model_ref = resolve_model(model)
    check_next_sentence_model(load_config(model_ref, model), model)
    heads = checkpoint_heads(model_ref)
    if heads is None or not all(heads.values()):
        notice("weights", describe_heads(heads), heads=heads)
    pairs = {"pair_seed": config.seed}  # the training pairs are drawn with the run's seed
    return pretrain_mlm(run, replace(config, task_options={**config.task_options, **pairs}), task="bert")
