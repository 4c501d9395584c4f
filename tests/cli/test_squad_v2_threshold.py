"""SQuAD v2 scores as the official v2 script reports them, and when `bertkit eval` may store the
no-answer threshold it tuned."""

from __future__ import annotations

import collections
import json

import numpy as np
import pytest
from test_qa_task import fake_outputs, make_squad, write_json

from bertkit.metrics.squad import f1, normalize_answer, squad_v2_scores
from bertkit.tasks.qa import QuestionAnsweringTask


# The official SQuAD v2.0 evaluate script's functions, verbatim apart from formatting.
def official_get_tokens(s):
    if not s:
        return []
    return normalize_answer(s).split()


def official_compute_f1(a_gold, a_pred):
    gold_toks = official_get_tokens(a_gold)
    pred_toks = official_get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def official_compute_exact(a_gold, a_pred):
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def official_apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
    new_scores = {}
    for qid, s in scores.items():
        pred_na = na_probs[qid] > na_prob_thresh
        if pred_na:
            new_scores[qid] = float(not qid_to_has_ans[qid])
        else:
            new_scores[qid] = s
    return new_scores


def official_find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
    num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
    cur_score = num_no_ans
    best_score = cur_score
    best_thresh = 0.0
    qid_list = sorted(na_probs, key=lambda k: na_probs[k])
    for i, qid in enumerate(qid_list):
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            if preds[qid]:
                diff = -1
            else:
                diff = 0
        cur_score += diff
        if cur_score > best_score:
            best_score = cur_score
            best_thresh = na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def test_v2_report_by_hand():
    golds = {"q1": ["paris"], "q2": [], "q3": ["blue whale"], "q4": []}
    best_texts = {"q1": "paris", "q2": "london", "q3": "whale", "q4": "rome"}
    diffs = {"q1": -3.0, "q2": 2.0, "q3": -2.0, "q4": -1.0}
    # The model predicted with threshold 0: q1, q3, q4 answer their text, q2 answers "".
    predictions = {"q1": "paris", "q2": "", "q3": "whale", "q4": "rome"}
    scores = squad_v2_scores(predictions, golds, diffs, best_texts)
    # EM: q1 1, q2 1, q3 0, q4 0 -> 50. F1: 1 + 1 + 2/3 ([whale] vs [blue whale]) + 0 -> 2.667 / 4.
    # Best threshold (sweep of diffs upward, all "" first = q2 + q4 = 2): F1 -3: 3, -2: 3.667, -1: 2.667,
    # 2: 1.667 -> best F1 at -2.0 = 91.667; EM -3: 3, -2: 3 (no gain), -1: 2 -> best EM at -3.0 = 75.
    assert scores == pytest.approx(
        {
            "exact": 50.0,
            "f1": 100 * (2 + 2 / 3) / 4,
            "total": 4,
            "HasAns_exact": 50.0,
            "HasAns_f1": 100 * (1 + 2 / 3) / 2,
            "HasAns_total": 2,
            "NoAns_exact": 50.0,
            "NoAns_f1": 50.0,
            "NoAns_total": 2,
            "best_exact": 75.0,
            "best_exact_thresh": -3.0,
            "best_f1": 100 * (3 + 2 / 3) / 4,
            "best_f1_thresh": -2.0,
        }
    )


