"""Sharding one batch plan over processes: every example once, the same number of steps on every rank."""

from __future__ import annotations

import random

import pytest

from bertkit.engine.batching import LengthGroupedBatches, shard_batches, sorted_batches


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
    assert shards == [([[0, 1], [9]], False), ([[2, 3], [8]], False),
                      ([[4, 5], [9]], True), ([[6, 7], [8]], True)]


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
