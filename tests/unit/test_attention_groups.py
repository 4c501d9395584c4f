"""The CPU training attention in groups of rows (bertkit/networks/attention_groups.py): the plan's
groups and the padded batch's chunks. Packed groups against the padded batch: test_packed_heads.py."""

from __future__ import annotations

import itertools
import random

import pytest

torch = pytest.importorskip("torch")

from bertkit.networks import attention_groups  # noqa: E402
from bertkit.networks.attention_groups import GROUP_COST, SCORE_BYTES, padded_chunks, plan  # noqa: E402


def _cost(lengths, groups, heads):
    return sum(GROUP_COST + len(g) * heads * max(lengths[r] for r in g) ** 2 for g in groups)


def _fits(lengths, group, heads, itemsize):
    return len(group) == 1 or len(group) * heads * max(lengths[r] for r in group) ** 2 * itemsize <= SCORE_BYTES


def _best_by_brute_force(lengths, heads, itemsize):
    """Every way to cut the length-sorted rows into consecutive groups."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    best = None
    for cuts in itertools.product((False, True), repeat=len(order) - 1):
        groups, start = [], 0
        for i, cut in enumerate(cuts, 1):
            if cut:
                groups.append(order[start:i])
                start = i
        groups.append(order[start:])
        if all(_fits(lengths, g, heads, itemsize) for g in groups):
            cost = _cost(lengths, groups, heads)
            best = cost if best is None else min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_the_plan_covers_every_row_once_and_costs_the_least(seed):
    rng = random.Random(seed)
    lengths = [rng.choice([rng.randint(2, 40), rng.randint(100, 512)]) for _ in range(rng.randint(1, 11))]
    heads, itemsize = rng.choice([(12, 2), (12, 4), (16, 2)])
    groups = plan(lengths, heads, itemsize)
    assert sorted(r for g in groups for r in g) == list(range(len(lengths)))
    assert all(_fits(lengths, g, heads, itemsize) for g in groups)
    assert _cost(lengths, groups, heads) == _best_by_brute_force(lengths, heads, itemsize)


def test_short_and_long_rows_go_apart_and_long_ones_fit_the_caches():
    lengths = [12, 380, 9, 375, 14, 384] * 6  # 18 short, 18 long: a random batch of QA windows
    groups = plan(lengths, heads=12, itemsize=2)
    long_rows = [g for g in groups if any(lengths[r] > 100 for r in g)]
    assert all(lengths[r] > 100 for g in long_rows for r in g)  # no short row pays a long row's square
    assert len(long_rows) >= 2  # 18 x 12 x 384^2 x 2 bytes is 64 MB: SCORE_BYTES twice
    assert all(_fits(lengths, g, 12, 2) for g in long_rows)
    assert sum(1 for g in groups if g not in long_rows) == 1  # the short ones together: a group costs more


def test_rows_of_one_length_stay_one_group_while_they_fit():
    assert plan([20] * 32, heads=12, itemsize=2) == [list(range(32))]
    assert plan([20] * 640, heads=12, itemsize=2) == [list(range(640))]
    assert len(plan([384] * 32, heads=12, itemsize=2)) == 4  # 113 MB of scores in 28 MB groups


def test_a_large_batch_is_cut_between_runs_of_rows():
    """Above UNITS rows the plan cuts between runs of neighbours in length order (5 rows a run here)."""
    rng = random.Random(0)
    lengths = [rng.choice([rng.randint(2, 30), rng.randint(200, 384)]) for _ in range(300)]
    groups = plan(lengths, heads=12, itemsize=2)
    assert sorted(r for g in groups for r in g) == list(range(300))
    assert len(groups) <= attention_groups.UNITS
    order = sorted(range(300), key=lengths.__getitem__)
    assert [r for g in groups for r in g] == order  # groups follow the length order
    assert all(len(g) % 5 == 0 for g in groups[:-1])  # whole runs of 5 (the last run holds the rest)
    assert all(_fits(lengths, g, 12, 2) or len(g) == 5 for g in groups)  # only a single run may overflow
    assert any(max(lengths[r] for r in g) < 100 for g in groups)  # short rows still go apart


def test_padded_chunks():
    assert padded_chunks(32, 12, 48, 48, 2) == 1
    assert padded_chunks(32, 12, 384, 384, 2) == 4
    assert padded_chunks(32, 12, 384, 384, 4) == 7
    assert padded_chunks(2, 12, 4096, 4096, 4) == 2  # never more chunks than rows


def test_a_padded_batch_in_chunks_trains_as_one(tiny_bert, monkeypatch):
    """Attention chunked row by row (a tiny SCORE_BYTES) gives the unchunked logits and gradients."""
    from transformers import AutoModelForTokenClassification

    from bertkit.engine.cpu_kernels import CpuTrainingKernels

    torch.manual_seed(0)
    model = AutoModelForTokenClassification.from_pretrained(
        str(tiny_bert), num_labels=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    ).train()
    CpuTrainingKernels(model).apply()
    ids = torch.randint(5, 30, (5, 9))
    mask = (torch.arange(9)[None, :] < torch.tensor([9, 4, 7, 2, 9])[:, None]).long()
    labels = torch.randint(0, 3, (5, 9)).masked_fill(mask == 0, -100)
    chunks = []

    def run():
        model.zero_grad(set_to_none=True)
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        return out.logits[mask.bool()].detach(), [p.grad.clone() for p in model.parameters()]

    whole = run()
    counted = attention_groups.padded_chunks
    monkeypatch.setattr(attention_groups, "SCORE_BYTES", 1)
    monkeypatch.setattr(attention_groups, "padded_chunks", lambda *a: chunks.append(counted(*a)) or chunks[-1])
    chunked = run()
    assert chunks and set(chunks) == {5}
    assert torch.allclose(chunked[0], whole[0], atol=1e-5)
    for a, b in zip(chunked[1], whole[1]):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


def test_bins_fill_longest_first_and_never_overflow():
    lengths = [4, 10, 2, 6, 5, 3]
    held = attention_groups.bins(lengths, list(range(6)), capacity=10)
    assert held == [[1], [3, 0], [4, 5, 2]]  # 10 | 6 + 4 | 5 + 3 + 2
    assert attention_groups.bins(lengths, [0, 2, 5], capacity=4) == [[0], [5], [2]]


def _grid_scores(lengths, groups, heads=12):
    return sum(len(g) * heads * max(lengths[r] for b in g for r in b) ** 2 for g in groups)


@pytest.mark.parametrize("seed", range(8))
def test_the_layout_holds_every_row_once_in_bins_of_its_groups_longest_row(seed):
    rng = random.Random(seed)
    lengths = [rng.choice([rng.randint(2, 40), rng.randint(100, 512)]) for _ in range(rng.randint(1, 40))]
    groups = attention_groups.layout(lengths, heads=12, itemsize=2)
    assert sorted(r for g in groups for b in g for r in b) == list(range(len(lengths)))
    for group in groups:
        longest = max(lengths[r] for b in group for r in b)
        assert all(sum(lengths[r] for r in b) <= longest for b in group)
    rows_apart = [[[r] for r in g] for g in plan(lengths, 12, 2)]
    assert len(groups) * GROUP_COST + _grid_scores(lengths, groups) <= (
        len(rows_apart) * GROUP_COST + _grid_scores(lengths, rows_apart)
    )


def test_a_random_sentence_batch_shares_grid_rows_and_long_windows_do_not():
    rng = random.Random(0)
    sentences = [rng.randint(3, 20) for _ in range(30)] + [60, 55]  # a random batch: a few long rows
    groups = attention_groups.layout(sentences, heads=12, itemsize=2)
    assert len(groups) == 1 and len(groups[0]) <= 12  # 32 rows in at most 12 grid rows
    assert _grid_scores(sentences, groups) * 2.5 < 12 * 32 * 60**2  # under 40 % of the whole grid's scores
    windows = [384, 380, 377, 384, 300, 384]
    assert all(len(b) == 1 for g in attention_groups.layout(windows, 12, 2) for b in g)


def test_the_whole_batch_in_bins_wins_when_short_rows_fill_the_long_rows_grid_rows():
    """Two long rows with room beside them: plan() puts the three short rows in a group of their own;
    in bins of the longest row they fill that room instead, and one group costs less."""
    lengths = [46, 156, 196, 27, 37]
    assert len(plan(lengths, 12, 2)) == 2
    assert attention_groups.layout(lengths, 12, 2) == [[[2], [1, 4], [0, 3]]]


def test_plans_groups_win_when_the_long_rows_leave_no_room():
    lengths = [512, 400, 100, 90, 20]
    groups = attention_groups.layout(lengths, 12, 2)
    assert groups == [[[2], [3], [4]], [[1]], [[0]]]  # plan's groups, as they were
    whole = [attention_groups.bins(lengths, list(range(5)), 512)]  # [512], [400, 100], [90, 20]
    assert attention_groups._score_cost(lengths, groups, 12) < attention_groups._score_cost(lengths, whole, 12)


def test_the_whole_batch_in_bins_must_fit_the_score_budget(monkeypatch):
    """Over SCORE_BYTES the whole batch in bins is no candidate, however cheap."""
    lengths = [46, 156, 196, 27, 37]
    monkeypatch.setattr(attention_groups, "SCORE_BYTES", 12 * 196**2 * 2 * 2)  # two grid rows of 196
    groups = attention_groups.layout(lengths, 12, 2)
    assert len(groups) > 1
    assert all(
        len(g) * 12 * max(lengths[r] for b in g for r in b) ** 2 * 2 <= attention_groups.SCORE_BYTES for g in groups
    )


def test_no_query_of_a_binned_grid_sees_no_key_so_fp16_stays_finite():
    """Binned, a padding cell's query sees its grid row's padding cells (never read, gradient 0): were it
    to see no key, its scores would be the dtype's lowest value, -inf in fp16 once a score is negative,
    and its softmax NaN, which the backward pass spreads to every key of the grid row."""
    from bertkit.engine import cpu_kernels
    from bertkit.networks.packed import Packing

    lengths, heads, d = [40, 5, 5, 6, 7, 3, 8, 9, 10, 4, 12, 6, 3, 2, 11], 4, 8
    mask = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    packing = Packing.of(mask)
    groups = attention_groups.row_groups(packing, heads, 2)
    assert groups is not None and any(group.segments is not None for group in groups)  # bins in the layout
    for group in groups:
        seen = group.additive_mask(torch.float32)[:, 0] == 0  # grid rows x queries x keys
        assert seen.any(-1).all()  # every query, padding ones too, sees a key
        real = group.keep[:, :, None] & ~group.keep[:, None, :]
        assert not (seen & real).any()  # and no real query sees a padding cell
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, heads, packing.total, d, generator=generator) for _ in range(3))
    q[0, :, 0, 0], k[0, :, :, 0] = 10.0, -10.0  # token 0 (every padding cell's copy) scores -100 against all
    q, k, v = (x.half().requires_grad_() for x in (q, k, v))

    def eager(query, key, value, mask):
        return cpu_kernels._attend(query, key, value, mask, d**-0.5, 0.0)[0]

    out = cpu_kernels._packed_attention(packing, q, k, v, eager)
    out[0, : len(packing.index)].float().sum().backward()
    assert all(torch.isfinite(x.grad).all() for x in (q, k, v))
