"""finetune --folds K: every example held out exactly once (stratified, or grouped by document),
out-of-fold predictions in data order, the folds' spread, the best fold's model kept."""

from __future__ import annotations

import json
import statistics
from collections import Counter

import pytest
from conftest import assert_user_error
from test_cli_classification import write_sentiment_csv

from bertkit.data.folds import assign_folds
from bertkit.errors import BertkitError


def read_rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_assign_folds_stratifies_groups_and_covers_everything():
    labels = ["a"] * 30 + ["b"] * 12
    folds = assign_folds(42, 3, seed=0, stratify=labels)
    assert sorted(Counter(folds).values()) == [14, 14, 14]
    for fold in range(3):  # each fold keeps the 30:12 ratio (10 a, 4 b)
        assert Counter(label for label, f in zip(labels, folds) if f == fold) == {"a": 10, "b": 4}
    groups = [i // 5 for i in range(40)]  # 8 groups of 5
    folds = assign_folds(40, 4, seed=1, groups=groups)
    assert all(len({f for g, f in zip(groups, folds) if g == group}) == 1 for group in set(groups))
    assert set(folds) == {0, 1, 2, 3} and assign_folds(40, 4, seed=1, groups=groups) == folds  # seeded


def test_three_folds_cover_every_example_once(tmp_path, tiny_bert, run_cli):
    train = tmp_path / "train.csv"
    rows = write_sentiment_csv(train, 48, seed=1)
    out = tmp_path / "model"
    code, stdout, stderr = run_cli(
        "finetune",
        "cls",
        "--data",
        train,
        "--model",
        tiny_bert,
        "--output",
        out,
        "--epochs",
        1,
        "--lr",
        "1e-3",
        "--batch-size",
        8,
        "--max-length",
        32,
        "--folds",
        3,
    )
    assert code == 0, stderr
    oof = read_rows(out / "oof-predictions.jsonl")
    assert [row["row"] for row in oof] == list(range(1, 49))  # every example once, in data order
    assert [row["gold_label"] for row in oof] == [row["label"] for row in rows]
    assert [row["text"] for row in oof] == [row["text"] for row in rows]
    by_fold = Counter(row["fold"] for row in oof)
    assert by_fold == {1: 16, 2: 16, 3: 16}
    for fold in (1, 2, 3):  # stratified: 8 pos and 8 neg in each held-out fold
        assert Counter(row["gold_label"] for row in oof if row["fold"] == fold) == {"pos": 8, "neg": 8}
    section = json.loads((out / "bertkit.json").read_text())["folds"]
    accuracies = [run["metrics"]["accuracy"] for run in section["runs"]]
    for fold, accuracy in zip((1, 2, 3), accuracies):  # each fold's accuracy is its out-of-fold rows'
        mine = [row for row in oof if row["fold"] == fold]
        assert accuracy == pytest.approx(sum(r["label"] == r["gold_label"] for r in mine) / len(mine), abs=1e-6)
    assert section["summary"]["accuracy"]["mean"] == pytest.approx(statistics.fmean(accuracies), abs=1e-6)
    assert section["summary"]["accuracy"]["std"] == pytest.approx(statistics.stdev(accuracies), abs=1e-6)
    assert section["chosen_fold"] == 1 + max(range(3), key=lambda i: accuracies[i])
    assert "accuracy over 3 folds:" in stdout and "out-of-fold predictions" in stdout
    assert "fold 1: accuracy" in stderr and not (tmp_path / "model.folds").exists()
    assert "3-fold cross-validation" in (out / "README.md").read_text()
    import yaml

    config = yaml.safe_load((out / "config.yaml").read_text())  # replays the whole cross-validation
    assert config["folds"] == 3 and config["output"] == str(out.resolve()) and config["eval_data"] is None


def test_ner_folds_keep_each_document_whole(tmp_path, tiny_bert, run_cli):
    documents = []
    for doc in range(6):
        sentences = [f"john B-PER\nvisited O\nparis B-LOC\nin O\n{doc} O" for _ in range(2 + doc % 3)]
        documents.append("-DOCSTART- O\n\n" + "\n\n".join(sentences))
    train = tmp_path / "train.txt"
    train.write_text("\n\n".join(documents) + "\n")
    sentence_doc = [doc for doc in range(6) for _ in range(2 + doc % 3)]
    out = tmp_path / "model"
    code, _, stderr = run_cli(
        "finetune",
        "ner",
        "--data",
        train,
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
        "--folds",
        3,
    )
    assert code == 0, stderr
    oof = read_rows(out / "oof-predictions.jsonl")
    assert [row["row"] for row in oof] == list(range(1, len(sentence_doc) + 1))
    for doc in range(6):  # a document's sentences are held out together
        assert len({row["fold"] for row, d in zip(oof, sentence_doc) if d == doc}) == 1
    assert all(row["gold_tags"] == ["B-PER", "O", "B-LOC", "O", "O"] for row in oof)


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (("--folds", 1), "--folds must be between 2 and 100"),
        (("--folds", 10**20), "--folds must be between 2 and 100"),  # not a job list of 10**20 runs first
        (("--folds", 2, "--seeds", 2), "one at a time"),
        (("--folds", 2, "--eval-data", "{train}"), "--eval-data has no place"),
        (("--folds", 2, "--max-eval-samples", 4), "--max-eval-samples does not apply with --folds"),
        (("--folds", 100), "needs at least 100 examples"),
    ],
)
def test_fold_mistakes(tmp_path, tiny_bert, run_cli, extra, fragment):
    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 20, seed=1)
    out = tmp_path / "model"
    args = [str(a).format(train=train) for a in extra]
    assert_user_error(
        run_cli("finetune", "cls", "--data", train, "--model", tiny_bert, "--output", out, "--epochs", 1, *args),
        fragment,
    )
    assert not out.exists() and not (tmp_path / "model.folds").exists()


