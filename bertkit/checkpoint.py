"""Model directories: plain transformers files plus ``bertkit.json``, written all-or-nothing."""

from __future__ import annotations

import json
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from bertkit.errors import BertkitError

META_FILE = "bertkit.json"


def check_output_dir(output: Path, overwrite: bool) -> None:
    """Fail before any work if the output would clobber something the user did not offer up."""
    if output.exists() and not output.is_dir():
        raise BertkitError(f"--output {output} is a file", "choose a directory path")
    if output.is_dir() and any(output.iterdir()) and not overwrite:
        raise BertkitError(f"--output {output} exists and is not empty", "choose a new directory or pass --overwrite")
    if not output.parent.exists():
        raise BertkitError(f"the parent of --output {output} does not exist", f"mkdir -p {output.parent}")


@contextmanager
def staged_output(output: Path):
    """Yield a hidden sibling directory to write into; it replaces ``output`` only on success,
    so an error or Ctrl-C never leaves a half-written model behind."""
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.partial-", dir=output.parent))
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if output.exists():
        trash = output.parent / f".{output.name}.old"
        shutil.rmtree(trash, ignore_errors=True)
        output.rename(trash)
        staging.rename(output)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        staging.rename(output)


def save_model_dir(directory: Path, model, tokenizer, meta: dict) -> None:
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    write_json(directory / META_FILE, meta)


def load_meta(model_dir: str) -> dict:
    path = Path(model_dir).expanduser()
    if not path.is_dir():
        raise BertkitError(f"model directory not found: {model_dir}", "pass the --output of `bertkit finetune`")
    meta_path = path / META_FILE
    if not meta_path.is_file():
        raise BertkitError(f"{model_dir} is not a bertkit model (no {META_FILE})", "pass the --output of `bertkit finetune`")
    try:
        return json.loads(meta_path.read_text())
    except json.JSONDecodeError as exc:
        raise BertkitError(f"{meta_path} is corrupt ({exc.msg})", "fine-tune the model again") from exc


def write_json(path: Path, data) -> None:
    """Write JSON via a temporary file and rename, so readers never see half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    tmp.replace(path)
