"""Per-family fine-tuning recipes (bertkit/tasks/family_recipes.py) and ELECTRA's layer-wise
learning-rate decay (engine/optimisation.parameter_groups)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bertkit.options import TrainConfig
from bertkit.tasks.family_recipes import (
    ALBERT,
    BERT,
    DEBERTA_V2_XLARGE,
    DEBERTA_V2_XXLARGE,
    DEBERTA_V3,
    DEBERTA_V3_LARGE,
    DEBERTA_V3_SMALL,
    ELECTRA,
    ELECTRA_LARGE,
    MODERNBERT,
    ROBERTA,
    recipe_for,
    with_family_recipe,
)


@pytest.mark.parametrize(
    "model_type,hidden,layers,recipe",
    [
        ("bert", 384, 6, BERT),
        ("distilbert", 768, 6, BERT),
        ("roberta", 768, 12, ROBERTA),
        ("xlm-roberta", 768, 12, ROBERTA),
        ("electra", 256, 12, ELECTRA),
        ("electra", 768, 12, ELECTRA),
        ("electra", 1024, 24, ELECTRA_LARGE),
        ("albert", 768, 12, ALBERT),
        ("modernbert", 768, 22, MODERNBERT),
        ("modernbert", 1024, 28, MODERNBERT),
        # DeBERTa-v2 and v3 share a model type; mnli.sh's rate is the size's
        ("deberta-v2", 384, 12, DEBERTA_V3),  # xsmall: no row of its own, base's
        ("deberta-v2", 768, 6, DEBERTA_V3_SMALL),
        ("deberta-v2", 768, 12, DEBERTA_V3),
        ("deberta-v2", 1024, 24, DEBERTA_V3_LARGE),
        ("deberta-v2", 1536, 24, DEBERTA_V2_XLARGE),
        ("deberta-v2", 1536, 48, DEBERTA_V2_XXLARGE),
        ("mpnet", 768, 12, BERT),  # no recipe read: the BERT paper's
    ],
)
def test_each_family_gets_its_published_recipe(model_type, hidden, layers, recipe):
    config = SimpleNamespace(model_type=model_type, hidden_size=hidden, num_hidden_layers=layers)
    assert recipe_for(config) is recipe


def test_the_recipes_say_what_their_sources_say():
    assert (BERT.lr, BERT.warmup_ratio, BERT.weight_decay, BERT.layer_decay) == (2e-5, 0.1, 0.01, 1.0)
    assert (ROBERTA.lr, ROBERTA.warmup_ratio, ROBERTA.weight_decay) == (1e-5, 0.06, 0.1)
    assert (ELECTRA.lr, ELECTRA.layer_decay, ELECTRA_LARGE.lr, ELECTRA_LARGE.layer_decay) == (1e-4, 0.8, 5e-5, 0.9)
    # run_glue.sh's SST-2 row: warmup 1256 of 20935 steps
    assert (ALBERT.lr, ALBERT.warmup_ratio, ALBERT.weight_decay) == (1e-5, round(1256 / 20935, 2), 0.01)
    # mnli.sh: 1000 warmup steps of 3 epochs (base) or 2 (small, large: 500) of 392,702 rows at batch 64
    per_epoch = -(-392_702 // 64)
    assert (DEBERTA_V3.lr, DEBERTA_V3.warmup_ratio) == (1.5e-5, round(1000 / (3 * per_epoch), 3))
    assert (DEBERTA_V3_SMALL.lr, DEBERTA_V3_SMALL.warmup_ratio) == (4.5e-5, round(1000 / (2 * per_epoch), 3))
    assert (DEBERTA_V3_LARGE.lr, DEBERTA_V3_LARGE.warmup_ratio) == (7e-6, round(500 / (2 * per_epoch), 3))
    assert (DEBERTA_V2_XLARGE.lr, DEBERTA_V2_XXLARGE.lr, DEBERTA_V3.weight_decay) == (4e-6, 3e-6, 0.01)
    assert (MODERNBERT.lr, MODERNBERT.warmup_ratio, MODERNBERT.weight_decay) == (8e-5, 0.0, 8e-6)
    assert {r.layer_decay for r in (ALBERT, DEBERTA_V3, MODERNBERT)} == {1.0}


def test_only_what_the_user_left_out_is_filled_and_said():
    electra = SimpleNamespace(model_type="electra", hidden_size=256)
    config, line = with_family_recipe(TrainConfig(lr=3e-5), electra)
    assert (config.lr, config.warmup_ratio, config.weight_decay, config.layer_decay) == (3e-5, 0.1, 0.01, 0.8)
    assert line.startswith("warmup-ratio 0.1, weight-decay 0.01, layer-decay 0.8: ELECTRA's") and "lr " not in line
    given = TrainConfig(lr=3e-5, warmup_ratio=0.0, weight_decay=0.0, layer_decay=1.0)
    assert with_family_recipe(given, electra) == (given, None)
    _, unknown = with_family_recipe(TrainConfig(), SimpleNamespace(model_type="mpnet", hidden_size=768))
    assert "the BERT paper's (no mpnet recipe read)" in unknown
    modern, said = with_family_recipe(TrainConfig(), SimpleNamespace(model_type="modernbert", hidden_size=768))
    assert (modern.lr, modern.warmup_ratio, modern.weight_decay) == (8e-5, 0.0, 8e-6)
    assert said.startswith("lr 8e-05, warmup-ratio 0, weight-decay 8e-06, layer-decay 1: ModernBERT's GLUE recipe")


def test_lora_adapters_train_at_one_rate_unless_told_otherwise():
    electra = SimpleNamespace(model_type="electra", hidden_size=768)
    assert with_family_recipe(TrainConfig(lora=8), electra)[0].layer_decay == 1.0
    assert with_family_recipe(TrainConfig(lora=8, layer_decay=0.9), electra)[0].layer_decay == 0.9
    assert with_family_recipe(TrainConfig(lora=8), electra)[0].lr == 1e-4  # the rest is still the family's


@pytest.mark.parametrize("value", [0.0, 1.5, float("nan")])
def test_a_layer_decay_outside_0_1_is_refused(value):
    from bertkit.errors import BertkitError

    with pytest.raises(BertkitError, match="--layer-decay"):
        TrainConfig(layer_decay=value).validate()


def _model(family, tmp_path):
    pytest.importorskip("torch")
    from tiny_models import build_family
    from transformers import AutoModelForSequenceClassification

    return AutoModelForSequenceClassification.from_pretrained(build_family(family, tmp_path / family), num_labels=2)


def test_layer_decay_gives_each_depth_its_rate_from_the_head_down(tmp_path):
    from bertkit.engine.optimisation import parameter_groups

    model = _model("electra", tmp_path)  # 2 layers: embeddings 0.8^3, layer 0 0.8^2, layer 1 0.8, head 1
    groups = parameter_groups(model, 0.01, 1e-4, 0.8)
    rate = {id(p): g["lr"] for g in groups for p in g["params"]}
    decay = {id(p): g["weight_decay"] for g in groups for p in g["params"]}
    for name, parameter in model.named_parameters():
        if "embeddings" in name:
            expected = 1e-4 * 0.8**3
        elif ".layer.0." in name:
            expected = 1e-4 * 0.8**2
        elif ".layer.1." in name:
            expected = 1e-4 * 0.8
        else:
            assert name.startswith("classifier."), name
            expected = 1e-4
        assert rate[id(parameter)] == pytest.approx(expected), name
        assert decay[id(parameter)] == (0.0 if name.endswith(("bias", "LayerNorm.weight")) else 0.01), name
    assert groups[0]["lr"] == 1e-4  # the first group's rate is the one logged as the run's
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


def test_without_layer_decay_two_groups_and_albert_refuses_it(tmp_path):
    from bertkit.engine.optimisation import parameter_groups
    from bertkit.errors import BertkitError

    albert = _model("albert", tmp_path)
    groups = parameter_groups(albert, 0.01, 2e-5, 1.0)
    assert [g["weight_decay"] for g in groups] == [0.01, 0.0] and all("lr" not in g for g in groups)
    with pytest.raises(BertkitError, match="no numbered layers"):
        parameter_groups(albert, 0.01, 2e-5, 0.8)
