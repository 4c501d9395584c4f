"""bertkit/api/audit_check.py: an audit's model is scored against the given labels beside the
task's trivial baseline; a model that does not beat it makes the audit say its flags are noise."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bertkit.api.audit_check import model_check
from bertkit.metrics.label_issues import MULTI, SINGLE, TOKENS


def scored(kind, labels, given, suggested, examples=None, source="audit --folds"):
    return SimpleNamespace(
        kind=kind,
        adapter=SimpleNamespace(labels=labels),
        given=given,
        suggested=suggested,
        examples=examples or [{} for _ in given],
        source={"kind": source},
    )


def test_a_model_that_learned_beats_the_majority_class_and_warns_of_nothing():
    given = [0] * 60 + [1] * 40
    suggested = ["neg"] * 55 + ["pos"] * 5 + ["pos"] * 38 + ["neg"] * 2  # 93 of 100 right
    check = model_check(scored(SINGLE, ["neg", "pos"], given, suggested))
    assert check["metrics"]["accuracy"] == pytest.approx(0.93) and check["beats_baseline"]
    assert check["baseline"]["name"] == "majority-class" and check["baseline"]["metrics"]["accuracy"] == 0.6
    assert check["warning"] is None and "out-of-fold" in check["of"]


def test_a_model_at_the_majority_class_makes_the_audit_say_its_flags_are_noise():
    given = [0] * 60 + [1] * 40
    check = model_check(scored(SINGLE, ["neg", "pos"], given, ["neg"] * 100, source="model"))
    assert not check["beats_baseline"] and check["metrics"]["accuracy"] == 0.6
    assert "no better than the majority-class baseline (always 'neg'" in check["warning"]
    assert "held-out" in check["warning"] and "accuracy 0.6000 vs 0.6000" in check["warning"]


def test_a_tagger_that_tags_every_word_o_is_at_the_always_o_baseline():
    examples = [{"tags": ["B-PER", "O", "O", "B-LOC"]}, {"tags": ["O", "B-ORG", "O"]}] * 5
    all_o = [["O"] * len(ex["tags"]) for ex in examples]
    check = model_check(scored(TOKENS, ["O", "B-PER", "B-LOC", "B-ORG"], [[0]] * 10, all_o, examples))
    assert not check["beats_baseline"] and "always-O" in check["warning"]
    right = model_check(scored(TOKENS, ["O"], [[0]] * 10, [list(ex["tags"]) for ex in examples], examples))
    assert right["beats_baseline"] and right["metrics"]["f1"] == 1.0


def test_a_multi_label_model_is_read_against_the_per_label_majority():
    given = [[0], [0, 1], [1], [0], [2], [0, 2]]
    check = model_check(scored(MULTI, ["a", "b", "c"], given, [[]] * 6))
    assert not check["beats_baseline"] and check["baseline"]["name"] == "per-label-majority"
    names = [["a"], ["a", "b"], ["b"], ["a"], ["c"], ["a", "c"]]
    assert model_check(scored(MULTI, ["a", "b", "c"], given, names))["metrics"]["micro_f1"] == 1.0
