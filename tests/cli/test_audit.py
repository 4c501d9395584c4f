"""`bertkit audit` on tiny models: its flags and ranking are cleanlab's on the same probabilities
(from folds run here, a --folds run's file, a trained model: cls single- and multi-label, ner), and
what it writes (ranked files, summary, Label Studio tasks) reads back as what it says."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from conftest import assert_user_error
from test_cli_classification import write_sentiment_csv
from test_problem_types import write_emotions_jsonl
from test_tagging_task import sentences, write_conll

from bertkit.options import RunOptions

FLIPPED = (3, 10, 17, 30, 41)  # rows (0-based) whose label the fixture flips


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def folds_audit(tiny_bert, tmp_path_factory):
    """An audit with --folds 3 of 48 sentiment rows, five labels flipped, through the CLI."""
    from typer.testing import CliRunner

    from bertkit.cli import app

    root = tmp_path_factory.mktemp("audit")
    rows = write_sentiment_csv(root / "clean.csv", 48, seed=1)
    for i in FLIPPED:
        rows[i]["label"] = "neg" if rows[i]["label"] == "pos" else "pos"
    with open(root / "train.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["text", "label"])
        writer.writeheader()
        writer.writerows(rows)
    args = ["audit", "--data", root / "train.csv", "--output", root / "audit", "--folds", 3, "--task", "cls"]
    args += ["--model", tiny_bert, "--epochs", 4, "--lr", "1e-3", "--batch-size", 8, "--max-length", 32]
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return root, rows, result.output


def test_folds_audit_is_cleanlab_on_the_out_of_fold_probabilities(folds_audit):
    from cleanlab.filter import find_label_issues
    from cleanlab.rank import get_label_quality_scores

    root, rows, output = folds_audit
    out = root / "audit"
    oof = read_jsonl(out / "model" / "oof-predictions.jsonl")  # the folds' model kept beside the audit
    labels = ["neg", "pos"]
    given = np.asarray([labels.index(row["label"]) for row in rows])
    probabilities = np.asarray([[row["probabilities"][name] for name in labels] for row in oof])
    flags, quality = find_label_issues(given, probabilities, n_jobs=1), get_label_quality_scores(given, probabilities)
    ranked = read_jsonl(out / "ranked.jsonl")
    assert [r["rank"] for r in ranked] == list(range(1, 49))
    assert [r["row"] for r in ranked] == sorted(range(1, 49), key=lambda n: (round(quality[n - 1], 6), n))
    for r in ranked:
        assert r["issue"] == bool(flags[r["row"] - 1]) and r["quality"] == pytest.approx(
            quality[r["row"] - 1], abs=1e-6
        )
        assert r["given"] == rows[r["row"] - 1]["label"] and r["text"] == rows[r["row"] - 1]["text"]
        assert r["suggested"] == oof[r["row"] - 1]["label"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"] == 48 and summary["flagged"] == int(flags.sum()) > 0
    check = summary["model_check"]  # the out-of-fold accuracy beside the majority class, always recorded
    assert check["metrics"]["accuracy"] == pytest.approx(float(np.mean(probabilities.argmax(1) == given)), abs=1e-6)
    assert check["baseline"]["metrics"]["accuracy"] == pytest.approx(max(np.mean(given), 1 - np.mean(given)))
    assert (summary["warnings"] == []) == check["beats_baseline"] and list(summary)[0] == "warnings"
    assert summary["data_checks_skipped"] == {} and isinstance(summary["outliers"], int)
    assert summary["source"]["run"] == str(out / "model") and summary["source"]["kind"] == "audit --folds"
    assert f"{summary['flagged']} of 48 rows flagged" in output
    with open(out / "ranked.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [int(r["row"]) for r in table] == [r["row"] for r in ranked] and table[0]["given"] == ranked[0]["given"]


def test_the_flagged_rows_go_to_label_studio_and_read_back_with_their_given_labels(folds_audit):
    from bertkit.data.registry import Source
    from bertkit.tasks import get_task_class
    from bertkit.tasks.base import TRAIN

    root, rows, _ = folds_audit
    out = root / "audit"
    flagged = [r for r in read_jsonl(out / "ranked.jsonl") if r["issue"]]
    tasks = json.loads((out / "relabel-label-studio.json").read_text())
    assert [t["meta"]["row"] for t in tasks] == [r["row"] for r in flagged]
    for task, row in zip(tasks, flagged):
        assert task["data"] == {"text": row["text"]}
        assert task["predictions"][0]["result"][0]["value"]["choices"] == [row["suggested"]]
        assert task["annotations"][0]["result"][0]["value"]["choices"] == [row["given"]]
    assert 'name="label" toName="text"' in (out / "label-studio-config.xml").read_text()
    path = out / "relabel-label-studio.json"  # as an export: the annotation (the given label) is read
    examples = get_task_class("cls")(None, {}).read(Source(str(path), path=path), TRAIN)
    assert [ex["label"] for ex in examples] == [r["given"] for r in flagged]


def test_from_a_folds_run_ranks_as_the_audit_that_ran_them(folds_audit, run_cli):
    root, _, _ = folds_audit
    out = root / "from-run"
    code, stdout, stderr = run_cli(
        "audit", "--data", root / "train.csv", "--from", root / "audit" / "model", "--output", out, "--no-data-issues"
    )
    assert code == 0, stderr
    first = read_jsonl(root / "audit" / "ranked.jsonl")
    again = read_jsonl(out / "ranked.jsonl")
    keys = ("rank", "row", "given", "suggested", "quality", "issue")
    assert [{k: r[k] for k in keys} for r in again] == [{k: r[k] for k in keys} for r in first]
    assert "near_duplicate_of" not in again[0] and json.loads((out / "summary.json").read_text())["outliers"] is None


def test_doccano_relabel_tasks_hold_the_given_label_and_read_back_as_the_data(folds_audit, run_cli):
    from bertkit.data.registry import Source
    from bertkit.tasks import get_task_class
    from bertkit.tasks.base import TRAIN

    root, rows, _ = folds_audit
    out = root / "doccano"
    args = ("audit", "--data", root / "train.csv", "--from", root / "audit" / "model", "--output", out)
    code, stdout, stderr = run_cli(*args, "--no-data-issues", "--format", "doccano")
    assert code == 0, stderr
    assert not (out / "relabel-label-studio.json").exists() and "relabel-doccano.jsonl" in stdout
    flagged = [r for r in read_jsonl(out / "ranked.jsonl") if r["issue"]]
    tasks = read_jsonl(out / "relabel-doccano.jsonl")
    assert [t["meta"]["row"] for t in tasks] == [r["row"] for r in flagged] and tasks
    for task, row in zip(tasks, flagged):
        assert task["text"] == row["text"] and task["label"] == [row["given"]]
        assert task["meta"]["suggested"] == row["suggested"] and task["meta"]["quality"] == row["quality"]
    path = out / "relabel-doccano.jsonl"  # an untouched export is the data as it was (--data-format doccano)
    examples = get_task_class("cls")(None, {"data_format": "doccano"}).read(Source(str(path), path=path), TRAIN)
    assert [ex["label"] for ex in examples] == [r["given"] for r in flagged]


def test_a_rerun_replaces_the_audit_only_with_overwrite(folds_audit, run_cli):
    root, _, _ = folds_audit
    out = root / "rerun"
    args = ("audit", "--data", root / "train.csv", "--from", root / "audit" / "model", "--output", out)
    assert run_cli(*args, "--no-data-issues")[0] == 0
    before = (out / "ranked.jsonl").read_bytes()
    assert_user_error(run_cli(*args), "holds an earlier audit", "--overwrite")
    assert (out / "ranked.jsonl").read_bytes() == before
    (out / "mine.txt").write_text("notes")  # the user's file: --overwrite never deletes it
    assert_user_error(run_cli(*args, "--overwrite"), "mine.txt")
    (out / "mine.txt").unlink()
    code, _, stderr = run_cli(*args, "--overwrite", "--no-data-issues")
    assert code == 0, stderr


def test_multi_label_audit_of_a_trained_model_is_cleanlabs_multi_label_ranking(tiny_bert, tmp_path, run_cli):
    from cleanlab.multilabel_classification.filter import find_label_issues
    from cleanlab.multilabel_classification.rank import get_label_quality_scores

    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.options import PredictOptions

    write_emotions_jsonl(tmp_path / "train.jsonl", 96, 1)
    held = write_emotions_jsonl(tmp_path / "held.jsonl", 40, 2)
    config = TrainConfig(epochs=3, lr=1e-3, batch_size=16)
    api.finetune(
        "cls", RunOptions(data=str(tmp_path / "train.jsonl"), model=str(tiny_bert), output=str(tmp_path / "m")), config
    )
    code, _, stderr = run_cli(
        "audit", "--data", tmp_path / "held.jsonl", "--model", tmp_path / "m", "--output", tmp_path / "a"
    )
    assert code == 0, stderr
    predicted = api.predict(str(tmp_path / "m"), PredictOptions(input=str(tmp_path / "held.jsonl")))
    names = json.loads((tmp_path / "m" / "config.json").read_text())["id2label"]
    labels = [names[str(i)] for i in range(len(names))]
    probabilities = np.asarray([[row["probabilities"][name] for name in labels] for row in predicted])
    given = [sorted(labels.index(name) for name in row["labels"]) for row in held]
    flags, quality = find_label_issues(given, probabilities, n_jobs=1), get_label_quality_scores(given, probabilities)
    ranked = {r["row"]: r for r in read_jsonl(tmp_path / "a" / "ranked.jsonl")}
    assert [ranked[n]["issue"] for n in range(1, 41)] == flags.tolist()
    assert [ranked[n]["quality"] for n in range(1, 41)] == pytest.approx(quality.tolist(), abs=1e-6)
    assert ranked[1]["given"] == sorted(held[0]["labels"])
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["label_kind"] == "multi-label" and len(summary["joint"]["given_by_true"]) == len(labels)


def test_ner_audit_by_folds_and_by_a_trained_model_ranks_every_sentence(tiny_bert, tmp_path, run_cli):
    write_conll(tmp_path / "train.txt", sentences(60, 1))
    held = sentences(20, 2)
    held[0][0] = (held[0][0][0], "B-LOC" if held[0][0][1] != "B-LOC" else "B-PER")  # one wrong tag
    write_conll(tmp_path / "held.txt", held)
    code, _, stderr = run_cli(
        "audit", "--data", tmp_path / "train.txt", "--folds", 2, "--task", "ner", "--model", tiny_bert,
        "--output", tmp_path / "folds", "--epochs", 2, "--lr", "1e-3", "--batch-size", 8, "--no-data-issues",
    )  # fmt: skip
    assert code == 0, stderr
    assert (
        not (tmp_path / "folds" / "model.folds").exists() and (tmp_path / "folds" / "model" / "bertkit.json").is_file()
    )
    model = tmp_path / "folds" / "model"
    code, _, stderr = run_cli("audit", "--data", tmp_path / "held.txt", "--model", model, "--output", tmp_path / "a")
    assert code == 0, stderr
    ranked = read_jsonl(tmp_path / "a" / "ranked.jsonl")
    assert len(ranked) == 20 and ranked[0]["quality"] <= ranked[-1]["quality"]
    by_row = {r["row"]: r for r in ranked}
    assert by_row[1]["words"] == [w for w, _ in held[0]] and by_row[1]["given"] == [t for _, t in held[0]]
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["label_kind"] == "tokens" and summary["noise_rate_of"] == "words"
    tasks = json.loads((tmp_path / "a" / "relabel-label-studio.json").read_text())
    assert len(tasks) == summary["flagged"]
    for task in tasks:  # spans: the given tags as the annotation, the model's as the prediction
        assert all(region["type"] == "labels" for region in task["annotations"][0]["result"])


def test_ner_audit_of_eight_sentences_runs_the_data_checks_with_fewer_neighbours(tiny_bert, tmp_path, run_cli):
    """Datalab's default of 10 neighbours exceeds 8 sentences: k is the rows less one, both checks run."""
    write_conll(tmp_path / "ner.txt", sentences(8, 1))
    code, _, stderr = run_cli(
        "audit", "--data", tmp_path / "ner.txt", "--task", "ner", "--model", tiny_bert, "--folds", 2,
        "--output", tmp_path / "o", "--epochs", 1, "--batch-size", 4, "--format", "doccano",
    )  # fmt: skip
    assert code == 0, stderr
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["rows"] == 8 and summary["data_checks_skipped"] == {} and summary["notices"] == []
    assert isinstance(summary["outliers"], int) and isinstance(summary["near_duplicates_with_other_labels"], int)
    ranked = read_jsonl(tmp_path / "o" / "ranked.jsonl")
    assert all("outlier" in row and "near_duplicate_of" in row for row in ranked)
    assert summary["model_check"]["baseline"]["name"] == "always-O"
    from bertkit.data.registry import Source
    from bertkit.tasks import get_task_class
    from bertkit.tasks.base import TRAIN

    path = tmp_path / "o" / "relabel-doccano.jsonl"  # spans of the given tags; they read back as those tags
    tasks = read_jsonl(path)
    flagged = [r for r in ranked if r["issue"]]
    assert len(tasks) == len(flagged) == summary["flagged"] > 0
    examples = get_task_class("ner")(None, {}).read(Source(str(path), path=path), TRAIN)
    assert [ex["tags"] for ex in examples] == [r["given"] for r in flagged]


