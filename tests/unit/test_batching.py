"""Sharding one batch plan over processes: every example once, the same number of steps on every rank;
the collator's tensors for each kind of target."""

from __future__ import annotations

import random

import pytest
import torch

from bertkit.engine.batching import Collator, LengthGroupedBatches, shard_batches, sorted_batches


def test_full_rounds_go_round_robin():
    batches = [[0, 1], [2, 3], [4, 5], [6]]
    lengths = [5] * 7
    assert shard_batches(batches, lengths, 2, 0) == ([[0, 1], [4, 5]], False)
    assert shard_batches(batches, lengths, 2, 1) == ([[2, 3], [6]], False)


def test_a_short_last_round_is_split_by_length_not_skipped_or_repeated():
    # 3 batches on 2 ranks: the third batch (5 examples) is cut 3 + 2, longest first
    batches = [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14]]
    lengths = [9] * 10 + [3, 8, 5, 7, 4]  # examples 10..14: 11 (8), 13 (7), 12 (5), 14 (4), 10 (3)
    assert shard_batches(batches, lengths, 2, 0) == ([[0, 1, 2, 3, 4], [11, 13, 12]], False)
    assert shard_batches(batches, lengths, 2, 1) == ([[5, 6, 7, 8, 9], [14, 10]], False)


