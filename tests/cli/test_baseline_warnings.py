"""A model that does not beat its task's trivial baseline is said (issue "Trust, round four"): the
baseline is printed beside the metric, written in bertkit.json and the eval report, and a warning
is on the console, in bertkit.json and on the card; a model that beats it gets no warning."""

from __future__ import annotations

import json

from hostile import CLS_CSV, NER_CONLL
from test_mlm import write_corpus

WARNING = "warning: the model does not beat the"


def _warnings(out: str, err: str) -> list[str]:
    return [line for line in (out + err).splitlines() if line.startswith(WARNING)]


def test_a_tagger_that_learned_nothing_is_said_below_always_o(tmp_path, tiny_bert, run_cli):
    (tmp_path / "train.conll").write_text(NER_CONLL)
    output = tmp_path / "model"
    code, out, err = run_cli(
        "finetune", "ner", "--data", tmp_path / "train.conll", "--eval-data", tmp_path / "train.conll",
        "--model", tiny_bert, "--output", output, "--lr", "1e-9", "--epochs", "1", "--threads", "1",
    )  # fmt: skip
    assert code == 0, err
    meta = json.loads((output / "bertkit.json").read_text())
    (baseline,) = meta["baselines"]
    # 28 words, 16 of them PER/LOC entities: always O is right on 12, and finds no entity
    assert baseline["name"] == "always-O" and baseline["metrics"]["token_accuracy"] == 0.428571
    assert baseline["metrics"]["f1"] == 0.0 and not baseline["beaten"]
    assert meta["metrics"]["f1"] <= 0.05 or meta["metrics"]["token_accuracy"] <= 0.428571
    shown = [w["text"] for w in meta["warnings"]]
    if not any(w["kind"] == "degenerate" for w in meta["warnings"]):  # a constant tagger names always-O itself
        assert shown == _warnings(out, err) and "always-O baseline (every word tagged O)" in shown[0], out + err
        assert "no better than a baseline (see the warning)" in out
    assert "(always-O baseline 0.4286)" in out  # beside token_accuracy in the summary
    card = (output / "README.md").read_text()
    assert f"**Warning:** {shown[0].removeprefix('warning: ')}" in card
    assert "the always-O baseline (every word tagged O): token_accuracy 0.4286, f1 0.0000: **not beaten**" in card

    code, out, err = run_cli("eval", output, "--data", tmp_path / "train.conll", "--threads", "1")
    assert code == 0, err
    report = json.loads((output / "eval-train.json").read_text())
    assert report["baselines"][0]["metrics"]["token_accuracy"] == 0.428571 and not report["baselines"][0]["beaten"]
    assert "(always-O baseline 0.4286)" in out and report["warnings"]


def test_bert_pretraining_left_at_chance_is_said(tmp_path, tiny_bert, run_cli):
    write_corpus(tmp_path / "corpus.txt", 12, seed=1)
    write_corpus(tmp_path / "held.txt", 6, seed=2)
    output = tmp_path / "bert"
    code, out, err = run_cli(
        "pretrain", "bert", "--data", tmp_path / "corpus.txt", "--eval-data", tmp_path / "held.txt",
        "--model", tiny_bert, "--output", output, "--epochs", 1, "--max-length", 24, "--lr", "1e-9",
        "--threads", "1",
    )  # fmt: skip
    assert code == 0, err
    assert "pre-training with peak lr 1e-09, warmup 10% of the steps, weight decay 0.01" in err  # the recipe, said
    assert "before training (zero-shot): loss" in err  # the starting score, said when computed
    meta = json.loads((output / "bertkit.json").read_text())
    chance = next(b for b in meta["baselines"] if b["name"] == "unigram-and-chance")
    assert 0.5 <= chance["metrics"]["nsp_accuracy"] < 0.7 and not chance["beaten"]
    said = _warnings(out, err)
    assert said and said == [w["text"] for w in meta["warnings"] if w["kind"] == "baseline"]
    assert any("unigram-and-chance baseline" in line and "mlm_loss" in line for line in said), said
    assert "(unigram-and-chance baseline " in out  # the saved epoch's line shows it
    card = (output / "README.md").read_text()
    assert f"**Warning:** {said[0].removeprefix('warning: ')}" in card


def test_a_classifier_that_learned_beats_its_baseline_and_is_not_warned(tmp_path, tiny_bert, run_cli):
    (tmp_path / "train.csv").write_text(CLS_CSV)
    output = tmp_path / "model"
    code, out, err = run_cli(
        "finetune", "cls", "--data", tmp_path / "train.csv", "--eval-data", tmp_path / "train.csv",
        "--model", tiny_bert, "--output", output, "--lr", "5e-3", "--epochs", "15", "--batch-size", "4",
        "--threads", "1",
    )  # fmt: skip
    assert code == 0, err
    meta = json.loads((output / "bertkit.json").read_text())
    assert meta["metrics"]["mcc"] > 0.5, f"the tiny model did not learn the toy data: {meta['metrics']}"
    (baseline,) = meta["baselines"]
    assert baseline["name"] == "majority-class" and baseline["metrics"]["accuracy"] == 0.5 and baseline["beaten"]
    assert meta["warnings"] is None and not _warnings(out, err) and "\nbest (epoch" in "\n" + out
    assert "(majority-class baseline 0.5000)" in out and "(majority-class baseline 0.0000)" in out
    assert "the majority-class baseline (always " in (output / "README.md").read_text()


def test_a_distilled_student_is_read_against_its_teacher_on_the_same_data(run_cli, trained, tmp_path):
    data = tmp_path / "train.csv"
    data.write_text(CLS_CSV)
    student = tmp_path / "student"
    code, out, err = run_cli(
        "distill", trained("cls"), "--data", data, "--eval-data", data, "--output", student, "--epochs", 1,
        "--student-layers", 1, "--threads", "1",
    )  # fmt: skip
    assert code == 0, err
    meta = json.loads((student / "bertkit.json").read_text())
    teacher = next(b for b in meta["baselines"] if b["name"] == "teacher")
    assert not teacher["warns"] and teacher["checked"] == [] and "accuracy" in teacher["metrics"]
    assert f"teacher {teacher['metrics']['accuracy']:.4f})" in out  # beside the student's accuracy
    assert "majority-class" in {b["name"] for b in meta["baselines"]}  # near chance is said as for any model
