"""The values a task hands back instead of keeping them: what reading saw, what training data
taught, and preprocessing's facts. A task is a fixed spec (its options, max length, labels) plus
the ``Learned`` value it was given; its methods return these and leave the task as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class Examples(list):
    """``Task.read``'s examples, with ``seen``: what the raw records showed that ``Task.fit`` learns
    from (the columns chosen, labels written as JSON lists, IOB1 tags). A plain list otherwise."""

    def __init__(self, items=(), seen: dict | None = None):
        super().__init__(items)
        self.seen = dict(seen or {})

    def __getitem__(self, index):
        # the first N rows (--max-train-samples) were read from the same records: they saw the same
        found = super().__getitem__(index)
        return Examples(found, self.seen) if isinstance(index, slice) else found


class Features(list):
    """``Task.preprocess``'s features, with ``stats``: the facts worth reporting about them
    (windows, truncations, notices)."""

    def __init__(self, items=(), stats: dict | None = None):
        super().__init__(items)
        self.stats = dict(stats or {})


@dataclass(frozen=True)
class Learned:
    """What training data taught a task (``Task.fit``); ``Task.with_learned`` makes the trained
    task from it. ``labels`` and ``options`` are stored with the model (``Task.state``); the head
    bias only starts the training (``Task.training_spec``)."""

    labels: list | None = None  # the model's label names (None: the task has none, or keeps its own)
    options: dict = field(default_factory=dict)  # changes to the task's options (a None value removes one)
    head_bias: tuple | None = None  # the output bias a fresh head starts from
    notices: tuple = ()  # what fitting did that the user should know (the class weights chosen)


def seen_in(examples) -> dict:
    """What reading saw, for examples that came straight from ``Task.read`` ({} for any other list)."""
    return getattr(examples, "seen", {})


def stats_of(features) -> dict:
    """Preprocessing's facts about ``features`` ({} for a plain list, as a plug-in task may return)."""
    return dict(getattr(features, "stats", {}))