def test_v2_report_matches_the_official_script_on_random_cases():
    rng = np.random.default_rng(7)
    for _ in range(100):
        n = int(rng.integers(1, 9))
        # "." and "the" normalise to nothing: the corner where the scripts' rules matter.
        golds = {
            f"q{i}": ([] if rng.random() < 0.4 else ["red dog", "the dog", "."][: int(rng.integers(1, 4))])
            for i in range(n)
        }
        golds.update({q: ["."] for q in list(golds)[:1] if rng.random() < 0.2})
        texts = {q: str(rng.choice(["red dog", "dog", "cat", "a red dog .", "the", "."])) for q in golds}
        diffs = {q: float(d) for q, d in zip(golds, rng.permutation(n) - n / 2)}  # no ties
        threshold = float(rng.choice([-100.0, 0.0, 100.0, *diffs.values()]))
        predicted = {q: ("" if diffs[q] > threshold else texts[q]) for q in golds}
        ours = squad_v2_scores(predicted, golds, diffs, texts)

        has_ans = {q: bool(a) for q, a in golds.items()}
        gold_texts = {q: [a for a in answers if normalize_answer(a)] or [""] for q, answers in golds.items()}
        scorers = (("exact", official_compute_exact), ("f1", official_compute_f1))
        raw = {name: {q: max(fn(g, texts[q]) for g in gold_texts[q]) for q in golds} for name, fn in scorers}
        # exact/f1: the script run on the answers as predicted (no --na-prob-file).
        answered = {name: {q: max(fn(g, predicted[q]) for g in gold_texts[q]) for q in golds} for name, fn in scorers}
        has_empty_only_gold = any(has_ans[q] and gold_texts[q] == [""] for q in golds)
        for name in ("exact", "f1"):
            assert ours[name] == pytest.approx(100.0 * sum(answered[name].values()) / n)
            # The same through --na-prob-file and -t threshold on the best texts, except where the script
            # contradicts itself: "" against a has-answer question whose golds are all "." scores 1 raw, 0 there.
            at_threshold = official_apply_no_ans_threshold(raw[name], diffs, has_ans, threshold)
            if not has_empty_only_gold:
                assert ours[name] == pytest.approx(100.0 * sum(at_threshold.values()) / n)
            best, best_thresh = official_find_best_thresh(texts, raw[name], diffs, has_ans)
            assert ours[f"best_{name}"] == pytest.approx(best)
            if best_thresh == 0.0 and best == 100.0 * sum(not a for a in has_ans.values()) / n:
                assert ours[f"best_{name}_thresh"] < min(diffs.values())  # answering nothing is best
            else:
                assert ours[f"best_{name}_thresh"] == best_thresh
    assert f1("red dog", "red dog") == official_compute_f1("red dog", "red dog") == 1.0


CONTEXT = "john lives in paris . mary lives in london ."


def two_questions(tokenizer, stored: float | None):
    examples = [
        {"id": "a", "question": "who lives in paris ?", "context": CONTEXT, "answers": [{"text": "john", "start": 0}]},
        {"id": "b", "question": "who lives in berlin ?", "context": CONTEXT, "answers": []},
    ]
    task = QuestionAnsweringTask(64, {"null_threshold": stored} if stored is not None else None)
    task.fit_labels(examples)
    features = task.preprocess(examples, tokenizer, train=False)
    # Null score minus best span score: a = 2*0 - 9 = -9, b = 2*8 - 9 = 7; b's best span is "mary".
    return task, examples, features, fake_outputs(features, {0: (0, 4), 1: (22, 26)}, cls={0: 0.0, 1: 8.0})


@pytest.fixture(scope="module")
def tokenizer(tiny_bert):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert)


def test_exact_and_f1_use_the_stored_threshold_best_uses_the_tuned_one(tokenizer):
    task, examples, features, outputs = two_questions(tokenizer, stored=10.0)
    tuned = task.tune(examples, features, outputs)
    assert tuned == {"null_threshold": -9.0} and task.options["null_threshold"] == 10.0  # tuning stores nothing
    scores = task.metrics(examples, task.postprocess(examples, features, outputs))
    # At the stored 10.0 both answer: a "john" (right), b "mary" (should be ""): 50 / 50.
    # At the best threshold (-9.0: answer a only) everything is right.
    assert scores == pytest.approx(
        {
            "exact": 50.0,
            "f1": 50.0,
            "total": 2,
            "HasAns_exact": 100.0,
            "HasAns_f1": 100.0,
            "HasAns_total": 1,
            "NoAns_exact": 0.0,
            "NoAns_f1": 0.0,
            "NoAns_total": 1,
            "best_exact": 100.0,
            "best_exact_thresh": -9.0,
            "best_f1": 100.0,
            "best_f1_thresh": -9.0,
        }
    )
    task, examples, features, outputs = two_questions(tokenizer, stored=-10.0)  # abstains on both
    assert task.metrics(examples, task.postprocess(examples, features, outputs))["f1"] == 50.0


