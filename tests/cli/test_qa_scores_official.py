"""QA numbers a user can check: an answer's `score` does not depend on --n-best, and the official
SQuAD v2.0 script's best-threshold report (--na-prob-file) is reproduced from `predict`'s rows."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_qa_task import LONG_CONTEXT, make_squad, write_json
from test_squad_v2_threshold import (
    official_apply_no_ans_threshold,
    official_compute_exact,
    official_compute_f1,
    official_find_best_thresh,
)

from bertkit.metrics.squad import normalize_answer
from bertkit.tasks.qa import QuestionAnsweringTask


@pytest.fixture(scope="module")
def tokenizer(tiny_bert):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert)


def random_outputs(features, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {
        name: [(rng.normal(size=len(f["input_ids"])) * 3).astype(np.float32) for f in features]
        for name in ("start_logits", "end_logits")
    }


def questions(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    words = LONG_CONTEXT.split()
    examples = []
    for i in range(n):
        start = int(rng.integers(0, len(words) - 30))
        context = " ".join(words[start : start + int(rng.integers(8, 30))])
        answer = context.split()[1]
        answers = [] if i % 3 == 0 else [{"text": answer, "start": context.index(" " + answer) + 1}]
        examples.append({"id": f"q{i}", "question": "who lives in paris ?", "context": context, "answers": answers})
    return examples


def test_the_top_answers_score_is_the_same_for_n_best_1_3_20(tokenizer):
    examples = questions(30, seed=1)
    rows_by_n_best = {}
    for n_best in (1, 3, 20):
        # A short window so that some questions have several: the score is read in the answer's window.
        task = QuestionAnsweringTask(24, {"doc_stride": 4, "n_best": n_best})
        features = task.preprocess(examples, tokenizer, train=False)
        outputs = random_outputs(features, seed=2)
        predictions = task.postprocess(examples, features, outputs)
        rows_by_n_best[n_best] = [task.format_prediction(ex, p) for ex, p in zip(examples, predictions)]
    assert task.stats["windowed_examples"] > 0
    one, three, twenty = (rows_by_n_best[n] for n in (1, 3, 20))
    for a, b, c in zip(one, three, twenty):
        assert (a["answer"], a["score"]) == (b["answer"], b["score"]) == (c["answer"], c["score"])
        assert b["n_best"][0]["score"] == b["score"] == c["n_best"][0]["score"]
        assert [x["score"] for x in b["n_best"]] == [x["score"] for x in c["n_best"][: len(b["n_best"])]]


def official_v2_from_rows(golds: dict, rows: list[dict], na_prob_thresh: float) -> dict:
    """evaluate-v2.0.py's main(), run on the files the README's jq lines make from predict's rows:
    pred.json = {id: best_span_answer}, na_prob.json = {id: null_score_diff}, -t = null_threshold."""
    preds = {r["id"]: r["best_span_answer"] for r in rows}
    na_probs = {r["id"]: r["null_score_diff"] for r in rows}
    qid_to_has_ans = {q: bool(a) for q, a in golds.items()}
    exact_raw, f1_raw = {}, {}
    for qid, answers in golds.items():
        gold_answers = [a for a in answers if normalize_answer(a)] or [""]
        exact_raw[qid] = max(official_compute_exact(a, preds[qid]) for a in gold_answers)
        f1_raw[qid] = max(official_compute_f1(a, preds[qid]) for a in gold_answers)
    out = {}
    for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
        at_threshold = official_apply_no_ans_threshold(raw, na_probs, qid_to_has_ans, na_prob_thresh)
        out[name] = 100.0 * sum(at_threshold.values()) / len(at_threshold)
        out[f"best_{name}"], out[f"best_{name}_thresh"] = official_find_best_thresh(
            preds, raw, na_probs, qid_to_has_ans
        )
    return out


@pytest.mark.parametrize("stored", [None, 0.5, -2.0])
def test_official_v2_report_from_predict_rows_equals_evals(tokenizer, stored):
    examples = questions(40, seed=3)
    task = QuestionAnsweringTask(24, {"doc_stride": 4, **({"null_threshold": stored} if stored is not None else {})})
    task.fit_labels(examples)  # unanswerable questions: a v2 model
    features = task.preprocess(examples, tokenizer, train=False)
    predictions = task.postprocess(examples, features, random_outputs(features, seed=4))
    ours = task.metrics(examples, predictions)
    rows = [task.format_prediction(ex, p) for ex, p in zip(examples, predictions)]
    golds = {ex["id"]: [a["text"] for a in ex["answers"]] for ex in examples}
    official = official_v2_from_rows(golds, rows, stored or 0.0)
    for key in ("exact", "f1", "best_exact", "best_f1"):
        assert ours[key] == pytest.approx(official[key], abs=1e-9), key
    for key in ("best_exact_thresh", "best_f1_thresh"):  # bertkit moves an all-"" threshold below every diff
        assert ours[key] == official[key] or ours[key] < min(r["null_score_diff"] for r in rows)
    # The rows' answers are what the model predicted: empty exactly when the margin exceeds the threshold.
    assert all((r["answer"] == "") == (r["null_score_diff"] > (stored or 0.0)) for r in rows)


def test_cli_predict_rows_reproduce_evals_v2_report(tmp_path, tiny_bert, run_cli):
    train = write_json(tmp_path / "train.json", make_squad(12, seed=4, v2=True))
    dev = write_json(tmp_path / "dev.json", make_squad(6, seed=5, v2=True))
    out = tmp_path / "qa2"
    code, _, stderr = run_cli(
        "finetune",
        "qa",
        "--data",
        train,
        "--eval-data",
        dev,
        "--model",
        tiny_bert,
        "--output",
        out,
        "--epochs",
        1,
        "--lr",
        "1e-3",
        "--batch-size",
        16,
        "--max-length",
        64,
    )
    assert code == 0, stderr
    # fp32: in bf16 eval's and predict's different batches round the no-answer scores differently
    code, _, stderr = run_cli(
        "eval", out, "--data", dev, "--no-store-threshold", "--output", tmp_path / "e.json", "--precision", "no"
    )
    assert code == 0, stderr
    ours = json.loads((tmp_path / "e.json").read_text())["metrics"]
    rows_by_n_best = {}
    for n_best in (1, 3, 20):
        code, stdout, stderr = run_cli("predict", out, "--input", dev, "--n-best", n_best, "--precision", "no")
        assert code == 0, stderr
        rows_by_n_best[n_best] = [json.loads(line) for line in stdout.splitlines()]
    rows = rows_by_n_best[1]
    assert {"null_score_diff", "best_span_answer"} <= set(rows[0])
    for n_best in (3, 20):
        assert [(r["answer"], r["score"]) for r in rows_by_n_best[n_best]] == [(r["answer"], r["score"]) for r in rows]

    squad = json.loads((tmp_path / "dev.json").read_text())
    golds = {
        qa["id"]: [a["text"] for a in qa["answers"]]
        for article in squad["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    }
    threshold = json.loads((out / "bertkit.json").read_text())["task"]["options"].get("null_threshold", 0.0)
    official = official_v2_from_rows(golds, rows, threshold)
    for key in ("exact", "f1", "best_exact", "best_f1"):
        assert ours[key] == pytest.approx(official[key], abs=1e-6), key
    for key in ("best_exact_thresh", "best_f1_thresh"):  # bertkit moves an all-"" threshold below every diff
        # (eval's report rounds to 6 decimals)
        assert (
            ours[key] == pytest.approx(official[key], abs=1e-6)
            or ours[key] <= min(r["null_score_diff"] for r in rows) + 1e-6
        )
