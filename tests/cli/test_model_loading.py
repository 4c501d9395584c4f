"""Whatever is wrong with --model fails in one line (exit 2, no traceback) before any training, and
never leaves an output directory: an offline Hub name, missing tokenizer files, corrupt or
mismatched weights, a --max-length beyond the model's positions, an XLNet-style model, and a
bertkit.json whose task does not match the saved weights."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, assert_user_error
from tiny_models import POSITIONS, build_family

from bertkit.options import RunOptions

TRAIN_CSV = "text,label\n" + "".join(
    f"the film was {w},{lab}\n" for w, lab in [("good", "pos"), ("bad", "neg"), ("great", "pos"), ("awful", "neg")] * 4
)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("loading")
    return {name: build_family(name, root / name) for name in ("bert", "distilbert", "roberta")}


@pytest.fixture
def train_csv(tmp_path) -> Path:
    path = tmp_path / "train.csv"
    path.write_text(TRAIN_CSV)
    return path


def finetune(run_cli, train, out, model, *extra):
    return run_cli(
        "finetune", "cls", "--data", train, "--model", model, "--output", out, "--epochs", 1, "--batch-size", 8, *extra
    )


def no_training(result, out):
    assert "epoch" not in result[1] and not out.exists() and not list(out.parent.glob(f".{out.name}*"))


def copy_model(source: Path, target: Path, skip=()) -> Path:
    target.mkdir()
    for item in source.iterdir():
        if item.name not in skip and item.is_file():  # figures/ and the like are not the model
            shutil.copy(item, target / item.name)
    return target


def run_bertkit(args, env_extra, timeout=120):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
        BERTKIT_DEBUG="",
        OMP_NUM_THREADS="1",
        **env_extra,
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bertkit", *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout
    )
    return done, time.perf_counter() - started


# --- the Hub ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "offline",
    [{"HF_HUB_OFFLINE": "1"}, {"HF_ENDPOINT": "http://127.0.0.1:9"}],
    ids=["HF_HUB_OFFLINE", "unreachable-endpoint"],
)
def test_hub_name_fails_within_seconds_when_offline(offline, tmp_path, train_csv):
    out = tmp_path / "out"
    done, seconds = run_bertkit(
        ["finetune", "cls", "--data", train_csv, "--model", "bert-base-uncased", "--output", out],
        {"HF_HOME": str(tmp_path / "empty-cache"), **offline},
    )
    assert done.returncode == 2 and seconds < 10, (seconds, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --model bert-base-uncased"), done.stderr
    assert "Hub is unreachable and it is not in the local cache" in lines[0] and "--model minilm" in lines[0]
    assert not out.exists()


def test_hub_name_in_the_local_cache_still_loads_offline(models, tmp_path, train_csv):
    """A Hub id already downloaded (HF cache layout: refs/main -> snapshots/<commit>/) trains offline."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hf" / "hub" / "models--tiny-org--tiny-bert"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(models["bert"], repo / "snapshots" / commit)
    out = tmp_path / "out"
    done, _ = run_bertkit(
        [
            "finetune",
            "cls",
            "--data",
            train_csv,
            "--model",
            "tiny-org/tiny-bert",
            "--output",
            out,
            "--epochs",
            1,
            "--batch-size",
            8,
        ],
        {"HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": "http://127.0.0.1:9"},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "bertkit.json").read_text())["base_model"] == "tiny-org/tiny-bert"


# --- tokenizer and weights -------------------------------------------------------------------------
def test_directory_without_tokenizer_files_is_refused(models, tmp_path, train_csv, run_cli):
    # transformers would build an empty WordPiece tokenizer here and train on nothing but [UNK]
    model = copy_model(models["bert"], tmp_path / "weights-only", skip=("tokenizer.json", "tokenizer_config.json"))
    out = tmp_path / "out"
    result = finetune(run_cli, train_csv, out, model)
    assert_user_error(result, "no tokenizer files", "tokenizer.save_pretrained")
    no_training(result, out)


