"""One ownership rule for every delete: bertkit deletes only in bertkit/model_dir/removal.py, which
removes a directory only when everything in it is bertkit's (a manifest's entries, a model
directory's own files, bertkit's temporary names) and otherwise refuses, naming what is not.
The grep-level check, then the rule itself on hand-made directories."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from bertkit.errors import BertkitError
from bertkit.model_dir.ownership import MANIFEST, strangers
from bertkit.model_dir.removal import claim, discard_owned, remove_owned, remove_temporary

PACKAGE = Path(__file__).resolve().parents[2] / "bertkit"
THE_MODULE = PACKAGE / "model_dir" / "removal.py"
# what deletes: shutil.rmtree, Path.unlink / rmdir, os.remove / unlink / rmdir / removedirs, and
# pyarrow file systems' delete_* (a --ray output)
DELETERS = {"rmtree", "unlink", "rmdir", "removedirs", "delete_dir", "delete_dir_contents", "delete_file"}


def _deletes(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and (
            node.attr in DELETERS
            or (node.attr == "remove" and isinstance(node.value, ast.Name) and node.value.id == "os")
        ):
            found.append(f"{path.name}:{node.lineno} .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "shutil"):
            found += [
                f"{path.name}:{node.lineno} from {node.module} import {alias.name}"
                for alias in node.names
                if alias.name in DELETERS | {"remove"}
            ]
    return found


def test_only_the_removal_module_deletes():
    offences = [
        f"{path.parent.relative_to(PACKAGE.parent)}/{hit}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != THE_MODULE
        for hit in _deletes(path)
    ]
    assert not offences, "delete through bertkit.model_dir.removal:\n" + "\n".join(offences)
    assert _deletes(THE_MODULE), "the check would not see a delete"  # the scan finds the real ones


def test_the_scan_sees_every_way_to_delete(tmp_path):
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text(
        "import os, shutil\nfrom shutil import rmtree\nshutil.rmtree('x')\nos.remove('y')\n"
        "path.unlink()\nfs.delete_dir_contents('z')\nos.rmdir('w')\nnames.remove('kept')\n"
    )
    assert [hit.split(" ", 1)[1] for hit in _deletes(sneaky)] == [
        "from shutil import rmtree",
        ".rmtree",
        ".remove",
        ".unlink",
        ".delete_dir_contents",
        ".rmdir",
    ]  # a list's .remove is not a delete


def _model_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    for name in ("bertkit.json", "config.json", "model.safetensors", "vocab.txt"):
        (path / name).write_text("{}")
    (path / "figures").mkdir()
    (path / "figures" / "training.png").write_bytes(b"png")
    return path


def test_a_runs_directory_goes_only_when_it_holds_nothing_else(tmp_path):
    root = claim(tmp_path / "out.seeds", "seed-1", "seed-1.checkpoints", "seed-2")
    _model_dir(root / "seed-1")
    claim(root / "seed-1.checkpoints", "history.jsonl").joinpath("history.jsonl").write_text("")
    (root / ".seed-2.partial-999999-abcd1234").mkdir()  # a killed writer's staging folder: bertkit's by name
    assert json.loads((root / MANIFEST).read_text())["entries"] == ["seed-1", "seed-1.checkpoints", "seed-2"]
    assert strangers(root) == []

    (root / "notes.txt").write_text("mine")
    (root / "seed-1" / "figures" / "my-plot.svg").write_text("mine")
    (root / "seed-1.checkpoints" / "keep.me").write_text("mine")
    (root / "seed-3").mkdir()  # not listed: a directory bertkit did not make
    expected = ["notes.txt", "seed-1/figures/my-plot.svg", "seed-1.checkpoints/keep.me", "seed-3"]
    assert strangers(root) == expected
    with pytest.raises(BertkitError) as refused:
        remove_owned(root, "--overwrite")
    assert "holds files bertkit did not write (notes.txt, seed-1/figures/my-plot.svg, " in refused.value.message
    assert ", ...), which --overwrite would delete" in refused.value.message
    assert strangers(root) == expected and (root / "seed-1" / "model.safetensors").is_file()  # nothing removed
    assert discard_owned(root, "cleaning up") == expected and root.is_dir()  # kept whole, and said so

    for path in (
        root / "notes.txt",
        root / "seed-1" / "figures" / "my-plot.svg",
        root / "seed-1.checkpoints" / "keep.me",
    ):
        path.unlink()
    (root / "seed-3").rmdir()
    remove_owned(root, "--overwrite")
    assert not root.exists()


def test_an_edited_card_and_a_directory_without_a_manifest_are_the_users(tmp_path):
    model = _model_dir(tmp_path / "model")
    (model / "README.md").write_text("my own card\n")
    assert strangers(model) == ["README.md (not bertkit’s card)"]
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.txt").write_text("x")
    with pytest.raises(BertkitError, match="was not written by bertkit"):
        remove_owned(plain, "a test")
    assert (plain / "a.txt").is_file()
    (tmp_path / "empty").mkdir()
    remove_owned(tmp_path / "empty", "a test")  # an empty folder loses nothing
    assert not (tmp_path / "empty").exists()


def test_temporary_names_only(tmp_path):
    with pytest.raises(ValueError):
        remove_temporary(tmp_path / "model")  # a bug, never a silent delete
    staging = tmp_path / ".model.partial-123-abcd"
    staging.mkdir()
    (staging / "graph.onnx").write_text("x")
    remove_temporary(staging / "graph.onnx")  # a file inside bertkit's staging folder
    remove_temporary(staging)
    assert list(tmp_path.iterdir()) == []
