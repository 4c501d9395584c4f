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
LARGE_HIDDEN = 1024  # ELECTRA-large's hidden size (small 256, base 768)

# model type -> recipe; XLM-R: RoBERTa's architecture, trained and fine-tuned with the same fairseq code
FAMILIES = {"bert": BERT, "distilbert": BERT, "roberta": ROBERTA, "xlm-roberta": ROBERTA, "electra": ELECTRA}
FIELDS = ("lr", "warmup_ratio", "weight_decay", "layer_decay")


def recipe_for(model_config) -> FamilyRecipe:
    model_type = getattr(model_config, "model_type", None)
    recipe = FAMILIES.get(model_type, BERT)
    if recipe is ELECTRA and getattr(model_config, "hidden_size", 0) >= LARGE_HIDDEN:
        return ELECTRA_LARGE
    return recipe


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