def test_tokenizer_with_only_special_tokens_is_refused(models, tmp_path, train_csv, run_cli):
    from transformers import BertTokenizer

    model = copy_model(models["bert"], tmp_path / "empty-vocab", skip=("tokenizer.json", "tokenizer_config.json"))
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    BertTokenizer(vocab={token: i for i, token in enumerate(specials)}).save_pretrained(model)
    out = tmp_path / "out"
    result = finetune(run_cli, train_csv, out, model)
    assert_user_error(result, "no vocabulary besides its special tokens")
    no_training(result, out)


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_corrupt_weights_fail_before_training(damage, models, tmp_path, train_csv, run_cli):
    model = copy_model(models["bert"], tmp_path / "corrupt")
    weights = model / "model.safetensors"
    if damage == "truncated":
        data = weights.read_bytes()
        weights.write_bytes(data[: len(data) // 2])
    else:
        weights.write_bytes(b"not a safetensors file")
    out = tmp_path / "out"
    result = finetune(run_cli, train_csv, out, model)
    assert_user_error(result, "the weights cannot be loaded (SafetensorError", "truncated or corrupt")
    no_training(result, out)


def test_weights_of_another_architecture_are_refused(models, tmp_path, train_csv, run_cli):
    """DistilBERT weights under a BERT config would load as a randomly initialised BERT."""
    model = copy_model(models["bert"], tmp_path / "mixed", skip=("model.safetensors",))
    shutil.copy(models["distilbert"] / "model.safetensors", model / "model.safetensors")
    out = tmp_path / "out"
    result = finetune(run_cli, train_csv, out, model)
    assert_user_error(result, "weight(s) are missing from the checkpoint", "bert.embeddings")
    no_training(result, out)


# --- positions ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_max_length_above_the_position_limit_fails_before_work(family, models, tmp_path, train_csv, run_cli):
    # both allow 128 tokens: BERT has 128 position embeddings, RoBERTa 130 of which 2 precede the first token
    out = tmp_path / "out"
    result = finetune(run_cli, train_csv, out, models[family], "--max-length", 129)
    assert_user_error(result, "--max-length 129 is above the 128 positions", "use --max-length 128 or less")
    no_training(result, out)


@pytest.fixture(scope="module")
def roberta_cls(models, tmp_path_factory) -> Path:
    """A RoBERTa classifier trained with the default max length, which the 128 positions cap."""
    from bertkit import api
    from bertkit.config import TrainConfig

    root = tmp_path_factory.mktemp("roberta-cls")
    (root / "train.csv").write_text(TRAIN_CSV)
    api.finetune(
        "cls",
        RunOptions(data=str(root / "train.csv"), model=str(models["roberta"]), output=str(root / "model")),
        config=TrainConfig(epochs=1, batch_size=8),
    )
    return root / "model"


def test_default_max_length_is_capped_and_long_inputs_stay_within_positions(roberta_cls, tmp_path, run_cli):
    assert json.loads((roberta_cls / "bertkit.json").read_text())["task"]["max_length"] == POSITIONS
    long_text = " ".join(["the film was very good and"] * 60)  # 360 words: truncated to 128 tokens
    (tmp_path / "long.txt").write_text(f"{long_text}\nbad\n")
    code, stdout, stderr = run_cli("predict", roberta_cls, "--input", tmp_path / "long.txt")
    assert code == 0, stderr
    assert [json.loads(line)["text"] for line in stdout.splitlines()] == [long_text, "bad"]


def test_saved_max_length_beyond_the_positions_is_refused(roberta_cls, tmp_path, run_cli):
    model = copy_model(roberta_cls, tmp_path / "edited")
    meta = json.loads((model / "bertkit.json").read_text())
    meta["task"]["max_length"] = 300
    (model / "bertkit.json").write_text(json.dumps(meta))
    (tmp_path / "rows.txt").write_text("good\n")
    (tmp_path / "dev.csv").write_text(TRAIN_CSV)
    for args in (("eval", model, "--data", tmp_path / "dev.csv"), ("predict", model, "--input", tmp_path / "rows.txt")):
        result = run_cli(*args)
        assert_user_error(result, "asks for max_length 300, above the 128 positions")
        assert result[1] == ""
    assert not list(model.glob("eval-*.json"))  # nothing written


# --- saved heads --------------------------------------------------------------------------------------
def test_bertkit_json_task_must_match_the_saved_head(roberta_cls, tmp_path, run_cli):
    model = copy_model(roberta_cls, tmp_path / "mislabelled")
    meta = json.loads((model / "bertkit.json").read_text())
    meta["task"] = {"task": "ner", "max_length": 128, "options": {}, "labels": ["O", "B-PER"]}
    (model / "bertkit.json").write_text(json.dumps(meta))
    (tmp_path / "rows.txt").write_text("John lives in Paris\n")
    result = run_cli("predict", model, "--input", tmp_path / "rows.txt")
    assert_user_error(result, "needs ...ForTokenClassification weights", "RobertaForSequenceClassification")
    assert result[1] == ""


def test_missing_head_weights_are_refused_even_without_architectures(roberta_cls, tmp_path, run_cli):
    """No 'architectures' to compare: loading finds the QA head missing instead of inventing one."""
    model = copy_model(roberta_cls, tmp_path / "no-arch")
    config = json.loads((model / "config.json").read_text())
    config.pop("architectures")
    (model / "config.json").write_text(json.dumps(config))
    meta = json.loads((model / "bertkit.json").read_text())
    meta["task"] = {"task": "qa", "max_length": 128, "options": {}, "labels": None}
    (model / "bertkit.json").write_text(json.dumps(meta))
    (tmp_path / "q.jsonl").write_text(json.dumps({"question": "who ?", "context": "John lives in Paris ."}) + "\n")
    assert_user_error(run_cli("predict", model, "--input", tmp_path / "q.jsonl"), "qa_outputs")


# --- encoders that read [CLS] last or pad on the left -------------------------------------------------
def test_xlnet_is_refused(tmp_path, train_csv, run_cli):
    from transformers import XLNetConfig, XLNetModel, XLNetTokenizer

    vocab = [
        ("<unk>", 0.0),
        ("<s>", 0.0),
        ("</s>", 0.0),
        ("<cls>", 0.0),
        ("<sep>", 0.0),
        ("<pad>", 0.0),
        ("<mask>", 0.0),
    ] + [(f"▁{w}", -2.0) for w in "the film was good bad great awful".split()]
    model = tmp_path / "xlnet"
    XLNetModel(XLNetConfig(vocab_size=len(vocab), d_model=32, n_layer=1, n_head=2, d_inner=64)).save_pretrained(model)
    XLNetTokenizer(vocab=vocab).save_pretrained(model)
    out = tmp_path / "out"
    result = finetune(run_cli, train_csv, out, model)
    assert_user_error(result, "xlnet puts [CLS] last and pads on the left", "[CLS] first")
    no_training(result, out)


def test_left_padding_tokenizer_is_refused(models, tmp_path, train_csv, run_cli):
    model = copy_model(models["bert"], tmp_path / "left")
    settings = json.loads((model / "tokenizer_config.json").read_text())
    (model / "tokenizer_config.json").write_text(json.dumps({**settings, "padding_side": "left"}))
    out = tmp_path / "out"
    result = finetune(run_cli, train_csv, out, model)
    assert_user_error(result, "puts [CLS] last or pads on the left")
    no_training(result, out)


@pytest.mark.parametrize("command", ["embed", "probe", "pretrain", "inspect"])
def test_every_command_checks_max_length_against_the_same_position_limit(models, train_csv, tmp_path, run_cli, command):
    """RoBERTa's config says POSITIONS + 2 (its positions start after the padding index): finetune's
    one check refuses that length, and so does every other command that runs a model."""
    roberta, beyond = models["roberta"], POSITIONS + 2
    (tmp_path / "corpus.txt").write_text("the film was good\n\nthe plot was bad\n")
    (tmp_path / "rows.txt").write_text("the film was good\nthe plot was bad\n")
    args = {
        "embed": ["embed", roberta, "--input", tmp_path / "rows.txt", "--output", tmp_path / "v.npy"],
        "probe": ["probe", "cls", "--data", train_csv, "--model", roberta, "--output", tmp_path / "p"],
        "pretrain": [
            "pretrain",
            "mlm",
            "--data",
            tmp_path / "corpus.txt",
            "--model",
            roberta,
            "--output",
            tmp_path / "m",
        ],
        "inspect": ["inspect", "attention", roberta, "--text", "the film", "--json", "--output", tmp_path / "a.json"],
    }[command]
    assert_user_error(
        run_cli(*args, "--max-length", beyond),
        f"--max-length {beyond} is above the {POSITIONS} positions",
        f"use --max-length {POSITIONS} or less",
    )
    assert not any((tmp_path / name).exists() for name in ("v.npy", "p", "m", "a.json"))
