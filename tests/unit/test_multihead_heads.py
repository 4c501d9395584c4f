"""finetune multi's units: the heads as written (tasks/multihead.py), the per-task batch plan
(engine/batching.GroupedBatches), and the shared-encoder module (networks/multihead.py): a head's
loss, outputs and metrics are its single-task model's on the same batch."""

from __future__ import annotations

import copy
from collections import Counter

import pytest

from bertkit.engine.batching import GroupedBatches
from bertkit.errors import BertkitError
from bertkit.tasks.multihead import check_heads, combined_metrics, head_text, parse_head

pytestmark = pytest.mark.unit


def test_a_head_as_written():
    head = parse_head("stsb:pair-regression:stsb:weight=0.5:eval_data=dev.tsv:text_column=s1")
    assert (head.name, head.task, head.data, head.eval_data, head.weight) == ("stsb", "pair", "stsb", "dev.tsv", 0.5)
    assert head.task_options() == {"text_column": "s1", "problem_type": "regression"}
    assert parse_head(head_text({"name": "a", "kind": "ner", "data": "conll2003", "weight": 2}, "f")).weight == 2.0


@pytest.mark.parametrize(
    "text, said",
    [
        ("a:cls", "is not NAME:KIND:DATA"),
        ("a:embedding:squad", "kind embedding is not a multi-head kind yet"),
        ("a:tagger:x", "unknown kind 'tagger'"),
        ("a:cls:sst2:weight=0", "weight 0 is not positive"),
        ("a:cls:sst2:weight=-1", "weight -1 is not positive"),
        ("a:cls:sst2:weight=nan", "weight nan is not positive"),
        ("a:cls:sst2:weight=x", "is not a number"),
        ("a:cls:sst2:model=bert-base-uncased", "model is set per head; the heads share one encoder"),
        ("a:cls:sst2:long_text=windows", "does not compose with --long-text"),
        ("a:cls:sst2:recipe=setfit", "does not compose with --recipe"),
        ("a b:cls:sst2", "is not a plain name"),
    ],
)
def test_bad_heads_are_one_line(text, said):
    with pytest.raises(BertkitError, match=None) as caught:
        parse_head(text)
    assert said in caught.value.message


def test_two_heads_with_one_name_and_no_heads():
    with pytest.raises(BertkitError, match="two heads are named 'a'"):
        check_heads([parse_head("a:cls:sst2"), parse_head("a:pair:mrpc")])
    with pytest.raises(BertkitError, match="at least one head"):
        check_heads([])


def test_combined_metrics_name_each_head_and_average_the_main_ones():
    found = combined_metrics({"s": {"accuracy": 0.8, "f1": 0.1}, "n": {"f1": 0.6}}, {"s": "accuracy", "n": "f1"})
    assert found == {"s/accuracy": 0.8, "s/f1": 0.1, "n/f1": 0.6, "mean": 0.7}


GROUPS = [0] * 40 + [1] * 12 + [2] * 5
LENGTHS = [5 + i % 7 for i in range(len(GROUPS))]


@pytest.mark.parametrize("sampling", ["proportional", "temperature", "round-robin"])
def test_every_batch_is_one_heads_and_the_plan_is_the_seeds(sampling):
    plan = GroupedBatches(GROUPS, LENGTHS, 4, 42, sampling, 2.0)
    plan.set_epoch(1)
    batches = list(plan)
    assert len(batches) == len(plan) == 10 + 3 + 2
    assert all(len({GROUPS[i] for i in batch}) == 1 for batch in batches)
    assert batches == list(plan)  # rebuilt the same (a resumed run's plan)
    plan.set_epoch(2)
    assert list(plan) != batches