class Stop(Exception):
    """Stands for Ctrl-C (or a lost machine) after a fold finished."""


def _folds_run(train, tiny_bert, out, resume=False, lr=1e-3, stop_after=None):
    from bertkit.api.folds import finetune_folds
    from bertkit.options import RepeatOptions, RunOptions, TrainConfig

    def on_run(fold, result):
        if fold == stop_after:
            raise Stop

    run = RunOptions(data=str(train), model=str(tiny_bert), output=str(out), resume=resume)
    config = TrainConfig(epochs=1, lr=lr, batch_size=8, max_length=32)
    return finetune_folds("cls", run, config, RepeatOptions(folds=3), on_run=on_run)


def test_a_stopped_set_of_folds_resumes_and_gives_the_rows_of_an_unstopped_one(tmp_path, tiny_bert, run_cli):
    from bertkit.events import listening

    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 48, seed=1)
    whole = _folds_run(train, tiny_bert, tmp_path / "whole")
    stopped = tmp_path / "stopped"
    with pytest.raises(Stop):
        _folds_run(train, tiny_bert, stopped, stop_after=2)
    assert not stopped.exists() and (tmp_path / "stopped.folds" / "fold-2.result.json").is_file()
    # a plain rerun refuses, and says how to continue
    assert_user_error(
        run_cli("finetune", "cls", "--data", train, "--model", tiny_bert, "--output", stopped, "--folds", 3),
        "pass --overwrite, or --resume to continue it",
    )
    # other settings or other data: never mixed into the set
    with pytest.raises(BertkitError, match=r"fold 1 .* other settings \(lr\)"):
        _folds_run(train, tiny_bert, stopped, resume=True, lr=2e-3)
    changed = tmp_path / "changed" / "train.csv"
    changed.parent.mkdir()
    write_sentiment_csv(changed, 48, seed=2)
    with pytest.raises(BertkitError, match="other data"):
        _folds_run(changed, tiny_bert, stopped, resume=True)
    events = []
    with listening(events.append):
        resumed = _folds_run(train, tiny_bert, stopped, resume=True)
    said = [e.text for e in events if e.kind == "resume"]
    assert said == ["--resume: fold(s) 1, 2 finished earlier and are taken as they are"]
    assert read_rows(stopped / "oof-predictions.jsonl") == read_rows(tmp_path / "whole" / "oof-predictions.jsonl")
    assert [run["metrics"] for run in resumed.runs] == [run["metrics"] for run in whole.runs]
    assert not (tmp_path / "stopped.folds").exists()  # the set's records go with its runs' directory
