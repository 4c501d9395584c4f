"""Length-sorted chunks (bertkit/networks/sorted_chunks.py): the vectors and gradients of the whole
padded batch, in the batch's row order, with each chunk within its token budget."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from bertkit.networks.sorted_chunks import chunks, mean_pooled  # noqa: E402

TEXTS = ["a", "the film was good and the plot was fine", "ok", "john lives in paris with mary", "it was bad", "no"]


def test_chunks_keep_rows_times_longest_within_the_budget_and_a_long_row_alone():
    lengths = [9, 7, 5, 5, 3, 2, 2]
    groups = chunks(lengths, 12)
    assert [i for group in groups for i in group] == list(range(len(lengths)))  # every row once, in order
    assert groups == [[0], [1], [2, 3], [4, 5, 6]]
    assert all(len(g) * lengths[g[0]] <= 12 or len(g) == 1 for g in groups)
    assert chunks([40, 3], 12) == [[0], [1]]  # a row over the budget is not cut, it runs alone


def _inputs(tiny_bert):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    return dict(tokenizer(TEXTS, padding=True, return_tensors="pt"))


def _vectors_and_grads(tiny_bert, chunk_tokens):
    from transformers import AutoModel

    encoder = AutoModel.from_pretrained(tiny_bert).eval()  # no dropout: both runs see one network
    vectors = mean_pooled(encoder, _inputs(tiny_bert), chunk_tokens)
    (vectors * torch.arange(1.0, vectors.shape[1] + 1)).sum().backward()  # a loss that weighs each row's order
    return vectors.detach(), {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}


def test_sorted_chunks_give_the_whole_batchs_vectors_and_gradients_in_row_order(tiny_bert):
    lengths = _inputs(tiny_bert)["attention_mask"].sum(1).tolist()
    assert len(chunks(sorted(lengths, reverse=True), 16)) >= 3  # the budget below really splits the batch
    whole, whole_grads = _vectors_and_grads(tiny_bert, None)
    split, split_grads = _vectors_and_grads(tiny_bert, 16)
    assert torch.allclose(split, whole, atol=1e-5)
    assert not torch.allclose(whole[0], whole[1], atol=1e-3)  # distinct rows: a row-order mix-up would show
    assert whole_grads.keys() == split_grads.keys() and whole_grads
    for name in whole_grads:
        assert torch.allclose(split_grads[name], whole_grads[name], atol=1e-5, rtol=1e-4), name
