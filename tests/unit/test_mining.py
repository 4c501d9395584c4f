"""Hard-negative choice on hand-made scores: copies of the positive (or anchor) never become a
negative, --skip-top skips after them, a candidate within --margin of the positive's score is
dropped, a passage is taken once, and what was dropped is counted by reason."""

from __future__ import annotations

from bertkit.api.mining import choose_negatives
from bertkit.options.retrieval import MineOptions


def settings(**changed) -> MineOptions:
    return MineOptions(data="p.jsonl", corpus="c.txt", output="t.jsonl", **changed)


RANKED = [
    ("The  film was GOOD", 0.99),  # the positive, but for case and spacing
    ("the film was great", 0.95),  # closer to the anchor than the positive
    ("was the film good", 0.93),  # the anchor itself
    ("the plot was bad", 0.80),
    ("the plot was  bad", 0.79),  # the same passage again
    ("the acting was awful", 0.70),
    ("mary visited berlin", 0.20),
]


def chosen(**changed) -> tuple[list[str], dict]:
    dropped = {"copies": 0, "skipped": 0, "margin": 0}
    found = choose_negatives("was the film good", "the film was good", 0.9, RANKED, settings(**changed), dropped)
    return found, dropped


def test_copies_and_candidates_closer_than_the_positive_are_never_negatives():
    assert chosen(negatives=3) == (
        ["the plot was bad", "the acting was awful", "mary visited berlin"],
        {"copies": 2, "skipped": 0, "margin": 1},
    )


def test_margin_and_skip_top():
    assert chosen(negatives=3, margin=0.15)[0] == ["the acting was awful", "mary visited berlin"]
    assert chosen(negatives=1, margin=-0.1) == (["the film was great"], {"copies": 1, "skipped": 0, "margin": 0})
    assert chosen(negatives=2, skip_top=1, margin=-1)[0] == ["the plot was bad", "the acting was awful"]
