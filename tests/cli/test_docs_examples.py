"""Every shell example in README.md and docs/*.md is run: each ```bash (or ```console) block's `bertkit`
commands run in-process (the run_cli fixture), page by page in a fresh directory, in the order the page
gives them, on the tiny BERT (for `minilm` and `bert-base-uncased`) and a miniature copy of the real data
(the first rows of each known dataset under $BERTKIT_DATA_DIR). A block that cannot run here says why
on the line before it: `<!-- not-run: needs a GPU -->`; those are counted, never silently skipped.

Where a documented value cannot work on a 2-layer, 32-wide model or would train for minutes, SHRINK
replaces it (a training command also gets `--max-train-samples` and `--epochs 1` when it has them)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA_DIR, REPO

FENCE = re.compile(r"^```\s*([\w-]*)")
SHELL = {"bash", "console", "sh", "shell"}
NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(.+?)\s*-->$")
STAND_INS = {"minilm", "bert-base-uncased"}  # replaced by the tiny BERT
# option -> the value the test gives it instead of the documented one (a tiny model, a few rows)
SHRINK = {
    "--max-steps": "4",
    "--eval-every": "2",
    "--save-every": "2",
    "--trials": "2",
    "--student-layers": "1",  # the tiny BERT has 2 layers
    "--matryoshka": "32,16",  # and 32 dimensions
    "--layer": "2",
    "--head": "1",
    "--max-train-samples": "24",
    "--epochs": "1",
    "--n": "3",
    "--corpus-chunk": "16",
}
APPENDED = {"--max-train-samples": "24", "--epochs": "1"}  # given to every command that has them


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks(path: Path):
    """(line number, language, text, not-run reason or None) for each fenced block of a page."""
    lines = path.read_text().split("\n")
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start, language = i, match.group(1)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = NOT_RUN.match(before)
        yield start + 1, language, "\n".join(lines[start + 1 : end]), marker.group(1) if marker else None
        i = end + 1


def shell_blocks(path: Path):
    return [(n, text, reason) for n, language, text, reason in blocks(path) if language in SHELL]


def commands(text: str) -> list[list[str]]:
    """The block's commands: continuation lines joined, comments dropped, $VARIABLES expanded."""
    joined = re.sub(r"\\\n\s*", " ", text)
    found = []
    for line in joined.split("\n"):
        words = shlex.split(line, comments=True)
        if words:
            found.append([os.path.expandvars(word) for word in words])
    return found


def options_of() -> dict[tuple, set]:
    sys.path.insert(0, str(REPO / "docs"))
    try:
        from gen_cli_reference import commands as cli_commands
    finally:
        sys.path.remove(str(REPO / "docs"))
    return {tuple(path[1:]): {o for p in c.params for o in getattr(p, "opts", [])} for path, c in cli_commands()}


def adapt(words: list[str], tiny: str, known: dict[tuple, set]) -> list[str]:
    args = [tiny if word in STAND_INS else word for word in words[1:]]
    for i, word in enumerate(args[:-1]):
        if word in SHRINK:
            args[i + 1] = SHRINK[word]
    command = next((key for key in sorted(known, key=len, reverse=True) if tuple(args[: len(key)]) == key), ())
    for option, value in APPENDED.items():
        if option in known.get(command, ()) and option not in args:
            args += [option, value]
    return args


def test_every_fence_names_its_language_and_every_shell_block_is_run_or_marked(capsys):
    """A fence without a language could hide a shell example from this test; a marker needs a reason."""
    run = skipped = run_commands = 0
    for page in pages():
        for number, language, text, reason in blocks(page):
            assert language, f"{page.relative_to(REPO)}:{number}: a fence needs a language (bash, text, python, ...)"
            if language not in SHELL:
                continue
            if reason:
                skipped += 1
                continue
            for words in commands(text):
                assert (
                    words[0] == "bertkit" or words[:2] == ["python", words[1]] and words[1].startswith("examples/")
                ), (
                    f"{page.relative_to(REPO)}:{number}: `{' '.join(words)}` is not a bertkit command or an "
                    "examples/ script: run it here or mark the block <!-- not-run: why -->"
                )
                assert not set(words) & {"|", ">", "&&", ";"}, f"{page.relative_to(REPO)}:{number}: one command a line"
            run += 1
            run_commands += len(commands(text))
    with capsys.disabled():
        print(f"\ndocs examples: {run} shell blocks ({run_commands} commands) run, {skipped} marked not-run")
    assert run > 0


# -- the miniature data and the files the examples name ----------------------------------------------

WORDS = ["good", "great", "fine", "bad", "awful", "poor"]


def _head(source: Path, target: Path, rows: int) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with source.open(encoding="utf-8", newline="") as handle:
        target.write_text("".join(line for _, line in zip(range(rows + 1), handle)), encoding="utf-8")


def _conll(source: Path, target: Path, sentences: int) -> None:
    parts = source.read_text(encoding="utf-8").split("\n\n")
    target.write_text("\n\n".join(parts[: sentences + 1]) + "\n", encoding="utf-8")


def _squad(source: Path, target: Path) -> None:
    squad = json.loads(source.read_text(encoding="utf-8"))
    for article in squad["data"]:
        article["paragraphs"] = article["paragraphs"][:1]
        article["paragraphs"][0]["qas"] = article["paragraphs"][0]["qas"][:2]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(squad), encoding="utf-8")