def test_proportional_sees_each_example_once_and_the_others_even_the_heads_out():
    proportional = GroupedBatches(GROUPS, LENGTHS, 4, 42, "proportional")
    assert sorted(i for batch in proportional for i in batch) == list(range(len(GROUPS)))
    heads = {}
    for sampling, t in (("temperature", 1000.0), ("round-robin", 1.0)):
        drawn = Counter(GROUPS[batch[0]] for batch in GroupedBatches(GROUPS, LENGTHS, 4, 42, sampling, t))
        heads[sampling] = drawn
    assert heads["round-robin"] == {0: 5, 1: 5, 2: 5}
    assert heads["temperature"][2] >= 3  # near-uniform at a high temperature: the small head drawn often


# --- the shared encoder -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def models(tiny_bert):
    """(a cls and a ner model sharing one encoder, and each one's independent single-task copy)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

    torch.manual_seed(0)
    cls_model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=3)
    ner_model = AutoModelForTokenClassification.from_pretrained(tiny_bert, num_labels=5)
    ner_model.bert.load_state_dict(
        cls_model.bert.state_dict(), strict=False
    )  # one encoder's weights (a tagger has no pooler)
    singles = {"c": copy.deepcopy(cls_model).eval(), "n": copy.deepcopy(ner_model).eval()}
    from bertkit.networks.multihead import MultiHeadModel, share_encoder

    encoder, heads = share_encoder({"c": cls_model, "n": ner_model})
    return MultiHeadModel(encoder, heads).eval(), singles


def batch(head: int):
    import torch

    ids = torch.tensor([[2, 7, 8, 9, 3, 0], [2, 10, 11, 3, 0, 0]])
    mask = (ids != 0).long()
    labels = (
        torch.tensor([1, 2])
        if head == 0
        else torch.tensor([[-100, 1, 2, 0, -100, -100], [-100, 4, 0, -100] + [-100] * 2])
    )
    return {"input_ids": ids, "attention_mask": mask, "labels": labels, "head": torch.tensor([head])}


def test_the_encoder_is_saved_once_and_each_head_holds_its_own_layers(models):
    model, _ = models
    keys = list(model.state_dict())
    assert sum(k.startswith("encoder.") for k in keys) == len(model.encoder.state_dict())
    assert {k.split(".")[1] for k in keys if k.startswith("heads.")} == {"c", "n"}
    assert not any(".bert." in k for k in keys if k.startswith("heads."))
    assert model.heads["c"].bert is model.heads["n"].bert is model.encoder
    assert model.encoder.pooler is not None  # the classifier's encoder, not the tagger's


def test_a_heads_loss_and_outputs_are_its_single_task_models(models):
    import torch

    from bertkit.networks.multihead import MultiHeadTrainer

    model, singles = models
    trainer = MultiHeadTrainer(model.encoder, dict(model.heads), [1.0, 2.5]).eval()
    with torch.no_grad():
        for index, name in enumerate(("c", "n")):
            given = batch(index)
            multi = trainer(**given)
            single = singles[name](**{k: v for k, v in given.items() if k != "head"})
            weight = (1.0, 2.5)[index]
            assert torch.allclose(multi.loss, single.loss * weight, atol=1e-6)
            assert torch.allclose(multi.logits, single.logits, atol=1e-6)
            view = model.view(name)(**{k: v for k, v in given.items() if k not in ("head", "labels")})
            assert torch.allclose(view.logits, single.logits, atol=1e-6)


def test_saved_and_loaded_every_head_answers_the_same(models, tmp_path):
    import torch

    from bertkit.networks.multihead import load_multihead, save_multihead

    model, _ = models
    save_multihead(tmp_path, model)
    heads = [(n, type(m).__name__, m.config.to_dict()) for n, m in model.heads.items()]
    loaded = load_multihead(str(tmp_path), heads)
    given = {k: v for k, v in batch(0).items() if k in ("input_ids", "attention_mask")}
    with torch.no_grad():
        for name in ("c", "n"):
            assert torch.equal(loaded.view(name)(**given).logits, model.view(name)(**given).logits)
    assert loaded.heads["c"].bert is loaded.encoder
