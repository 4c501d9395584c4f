"""Distillation's parts on hand-made numbers and tiny models: the loss against a computation by hand,
the student made of the teacher's chosen layers, and the cached teacher logits against fresh ones."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bertkit.networks.distillation import (
    DistillCollator,
    chosen_layers,
    distillation_loss,
    drop_layers,
    hidden_state_loss,
    mapped_layers,
)


def _softmax(row, t):
    e = [math.exp(x / t) for x in row]
    return [x / sum(e) for x in e]


def _by_hand(student, teacher, labels, t, alpha, soft_only):
    """alpha * T^2 * KL(p_teacher || p_student) + (1 - alpha) * CE per row (KL only where soft_only), mean."""
    total, rows = 0.0, 0
    for s, te, y, soft in zip(student, teacher, labels, soft_only):
        if y == -100 and not soft:
            continue
        p_s, p_t = _softmax(s, t), _softmax(te, t)
        kl = sum(pt * (math.log(pt) - math.log(ps)) for pt, ps in zip(p_t, p_s)) * t * t
        ce = -math.log(_softmax(s, 1.0)[y]) if not soft else 0.0
        total += kl if soft else alpha * kl + (1 - alpha) * ce
        rows += 1
    return total / rows


def test_loss_is_temperature_scaled_kl_times_t_squared_plus_cross_entropy():
    student = [[1.0, -0.5, 0.2], [0.3, 0.1, 2.0], [-1.0, 0.5, 0.0], [0.7, 0.7, -0.2]]
    teacher = [[2.0, -1.0, 0.0], [0.0, 0.0, 3.0], [0.5, 1.5, -0.5], [1.0, 0.0, 0.0]]
    labels, soft_only = [0, 2, -100, 1], [False, False, True, False]
    for t, alpha in ((2.0, 0.5), (1.0, 0.0), (4.0, 1.0), (3.0, 0.3)):
        got = distillation_loss(
            torch.tensor(student), torch.tensor(teacher), torch.tensor(labels), t, alpha, torch.tensor(soft_only)
        )
        assert got.item() == pytest.approx(_by_hand(student, teacher, labels, t, alpha, soft_only), rel=1e-5)


def test_token_loss_scores_only_labelled_tokens():
    """ner: [rows, tokens, classes]; a token whose label is -100 (sub-word, special, padding) is not scored."""
    g = torch.Generator().manual_seed(0)
    student, teacher = torch.randn(2, 4, 3, generator=g), torch.randn(2, 4, 3, generator=g)
    labels = torch.tensor([[-100, 1, 2, -100], [-100, 0, -100, -100]])
    got = distillation_loss(student, teacher, labels, 2.0, 0.5)
    flat = labels.reshape(-1)
    kept = [i for i in range(len(flat)) if flat[i] != -100]
    want = _by_hand(
        student.reshape(-1, 3)[kept].tolist(), teacher.reshape(-1, 3)[kept].tolist(), flat[kept].tolist(), 2.0, 0.5,
        [False] * len(kept),
    )  # fmt: skip
    assert got.item() == pytest.approx(want, rel=1e-5)


def test_gradient_of_the_soft_term_keeps_its_scale_across_temperatures():
    """T^2: the soft term's gradient is of the same order at T=1 and T=8 (Hinton et al. 2015)."""
    teacher = torch.tensor([[3.0, -1.0, 0.5]])
    norms = []
    for t in (1.0, 8.0):
        student = torch.tensor([[0.0, 1.0, -1.0]], requires_grad=True)
        distillation_loss(student, teacher, torch.tensor([0]), t, 1.0).backward()
        norms.append(student.grad.norm().item())
    assert 0.2 < norms[1] / norms[0] < 5


def test_hidden_loss_compares_mapped_layers_on_real_tokens_only():
    g = torch.Generator().manual_seed(1)
    student = [torch.randn(2, 3, 4, generator=g) for _ in range(3)]  # embeddings + 2 layers
    teacher = [torch.randn(2, 3, 4, generator=g) for _ in range(5)]  # embeddings + 4 layers
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    teacher[2][0, 2] = teacher[4][1, 1:] = 1e6  # at padding: must not count
    real = [(0, 0), (0, 1), (1, 0)]

    def mse(s, t):
        return sum(((s[b, i] - t[b, i]) ** 2).mean().item() for b, i in real) / len(real)

    want = (mse(student[1], teacher[2]) + mse(student[2], teacher[4])) / 2
    got = hidden_state_loss(student, teacher, mapped_layers(4, 2), mask, "mse")
    assert got.item() == pytest.approx(want, rel=1e-5)
    same = hidden_state_loss(
        student, [student[0], student[1], student[1], student[2], student[2]], [2, 4], mask, "cosine"
    )
    assert same.item() == pytest.approx(0.0, abs=1e-6)


def test_chosen_layers_are_every_other_one_evenly_spaced():
    assert chosen_layers(12, 6) == [0, 2, 4, 6, 8, 10]  # DistilBERT's
    assert chosen_layers(6, 3) == [0, 2, 4]
    assert chosen_layers(6, 2) == [0, 3]
    assert mapped_layers(6, 3) == [2, 4, 6]  # the hidden-state loss: the end of each replaced block


