"""The degenerate-model check (bertkit.metrics.degenerate): one answer for almost everything, scores
that hardly vary, or MCC / correlation about zero is said; a model that varies is not."""

from __future__ import annotations

import pytest

from bertkit.metrics.degenerate import MIN_EXAMPLES, degenerate, gold_answers, warning_text


def label_rows(predicted: list, gold: list) -> list[dict]:
    return [{"row": i, "gold_label": g, "label": p} for i, (p, g) in enumerate(zip(predicted, gold), 1)]


def test_one_label_for_every_pair_is_the_majority_baseline():
    """MRPC at 400 rows: accuracy 0.685, MCC 0.0, every pair the same label."""
    gold = ["equivalent"] * 68 + ["not_equivalent"] * 32
    rows = label_rows(["equivalent"] * 100, gold)
    verdict = degenerate(rows, gold_answers(rows, []), {"accuracy": 0.68, "mcc": 0.0})
    assert verdict["kind"] == "one_answer" and verdict["answer"] == "equivalent"
    assert verdict["share"] == 1.0 and verdict["baseline"] == {"answer": "equivalent", "accuracy": 0.68}
    assert "'always equivalent' baseline (accuracy 0.6800)" in verdict["text"] and "mcc 0.0000" in verdict["text"]


def test_a_model_that_varies_is_not_flagged():
    gold = ["pos", "neg"] * 20
    rows = label_rows(["pos", "neg", "neg", "pos"] * 10, gold)
    assert degenerate(rows, gold_answers(rows, []), {"accuracy": 0.5, "mcc": 0.3}) is None


def test_data_where_one_label_is_the_truth_almost_everywhere_is_not_flagged_for_predicting_it():
    gold = ["ok"] * 99 + ["spam"]
    rows = label_rows(["ok"] * 100, gold)
    assert degenerate(rows, gold_answers(rows, []), {"accuracy": 0.99}) is None


def test_too_few_examples_prove_nothing():
    gold = ["pos", "neg"] * ((MIN_EXAMPLES - 1) // 2)
    rows = label_rows(["pos"] * len(gold), gold)
    assert degenerate(rows, gold_answers(rows, []), {"mcc": 0.0}) is None


def test_scores_that_hardly_vary_are_the_mean_baseline():
    """STS-B: every prediction in 2.3-2.6 while the gold scores span 0-5."""
    gold = [i * 5 / 99 for i in range(100)]
    rows = [{"gold_label": g, "score": 2.3 + 0.003 * i} for i, g in enumerate(gold)]
    verdict = degenerate(rows, gold_answers(rows, []), {"pearson": 0.01, "spearman": 0.0})
    assert verdict["kind"] == "flat_scores" and verdict["range"] == [2.3, 2.597]
    assert "2.30-2.60" in verdict["text"] and "pearson 0.0100" in verdict["text"]
    varied = [{"gold_label": g, "score": g + 0.5} for g in gold]
    assert degenerate(varied, gold_answers(varied, []), {"pearson": 0.99}) is None


def test_a_label_set_is_one_answer():
    """GoEmotions at the 'always neutral' baseline."""
    gold = [["neutral"]] * 30 + [["joy"]] * 40 + [["anger", "joy"]] * 30
    rows = [{"gold_label": g, "labels": ["neutral"]} for g in gold]
    verdict = degenerate(rows, gold_answers(rows, []), {})
    assert verdict["answer"] == "neutral" and verdict["baseline"]["accuracy"] == 0.3


def test_tagging_every_word_o():
    examples = [{"tokens": ["john", "lives", "in", "paris"], "tags": ["B-PER", "O", "O", "B-LOC"]}] * 5
    rows = [{"words": ex["tokens"], "tags": ["O"] * 4} for ex in examples]
    verdict = degenerate(rows, gold_answers(rows, examples), {})
    assert verdict["answer"] == "O" and "20 words" in verdict["text"]


def test_mcc_about_zero_without_one_answer():
    gold = ["pos", "neg"] * 20
    rows = label_rows(["pos", "pos", "neg", "neg"] * 10, gold)
    verdict = degenerate(rows, gold_answers(rows, []), {"mcc": 0.0})
    assert verdict["kind"] == "no_correlation" and "mcc" in verdict["text"]


@pytest.mark.parametrize("command, flag", [("finetune", "(see --epochs, --lr)"), ("eval", "`bertkit finetune")])
def test_the_warning_says_the_causes_and_what_to_change(command, flag):
    gold = ["a", "b"] * 10
    rows = label_rows(["a"] * 20, gold)
    text = warning_text(degenerate(rows, gold_answers(rows, []), {}), command)
    assert text.startswith("warning: the model predicts 'a' for 100% of the 20 examples")
    assert "too little data or too few steps" in text and flag in text