@pytest.fixture(scope="module")
def adapter_run(tiny_bert, tmp_path_factory):
    """A `finetune --lora 4 --save-adapter --folds 2` run on 16 rows: adapters, no model.safetensors,
    and a model at the majority-class baseline (one epoch on 8 rows per fold)."""
    from hostile import CLS_CSV

    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.options import RepeatOptions

    root = tmp_path_factory.mktemp("adapter-run")
    (root / "cls.csv").write_text(CLS_CSV)
    run = RunOptions(data=str(root / "cls.csv"), model=str(tiny_bert), output=str(root / "run"))
    config = TrainConfig(epochs=1, batch_size=8, max_length=32, lora=4, save_adapter=True)
    api.finetune_folds("cls", run, config, RepeatOptions(folds=2))
    assert not (root / "run" / "model.safetensors").exists()
    return root


@pytest.mark.parametrize("flag", ["--from", "--model"])
def test_an_adapter_directory_is_audited_as_eval_loads_it_and_a_baseline_model_is_said(adapter_run, flag, run_cli):
    out = adapter_run / f"audit{flag}"
    code, _, stderr = run_cli("audit", "--data", adapter_run / "cls.csv", flag, adapter_run / "run", "--output", out)
    assert code == 0, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert isinstance(summary["outliers"], int)  # the data checks ran on the adapters merged over the base
    check = summary["model_check"]
    assert not check["beats_baseline"] and check["metrics"]["accuracy"] <= check["baseline"]["metrics"]["accuracy"]
    assert len(summary["warnings"]) == 1 and "no better than the majority-class baseline" in summary["warnings"][0]
    assert "warning: the flags come from a model no better than the majority-class baseline" in stderr