def test_fewer_examples_than_ranks_left_repeats_and_flags_it():
    batches = [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]  # 4 ranks: one full round, then 2 examples
    lengths = [4] * 8 + [2, 6]
    shards = [shard_batches(batches, lengths, 4, rank) for rank in range(4)]
    assert shards == [([[0, 1], [9]], False), ([[2, 3], [8]], False), ([[4, 5], [9]], True), ([[6, 7], [8]], True)]


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_every_example_once_and_equal_steps_for_many_plans(world):
    rng = random.Random(world)
    for _ in range(60):
        n, batch_size = rng.randint(1, 70), rng.randint(1, 9)
        lengths = [rng.randint(3, 40) for _ in range(n)]
        plan = list(LengthGroupedBatches(lengths, batch_size, seed=rng.randint(0, 99), group=3))
        shards = [shard_batches(plan, lengths, world, rank) for rank in range(world)]
        steps = {len(batches) for batches, _ in shards}
        assert steps == {-(-len(plan) // world)}, (n, batch_size)
        used = []
        for batches, repeats in shards:
            for batch in batches[:-1] if repeats else batches:
                used += batch
        assert sorted(used) == list(range(n)), (n, batch_size)
        assert all(batches[-1] for batches, _ in shards)  # no empty batch


def test_sorted_batches_longest_first_and_complete():
    lengths = [3, 9, 5, 9, 1]
    assert sorted_batches(lengths, 2) == [[1, 3], [2, 0], [4]]


# --- Collator ------------------------------------------------------------------------------------
def _rows(targets: list[dict]) -> list[dict]:
    """Two features of 4 and 2 tokens, plus the given target values."""
    return [
        {"input_ids": [2, 7, 8, 3], "token_type_ids": [0, 0, 1, 1], "example_id": 0, **targets[0]},
        {"input_ids": [2, 3], "token_type_ids": [0, 0], "example_id": 1, **targets[1]},
    ]


def test_inputs_pad_to_the_longest_row_with_the_mask():
    batch = Collator(pad_token_id=9)(_rows([{}, {}]))
    assert list(batch) == ["input_ids", "token_type_ids", "attention_mask"]  # meta data stays out
    assert batch["input_ids"].tolist() == [[2, 7, 8, 3], [2, 3, 9, 9]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 1, 1], [0, 0, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert all(v.dtype == torch.long for v in batch.values())


def test_class_targets_are_long_one_per_feature():
    batch = Collator(0, {"labels": "class"})(_rows([{"labels": 2}, {"labels": 0}]))
    assert batch["labels"].dtype == torch.long and batch["labels"].tolist() == [2, 0]


def test_token_class_targets_are_long_and_padded_with_minus_100():
    batch = Collator(0, {"labels": "token_class"})(_rows([{"labels": [-100, 1, 2, -100]}, {"labels": [-100, -100]}]))
    assert batch["labels"].dtype == torch.long and batch["labels"].shape == (2, 4)
    assert batch["labels"].tolist() == [[-100, 1, 2, -100], [-100, -100, -100, -100]]


def test_float_targets_are_float32_one_per_feature():
    batch = Collator(0, {"labels": "float"})(_rows([{"labels": 0.25}, {"labels": 3}]))
    assert batch["labels"].dtype == torch.float32 and batch["labels"].tolist() == [0.25, 3.0]


def test_multi_hot_targets_are_float32_and_not_padded_to_the_tokens():
    batch = Collator(0, {"labels": "multi_hot"})(_rows([{"labels": [1, 0, 1]}, {"labels": [0.0, 0.0, 1.0]}]))
    assert batch["labels"].dtype == torch.float32 and batch["labels"].shape == (2, 3)  # 3 labels, 4 tokens
    assert batch["labels"].tolist() == [[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]


def test_several_targets_and_absent_ones():
    targets = {"start_positions": "class", "end_positions": "class"}
    batch = Collator(0, targets)(
        _rows([{"start_positions": 1, "end_positions": 2}, {"start_positions": 0, "end_positions": 0}])
    )
    assert batch["start_positions"].tolist() == [1, 0] and batch["end_positions"].tolist() == [2, 0]
    assert "labels" not in Collator(0, {"labels": "float"})(_rows([{}, {}]))  # prediction: no targets yet


def test_without_targets_the_kinds_are_inferred_as_before():
    tagging = Collator(0)(_rows([{"labels": [-100, 4, 5, -100]}, {"labels": [-100, -100]}]))
    assert tagging["labels"].dtype == torch.long
    assert tagging["labels"].tolist() == [[-100, 4, 5, -100], [-100, -100, -100, -100]]
    qa = Collator(0)(_rows([{"start_positions": 1, "end_positions": 2}, {"start_positions": 0, "end_positions": 0}]))
    assert list(qa) == ["input_ids", "token_type_ids", "start_positions", "end_positions", "attention_mask"]
    assert qa["end_positions"].dtype == torch.long and qa["end_positions"].tolist() == [2, 0]
    classes = Collator(0)(_rows([{"labels": 1}, {"labels": 0}]))
    assert classes["labels"].dtype == torch.long and classes["labels"].tolist() == [1, 0]


def test_an_unknown_target_kind_is_refused():
    with pytest.raises(ValueError, match="regression"):
        Collator(0, {"labels": "regression"})


def test_a_plan_of_random_batches_ignores_lengths_a_grouped_one_does_not():
    """Bi-encoder and SetFit batches must meet at random (their collators say random_batches): the
    same rows go together whatever their lengths; the default groups rows of similar length."""
    import types

    from bertkit.engine.training import StepPlan

    config = types.SimpleNamespace(grad_accum=1, epochs=1, max_steps=None, batch_size=4, seed=3)
    lengths = [n % 7 * 10 + 5 for n in range(64)]  # 7 very different lengths, interleaved
    random_plan = StepPlan(lengths, config, 1, 0, grouped=False)
    other_lengths = StepPlan(list(reversed(lengths)), config, 1, 0, grouped=False)
    random_batches = sorted(map(sorted, random_plan.shard(0)[0]))
    assert random_batches == sorted(map(sorted, other_lengths.shard(0)[0]))  # lengths play no part
    assert sorted(i for b in random_batches for i in b) == list(range(64))
    grouped = StepPlan(lengths, config, 1, 0).shard(0)[0]

    def spread(batches):  # the mean range of lengths inside a batch
        return sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches) / len(batches)

    assert spread(grouped) < 10 < spread(random_batches)
