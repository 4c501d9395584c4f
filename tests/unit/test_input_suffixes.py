"""Input-file suffixes are spelled in ONE place, bertkit/data/formats.py's registry: no other module
holds a tuple, list or set of two or more of them, or tests a value's membership in one (``suffix in
(".csv", ".tsv")``, ``".jsonl" in suffixes``). A module that writes files may name its OUTPUT
formats, when it is allow-listed here with the reason."""

from __future__ import annotations

import ast
from pathlib import Path

from bertkit.data import formats

PACKAGE = Path(__file__).resolve().parents[2] / "bertkit"
REGISTRY = PACKAGE / "data" / "formats.py"
ALLOWED = {  # path under bertkit/ -> why its suffixes are not input formats
    "data/sinks.py": "predict's and embed's --output writers (.jsonl, .parquet, .npy)",
    "api/embedding.py": "embed's --output formats (.npy, .npz, .jsonl, .parquet)",
    "data/annotation_sinks.py": "--format label-studio/doccano writes a JSON list or JSON Lines",
    "ray/outputs.py": "--ray writes a directory of Parquet files: an output named like a file is refused",
    "models/__init__.py": "the files of a model directory transformers reads (config .json, vocab .txt), not data",
}


def input_suffixes() -> set[str]:
    return set(formats.suffixes()) | set(formats.DATASET_ONLY_SUFFIXES)


def _suffix_literals(node: ast.AST, known: set[str]) -> list[str]:
    if not isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return []
    return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in known]


def stray_suffixes(path: Path, known: set[str], root: Path = PACKAGE.parent) -> list[str]:
    """``file:line: what`` for each collection of 2+ input suffixes and each membership test on one."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        literals = _suffix_literals(node, known)
        if len(literals) >= 2:
            found.append((node.lineno, f"suffixes {', '.join(literals)} spelled outside the registry"))
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            left = node.left
            tested = [left.value] if isinstance(left, ast.Constant) and left.value in known else []
            for comparator in node.comparators:
                tested += _suffix_literals(comparator, known)
            if tested and len(_suffix_literals(node.comparators[0], known)) < 2:  # not reported twice
                found.append((node.lineno, f"membership test on {', '.join(tested)}"))
    relative = path.relative_to(root)
    return [f"{relative}:{line}: {what}" for line, what in sorted(set(found))]


def test_the_scan_finds_what_it_looks_for(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        'A = (".csv", ".tsv")\n'
        "def f(s):\n"
        '    return s in (".txt",) or ".jsonl" in s or s.endswith((".json", ".parquet"))\n'
        'B = {".npy": 1}\n'
        'C = (".csv", ".npy")\n'
        'D = A == ".tsv"\n'
    )
    found = stray_suffixes(sample, input_suffixes(), tmp_path)
    assert [line.split(":")[1] for line in found] == ["1", "3", "3", "3"], found
    assert found[0].startswith("sample.py:1: suffixes .csv, .tsv")


def test_no_input_suffix_tuple_outside_the_registry():
    known = input_suffixes()
    stray = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if path == REGISTRY or relative in ALLOWED:
            continue
        stray += stray_suffixes(path, known)
    assert not stray, "declare input formats once, in bertkit/data/formats.py:\n" + "\n".join(stray)


def test_the_allow_list_names_existing_modules_that_need_it():
    known = input_suffixes()
    for relative, reason in ALLOWED.items():
        path = PACKAGE / relative
        assert path.is_file() and reason, relative
        assert stray_suffixes(path, known), f"{relative} no longer spells suffixes: drop it from ALLOWED"
