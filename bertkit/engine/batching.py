"""Batches that waste little compute on padding: length-grouped for training, length-sorted for
inference. The collator that pads each batch only to its own longest row is networks.collate's
(masked-LM masking pads with it too); it is imported here under its old name."""

from __future__ import annotations

import random

from bertkit.networks.collate import Collator  # noqa: F401  (engine.batching's name for it)


class LengthGroupedBatches:
    """Shuffled batches of similar length.

    Each epoch the indices are shuffled, cut into mega-batches of ``group`` batches, each
    mega-batch is sorted by length and cut into batches, and the batch order is shuffled. This
    keeps SGD's randomness while padding stays near zero (the same idea as transformers'
    ``group_by_length``, which only sorts inside 50-batch mega-batches as well).
    """

    def __init__(self, lengths: list[int], batch_size: int, seed: int, group: int = 50, drop_last: bool = False):
        self.lengths, self.batch_size, self.seed, self.group = lengths, batch_size, seed, group
        self.drop_last = drop_last
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        rng = random.Random(self.seed + self.epoch)
        order = list(range(len(self.lengths)))
        rng.shuffle(order)
        span = self.batch_size * self.group
        batches = []
        for start in range(0, len(order), span):
            chunk = sorted(order[start : start + span], key=lambda i: self.lengths[i], reverse=True)
            batches.extend(chunk[i : i + self.batch_size] for i in range(0, len(chunk), self.batch_size))
        if self.drop_last:
            batches = [b for b in batches if len(b) == self.batch_size]
        rng.shuffle(batches)
        return iter(batches)

    def __len__(self) -> int:
        full, rest = divmod(len(self.lengths), self.batch_size)
        if self.drop_last:
            return full
        # every mega-batch but the last is a whole number of batches, so only the tail can be ragged
        span = self.batch_size * self.group
        return sum(-(-min(span, len(self.lengths) - s) // self.batch_size) for s in range(0, len(self.lengths), span))


def shard_batches(batches: list[list[int]], lengths: list[int], world: int, rank: int) -> tuple[list[list[int]], bool]:
    """This rank's share of a training batch plan that every rank built identically (same seed).

    Batch ``i`` goes to rank ``i % world`` for every full round of ``world`` batches, so each rank
    takes ``ceil(len(batches) / world)`` steps per epoch. A last round with fewer batches than
    ranks is neither skipped nor padded with repeats: its examples are pooled, sorted by length
    (padding stays low) and cut into ``world`` parts whose sizes differ by at most one.

    Returns the batches and whether the last one only repeats an example: that happens only when
    fewer examples than ranks are left, and then a rank must still run a step (its gradient
    all-reduce pairs with the others'), so it re-uses one of those examples; callers should not
    count it as new data.
    """
    full = len(batches) - len(batches) % world
    mine = [list(b) for b in batches[rank:full:world]]
    tail = [i for b in batches[full:] for i in b]
    if not tail:
        return mine, False
    tail.sort(key=lambda i: lengths[i], reverse=True)
    if len(tail) < world:
        return mine + [[tail[rank % len(tail)]]], rank >= len(tail)
    size, extra = divmod(len(tail), world)
    start = rank * size + min(rank, extra)
    return mine + [tail[start : start + size + (rank < extra)]], False


def sorted_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Inference batches over indices sorted by length (longest first, so memory peaks early)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


class GroupedBatches:
    """Batches that each hold one group's features (a multi-head model's task: its collation stays
    the task's own), length-grouped within the group. An epoch has as many batches as the groups
    have together; ``sampling`` says which group each comes from:

    * ``proportional``: every group's batches once, the groups interleaved at random (each example
      once an epoch; one group alone gives exactly LengthGroupedBatches' plan);
    * ``temperature``: group g drawn with probability proportional to n_g^(1/T) (MT-DNN, MaChAmp:
      T = 1 is proportional in expectation, larger T evens the groups; a group drawn more often than
      it has batches starts another shuffled pass);
    * ``round-robin``: the groups in turn, each starting another pass when it runs out.

    Deterministic in (seed, epoch), as LengthGroupedBatches, so a resumed run rebuilds the same plan.
    """

    def __init__(
        self, groups: list, lengths: list[int], batch_size: int, seed: int, sampling: str, temperature: float = 1.0
    ):
        self.names = sorted(set(groups))
        self.members = {g: [i for i, x in enumerate(groups) if x == g] for g in self.names}
        self.samplers = {
            g: LengthGroupedBatches([lengths[i] for i in self.members[g]], batch_size, seed + 7919 * n)
            for n, g in enumerate(self.names)
        }
        self.seed, self.sampling, self.temperature, self.epoch = seed, sampling, temperature, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return sum(len(s) for s in self.samplers.values())

    def _pass(self, group, number: int) -> list[list[int]]:
        """Pass ``number`` over ``group``'s batches (indices into all features)."""
        sampler = self.samplers[group]
        sampler.set_epoch(self.epoch + 1009 * number)  # pass 0: the group's plan as if it trained alone
        return [[self.members[group][j] for j in batch] for batch in sampler]

    def __iter__(self):
        rng = random.Random(self.seed + self.epoch)
        if self.sampling == "proportional":  # each group's batches in its own order, the groups interleaved
            order = [g for g in self.names for _ in range(len(self.samplers[g]))]
            rng.shuffle(order)
        elif self.sampling == "round-robin":
            order = [self.names[i % len(self.names)] for i in range(len(self))]
        else:
            sizes = [len(self.members[g]) ** (1.0 / self.temperature) for g in self.names]
            order = rng.choices(self.names, weights=sizes, k=len(self))
        queued = {g: [] for g in self.names}
        passes = dict.fromkeys(self.names, 0)
        batches = []
        for group in order:
            if not queued[group]:
                queued[group] = self._pass(group, passes[group])
                passes[group] += 1
            batches.append(queued[group].pop(0))
        return iter(batches)
