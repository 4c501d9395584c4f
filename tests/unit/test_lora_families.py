"""--lora's default targets on every encoder family bertkit tests (tests/tiny_models.py) and every
task head: adapters go where the family's query and value projections are, only the adapters and
the head train, and merging gives W + (alpha/R) B A in a plain model of the same class. No
training: B is set by hand (it starts at zero). The end-to-end runs: tests/cli/test_lora.py."""

from __future__ import annotations

import pytest
import torch
from tiny_models import FAMILIES, build_family

pytest.importorskip("peft")

HEADS = {
    "AutoModelForSequenceClassification": {"num_labels": 3},
    "AutoModelForTokenClassification": {"num_labels": 5},
    "AutoModelForQuestionAnswering": {},
}


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    root = tmp_path_factory.mktemp("lora-families")
    return {name: build_family(name, root / name) for name in FAMILIES}


@pytest.mark.parametrize("model_class", list(HEADS))
@pytest.mark.parametrize("family", FAMILIES)
def test_default_targets_train_only_adapters_and_head_and_merge_exactly(families, family, model_class):
    import transformers

    from bertkit.networks.lora import FAMILY_TARGETS, LoraSettings, add_adapters, head_parameter_names, merged

    load = getattr(transformers, model_class).from_pretrained
    base = load(families[family], **HEADS[model_class]).state_dict()
    model = load(families[family], **HEADS[model_class])
    facts = add_adapters(model, LoraSettings(2, 6.0, 0.0, None), family)
    assert facts["targets"] == list(FAMILY_TARGETS[family]) and facts["adapted_layers"] >= 2
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    head = set(head_parameter_names(model))
    assert head and head <= trainable and all(".lora_" in n for n in trainable - head)
    assert facts["trainable_parameters"] == sum(p.numel() for n, p in model.named_parameters() if n in trainable)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if ".lora_B." in name:
                parameter.normal_()
    adapters = {n: p.detach().clone() for n, p in model.named_parameters() if ".lora_" in n}
    plain = merged(model)
    assert type(plain).__name__ == getattr(transformers, model_class).from_config(plain.config).__class__.__name__
    state = plain.state_dict()
    assert set(state) == set(base)  # the base's weight names: plain transformers loads it
    for key in (k for k in adapters if ".lora_A." in k):
        layer = key.split(".lora_A.")[0]
        a, b = adapters[key], adapters[key.replace(".lora_A.", ".lora_B.")]
        expected = base[f"{layer}.weight"] + (6.0 / 2) * (b @ a)
        assert torch.allclose(state[f"{layer}.weight"], expected, atol=1e-6, rtol=0)
    adapted = {f"{key.split('.lora_A.')[0]}.weight" for key in adapters}
    untouched = [k for k in base if k not in adapted and k not in head]  # a fresh head differs per load
    assert len(untouched) > 10 and all(torch.equal(state[k], base[k]) for k in untouched)
