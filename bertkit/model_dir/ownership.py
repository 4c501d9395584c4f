"""What bertkit wrote, so that nothing else is ever deleted: the one rule every delete and every
replace goes through (bertkit.model_dir.removal does the deleting).

A directory bertkit makes that is not a model directory (``OUT.seeds/``, ``OUT.folds/``,
``OUT.tune/``, ``OUT.checkpoints/`` and each ``step-N/``) holds a manifest, ``.bertkit-owned.json``,
listing each entry bertkit made there, written before the entry is (``NAME/``: a folder whose
whole content bertkit's libraries write, such as the trackers' logs). A model directory's manifest is
the list of names its commands write (``OURS``, with the folders inside it in ``FOLDERS``): a notes
file dropped in, a prediction file written there, a model card the user edited are the user's. The
card ends with a digest of itself, so an edit shows (``card_state``). bertkit's own temporary
siblings (a staging folder with its writer's pid, an atomic file's ``.tmp``, ``.step-N.tmp``) are
its own by their names. Anything else in a directory is the user's: a delete refuses, naming it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.model_dir.fingerprint import file_digest

META_FILE = "bertkit.json"  # a directory holding it is a (complete) bertkit model directory
CARD_FILE = "README.md"
NEW_CARD_FILE = "README.bertkit.md"  # bertkit's new card, next to a README.md the user edited
CARD_MARK = re.compile(r"\n<!-- bertkit card sha256:([0-9a-f]{64})[^\n]*-->\n\Z")
# eval's results: the metrics JSON, its predictions file and (--data BEIR_DIR) its run file
RESULTS = ("eval-*", "predictions-*.jsonl", "run-*.trec")
# What bertkit's commands write into a model directory, besides the card: finetune / probe /
# pretrain (bertkit.json, config.yaml, history, results, figures, report, oof predictions, the
# probe head), eval (eval-*.json and their predictions), export (onnx/, openvino/), and what
# save_pretrained writes for the model and its tokenizer (names vary with the tokenizer).
OURS = (
    META_FILE,
    "config.yaml",
    "history.jsonl",
    "results.json",
    "report.html",
    "figures",
    "oof-predictions.jsonl",
    "probe_head.safetensors",
    *RESULTS,
    "onnx",
    "openvino",
    NEW_CARD_FILE,
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "adapter_config.json",  # finetune --lora --save-adapter (peft's format)
    "adapter_model.safetensors",
    "model-*.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "tokenizer*",
    "vocab*",
    "merges.txt",
    "special_tokens_map.json",
    "added_tokens.json",
    "*.model",
    "chat_template*",
    # sentence-transformers' directory files (finetune embedding, --recipe setfit) and SetFit's head
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling",
    "2_Normalize",  # the base's Normalize module, kept (bertkit.networks.bi_encoder)
    "config_setfit.json",
    "model_head.pkl",
)


# Of those, what makes the model and its record: a result file written over one damages the model
# (eval's own eval-*.json, predictions-*.jsonl and run-*.trec are results, rewritten for their model).
MODEL_FILES = tuple(p for p in OURS if p not in (*RESULTS, NEW_CARD_FILE)) + (CARD_FILE,)


def is_model_file(path: Path) -> bool:
    """Whether ``path`` is one of the files of the bertkit model directory it sits in."""
    return (path.parent / META_FILE).is_file() and any(fnmatch.fnmatchcase(path.name, p) for p in MODEL_FILES)


def card_state(path: Path) -> str:
    """ "ours" (absent, or bertkit's card unchanged), "edited" (bertkit's, changed since) or
    "unsigned" (the user's own, or a card from a bertkit version before the signature)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "ours"
    except (OSError, UnicodeDecodeError):
        return "unsigned"  # unreadable or not text: certainly not ours to replace
    mark = CARD_MARK.search(text)
    if mark is None:
        return "unsigned"
    return "ours" if hashlib.sha256(text[: mark.start()].encode("utf-8")).hexdigest() == mark.group(1) else "edited"


MANIFEST = ".bertkit-owned.json"  # in each directory bertkit makes that is not a model directory
# The folders inside a model directory and what bertkit writes in them: the figures, an export's files.
EXPORT_FILES = ("export.json", "model*.onnx", "model*.onnx.data", "model*.xml", "model*.bin")
FOLDERS = {
    "figures": ("*.png",),
    "onnx": EXPORT_FILES,
    "openvino": EXPORT_FILES,
    "1_Pooling": ("config.json",),
    "2_Normalize": ("config.json",),
}
# bertkit's own by their names: a staging folder (.NAME.partial-<pid>-<random>), an atomic file's
# temporary (.NAME.<pid>-<random>.tmp), a checkpoint being written (.step-N.tmp), a probe, and the
# parts of an unfinished streamed output (.NAME.bertkit-partial, checked inside by its layout).
TEMPORARY = re.compile(
    r"\..+\.partial-[\w-]+|\..+\.\d+-[0-9a-f]{8}\.tmp|\.step-\d+\.tmp|\.bertkit-probe-\w+|\..+\.bertkit-partial"
    r"|\..+\.bertkit-lock"  # model_dir/writer_lock.py
)


def listed(directory: Path) -> set[str]:
    """The names ``directory``'s manifest lists (none without one, or with one bertkit cannot read)."""
    try:
        entries = json.loads((Path(directory) / MANIFEST).read_text(encoding="utf-8")).get("entries")
    except (OSError, ValueError, AttributeError):
        return set()
    return {name for name in entries if isinstance(name, str)} if isinstance(entries, list) else set()


def strangers(directory: Path, also: tuple = ()) -> list[str]:
    """What in ``directory`` (and in the folders of it that are bertkit's) bertkit did not write,
    as paths relative to it: empty when removing ``directory`` deletes nothing of the user's.
    ``also``: name patterns a caller's own layout owns (a Parquet dataset cannot hold a manifest)."""
    directory = Path(directory)
    if not directory.is_dir() or directory.is_symlink():
        return []
    model, names = (directory / META_FILE).is_file(), listed(directory)
    found = []
    for entry in sorted(directory.iterdir(), key=lambda p: p.name):
        name = entry.name
        if model and name == CARD_FILE:
            state = card_state(entry)
            if state != "ours":
                found.append(f"{CARD_FILE} ({'edited' if state == 'edited' else 'not bertkit’s card'})")
        elif not owns(directory, name, also, names):
            found.append(name)
        elif entry.is_dir() and not entry.is_symlink() and not temporary(name) and f"{name}/" not in names:
            found += [f"{name}/{inner}" for inner in strangers(entry)]
    return found


def owns(directory: Path, name: str, also: tuple = (), names: set | None = None) -> bool:
    """Whether bertkit wrote the entry ``name`` of ``directory`` (not looking inside it); ``names``:
    its manifest's, when the caller has read them."""
    if name == MANIFEST or temporary(name):
        return True
    if name.startswith(".") and name.endswith(".old"):  # .NAME.old: a replaced NAME, checked before it moved aside
        return owns(directory, name[1:-4], also, names)
    patterns = tuple(also) + _patterns(Path(directory))
    names = listed(directory) if names is None else names
    return name in names or f"{name}/" in names or any(fnmatch.fnmatchcase(name, p) for p in patterns)


def temporary(name: str) -> bool:
    return TEMPORARY.fullmatch(name) is not None


def _patterns(directory: Path) -> tuple:
    """The names a model directory's commands write in it, or in a folder of one."""
    if (directory / META_FILE).is_file():
        return OURS
    if directory.name in FOLDERS and (directory.parent / META_FILE).is_file():
        return FOLDERS[directory.name]
    return ()


def foreign_files(directory: Path) -> list[str]:
    """The entries of ``directory`` that bertkit did not write (a card the user changed among them)."""
    return strangers(directory)


def named(found: list[str]) -> str:
    return ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")


def refuse_strangers(directory: Path, what: str, also: tuple = (), hint: str | None = None) -> None:
    """One line naming what in ``directory`` is not bertkit's, when anything is: ``what`` would delete it."""
    found = strangers(directory, also)
    if found:
        raise BertkitError(
            f"{directory} holds files bertkit did not write ({named(found)}), which {what} would delete",
            hint or f"move them out of {directory} first",
        )


def check_replaceable(output: Path) -> None:
    """--overwrite replaces a bertkit model directory, and only one holding nothing but bertkit's files."""
    if not (output / META_FILE).is_file():
        found = ", ".join(sorted(p.name for p in output.iterdir())[:3])
        raise BertkitError(
            f"--output {output} holds files bertkit did not write ({found}, ...); --overwrite "
            f"replaces only a bertkit model directory",
            "choose a new directory for the model",
        )
    foreign = foreign_files(output)
    if foreign:  # the user's own files added to a model directory: replacing it would delete them
        raise BertkitError(
            f"--output {output} holds files bertkit did not write ({named(foreign)}), which --overwrite would delete",
            f"move them out of {output} first, or choose a new directory for the model",
        )


# --- eval's result files (the metrics JSON, its predictions file, its run file) -------------------
# A metrics JSON is bertkit's for the model its report names; it records (``outputs``) the model
# and the sha256 of each file written with it (names derived from its own: bertkit.training.results),
# so a derived file is replaced only when it is still the one written with that JSON for that model.
# In the model's own directory the result names are the directory's (``RESULTS``), as above.


def model_identity(model) -> str:
    """A model as a result file records it: a local path resolved, else the name (a Hub id)."""
    path = Path(str(model)).expanduser()
    return str(path.resolve()) if path.exists() else str(model)


def results_record(model, *written: Path) -> dict:
    """What a metrics JSON records of its writing (its ``outputs``): the model, each file's digest."""
    return {"model": model_identity(model), "files": {path.name: file_digest(path) for path in written}}


def check_results_kept(model, target: Path, flag: str, derived: dict) -> None:
    """Refuse, before any work, to write eval's results over a file bertkit did not write for
    ``model``: the metrics JSON ``target`` (``flag``) and ``derived`` ({path: what it is}, named
    after ``target``). Absent files, and the result names of the model's own directory, are free."""
    target, identity = Path(target), model_identity(model)
    own = Path(identity) if (Path(identity) / META_FILE).is_file() else None
    paths = {target: flag, **{Path(path): what for path, what in derived.items()}}
    taken = [path for path in paths if os.path.lexists(path) and not _own_result(path, own)]
    if not taken:
        return
    recorded = _recorded(target)
    if target in taken and (recorded is None or recorded[0] != identity):
        whose = (
            "is not a bertkit evaluation" if recorded is None else f"holds the scores of another model ({recorded[0]})"
        )
        raise BertkitError(
            f"{flag} {target} exists and {whose}; bertkit writes only over its own results for this model",
            "choose another --output (one per model), or move that file elsewhere",
        )
    files = recorded[1] if recorded is not None and recorded[0] == identity else {}
    for path in taken:
        if path != target and files.get(path.name) != _digest_or_none(path):
            raise BertkitError(
                f"{paths[path]} {path} exists and was not written by bertkit with {target.name} for this model, "
                "and writing would replace it",
                "move it elsewhere, or choose another --output (the files beside it are named after it)",
            )


def _own_result(path: Path, own: Path | None) -> bool:
    """A result name in the model's own directory: the directory's (its files are its model's)."""
    return own is not None and path.parent.resolve() == own and any(fnmatch.fnmatchcase(path.name, p) for p in RESULTS)


def _recorded(target: Path) -> tuple[str, dict] | None:
    """(the model, {file name: digest}) a metrics JSON says it was written for; None: not one of bertkit's."""
    try:
        report = json.loads(Path(target).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict) or not isinstance(report.get("metrics"), dict) or "model" not in report:
        return None
    outputs = report.get("outputs")
    if isinstance(outputs, dict) and isinstance(outputs.get("model"), str):
        files = outputs.get("files")
        return outputs["model"], files if isinstance(files, dict) else {}
    return model_identity(report["model"]), {}  # a report from before the record: its model, no files


def _digest_or_none(path: Path) -> str | None:
    try:
        return file_digest(path) if path.is_file() else None
    except OSError:
        return None
