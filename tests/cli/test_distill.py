"""`bertkit distill` end to end on tiny models: the student directory is an ordinary bertkit model
directory (eval, predict), bertkit.json and the card state the teacher and the ratios, the teacher's
logits are read from the cache on a second run, and every kind of student trains."""

from __future__ import annotations

import json

import pytest
from hostile import CLS_CSV, NER_CONLL, PAIR_TSV


def _distill(run_cli, teacher, data, output, *extra):
    code, out, err = run_cli("distill", teacher, "--data", data, "--output", output, "--epochs", 1, *extra)
    assert code == 0, err
    return out, err


def test_layer_dropped_cls_student_evaluates_and_predicts(run_cli, trained, tmp_path):
    data = tmp_path / "train.csv"
    data.write_text(CLS_CSV)
    student = tmp_path / "student"
    out, err = _distill(run_cli, trained("cls"), data, student, "--student-layers", 1)
    assert "student: the teacher's layers [0] of 0..1" in out + err
    meta = json.loads((student / "bertkit.json").read_text())
    section = meta["distillation"]
    assert section["teacher_layers"] == 2 and section["student"] == {
        "model": str(trained("cls")),
        "layers": 1,
        "layers_taken": [0],
    }
    assert 0 < section["parameters"]["ratio"] < 1 and section["speed"]["ratio"] > 0
    assert json.loads((student / "config.json").read_text())["num_hidden_layers"] == 1
    assert "Distilled from" in (student / "README.md").read_text()
    code, out, err = run_cli("eval", student, "--data", data)
    assert code == 0 and "accuracy" in out, err
    (tmp_path / "in.txt").write_text("the film was good\nthe plot was awful\n")
    code, out, err = run_cli("predict", student, "--input", tmp_path / "in.txt")
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert code == 0 and len(rows) == 2 and all(r["label"] in ("neg", "pos") for r in rows), err
    pytest.importorskip("onnxruntime")
    code, out, err = run_cli("export", "onnx", student, "--data", data)
    assert code == 0 and (student / "onnx" / "model.onnx").is_file(), err


def test_second_run_reads_the_teachers_logits_from_the_cache(run_cli, trained, tmp_path):
    data = tmp_path / "train.csv"
    data.write_text(CLS_CSV)
    out, err = _distill(run_cli, trained("cls"), data, tmp_path / "s")
    assert "0 of 16 features read from the cache" in out + err
    out, err = _distill(run_cli, trained("cls"), data, tmp_path / "s", "--overwrite", "--seed", 7)
    assert "16 of 16 features read from the cache" in out + err
    meta = json.loads((tmp_path / "s" / "bertkit.json").read_text())
    assert meta["distillation"]["teacher_logits"] == {"reused": 16, "computed": 0}
    data.write_text(CLS_CSV.replace("good", "fine"))  # other data: a new fingerprint, never the stale cache
    out, err = _distill(run_cli, trained("cls"), data, tmp_path / "s", "--overwrite")
    assert "0 of 16 features read from the cache" in out + err


def test_ner_student_and_unlabelled_text_for_cls(run_cli, trained, tmp_path):
    data = tmp_path / "train.txt"
    data.write_text(NER_CONLL)
    _distill(run_cli, trained("ner"), data, tmp_path / "ner-student", "--student-layers", 1)
    code, out, err = run_cli("eval", tmp_path / "ner-student", "--data", data)
    assert code == 0 and "f1" in out, err
    cls_data = tmp_path / "train.csv"
    cls_data.write_text(CLS_CSV)
    (tmp_path / "more.txt").write_text("the acting was great\nthe story was poor\nit was fine\n")
    _distill(run_cli, trained("cls"), cls_data, tmp_path / "s", "--unlabelled", tmp_path / "more.txt")
    meta = json.loads((tmp_path / "s" / "bertkit.json").read_text())
    assert meta["distillation"]["unlabelled"]["examples"] == 3
    assert meta["preprocessing"]["unlabelled_features"] == 3
    assert meta["distillation"]["teacher_logits"]["computed"] == 16 + 3


