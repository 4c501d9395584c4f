"""The tokenizer of a model reference, checked and adjusted for bertkit's tasks: a fast tokenizer
with a real vocabulary, [CLS] first and padding on the right, a prefix space for byte-level BPE's
pre-split words (NER), and segment ids exactly when the model has segment embeddings."""

from __future__ import annotations

import json
from pathlib import Path

from bertkit import hub
from bertkit.errors import BertkitError
from bertkit.models import first_line, is_local, not_loadable, quiet_transformers

TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "spm.model",
    "tokenizer.model",
    "sentencepiece.bpe.model",
)


def load_tokenizer(model_ref: str, display_name: str, config=None):
    """The fast tokenizer, checked and adjusted for bertkit's tasks (``config`` decides the inputs)."""
    local = is_local(model_ref)
    if local and not any((Path(model_ref) / name).is_file() for name in TOKENIZER_FILES):
        raise BertkitError(
            f"--model {display_name}: no tokenizer files in the directory (looked for "
            f"{', '.join(TOKENIZER_FILES[:3])}, ...)",
            "save the tokenizer next to the weights: tokenizer.save_pretrained(DIR)",
        )
    if not local:
        hub.use_hub_or_cache()
    transformers = quiet_transformers()
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(model_ref)
    except Exception as exc:  # the tokenizers library raises plain Exception for a corrupt tokenizer.json
        if not local and isinstance(exc, OSError):
            raise not_loadable(display_name, exc) from exc
        raise BertkitError(
            f"--model {display_name}: the tokenizer cannot be loaded ({type(exc).__name__}: {first_line(exc)})",
            "check or replace the tokenizer files",
        ) from exc
    if not getattr(tokenizer, "is_fast", False):
        raise BertkitError(
            f"--model {display_name}: a fast (Rust) tokenizer is needed for offsets",
            "use a model that ships tokenizer.json",
        )
    specials = set(tokenizer.all_special_tokens)
    if not any(token not in specials for token in tokenizer.get_vocab()):
        raise BertkitError(
            f"--model {display_name}: the tokenizer has no vocabulary besides its special tokens, "
            "so every word would be unknown",
            "save the real tokenizer files next to the weights",
        )
    _check_layout(tokenizer, display_name)
    _prefix_space_for_words(tokenizer)
    if config is not None:
        _segment_inputs(tokenizer, config)
    return tokenizer


def _check_layout(tokenizer, display_name: str) -> None:
    """Tasks read [CLS] at position 0 and pad on the right; refuse anything else in one line."""
    missing = [name for name in ("cls_token", "sep_token", "pad_token") if getattr(tokenizer, name) is None]
    if missing:
        raise BertkitError(
            f"--model {display_name}: the tokenizer has no {', '.join(missing)}, so this is not a BERT-style encoder",
            "use an encoder checkpoint (BERT, RoBERTa, DeBERTa, ...)",
        )
    ids = tokenizer("a")["input_ids"]
    if tokenizer.padding_side != "right" or not ids or ids[0] != tokenizer.cls_token_id:
        raise BertkitError(
            f"--model {display_name}: the tokenizer puts [CLS] last or pads on the left "
            "(XLNet style), which bertkit does not support",
            "use an encoder with [CLS] first",
        )


def _prefix_space_for_words(tokenizer) -> None:
    """Byte-level BPE (RoBERTa, ModernBERT, DeBERTa-v1, Longformer) marks a word start by its
    leading space ('ĠParis'). Pre-split words (NER) carry no space, so without a prefix space they
    become mid-word pieces ('Par', 'is'). With it, pre-split words and running text encode alike;
    only the first word of a text changes, and in pretraining most sentences followed a space too.
    Offsets are trimmed to exclude that space, so QA answers start on their first letter.
    """
    from tokenizers import Tokenizer, pre_tokenizers

    current = tokenizer.backend_tokenizer.pre_tokenizer
    if not isinstance(current, pre_tokenizers.ByteLevel) or current.add_prefix_space:
        return
    state = json.loads(tokenizer.backend_tokenizer.to_str())
    state["pre_tokenizer"]["add_prefix_space"] = True
    post = state.get("post_processor")
    if post and post.get("type") in ("RobertaProcessing", "ByteLevel"):
        post.update(add_prefix_space=True, trim_offsets=True)
    elif post is None or post.get("type") in ("TemplateProcessing", "BertProcessing"):
        trim = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
        state["post_processor"] = {"type": "Sequence", "processors": [trim] + ([post] if post else [])}
    backend = Tokenizer.from_str(json.dumps(state))
    backend.encode_special_tokens = tokenizer.backend_tokenizer.encode_special_tokens
    tokenizer._tokenizer = backend
    tokenizer.add_prefix_space = True
    tokenizer.init_kwargs["add_prefix_space"] = True  # saved, so classes that rebuild the backend keep it


def _segment_inputs(tokenizer, config) -> None:
    """``token_type_ids`` exactly when the model has segment embeddings (type_vocab_size >= 2):
    DistilBERT, RoBERTa, DeBERTa-v3 and ModernBERT get none, ALBERT gets them even though its
    tokenizer does not ask for them."""
    wanted = (getattr(config, "type_vocab_size", 0) or 0) >= 2
    names = [name for name in tokenizer.model_input_names if name != "token_type_ids"]
    if wanted:
        names.insert(1, "token_type_ids")
    if names != list(tokenizer.model_input_names):
        tokenizer.model_input_names = names
        tokenizer.init_kwargs["model_input_names"] = names