def _tiny_classifier(layers: int = 4):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=layers, num_attention_heads=2, intermediate_size=32
    )
    return BertForSequenceClassification(config)


def test_layer_dropped_student_has_the_teachers_chosen_layers(tmp_path):
    from transformers import BertForSequenceClassification

    teacher = _tiny_classifier(4)
    reference = {k: v.clone() for k, v in teacher.state_dict().items()}
    student = drop_layers(_tiny_classifier(4), chosen_layers(4, 2))  # layers 0 and 2
    assert student.config.num_hidden_layers == 2
    state = student.state_dict()
    for key, value in state.items():
        if ".encoder.layer." in key:
            index = int(key.split(".encoder.layer.")[1].split(".")[0])
            source = key.replace(f".encoder.layer.{index}.", f".encoder.layer.{[0, 2][index]}.")
            assert torch.equal(value, reference[source]), key
        else:  # embeddings, pooler, head: the teacher's
            assert torch.equal(value, reference[key]), key
    assert not any(".encoder.layer.2." in key for key in state)
    student.save_pretrained(tmp_path)  # an ordinary 2-layer model directory
    again = BertForSequenceClassification.from_pretrained(tmp_path)
    assert again.config.num_hidden_layers == 2
    assert all(torch.equal(v, state[k]) for k, v in again.state_dict().items())


def test_collator_pads_token_logits_and_marks_unlabelled_rows():
    features = [
        {"input_ids": [2, 5, 3], "labels": [-100, 1, -100], "teacher_logits": np.ones((3, 2), np.float32)},
        {"input_ids": [2, 3], "labels": [-100, -100], "teacher_logits": np.ones((2, 2), np.float32), "soft_only": True},
    ]
    batch = DistillCollator(0, {"labels": "token_class"})(features)
    assert batch["teacher_logits"].shape == (2, 3, 2)
    assert batch["teacher_logits"][1, 2].abs().sum() == 0
    assert batch["soft_only"].tolist() == [False, True]


def test_cached_teacher_logits_equal_fresh_ones_and_a_changed_fingerprint_recomputes(tmp_path):
    from bertkit.engine import Engine
    from bertkit.methods.teacher_cache import teacher_logits

    engine = Engine("no")
    device = engine.accelerator.device  # the teacher is placed where the engine runs, as api/distillation.py does
    model = _tiny_classifier(2).eval().to(device)
    rng = np.random.default_rng(0)
    features = [{"input_ids": [2, *rng.integers(5, 40, n).tolist(), 3]} for n in rng.integers(1, 12, 37)]
    with torch.inference_mode():  # fresh: one feature at a time, no padding
        fresh = [
            model(input_ids=torch.tensor([f["input_ids"]], device=device)).logits[0].cpu().numpy() for f in features
        ]
    first = teacher_logits(engine, model, features, False, 0, 8, tmp_path, {"teacher": "a"})
    again = teacher_logits(engine, model, features, False, 0, 8, tmp_path, {"teacher": "a"})
    assert (first.computed, first.reused) == (37, 0) and (again.computed, again.reused) == (0, 37)
    for a, b, c in zip(first.logits, again.logits, fresh):
        np.testing.assert_allclose(a, c, atol=1e-5)
        np.testing.assert_array_equal(a, b)
    other = teacher_logits(engine, model, features, False, 0, 8, tmp_path, {"teacher": "b"})
    assert other.computed == 37 and other.folder != first.folder


def test_cached_token_logits_round_trip(tmp_path):
    from transformers import BertConfig, BertForTokenClassification

    from bertkit.engine import Engine
    from bertkit.methods.teacher_cache import teacher_logits

    torch.manual_seed(0)
    model = BertForTokenClassification(
        BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    ).eval()
    features = [{"input_ids": [2, *range(5, 5 + n), 3]} for n in (3, 1, 7, 2)]
    engine = Engine("no")
    model.to(engine.accelerator.device)
    first = teacher_logits(engine, model, features, True, 0, 2, tmp_path, {})
    again = teacher_logits(engine, model, features, True, 0, 2, tmp_path, {})
    assert again.reused == 4
    assert [a.shape for a in again.logits] == [(len(f["input_ids"]), 2) for f in features]
    for a, b in zip(first.logits, again.logits):
        np.testing.assert_array_equal(a, b)


def test_a_truncated_cache_part_is_computed_again(tmp_path):
    from bertkit.engine import Engine
    from bertkit.methods.teacher_cache import teacher_logits

    engine = Engine("no")
    model = _tiny_classifier(1).eval().to(engine.accelerator.device)
    features = [{"input_ids": [2, 7, 3]}] * 5
    first = teacher_logits(engine, model, features, False, 0, 8, tmp_path, {})
    part = next(first.folder.glob("part-*.npz"))
    part.write_bytes(part.read_bytes()[:20])  # a part cut short (a full disk, a copy interrupted)
    again = teacher_logits(engine, model, features, False, 0, 8, tmp_path, {})
    assert again.computed == 5
    np.testing.assert_array_equal(np.stack(first.logits), np.stack(again.logits))
