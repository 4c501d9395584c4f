"""The one place bertkit deletes anything (tests/unit/test_one_delete_rule.py keeps it the only one).

Every delete follows model_dir.ownership's rule: a directory goes only when everything in it is
bertkit's (its manifest's entries, a model directory's own files, bertkit's temporary names);
anything else is named in a refusal and nothing is deleted. ``claim`` writes the manifest: a
directory bertkit makes lists each entry before the entry is made, so a kill in between leaves
nothing unlisted.
"""

from __future__ import annotations

import fnmatch
import json
import os
import secrets
import shutil
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.model_dir.ownership import MANIFEST, META_FILE, listed, named, owns, refuse_strangers, strangers, temporary


def claim(directory: Path, *names: str) -> Path:
    """Record in ``directory``'s manifest that bertkit makes ``names`` there (the directory and its
    manifest are made when missing); returns ``directory``. Call it before making them."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    entries = listed(directory)
    if set(names) <= entries and (directory / MANIFEST).is_file():
        return directory
    text = json.dumps({"written_by": "bertkit", "entries": sorted(entries | set(names))}, indent=1) + "\n"
    tmp = directory / f".{MANIFEST}.{os.getpid()}-{secrets.token_hex(4)}.tmp"  # a temporary name (ownership)
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, directory / MANIFEST)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return directory


def remove_owned(path: Path, what: str, also: tuple = (), hint: str | None = None) -> None:
    """Delete ``path`` (a directory bertkit made, or an entry of one) when all of it is bertkit's;
    else refuse in one line naming what is not (``what`` would have deleted it), deleting nothing.
    ``also``: name patterns that are bertkit's inside ``path`` (a layout that holds no manifest)."""
    path = Path(path)
    if not os.path.lexists(path):
        return
    if not (owns(path.parent, path.name) or _self_owned(path)):
        raise BertkitError(
            f"{path} was not written by bertkit, and {what} would delete it", hint or f"move {path} elsewhere"
        )
    if path.is_dir() and not path.is_symlink():
        refuse_strangers(path, what, also, hint)
    try:
        _delete(path)
    except OSError as exc:
        raise BertkitError(
            f"cannot remove {path} ({exc.strerror or type(exc).__name__})", "check its permissions"
        ) from None


def discard_owned(path: Path, what: str, also: tuple = ()) -> list[str]:
    """``remove_owned`` where a refusal must not stop anything (after a failure, or once a run's
    result is in place): a directory holding files bertkit did not write is kept whole and said so.
    Returns what was kept; never raises."""
    path = Path(path)
    try:
        found = strangers(path, also) if path.is_dir() and not path.is_symlink() else []
        if found:
            notice(
                "warning",
                f"kept {path}: it holds files bertkit did not write ({named(found)}), so {what} left it in place",
                path=str(path),
                kept=found,
            )
            return found
        if os.path.lexists(path):
            _delete(path)
    except OSError:
        pass  # best effort: the run's own outcome is what the user hears about
    return []


def remove_temporary(path: Path) -> None:
    """Delete one of bertkit's temporary siblings (a staging folder, an atomic file's .tmp, a
    ``.step-N.tmp``, a probe, a replaced model moved aside to ``.NAME.old`` after it was checked):
    bertkit's by its name, made by bertkit alone), or a file bertkit wrote inside a staging folder.
    Errors are ignored (it is only a leftover)."""
    path = Path(path)
    if not (_temporary(path.name) or _temporary(path.parent.name)):  # or a file inside a staging folder
        raise ValueError(f"{path} is not a bertkit temporary name")  # a bug: nothing else goes this way
    try:
        _delete(path)
    except OSError:
        pass


def remove_made_empty(directories: list[Path]) -> None:
    """Remove the directories bertkit made for a run that wrote nothing in them (deepest first),
    stopping at the first that holds anything."""
    for directory in directories:
        try:
            Path(directory).rmdir()
        except OSError:
            return


def remove_matching(filesystem, path: str, shown: str, patterns: tuple, what: str) -> None:
    """Empty a directory on a pyarrow file system (local or a URL: a Parquet dataset, which cannot
    hold a manifest) when all in it matches ``patterns``; else refuse, naming what does not."""
    import pyarrow.fs as pafs

    names = sorted(info.base_name for info in filesystem.get_file_info(pafs.FileSelector(path, recursive=False)))
    found = [name for name in names if not any(fnmatch.fnmatchcase(name, p) for p in patterns)]
    if found:
        raise BertkitError(
            f"{shown} holds files bertkit did not write ({named(found)}), which {what} would delete",
            f"move them out of {shown} first, or choose another directory",
        )
    filesystem.delete_dir_contents(path)


def _temporary(name: str) -> bool:
    return temporary(name) or (name.startswith(".") and name.endswith(".old"))


def _self_owned(path: Path) -> bool:
    """A directory says it is bertkit's by its manifest or, a model directory, by its bertkit.json;
    an empty one loses nothing."""
    if not path.is_dir() or path.is_symlink():
        return False
    return (path / MANIFEST).is_file() or (path / META_FILE).is_file() or not any(path.iterdir())


def _delete(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
