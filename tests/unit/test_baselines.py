"""Each task's trivial baseline (bertkit.metrics.baselines) on hand-made examples, with numbers
computed by hand, and the comparison that decides whether a model beats it."""

from __future__ import annotations

import math

import pytest

from bertkit.metrics.baselines import (
    always_outside,
    constant_mean,
    majority_class,
    per_label_majority,
    random_ranking,
    shortfalls,
    starting_model,
    trivial_spans,
    unigram,
    unigram_and_chance,
)
from bertkit.tasks import get_task_class


def test_majority_class_and_a_classifier_worse_than_it():
    baseline = majority_class(["a", "a", "b", "a"], ["a", "b"])
    assert baseline["rule"] == "always 'a'" and baseline["metrics"]["accuracy"] == 0.75
    assert baseline["metrics"]["mcc"] == 0.0 and baseline["checked"] == ["accuracy", "mcc"]
    # MRPC at lr 1e-9: accuracy below the majority's and a negative MCC are both said
    assert [m["metric"] for m in shortfalls({"accuracy": 0.5, "mcc": -0.2}, baseline)] == ["accuracy", "mcc"]
    assert shortfalls({"accuracy": 0.75, "mcc": 0.01}, baseline)  # a tie, and MCC about zero, beat nothing
    assert shortfalls({"accuracy": 0.8, "mcc": 0.5}, baseline) == []


def test_constant_mean_is_the_gold_variance_and_no_correlation():
    baseline = constant_mean([1.0, 2.0, 3.0, 4.0])
    assert baseline["metrics"]["mse"] == 1.25 and baseline["metrics"]["pearson"] == 0.0  # mean 2.5: (2.25+0.25)*2/4
    assert [m["metric"] for m in shortfalls({"pearson": 0.9, "spearman": 0.9, "mse": 1.3}, baseline)] == ["mse"]
    assert shortfalls({"pearson": 0.9, "spearman": 0.9, "mse": 0.2}, baseline) == []


def test_per_label_majority_predicts_the_labels_most_examples_have():
    baseline = per_label_majority([[1, 0], [1, 1], [1, 0]], ["x", "y"])
    # always {x}: 3 true positives, 1 missed y: precision 1, recall 3/4, micro F1 6/7
    assert baseline["rule"] == "always {x}" and baseline["metrics"]["micro_f1"] == round(6 / 7, 6)
    empty = per_label_majority([[1, 0], [0, 1], [0, 0]], ["x", "y"])
    assert empty["rule"] == "always no label" and empty["metrics"]["micro_f1"] == 0.0
    assert shortfalls({"micro_f1": 0.04}, empty) and not shortfalls({"micro_f1": 0.3}, empty)  # about zero


def test_always_o_and_the_newcomers_conll_run():
    baseline = always_outside([["B-PER", "I-PER", "O", "O"], ["O", "B-LOC"]])
    assert baseline["metrics"]["token_accuracy"] == 0.5 and baseline["metrics"]["f1"] == 0.0
    conll = always_outside([["O"] * 83 + ["B-PER"] * 17])
    missed = shortfalls({"f1": 0.046, "token_accuracy": 0.546}, conll)  # the 400-row run of the issue
    assert [(m["metric"], m["baseline"]) for m in missed] == [("token_accuracy", 0.83), ("f1", 0.0)]
    assert shortfalls({"f1": 0.6, "token_accuracy": 0.9}, conll) == []


def test_trivial_spans_take_the_best_rule_and_say_which():
    example = {
        "question": "Where does John live?",
        "context": "Mary is tall. John lives in Paris. It rains.",
        "answers": [{"text": "Paris", "start": 28}],
    }
    baseline = trivial_spans([example], v2=False)
    # "John lives in Paris.": 1 of 4 words right, recall 1: F1 2 * 0.25 / 1.25 = 40
    assert baseline["metrics"] == {"exact_match": 0.0, "f1": 40.0}
    assert baseline["rule"].startswith("the context sentence sharing the most words with the question")
    unanswerable = {"question": "Who?", "context": "No one is here.", "answers": []}
    v2 = trivial_spans([example, unanswerable], v2=True)
    assert v2["rule"].startswith("no answer to any question") and v2["metrics"] == {"exact": 50.0, "f1": 50.0}
    assert shortfalls({"exact_match": 2.0, "f1": 8.0}, baseline)  # F1 8 of 100 is said


def test_a_random_ranking_s_expected_scores():
    rows = [{"query": "q", "passage": str(i), "label": label} for i, label in enumerate([1, 0, 0, 0])]
    baseline = random_ranking(rows)
    # one relevant of 4: E[1/rank] = (1 + 1/2 + 1/3 + 1/4) / 4; E[DCG] = 1/4 of the 4 discounts, IDCG 1
    assert baseline["metrics"]["mrr@10"] == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4, abs=1e-6)
    discounts = sum(1 / math.log2(r + 2) for r in range(4))
    assert baseline["metrics"]["ndcg@10"] == pytest.approx(discounts / 4, abs=1e-6)
    assert baseline["metrics"]["auc"] == 0.5 and baseline["metrics"]["accuracy"] == 0.75
    assert shortfalls({"auc": 0.51, "ndcg@10": 0.9, "mrr@10": 0.9}, baseline)[0]["metric"] == "auc"


def test_unigram_loss_and_nsp_chance():
    baseline = unigram([[1, 2, 3, 1]])  # frequencies 1/2, 1/4, 1/4: entropy 1.5 bits
    assert baseline["metrics"]["loss"] == pytest.approx(1.5 * math.log(2), abs=1e-6)
    assert shortfalls({"loss": 7.9}, baseline) and not shortfalls({"loss": 0.5}, baseline)  # lower is better
    bert = unigram_and_chance([[1, 2]], [0, 1, 1, 0])
    assert bert["metrics"]["nsp_accuracy"] == 0.5 and bert["metrics"]["nsp_loss"] == pytest.approx(math.log(2), 1e-6)
    assert [m["metric"] for m in shortfalls({"mlm_loss": 0.1, "nsp_accuracy": 0.496}, bert)] == ["nsp_accuracy"]


def test_the_starting_model_checks_the_main_metric_only():
    before = starting_model({"spearman": 0.8, "pearson": 0.7, "pairs": 10}, "spearman")
    assert before["checked"] == ["spearman"]
    assert shortfalls({"spearman": 0.75, "pearson": 0.9}, before)[0]["metric"] == "spearman"
    assert shortfalls({"spearman": 0.85, "pearson": 0.1}, before) == []


CLS = [{"text": "a", "label": "pos"}, {"text": "b", "label": "neg"}, {"text": "c", "label": "pos"}]
RERANK = [{"query": "q", "passage": "p", "label": 1}, {"query": "q", "passage": "r", "label": 0}]
PAIRS = [{"text": "a", "text_pair": "b", "score": 1.0}, {"text": "c", "text_pair": "d", "score": 0.0}]


@pytest.mark.parametrize(
    ("task", "examples", "name"),
    [
        ("cls", CLS, "majority-class"),
        ("ner", [{"tokens": ["a", "b"], "tags": ["B-X", "O"]}], "always-O"),
        ("rerank", RERANK, "random-ranking"),
        ("embedding", PAIRS, "constant-mean"),
    ],
)
def test_each_task_declares_its_baseline(task, examples, name):
    labels = ["neg", "pos"] if task == "cls" else ["O", "B-X"] if task == "ner" else None
    assert get_task_class(task)(None, None, labels).baseline(examples, None)["name"] == name
