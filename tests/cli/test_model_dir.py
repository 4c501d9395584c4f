"""bertkit.json: one schema for every command that writes a model directory, old (schema 1)
directories still served by eval and predict, and updates that a crash cannot half-write."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
from pathlib import Path

import pytest
from test_cli_classification import write_sentiment_csv
from test_mlm import write_corpus

from bertkit.errors import BertkitError
from bertkit.model_dir import DATA_KEYS, META_FILE, META_KEYS, SCHEMA, atomic_file, load_meta, update_meta, upgrade_meta

V1 = (
    Path(__file__).resolve().parents[1] / "fixtures" / "model-dir-v1"
)  # written by `bertkit finetune cls` before schema 2


@pytest.fixture
def v1_dir(tmp_path) -> Path:
    """A copy: eval writes its metrics and report into the model directory."""
    return Path(shutil.copytree(V1, tmp_path / "model-v1"))


def count_meta_reads(monkeypatch) -> list:
    reads = []
    original = pathlib.Path.read_text

    def read_text(self, *args, **kwargs):
        if self.name == META_FILE:
            reads.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "read_text", read_text)
    return reads


def test_a_schema_1_directory_still_evaluates_and_predicts(v1_dir, tmp_path, run_cli, monkeypatch):
    on_disk = (v1_dir / META_FILE).read_text()
    write_sentiment_csv(tmp_path / "dev.csv", 12, seed=3)
    reads = count_meta_reads(monkeypatch)
    code, stdout, stderr = run_cli("eval", v1_dir, "--data", tmp_path / "dev.csv", "--precision", "no")
    assert code == 0, stderr
    assert len(reads) == 1  # eval hands the one copy it read to loading and to the report
    report = json.loads((v1_dir / "eval-dev.json").read_text())
    assert report["examples"] == 12 and set(report["metrics"]) >= {"accuracy", "f1", "mcc"}
    assert (v1_dir / META_FILE).read_text() == on_disk  # nothing tuned, so nothing rewritten

    (tmp_path / "in.txt").write_text("the plot was awful\na great film\n")
    code, stdout, stderr = run_cli("predict", v1_dir, "--input", tmp_path / "in.txt", "--precision", "no")
    assert code == 0, stderr
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert [row["text"] for row in rows] == ["the plot was awful", "a great film"]
    assert all(row["label"] in {"neg", "pos"} for row in rows)


def test_load_meta_upgrades_schema_1_in_memory(v1_dir):
    raw = json.loads((v1_dir / META_FILE).read_text())
    assert "schema" not in raw
    meta = load_meta(str(v1_dir))
    assert list(meta) == list(META_KEYS) and meta["schema"] == SCHEMA and meta["kind"] == "finetune"
    assert list(meta["data"]) == list(DATA_KEYS)
    for key in raw:
        assert meta[key] == raw[key], key  # filled in, nothing changed
    assert meta["before"] is None and meta["probe"] is None and meta["pretraining"] is None
    assert json.loads((v1_dir / META_FILE).read_text()) == raw  # reading never rewrites


def test_schema_1_probe_and_pretrain_dicts_upgrade_to_their_kind():
    task = {"task": "mlm", "max_length": 16, "options": {}, "labels": None}
    pretrain = upgrade_meta(
        {
            "task": task,
            "pretraining": {"objective": "masked LM"},
            "before": {"loss": 4.5},
            "data": {"train": "c.txt", "train_documents": 24, "eval_documents": 8},
        }
    )
    assert pretrain["kind"] == "pretrain" and pretrain["before"] == {"loss": 4.5}
    assert pretrain["data"]["train_examples"] == 24 and pretrain["data"]["eval_examples"] == 8
    assert set(pretrain["data"]) == set(DATA_KEYS) and pretrain["history"] == [] and pretrain["config"] == {}
    probe = upgrade_meta({"task": {**task, "task": "cls"}, "probe": {"pooling": "mean"}, "best_epoch": None})
    assert probe["kind"] == "probe" and list(probe) == list(META_KEYS)


@pytest.mark.parametrize(
    "content, message",
    [
        ({"schema": SCHEMA + 1, "task": {"task": "cls"}}, f"schema {SCHEMA + 1}"),
        (["not", "a", "dict"], "corrupt"),
        ({"metrics": {}}, "corrupt"),
    ],
)
def test_unreadable_meta_is_a_user_error(tmp_path, content, message):
    (tmp_path / META_FILE).write_text(json.dumps(content))
    with pytest.raises(BertkitError, match=message):
        load_meta(str(tmp_path))


def test_finetune_probe_and_pretrain_write_one_key_set(tmp_path, tiny_bert, run_cli):
    write_sentiment_csv(tmp_path / "train.csv", 40, seed=1)
    write_sentiment_csv(tmp_path / "dev.csv", 12, seed=2)
    write_corpus(tmp_path / "corpus.txt", 8, seed=1)
    common = ["--model", tiny_bert, "--batch-size", 8]
    runs = {
        "finetune": [
            "finetune",
            "cls",
            "--data",
            tmp_path / "train.csv",
            "--eval-data",
            tmp_path / "dev.csv",
            "--epochs",
            1,
            "--max-length",
            16,
        ],
        "probe": [
            "probe",
            "cls",
            "--data",
            tmp_path / "train.csv",
            "--eval-data",
            tmp_path / "dev.csv",
            "--holdout",
            "0.25",
            "--max-length",
            16,
        ],
        "pretrain": [
            "pretrain",
            "mlm",
            "--data",
            tmp_path / "corpus.txt",
            "--eval-share",
            "0.25",
            "--epochs",
            1,
            "--max-length",
            16,
        ],
    }
    written = {}
    for kind, args in runs.items():
        code, _, stderr = run_cli(*args, *common, "--output", tmp_path / kind)
        assert code == 0, stderr
        written[kind] = json.loads((tmp_path / kind / META_FILE).read_text())
    for kind, meta in written.items():
        assert list(meta) == list(META_KEYS), kind
        assert meta["schema"] == SCHEMA and meta["kind"] == kind
        assert list(meta["data"]) == list(DATA_KEYS), kind
        assert "notice" not in meta["runtime"]
        assert load_meta(str(tmp_path / kind)) == meta  # schema 2 is read as written
    assert written["finetune"]["data"]["eval_file"] == str((tmp_path / "dev.csv").resolve())
    assert written["probe"]["data"]["eval_file"] == str((tmp_path / "dev.csv").resolve())
    assert written["pretrain"]["data"] | {"train": None} == {
        "name": None,
        "train": None,
        "data_dir": None,
        "eval": "2 held-out examples of the training data",
        "eval_file": None,
        "train_examples": 6,
        "eval_examples": 2,
    }
    assert written["probe"]["probe"]["pooling"] and written["finetune"]["probe"] is None
    assert written["pretrain"]["before"] and written["finetune"]["before"] is None


def test_an_interrupted_update_leaves_the_old_file(v1_dir, monkeypatch):
    path = v1_dir / META_FILE
    before = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="No space left"):
        update_meta(v1_dir, {"metrics": {"accuracy": 1.0}})
    assert path.read_bytes() == before
    assert sorted(p.name for p in v1_dir.iterdir() if p.name.startswith(".")) == []  # no temporary file left
    monkeypatch.undo()

    updated = update_meta(v1_dir, {"metrics": {"accuracy": 1.0}})
    on_disk = json.loads(path.read_text())
    assert on_disk == updated and on_disk["schema"] == SCHEMA and on_disk["metrics"] == {"accuracy": 1.0}
    assert on_disk["task"] == json.loads(before)["task"]
    for change in ({"threshold": 0.5}, {"kind": "probe"}):
        with pytest.raises(ValueError, match="cannot set"):
            update_meta(v1_dir, change)


def test_a_failed_file_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "vectors.npy"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_file(target, "wb") as handle:
            handle.write(b"half of the new")
            raise RuntimeError("killed mid-write")
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["vectors.npy"]


def test_run_siblings_are_named_in_one_place():
    from bertkit import model_dir
    from bertkit.engine import checkpoints, tracking

    assert checkpoints.checkpoint_root is model_dir.checkpoint_root
    assert tracking.logging_dir is model_dir.logging_dir
    out = Path("/runs/model")
    assert [model_dir.checkpoint_root(out), model_dir.logging_dir(out), model_dir.trash_dir(out)] == [
        Path("/runs/model.checkpoints"),
        Path("/runs/model.logs"),
        Path("/runs/.model.old"),
    ]
    assert model_dir.staging_prefix(out) == ".model.partial-"
