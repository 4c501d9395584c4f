"""Packed prediction on the CPU (bertkit/engine/packed_inference.py): a mostly padded batch runs on
its real tokens only, with the padded batch's outputs (fp32, 1e-5) for every head and packable
family; a batch with little padding, an evaluation with targets and an unpackable model run padded,
and the model's own attention is back after every batch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tiny_models import build_family  # noqa: E402

from bertkit.engine import packed_inference  # noqa: E402
from bertkit.engine.packed_inference import PackedInference, padding_share  # noqa: E402
from bertkit.networks.packed import PACKED_TYPES  # noqa: E402

# one short row beside long ones: most of the batch is padding, as in a served batch
TEXTS = ["a", "the film was good and the plot was fine and the acting was great", "ok", "no", "it was", "yes"]
HEADS = {  # head -> (transformers class, config overrides, the per-token outputs compared)
    "cls": ("AutoModelForSequenceClassification", {"num_labels": 3}, ("logits",)),
    "regression": ("AutoModelForSequenceClassification", {"num_labels": 1, "problem_type": "regression"}, ("logits",)),
    "ner": ("AutoModelForTokenClassification", {"num_labels": 5}, ("logits",)),
    "qa": ("AutoModelForQuestionAnswering", {}, ("start_logits", "end_logits")),
}


def _model_and_batch(family: str, head: str, tmp_path):
    import transformers

    directory = build_family(family, tmp_path / family)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    class_name, overrides, outputs = HEADS[head]
    torch.manual_seed(0)
    model = getattr(transformers, class_name).from_pretrained(directory, attn_implementation="sdpa", **overrides)
    batch = dict(tokenizer(TEXTS, TEXTS[::-1], padding=True, return_tensors="pt"))
    return model.eval(), batch, outputs


def _real(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-token outputs at the real tokens (padding differs: zeros packed, a [PAD] vector padded)."""
    return values[mask.bool()] if values.shape[:2] == mask.shape else values


@pytest.fixture(params=["short rows share grid rows", "whole grid"])
def grids(request, monkeypatch) -> tuple[str, list]:
    """How the packed attention lays its rows out (networks/attention_groups.layout): as it chooses
    (these batches' short rows share grid rows), or every row on the whole padded grid. Returns the
    layout's name and the groups each batch ran in."""
    from bertkit.networks import attention_groups

    ran, row_groups = [], attention_groups._row_groups
    if request.param == "whole grid":
        monkeypatch.setattr(attention_groups, "layout", lambda lengths, *a: [[[row] for row in range(len(lengths))]])
    monkeypatch.setattr(attention_groups, "_row_groups", lambda *a: ran.append(row_groups(*a)) or ran[-1])
    return request.param, ran


@pytest.mark.parametrize("family", PACKED_TYPES)
@pytest.mark.parametrize("head", sorted(HEADS))
def test_a_mostly_padded_batch_runs_packed_with_the_padded_outputs(family, head, tmp_path, grids):
    model, batch, names = _model_and_batch(family, head, tmp_path)
    assert padding_share(batch["attention_mask"]) >= packed_inference.PADDING_SHARE
    packing = PackedInference(model, torch.device("cpu"))
    with torch.inference_mode():
        padded = model(**batch)
        packed = packing.run(model, batch)
    assert packing.packed_batches == 1
    layout, ran = grids
    if layout == "whole grid":
        assert ran == [None]
    else:  # one group, 6 rows in fewer grid rows
        assert len(ran) == 1 and len(ran[0]) == 1 and ran[0][0].segments is not None and ran[0][0].grid_rows < 6
    for name in names:
        a, b = _real(padded[name], batch["attention_mask"]), _real(packed[name], batch["attention_mask"])
        assert torch.allclose(a, b, atol=1e-5), (name, (a - b).abs().max())
    assert model.config._attn_implementation == "sdpa"  # the model's own attention again


def test_a_row_in_a_packed_batch_never_sees_another_row(tmp_path):
    model, batch, _ = _model_and_batch("bert", "ner", tmp_path)
    packing = PackedInference(model, torch.device("cpu"))
    changed = {k: v.clone() for k, v in batch.items()}
    changed["input_ids"][1, 2:6] = changed["input_ids"][1, 2:6].flip(0)  # one row's words reordered
    with torch.inference_mode():
        before, after = packing.run(model, batch).logits, packing.run(model, changed).logits
    real = batch["attention_mask"].bool()
    assert packing.packed_batches == 2
    assert not torch.allclose(after[1][real[1]], before[1][real[1]], atol=1e-4)
    for row in (0, 2, 3, 4, 5):
        assert torch.allclose(after[row][real[row]], before[row][real[row]], atol=1e-6), row


def test_little_padding_targets_and_other_devices_run_padded(tmp_path, monkeypatch):
    model, batch, _ = _model_and_batch("bert", "cls", tmp_path)
    with torch.inference_mode():
        monkeypatch.setattr(packed_inference, "PADDING_SHARE", 0.99)
        packing = PackedInference(model, torch.device("cpu"))
        packing.run(model, batch)
        assert packing.packed_batches == 0  # under the share: SDPA on the padded batch
        monkeypatch.setattr(packed_inference, "PADDING_SHARE", 0.0)
        for unused in (
            PackedInference(model, torch.device("cpu"), enabled=False),
            PackedInference(model, torch.device("meta")),
        ):
            assert not unused.usable and not unused.wants(batch)  # an evaluation with targets; not a CPU
        unused.run(model, batch)
        assert unused.packed_batches == 0


def test_only_a_serving_engine_packs_and_it_answers_as_padded(tmp_path, monkeypatch):
    """Engine.infer packs only with ``pack_padded`` (serve sets it): predict, eval and select keep
    the padded numbers they share; packed, every row's outputs are the padded ones."""
    from bertkit.engine import Engine

    model, batch, _ = _model_and_batch("bert", "ner", tmp_path)
    features = [
        {"input_ids": ids[mask.bool()].tolist(), "attention_mask": [1] * int(mask.sum())}
        for ids, mask in zip(batch["input_ids"], batch["attention_mask"])
    ]
    packed_calls = []
    real = packed_inference.pack_this_encoder
    monkeypatch.setattr(packed_inference, "pack_this_encoder", lambda encoder: packed_calls.append(1) or real(encoder))
    monkeypatch.setattr(packed_inference, "PADDING_SHARE", 0.0)
    engine = Engine("no")
    padded = engine.infer(model, features, 6, ("logits",), True, 0)["logits"]
    assert packed_calls == []  # not serving: padded
    engine.pack_padded = True
    packed = engine.infer(model, features, 6, ("logits",), True, 0)["logits"]
    assert packed_calls == [1] and len(packed) == len(TEXTS)
    for a, b in zip(padded, packed):
        assert a.shape == b.shape and abs(a - b).max() < 1e-5


@pytest.mark.parametrize("family", PACKED_TYPES)
def test_the_first_token_shortcut_packs_with_the_padded_logits(family, tmp_path):
    """Prediction runs a sequence classifier's last layer for [CLS] alone (inference.speed_up);
    packed, each row's first token still attends to its own row only."""
    from bertkit.networks.first_token_head import first_token_only_last_layer

    model, batch, _ = _model_and_batch(family, "cls", tmp_path)
    with torch.inference_mode():
        full = model(**batch).logits
        first_token_only_last_layer(model)
        padded = model(**batch).logits
        packing = PackedInference(model, torch.device("cpu"))
        packed = packing.run(model, batch).logits
    assert packing.packed_batches == 1
    assert torch.allclose(padded, full, atol=1e-5) and torch.allclose(packed, padded, atol=1e-5)
