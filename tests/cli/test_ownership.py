"""One ownership rule for every delete (#30): for each command that deletes or replaces, real
bertkit files with the user's files beside them. The command refuses in one line naming the
user's files, and nothing is removed; with only bertkit's files there, the delete goes ahead.
(The rule on hand-made folders: tests/unit/test_one_delete_rule.py; hostile cases:
tests/corpus/test_hostile_round3_deletes.py.)"""

from __future__ import annotations

import importlib.util
import json

import pytest
from conftest import assert_user_error
from hostile import snapshot
from test_cli_classification import write_sentiment_split

from bertkit.model_dir.ownership import MANIFEST

needs_optuna = pytest.mark.skipif(
    importlib.util.find_spec("optuna") is None, reason="Optuna is not installed (pip install 'bertkit[tune]')"
)


@pytest.fixture
def data(tmp_path):
    return write_sentiment_split(tmp_path, 32, 20)


def finetune(train, dev, tiny_bert, out, *extra):
    return (
        "finetune",
        "cls",
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
        "--batch-size",
        8,
        "--max-length",
        32,
        *extra,
    )


def tune(train, dev, tiny_bert, out, *extra):
    return (
        "tune",
        "cls",
        "--data",
        train,
        "--eval-data",
        dev,
        "--model",
        tiny_bert,
        "--output",
        out,
        "--max-length",
        32,
        "--epochs",
        1,
        "--batch-size",
        8,
        *extra,
    )


def refused(result, *names, absent=()):
    """Exit 2 in one line naming ``names`` (that nothing changed, each test checks by a snapshot)."""
    assert_user_error(result, "holds files bertkit did not write", *names)
    for text in absent:
        assert text not in result[2], result[2]


def test_seeds_never_delete_the_users_files_in_the_runs_directory(tmp_path, tiny_bert, run_cli, data):
    out = tmp_path / "model"
    code, _, stderr = run_cli(*finetune(*data, tiny_bert, out, "--seeds", "1,2", "--keep-all"))
    assert code == 0, stderr
    root = tmp_path / "model.seeds"
    [kept] = [p for p in root.iterdir() if p.name.startswith("seed-")]
    (root / "notes.txt").write_text("mine")
    (kept / "figures" / "my-notes.txt").write_text("mine")
    before = snapshot(tmp_path)

    result = run_cli(*finetune(*data, tiny_bert, out, "--seeds", "1,2", "--overwrite"))
    refused(result, "notes.txt", f"{kept.name}/figures/my-notes.txt")
    assert snapshot(tmp_path) == before
    (root / "notes.txt").unlink()
    (kept / "figures" / "my-notes.txt").unlink()

    # nothing but bertkit's: --overwrite replaces the earlier set
    code, _, stderr = run_cli(*finetune(*data, tiny_bert, out, "--seeds", "1,2", "--overwrite"))
    assert code == 0, stderr
    assert not root.exists() and json.loads((out / "bertkit.json").read_text())["seeds"]["seeds"] == [1, 2]


def test_seeds_refuse_a_runs_directory_of_the_users_without_recommending_overwrite(tmp_path, tiny_bert, run_cli, data):
    root = tmp_path / "model.seeds"
    root.mkdir()
    (root / "plan.txt").write_text("mine")
    before = snapshot(tmp_path)
    result = run_cli(*finetune(*data, tiny_bert, tmp_path / "model", "--seeds", 2))
    refused(result, "plan.txt", absent=("earlier --seeds run", "pass --overwrite"))
    assert snapshot(tmp_path) == before


