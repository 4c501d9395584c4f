"""The shared harness of the hostile-input corpora (tests/corpus/test_bad_input_corpus.py and the
tests/corpus/test_hostile_*.py files): small valid data files, the Context a case builds its command
line from, the Case record, and the check every case must pass: exit 2, ONE line
`error: ... (hint: ...)`, no traceback, nothing written or removed in the case's folder and the
shared model directories.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from conftest import assert_user_error

CLS_CSV = "text,label\n" + "".join(
    f"the film was {w},{lab}\n" for w, lab in [("good", "pos"), ("bad", "neg"), ("great", "pos"), ("awful", "neg")] * 4
)
PAIR_TSV = "sentence1\tsentence2\tlabel\n" + "".join(
    f"the film was {a}\tit was {b}\t{lab}\n"
    for a, b, lab in [("good", "good", "same"), ("bad", "great", "different")] * 6
)
NER_CONLL = "john B-PER\nlives O\nin O\nparis B-LOC\n\nmary B-PER\nvisited O\nberlin B-LOC\n\n" * 4
QA_RECORD = {
    "question": "who lives in paris ?",
    "context": "john lives in paris .",
    "answers": {"text": ["john"], "answer_start": [0]},
}
QA_JSONL = "".join(json.dumps({**QA_RECORD, "id": f"q{i}"}) + "\n" for i in range(8))


def jsonl(*records: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


@dataclass
class Context:
    tmp: Path
    tiny: Path
    trained: Callable[[str], Path]
    monkeypatch: pytest.MonkeyPatch

    def file(self, name: str, text: str | bytes) -> Path:
        path = self.tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return path

    def finetune(self, task: str, data, *extra) -> list:
        """A finetune command line writing to <tmp>/out; data is a file name + content, or a string."""
        if isinstance(data, tuple):
            data = self.file(*data)
        return [
            "finetune",
            task,
            "--data",
            data,
            "--model",
            self.tiny,
            "--output",
            self.tmp / "out",
            "--epochs",
            1,
            *extra,
        ]

    def offline(self) -> None:
        """No Hub and an empty Hugging Face cache, whatever the machine running the tests has."""
        import datasets
        import huggingface_hub.constants

        from bertkit import hub

        self.monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        self.monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", self.tmp.parent / "hf-datasets")
        self.monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(self.tmp.parent / "hf-hub"))
        hub.hub_reachable.cache_clear()


@dataclass
class Case:
    id: str
    args: Callable[[Context], list]
    fragments: tuple
    absent: tuple = ()  # what the line must not say: flags or commands the failing command does not have


def snapshot(*roots: Path) -> dict:
    """Every file (with its bytes) and directory under the roots."""
    return {str(p): (p.read_bytes() if p.is_file() else None) for root in roots for p in sorted(root.rglob("*"))}


def run_case(case: Case, context: Context, run_cli, capsys, *watched: Path, seconds: float = 20) -> tuple:
    """Run one case and assert the contract; returns the command's (code, stdout, stderr)."""
    from bertkit import hub

    try:
        args = case.args(context)  # may train a session model first: not part of what is measured
        capsys.readouterr()  # that training's progress is not the command's output
        roots = (context.tmp, context.trained.root, *watched)
        before = snapshot(*roots)
        started = time.perf_counter()
        result = run_cli(*args)
        elapsed = time.perf_counter() - started
    finally:
        hub.hub_reachable.cache_clear()
    assert_user_error(result, *case.fragments)
    for text in case.absent:
        assert text not in result[2], result[2]
    assert snapshot(*roots) == before, "a failing command wrote or removed something"
    assert elapsed < seconds, f"{case.id} took {elapsed:.1f}s: validation must come before the expensive work"
    return result
