"""Which files of a model directory bertkit wrote, so that ``--overwrite`` replaces a model
directory only when nothing in it is the user's: a notes file dropped in, a prediction file
written there, a model card the user edited. The card ends with a digest of itself, so an edit
shows (``card_state``); everything else is known by name.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from pathlib import Path

from bertkit.errors import BertkitError

META_FILE = "bertkit.json"  # a directory holding it is a (complete) bertkit model directory
CARD_FILE = "README.md"
NEW_CARD_FILE = "README.bertkit.md"  # bertkit's new card, next to a README.md the user edited
CARD_MARK = re.compile(r"\n<!-- bertkit card sha256:([0-9a-f]{64})[^\n]*-->\n\Z")
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
    "eval-*",
    "predictions-*.jsonl",
    "onnx",
    "openvino",
    NEW_CARD_FILE,
    "config.json",
    "generation_config.json",
    "model.safetensors",
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
)


# Of those, what makes the model and its record: a result file written over one damages the model
# (eval's own eval-*.json and predictions-*.jsonl are results, and may be rewritten).
MODEL_FILES = tuple(p for p in OURS if p not in ("eval-*", "predictions-*.jsonl", NEW_CARD_FILE)) + (CARD_FILE,)


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


def foreign_files(directory: Path) -> list[str]:
    """The entries of ``directory`` that bertkit did not write (a card the user changed among them)."""
    foreign = []
    for entry in sorted(Path(directory).iterdir(), key=lambda p: p.name):
        if entry.name == CARD_FILE:
            state = card_state(entry)
            if state != "ours":
                foreign.append(f"{CARD_FILE} ({'edited' if state == 'edited' else 'not bertkit’s card'})")
        elif not any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in OURS):
            foreign.append(entry.name)
    return foreign


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
            f"--output {output} holds files bertkit did not write ({', '.join(foreign[:3])}"
            f"{', ...' if len(foreign) > 3 else ''}), which --overwrite would delete",
            f"move them out of {output} first, or choose a new directory for the model",
        )