def test_folds_overwrite_keeps_the_users_files(tmp_path, tiny_bert, run_cli, data):
    train, _ = data
    root = tmp_path / "model.folds"
    root.mkdir()
    (root / "fold-1").mkdir()
    (root / "fold-1" / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    args = ("finetune", "cls", "--data", train, "--model", tiny_bert, "--output", tmp_path / "model")
    result = run_cli(*args, "--folds", 2, "--overwrite", "--epochs", 1)
    refused(result, "fold-1")
    assert snapshot(tmp_path) == before


@needs_optuna
def test_tune_never_deletes_a_trial_directory_holding_the_users_files(tmp_path, tiny_bert, run_cli, data):
    root = tmp_path / "model.tune"
    (root / "trial-0").mkdir(parents=True)
    (root / "trial-0" / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    result = run_cli(*tune(*data, tiny_bert, tmp_path / "model", "--trials", 1))
    refused(result, "trial-0")
    assert snapshot(tmp_path) == before  # the file kept; no study.db, no .lock, no manifest made


def test_tune_refuses_a_shared_study_of_another_output_and_a_changed_range(tmp_path, tiny_bert, run_cli, data):
    optuna = pytest.importorskip("optuna")
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    shared = ("--storage", storage, "--study-name", "shared", "--trials")
    first = tmp_path / "first"
    code, _, stderr = run_cli(*tune(*data, tiny_bert, first, *shared, 1))
    assert code == 0, stderr
    (first.parent / "first.tune" / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)

    def trials():
        return [t.state.name for t in optuna.load_study(study_name="shared", storage=storage).get_trials()]

    assert trials() == ["COMPLETE"]
    result = run_cli(*tune(*data, tiny_bert, tmp_path / "second", *shared, 2))
    assert_user_error(result, "is run for --output", str(first), "--study-name")
    assert not (tmp_path / "second.tune").exists() and trials() == ["COMPLETE"]  # no .lock, no FAIL trial

    space = tmp_path / "space.yaml"
    space.write_text("lr: {low: 2e-5, high: 5e-5, log: true}\n")
    (first.parent / "first.tune" / "notes.txt").unlink()
    before = snapshot(tmp_path)
    result = run_cli(*tune(*data, tiny_bert, first, *shared, 2, "--space", space))
    assert_user_error(result, "searched lr over numbers 1e-05..0.0001 (log), this run over numbers 2e-05..5e-05")
    space.write_text("lr: [1e-5, 2e-5]\n")  # another kind
    result = run_cli(*tune(*data, tiny_bert, first, *shared, 2, "--space", space))
    assert_user_error(result, "searched lr over numbers", "this run over the choices")
    assert trials() == ["COMPLETE"] and snapshot(tmp_path) == {**before, str(space): space.read_bytes()}


@needs_optuna
def test_tune_with_the_users_file_beside_its_study(tmp_path, tiny_bert, run_cli, data):
    out = tmp_path / "model"
    code, _, stderr = run_cli(*tune(*data, tiny_bert, out, "--trials", 1))
    assert code == 0, stderr
    root = tmp_path / "model.tune"
    assert sorted(json.loads((root / MANIFEST).read_text())["entries"])[:2] == [".lock", "study.db"]
    (root / "results.csv").write_text("mine")
    before = snapshot(tmp_path)
    refused(run_cli(*tune(*data, tiny_bert, out, "--trials", 2)), "results.csv")
    assert snapshot(tmp_path) == before


def test_checkpoints_overwrite_keeps_the_users_files(tmp_path, tiny_bert, run_cli, data):
    out = tmp_path / "model"
    code, _, stderr = run_cli(*finetune(*data, tiny_bert, out, "--save-every", 2))
    assert code == 0, stderr
    root = tmp_path / "model.checkpoints"
    step = sorted(p for p in root.iterdir() if p.name.startswith("step-"))[0]
    (root / "notes.txt").write_text("mine")
    (step / "why.txt").write_text("mine")
    before = snapshot(tmp_path)
    result = run_cli(*finetune(*data, tiny_bert, out, "--save-every", 2, "--overwrite"))
    refused(result, "notes.txt", f"{step.name}/why.txt")
    assert snapshot(tmp_path) == before
    (root / "notes.txt").unlink()
    (step / "why.txt").unlink()
    code, _, stderr = run_cli(*finetune(*data, tiny_bert, out, "--save-every", 2, "--overwrite"))
    assert code == 0, stderr


def test_a_model_directorys_folders_are_checked_too(tmp_path, tiny_bert, run_cli, data):
    out = tmp_path / "model"
    code, _, stderr = run_cli(*finetune(*data, tiny_bert, out))
    assert code == 0, stderr
    (out / "figures" / "my-notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    refused(run_cli(*finetune(*data, tiny_bert, out, "--overwrite")), "figures/my-notes.txt")
    assert snapshot(tmp_path) == before


def test_the_new_model_never_replaces_a_directory_the_user_added_to_meanwhile(tmp_path):
    from bertkit.errors import BertkitError
    from bertkit.model_dir import staged_output

    out = tmp_path / "model"
    out.mkdir()
    (out / "bertkit.json").write_text("{}")
    with pytest.raises(BertkitError, match=r"holds files bertkit did not write \(notes.txt\)"):
        with staged_output(out) as staging:
            (staging / "bertkit.json").write_text('{"new": true}')
            (out / "notes.txt").write_text("added while the model trained")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no staging, no .model.old left
    assert (out / "bertkit.json").read_text() == "{}" and (out / "notes.txt").is_file()


def test_a_streamed_outputs_unfinished_parts_are_not_deleted_with_the_users_file(tmp_path, tiny_bert, run_cli):
    work = tmp_path / ".out.jsonl.bertkit-partial"  # an earlier unfinished run's, with the user's file added
    work.mkdir()
    (work / "progress.json").write_text("{}")
    (work / "mine.txt").write_text("mine")
    (tmp_path / "in.txt").write_text("the film was good\n" * 4)
    code, _, stderr = run_cli("embed", tiny_bert, "--input", tmp_path / "in.txt", "--output", tmp_path / "out.jsonl")
    assert code == 2 and "holds files bertkit did not write (mine.txt)" in stderr, stderr
    assert (work / "mine.txt").read_text() == "mine" and (work / "progress.json").is_file()


def test_a_run_that_fails_before_its_first_checkpoint_leaves_no_checkpoints_directory(
    tiny_bert, data, tmp_path, run_cli, monkeypatch
):
    """Not only a full disk: any failure before a complete checkpoint leaves nothing to resume
    from, so OUT.checkpoints (only the live history so far) goes; the error itself stays."""
    from bertkit.engine import training

    calls = []

    def failing_backward(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("a failure in the second batch")
        return original(self, *args, **kwargs)

    original = training.Run.backward
    monkeypatch.setattr(training.Run, "backward", failing_backward)
    train, _ = data
    with pytest.raises(RuntimeError, match="second batch"):
        run_cli(
            "finetune", "cls", "--data", train, "--model", tiny_bert, "--output", tmp_path / "m",
            "--epochs", 1, "--save-every", 4, "--batch-size", 4,
        )  # fmt: skip
    assert not (tmp_path / "m.checkpoints").exists() and not (tmp_path / "m").exists(), list(tmp_path.iterdir())


def test_evals_result_files_in_a_model_directory_are_bertkits(tmp_path):
    """eval's results in the model's own directory (the run file of `eval --data BEIR_DIR` too) are
    bertkit's: --overwrite may replace the directory, and a later eval may rewrite them."""
    from bertkit.model_dir.ownership import check_results_kept, strangers

    model = tmp_path / "m"
    model.mkdir()
    (model / "bertkit.json").write_text("{}")
    for name in ("eval-mini-test.json", "run-mini-test.trec", "predictions-e.jsonl", "eval-e.json"):
        (model / name).write_text("x")
    assert strangers(model) == []
    check_results_kept(model, model / "eval-mini-test.json", "the metrics file", {model / "run-mini-test.trec": "r"})
