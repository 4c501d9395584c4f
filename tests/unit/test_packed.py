"""Packed towers (bertkit/networks/packed.py): the real tokens of a batch's rows run as one sequence,
attention row by row; the vectors and the gradients must be the padded batch's."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tiny_models import build_family  # noqa: E402

from bertkit.engine.cpu_kernels import CpuTrainingKernels  # noqa: E402
from bertkit.engine.varlen_attention import VarlenAttention  # noqa: E402
from bertkit.networks.bi_encoder import BiEncoderTrainer  # noqa: E402
from bertkit.networks.contrastive import CosineSimilarityTrainer  # noqa: E402
from bertkit.networks.packed import PACKED_TYPES, can_pack, packed_mean  # noqa: E402
from bertkit.networks.pooling import masked_mean  # noqa: E402
from bertkit.networks.sorted_chunks import mean_pooled  # noqa: E402
from bertkit.tasks.training_spec import EmbeddingLoss  # noqa: E402

ATTENTIONS = {"cpu": CpuTrainingKernels, "varlen": VarlenAttention}  # CUDA's, run here on the CPU
TEXTS = ["a", "the film was good and the plot was fine", "ok", "john lives in paris with mary", "it was bad", "no"]


def _encoder_and_inputs(family: str, tmp_path, pairs: bool = False):
    from transformers import AutoModel, AutoTokenizer

    directory = build_family(family, tmp_path / family)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    encoder = AutoModel.from_pretrained(directory, attn_implementation="sdpa")
    encoded = (
        tokenizer(TEXTS, TEXTS[::-1], padding=True, return_tensors="pt")
        if pairs
        else tokenizer(TEXTS, padding=True, return_tensors="pt")
    )
    return encoder, dict(encoded)


def _padded_reference(encoder, inputs):
    return masked_mean(encoder(**inputs).last_hidden_state, inputs["attention_mask"])


def _vectors_and_grads(encoder, inputs, pooled):
    encoder.zero_grad(set_to_none=True)
    vectors = pooled(encoder, inputs)
    (vectors * torch.arange(1.0, vectors.shape[1] + 1)).sum().backward()  # weighs each row's order
    return vectors.detach(), {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("family", PACKED_TYPES)
@pytest.mark.parametrize("pairs", [False, True])
@pytest.mark.parametrize("attention", sorted(ATTENTIONS))
def test_packed_rows_give_the_padded_batchs_vectors_and_gradients(family, pairs, attention, tmp_path):
    encoder, inputs = _encoder_and_inputs(family, tmp_path, pairs)
    encoder.eval()  # no dropout: both runs see one network
    padded, padded_grads = _vectors_and_grads(encoder, inputs, _padded_reference)
    ATTENTIONS[attention](encoder).apply()
    assert can_pack(encoder)
    lengths = inputs["attention_mask"].sum(1)
    assert lengths.min() < lengths.max()  # rows of different lengths: padding to take out
    if pairs and "token_type_ids" in inputs:  # RoBERTa's tokenizer gives none
        assert inputs["token_type_ids"].max() == 1  # segment ids travel with their tokens
    packed, packed_grads = _vectors_and_grads(encoder, inputs, packed_mean)
    assert torch.allclose(packed, padded, atol=1e-5)
    assert not torch.allclose(padded[0], padded[1], atol=1e-3)  # distinct rows: a mix-up would show
    assert padded_grads.keys() == packed_grads.keys() and padded_grads
    for name in padded_grads:
        assert torch.allclose(packed_grads[name], padded_grads[name], atol=1e-5, rtol=1e-4), name


def test_a_packed_row_does_not_see_the_other_rows(tmp_path):
    encoder, inputs = _encoder_and_inputs("bert", tmp_path)
    encoder.eval()
    CpuTrainingKernels(encoder).apply()
    before = packed_mean(encoder, inputs)
    changed = {k: v.clone() for k, v in inputs.items()}
    changed["input_ids"][1, 1:5] = changed["input_ids"][1, 1:5].flip(0)  # another row's words reordered
    after = packed_mean(encoder, changed)
    assert not torch.allclose(after[1], before[1], atol=1e-4)
    others = [0, 2, 3, 4, 5]
    assert torch.allclose(after[others], before[others], atol=1e-6)


@pytest.mark.parametrize("family", ["bert", "roberta", "distilbert"])
@pytest.mark.parametrize("attention", sorted(ATTENTIONS))
def test_no_mask_of_the_packed_row_is_built(family, attention, tmp_path, monkeypatch):
    """Each layer's attention gets no total x total mask: without a mask of its own, transformers reads
    the restarting positions as packed sequences and builds one (8,896 tokens: 79M entries a step)."""
    from bertkit.engine import cpu_kernels, varlen_attention

    module, name = {
        "cpu": (cpu_kernels, "attention_for_training"),
        "varlen": (varlen_attention, "varlen_attention"),
    }[attention]
    encoder, inputs = _encoder_and_inputs(family, tmp_path)
    ATTENTIONS[attention](encoder).apply()
    masks, real = [], getattr(module, name)

    def seen(module, query, key, value, attention_mask, **kwargs):
        masks.append(attention_mask)
        return real(module, query, key, value, attention_mask, **kwargs)

    monkeypatch.setattr(module, name, seen)
    module.register_attention()
    try:
        packed_mean(encoder, inputs)
        packed = list(masks)
        masks.clear()
        encoder(**inputs)  # padded: the rows' own mask, as before
    finally:
        monkeypatch.undo()
        module.register_attention()  # the registry holds the function itself: the real one again
    assert packed and all(mask is None for mask in packed)
    assert masks and all(mask is not None and mask.shape[0] == len(TEXTS) for mask in masks)


def test_packing_needs_the_training_attention_and_a_type_whose_positions_it_knows(tmp_path):
    encoder, inputs = _encoder_and_inputs("bert", tmp_path)
    assert not can_pack(encoder)  # SDPA: it would ignore the rows; mean_pooled runs padded
    kernels = CpuTrainingKernels(encoder)
    kernels.apply()
    assert can_pack(encoder)
    kernels.undo()
    assert not can_pack(encoder)
    roberta, _ = _encoder_and_inputs("roberta", tmp_path)
    CpuTrainingKernels(roberta).apply()
    assert can_pack(roberta)  # its positions start after the padding id: packed.POSITIONS gives them so
    modernbert, _ = _encoder_and_inputs("modernbert", tmp_path)
    CpuTrainingKernels(modernbert).apply()
    assert not can_pack(modernbert)  # no training attention, its own local attention: padded


@pytest.mark.parametrize("wrapper", ["bi-encoder", "setfit"])
def test_the_training_wrappers_take_the_cpu_attention_and_run_their_towers_packed(wrapper, tmp_path, monkeypatch):
    encoder, inputs = _encoder_and_inputs("bert", tmp_path)
    model = (
        BiEncoderTrainer(encoder, EmbeddingLoss(objective="mnrl"))
        if wrapper == "bi-encoder"
        else CosineSimilarityTrainer(encoder)
    )
    kernels = CpuTrainingKernels(model)
    kernels.apply()
    assert can_pack(encoder)
    calls = []
    import bertkit.networks.sorted_chunks as sorted_chunks

    monkeypatch.setattr(
        sorted_chunks, "packed_mean", lambda enc, part: calls.append(len(part["input_ids"])) or packed_mean(enc, part)
    )
    model.eval()
    with torch.no_grad():
        vectors = model.embed(**inputs) if wrapper == "setfit" else model.embed(inputs)
    assert sum(calls) == len(TEXTS)
    assert torch.allclose(vectors, _padded_reference(encoder, inputs), atol=1e-5)
    kernels.undo()
    assert encoder.config._attn_implementation == "sdpa"


def test_mean_pooled_packs_each_sorted_chunk(tmp_path):
    encoder, inputs = _encoder_and_inputs("bert", tmp_path)
    encoder.eval()
    reference = _padded_reference(encoder, inputs).detach()
    CpuTrainingKernels(encoder).apply()
    assert torch.allclose(mean_pooled(encoder, inputs, 16).detach(), reference, atol=1e-5)  # several chunks
    assert torch.allclose(mean_pooled(encoder, inputs).detach(), reference, atol=1e-5)  # one chunk


def test_a_gpus_tower_runs_whole_and_packs_under_the_variable_length_attention(tmp_path, monkeypatch):
    """On CUDA a tower's batch is one piece (sorted_chunks.whole_batch): packed while the variable-length
    attention is on (--packing on), padded otherwise, the padded batch's vectors either way."""
    from bertkit.networks import packed as packed_module
    from bertkit.networks.sorted_chunks import whole_batch

    encoder, inputs = _encoder_and_inputs("bert", tmp_path, pairs=True)
    encoder.eval()
    reference = _padded_reference(encoder, inputs).detach()
    calls = []
    real = packed_module.Packing.of
    monkeypatch.setattr(packed_module.Packing, "of", staticmethod(lambda mask: calls.append(1) or real(mask)))
    assert torch.allclose(whole_batch(encoder, inputs).detach(), reference, atol=1e-5) and not calls
    attention = VarlenAttention(encoder)
    attention.apply()
    assert torch.allclose(whole_batch(encoder, inputs).detach(), reference, atol=1e-5) and calls == [1]
    attention.undo()