def stored_threshold(model_dir):
    return json.loads((model_dir / "bertkit.json").read_text())["task"]["options"].get("null_threshold")


def test_eval_stores_the_threshold_only_from_a_full_evaluation_of_the_dev_data(tmp_path, tiny_bert, run_cli):
    train = write_json(tmp_path / "train.json", make_squad(12, seed=4, v2=True))
    dev = write_json(tmp_path / "dev.json", make_squad(6, seed=5, v2=True))
    other = write_json(tmp_path / "other.json", make_squad(3, seed=6, v2=True))
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
    assert stored_threshold(out) is None

    # Part of the dev data: reported, not stored.
    code, stdout, stderr = run_cli("eval", out, "--data", dev, "--max-eval-samples", 5, "--output", tmp_path / "p.json")
    assert code == 0, stderr
    assert "NOT stored: only 5 of 21 examples were evaluated (--max-eval-samples)" in stdout
    assert "the model keeps its default" in stdout and "stored with the model" not in stdout
    report = json.loads((tmp_path / "p.json").read_text())
    assert report["tuned"] == {} and set(report["tuned_not_stored"]) == {"null_threshold"}
    assert stored_threshold(out) is None

    # Other data than the model's dev data: not stored either.
    code, stdout, stderr = run_cli("eval", out, "--data", other, "--output", tmp_path / "o.json")
    assert code == 0, stderr
    assert "NOT stored" in stdout and "is not the model's dev data" in stdout and stored_threshold(out) is None

    # The full dev data: stored. exact/f1 are at the threshold the model predicted with (the default
    # here), best_f1 at the tuned one, which is what is stored.
    code, stdout, stderr = run_cli("eval", out, "--data", dev, "--output", tmp_path / "full.json")
    assert code == 0, stderr
    first = json.loads((tmp_path / "full.json").read_text())
    assert "NOT stored" not in stdout and "tuned null_threshold" in stdout
    assert [n for n in first["notices"] if "baseline" not in n] == []  # the tiny model need not beat the baseline
    assert stored_threshold(out) == first["tuned"]["null_threshold"]
    assert first["metrics"]["best_f1_thresh"] == pytest.approx(stored_threshold(out), abs=1e-6)
    # Evaluated again, the model now predicts with that threshold: its f1 is the best f1 found before.
    code, stdout, stderr = run_cli("eval", out, "--data", dev, "--output", tmp_path / "again.json")
    assert code == 0, stderr
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["metrics"]["f1"] == pytest.approx(first["metrics"]["best_f1"], abs=1e-6)
    assert (
        again["metrics"]["exact"] == pytest.approx(first["metrics"]["best_exact"], abs=1e-6)
        or first["metrics"]["best_exact_thresh"] != first["metrics"]["best_f1_thresh"]
    )

    code, stdout, stderr = run_cli("eval", out, "--data", dev, "--no-store-threshold", "--output", tmp_path / "n.json")
    assert code == 0, stderr
    assert "NOT stored: storing was turned off (--no-store-threshold)" in stdout

    # An explicit opt-in stores from partial data, and says so.
    code, stdout, stderr = run_cli(
        "eval", out, "--data", dev, "--max-eval-samples", 5, "--store-threshold", "--output", tmp_path / "p2.json"
    )
    assert code == 0, stderr
    assert "stored as asked, although only 5 of 21 examples were evaluated" in stdout
    assert stored_threshold(out) == json.loads((tmp_path / "p2.json").read_text())["tuned"]["null_threshold"]
