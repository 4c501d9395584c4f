"""Each model family's published fine-tuning recipe: the learning rate, warmup, weight decay and
layer-wise learning-rate decay a run uses where the user gave none (torch-free).

``--lr``, ``--warmup-ratio``, ``--weight-decay`` and ``--layer-decay`` default to None, "the
family's"; ``with_family_recipe`` fills what was not given from the model's config, once the model
is known, and the filled config is what the run records (bertkit.json, config.yaml: a replay is
exact). A family without a published recipe bertkit has read trains with the BERT paper's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class FamilyRecipe:
    name: str
    lr: float
    warmup_ratio: float
    weight_decay: float
    layer_decay: float  # 1.0: every layer at the peak rate
    source: str


BERT = FamilyRecipe(
    "the BERT paper's",
    2e-5,
    0.1,
    0.01,
    1.0,
    # Devlin et al. 2019, appendix A.3: lr among 5e-5, 3e-5, 2e-5; google-research/bert
    # run_classifier.py: warmup_proportion 0.1, AdamWeightDecay's weight_decay_rate 0.01
    "Devlin et al. 2019 (A.3) and google-research/bert run_classifier.py",
)
ROBERTA = FamilyRecipe(
    "RoBERTa's GLUE recipe",
    1e-5,
    0.06,
    0.1,
    1.0,
    # fairseq examples/roberta/README.glue.md: --lr 1e-5 (2e-5 for RTE and STS-B), --warmup-updates
    # 6 % of the updates, --weight-decay 0.1 (Liu et al. 2019, Table 10: lr 1e-5..3e-5, warmup 6 %)
    "fairseq examples/roberta/README.glue.md; Liu et al. 2019 (Table 10)",
)
ELECTRA = FamilyRecipe(
    "ELECTRA's fine-tuning recipe",
    1e-4,
    0.1,
    0.01,
    0.8,
    # google-research/electra configure_finetuning.py: learning_rate 1e-4, weight_decay_rate 0.01,
    # warmup_proportion 0.1, layerwise_lr_decay 0.8; for "large": 5e-5 and 0.9 (ELECTRA_LARGE)
    "google-research/electra configure_finetuning.py (Clark et al. 2020)",
)
ELECTRA_LARGE = replace(ELECTRA, lr=5e-5, layer_decay=0.9)
LARGE_HIDDEN = 1024  # ELECTRA-large's and DeBERTa-v3-large's hidden size (base 768)
ALBERT = FamilyRecipe(
    "ALBERT's GLUE recipe (its SST-2 row)",
    1e-5,
    0.06,
    0.01,
    1.0,
    # google-research/albert run_glue.sh, SST-2: --learning_rate 1e-5, --warmup_step 1256 of --train_step
    # 20935 (6 %), --optimizer adamw, whose optimization.py sets weight_decay_rate 0.01 (other rows:
    # MNLI 3e-5 with 10 % warmup, RTE and MRPC 3e-5 / 2e-5 with 25 %)
    "google-research/albert run_glue.sh (SST-2) and optimization.py (Lan et al. 2020)",
)
DEBERTA_V3 = FamilyRecipe(
    "DeBERTa-v3-base's MNLI recipe",
    1.5e-5,
    0.054,
    0.01,
    1.0,
    # microsoft/DeBERTa experiments/glue/mnli.sh, deberta-v3-base: --learning_rate 1.5e-5, --warmup 1000
    # steps of 3 epochs x 6,136 (392,702 rows, batch 64) = 18,408 (5.4 %); DeBERTa/optims/args.py
    # --weight_decay 0.01 (He et al. 2021, Table 9: weight decay 0.01)
    "microsoft/DeBERTa experiments/glue/mnli.sh and optims/args.py (He et al. 2021)",
)
# the same script's other sizes: v3-small (6 layers) 4.5e-5 with 1000 of 2 epochs' 12,272 steps; v3-large
# 7e-6 with 500 of 12,272; DeBERTa-v2-xlarge 4e-6 (its 24 layers of 1536) and -xxlarge (48) 3e-6 with 1000
DEBERTA_V3_SMALL = replace(DEBERTA_V3, name="DeBERTa-v3-small's MNLI recipe", lr=4.5e-5, warmup_ratio=0.081)
DEBERTA_V3_LARGE = replace(DEBERTA_V3, name="DeBERTa-v3-large's MNLI recipe", lr=7e-6, warmup_ratio=0.041)
DEBERTA_V2_XLARGE = replace(DEBERTA_V3, name="DeBERTa-v2-xlarge's MNLI recipe", lr=4e-6)
DEBERTA_V2_XXLARGE = replace(DEBERTA_V3, name="DeBERTa-v2-xxlarge's MNLI recipe", lr=3e-6)
MODERNBERT = FamilyRecipe(
    "ModernBERT's GLUE recipe",
    8e-5,
    0.0,
    8e-6,
    1.0,
    # AnswerDotAI/ModernBERT examples/finetune_modernbert_on_glue.ipynb ("hyperparameters that have proven
    # to work well for us in fine-tuning ModernBERT-base on GLUE"): lr 8e-5, wd 8e-6, a linear schedule
    # without warmup, batch 32, 2 epochs; its betas (0.9, 0.98) and eps 1e-6 are not carried, and its
    # TrainingArguments leave wd out (the Trainer's 0): 8e-6 is the value the notebook names
    "AnswerDotAI/ModernBERT examples/finetune_modernbert_on_glue.ipynb (Warner et al. 2024)",
)

# model type -> recipe; XLM-R: RoBERTa's architecture, trained and fine-tuned with the same fairseq code;
# deberta-v2 is the type of DeBERTa-v2 and v3 checkpoints (sized by _deberta)
FAMILIES = {
    "bert": BERT,
    "distilbert": BERT,
    "roberta": ROBERTA,
    "xlm-roberta": ROBERTA,
    "electra": ELECTRA,
    "albert": ALBERT,
    "deberta-v2": DEBERTA_V3,
    "modernbert": MODERNBERT,
}
FIELDS = ("lr", "warmup_ratio", "weight_decay", "layer_decay")


def recipe_for(model_config) -> FamilyRecipe:
    model_type = getattr(model_config, "model_type", None)
    recipe = FAMILIES.get(model_type, BERT)
    hidden = getattr(model_config, "hidden_size", 0) or 0
    if recipe is ELECTRA and hidden >= LARGE_HIDDEN:
        return ELECTRA_LARGE
    if recipe is DEBERTA_V3:
        return _deberta(hidden, getattr(model_config, "num_hidden_layers", 0) or 0)
    return recipe


def _deberta(hidden: int, layers: int) -> FamilyRecipe:
    """mnli.sh's row for this size: the learning rate falls with the model's width and depth."""
    if hidden > LARGE_HIDDEN:
        return DEBERTA_V2_XXLARGE if layers > 24 else DEBERTA_V2_XLARGE
    if hidden == LARGE_HIDDEN:
        return DEBERTA_V3_LARGE
    if hidden == 768 and layers <= 6:
        return DEBERTA_V3_SMALL
    return DEBERTA_V3  # base, and xsmall (384 wide, 12 layers), which the script has no row for


def with_family_recipe(config, model_config) -> tuple[object, str | None]:
    """``config`` with the family's values where it has None, and the line that says which were
    filled from where (None when the user gave all four)."""
    recipe = recipe_for(model_config)
    if getattr(config, "lora", None):  # LoRA's recipe (Hu et al. 2021) trains its adapters at one rate
        recipe = replace(recipe, layer_decay=1.0)
    missing = [name for name in FIELDS if getattr(config, name, 0) is None]
    if not missing:
        return config, None
    config = replace(config, **{name: getattr(recipe, name) for name in missing})
    shown = ", ".join(f"{name.replace('_', '-')} {getattr(config, name):g}" for name in missing)
    model_type = getattr(model_config, "model_type", "?")
    whose = recipe.name if model_type in FAMILIES else f"{recipe.name} (no {model_type} recipe read)"
    return config, f"{shown}: {whose}, from {recipe.source}; the flags override"


def family_recipe(config, model_config):
    """``with_family_recipe``'s config, its line said once (a run records the filled config)."""
    from bertkit.events import notice

    config, line = with_family_recipe(config, model_config)
    if line is not None:
        notice("recipe", line)
    return config