@pytest.fixture(scope="session")
def mini_data(tmp_path_factory) -> Path:
    """The first rows of every known dataset's files, in the original layout."""
    if not (DATA_DIR / "sst2" / "train.tsv").is_file():
        pytest.skip(f"real data not found at {DATA_DIR} (set BERTKIT_DATA_DIR)")
    root = tmp_path_factory.mktemp("mini-data")
    for source in DATA_DIR.rglob("*"):
        if not source.is_file():
            continue
        target = root / source.relative_to(DATA_DIR)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.parent.name == "conll2003" and source.suffix == ".txt":
            _conll(source, target, 40)
        elif source.name.endswith("-v1.1.json"):
            _squad(source, target)
        elif source.suffix in (".tsv", ".csv"):
            _head(source, target, 48)
        elif source.stat().st_size < 100_000:
            target.write_bytes(source.read_bytes())
    return root


def _lines(n: int, offset: int = 0) -> str:
    return "".join(f"the movie was {WORDS[(i + offset) % 6]}\n" for i in range(n))


def _span(start: int, text: str, label: str) -> dict:
    value = {"start": start, "end": start + len(text), "text": text, "labels": [label]}
    return {"from_name": "label", "to_name": "text", "type": "labels", "value": value}


def _label_studio(offset: int) -> str:
    """A Label Studio export of a few annotated ner tasks."""
    people = [("john", "paris"), ("mary", "london"), ("obama", "berlin"), ("john", "london")][offset:] * 3
    tasks = [
        {
            "id": i + 1,
            "data": {"text": f"{name} lives in {city}"},
            "annotations": [{"result": [_span(0, name, "PER"), _span(len(name) + 10, city, "LOC")]}],
        }
        for i, (name, city) in enumerate(people)
    ]
    return json.dumps(tasks)


def _emotions(offset: int) -> str:
    names = ["joy", "anger", "fear"]
    return "".join(
        json.dumps({"text": f"{WORDS[(i + offset) % len(WORDS)]} film number {i}", "labels": names[: 1 + i % 2]}) + "\n"
        for i in range(12)
    )


def example_files(tiny: str) -> dict[str, str]:
    """The files the examples name, small and in the tiny vocabulary's words."""
    labelled = [(f"the film was {WORDS[i % 6]}", "positive" if i % 6 < 3 else "negative") for i in range(12)]
    queries = [("who lives in paris", "john lives in paris"), ("who works in london", "mary works in london")]
    return {
        "reviews.txt": _lines(6),
        # a multi-label file (docs/calibration.md's sets): the tiny model's labels, 1-2 per row
        "emotions.jsonl": _emotions(0),
        "emotions-held-out.jsonl": _emotions(1),
        "texts.txt": _lines(6, 1),
        "sentences.txt": _lines(8, 2),
        "pool.txt": _lines(12, 3),
        "article.txt": "john lives in paris .\nhe works for google .\n",
        "sentences.jsonl": "".join(
            json.dumps({"text": t, "document": d}) + "\n"
            for t, d in [("john lives in paris", "d7"), ("he met mary", "d7"), ("obama visited berlin", "d8")]
        ),
        "words.jsonl": "".join(json.dumps({"tokens": t.split()}) + "\n" for t in ["john lives in paris", "a film"]),
        "few.csv": "text,label\n" + "".join(f"{t},{label}\n" for t, label in labelled),
        "few.tsv": "sentence1\tsentence2\tlabel\n"
        + "".join(f"{t}\tthe plot was {WORDS[i % 6]}\t{label}\n" for i, (t, label) in enumerate(labelled)),
        "export.json": _label_studio(0),
        "export-2.json": _label_studio(1),
        "pairs.jsonl": "".join(
            json.dumps({"anchor": f"what was the {w} film", "positive": f"the film was {w}"}) + "\n" for w in WORDS
        ),
        "triplets.jsonl": "".join(
            json.dumps({"anchor": f"a {w} movie", "positive": f"the movie was {w}", "negative": f"the plot was {v}"})
            + "\n"
            for w, v in zip(WORDS, reversed(WORDS))
        ),
        "qrels-pairs.jsonl": "".join(
            json.dumps({"query": q, "passage": p, "label": int(p == right)}) + "\n"
            for q, right in queries * 2
            for p in (right, "the movie was bad", "it was fine")
        ),
        "corpus.txt": "".join(f"{_lines(3, i)}\n" for i in range(6)),
        "docs.txt": "".join(f"{_lines(4, i)}\n" for i in range(8)),
        "base.yaml": f"data: sst2\nmodel: {tiny}\nepochs: 1\nmax-train-samples: 24\n",
    }


# -- running each page's blocks -----------------------------------------------------------------------


def _run(words, tiny, known, run_cli):
    if words[0] == "python":
        done = subprocess.run([sys.executable, *words[1:]], capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout, done.stderr
    return run_cli(*adapt(words, tiny, known))


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_the_shell_examples_of_a_page_run(page, tmp_path, tiny_bert, mini_data, run_cli, monkeypatch):
    runnable = [(n, text) for n, text, reason in shell_blocks(page) if reason is None]
    if not runnable:
        pytest.skip(f"{page.name}: no runnable shell example")
    monkeypatch.setenv("BERTKIT_DATA_DIR", str(mini_data))
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # examples/ scripts import this checkout's bertkit
    monkeypatch.chdir(tmp_path)
    (REPO / "examples").is_dir() and subprocess.run(["cp", "-r", str(REPO / "examples"), "examples"], check=True)
    for name, text in example_files(str(tiny_bert)).items():
        (tmp_path / name).write_text(text)
    known = options_of()
    for number, text in runnable:
        for words in commands(text):
            code, stdout, stderr = _run(words, str(tiny_bert), known, run_cli)
            where = f"{page.relative_to(REPO)}:{number}: {' '.join(words)}"
            assert code == 0, f"{where}\nexit {code}\n{stdout[-2000:]}\n{stderr[-3000:]}"