def test_checkpoint_student_with_the_teachers_vocabulary_and_hidden_loss(run_cli, trained, tiny_bert, tmp_path):
    data = tmp_path / "train.tsv"
    data.write_text(PAIR_TSV)
    for extra in (("--hidden-loss", "mse"), ("--hidden-loss", "cosine", "--alpha", "1")):
        _distill(run_cli, trained("pair"), data, tmp_path / "s", "--student", tiny_bert, "--overwrite", *extra)
        meta = json.loads((tmp_path / "s" / "bertkit.json").read_text())
        assert meta["distillation"]["student"]["layers_taken"] is None
        assert meta["distillation"]["hidden_loss"] == extra[1]
    _distill(run_cli, trained("pair"), data, tmp_path / "l", "--student-layers", 1, "--hidden-loss", "mse")


def test_plain_student_is_the_baseline_a_distilled_student_must_beat(run_cli, trained, tmp_path):
    """--plain-student trains the same student without the teacher first; its metrics are those of an
    ordinary `distill --alpha 0` run (the gold loss alone, same seed), stored as a baseline that warns."""
    data = tmp_path / "train.csv"
    data.write_text(CLS_CSV)
    common = ("--eval-data", data, "--student-layers", 1, "--seed", 3)
    out, err = _distill(run_cli, trained("cls"), data, tmp_path / "s", *common, "--plain-student")
    assert "training the same student without the teacher first" in out + err
    meta = json.loads((tmp_path / "s" / "bertkit.json").read_text())
    plain = next(b for b in meta["baselines"] if b["name"] == "plain-student")
    assert plain["warns"] and plain["checked"] == ["accuracy"]
    _distill(run_cli, trained("cls"), data, tmp_path / "gold-only", *common, "--alpha", 0)
    gold_only = json.loads((tmp_path / "gold-only" / "bertkit.json").read_text())["metrics"]
    assert plain["metrics"]["accuracy"] == pytest.approx(gold_only["accuracy"], abs=1e-6)
    assert plain["metrics"]["loss"] == pytest.approx(gold_only["loss"], rel=1e-4)
    assert not list(tmp_path.glob("**/bertkit-plain-student-*"))  # the scratch student is not kept
    teacher = next(b for b in meta["baselines"] if b["name"] == "teacher")
    assert not teacher["warns"]


def test_augment_adds_rewritten_rows_the_teacher_labels_and_caches(run_cli, trained, tmp_path):
    data = tmp_path / "train.tsv"
    data.write_text(PAIR_TSV)
    _distill(run_cli, trained("pair"), data, tmp_path / "s", "--augment", 3)
    meta = json.loads((tmp_path / "s" / "bertkit.json").read_text())
    made = meta["distillation"]["augment"]
    rows = meta["data"]["train_examples"]
    assert made["per_row"] == 3 and rows < made["rows"] <= 3 * rows
    assert meta["preprocessing"]["augmented_features"] == made["rows"]
    assert meta["distillation"]["teacher_logits"] == {"reused": 0, "computed": rows + made["rows"]}
    # the same seed rewrites the same rows: every logit from the cache; another seed, other rows
    _distill(run_cli, trained("pair"), data, tmp_path / "s", "--augment", 3, "--overwrite")
    again = json.loads((tmp_path / "s" / "bertkit.json").read_text())["distillation"]
    assert again["teacher_logits"] == {"reused": rows + made["rows"], "computed": 0}
    _distill(run_cli, trained("pair"), data, tmp_path / "s", "--augment", 3, "--overwrite", "--seed", 7)
    other = json.loads((tmp_path / "s" / "bertkit.json").read_text())["distillation"]
    assert other["teacher_logits"]["computed"] > 0


@pytest.mark.parametrize(
    "task, extra, said",
    [
        ("cls", ("--augment", 2, "--alpha", 0), "--augment adds rows the teacher labels, and --alpha 0"),
        ("ner", ("--augment", 2), "--augment applies to cls and pair"),
        ("cls", ("--augment", -1), "--augment must be between 0 and 100"),
    ],
)
def test_augment_refuses_in_one_line(run_cli, trained, tmp_path, task, extra, said):
    from conftest import assert_user_error

    data = tmp_path / ("train.txt" if task == "ner" else "train.csv")
    data.write_text(NER_CONLL if task == "ner" else CLS_CSV)
    result = run_cli("distill", trained(task), "--data", data, "--output", tmp_path / "s", "--epochs", 1, *extra)
    assert_user_error(result, said)
    assert not (tmp_path / "s").exists()
