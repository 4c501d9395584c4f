"""Frozen-encoder vectors through the one inference path.

``EmbeddingNetwork`` wraps an encoder so that its forward returns pooled vectors (or per-token
vectors); ``Engine.infer`` runs it like any task model (length-sorted batches, dynamic padding,
no gradients, outputs back in input order), so embedding has no inference loop of its own.
Long inputs become overlapping windows here and their vectors are combined afterwards.
"""

from __future__ import annotations

import types

import numpy as np
from torch import nn

from bertkit.errors import BertkitError
from bertkit.models import OFFLINE_HINT, choose_max_length, load_model
from bertkit.networks.first_token_head import first_token_only_last_layer
from bertkit.networks.pooling import Pooling, combine_windows, pool, token_vectors
from bertkit.tasks.word_windows import encode_words, window_features

OUTPUT = "embedding"


class EmbeddingNetwork(nn.Module):
    """Encoder + pooling: ``forward`` returns ``{"embedding": (batch, dim)}``, or ``(batch, tokens,
    dim)`` with ``per_token`` (the caller picks the words' first sub-words)."""

    def __init__(self, encoder, pooling: Pooling, per_token: bool = False):
        super().__init__()
        self.encoder, self.pooling, self.per_token = encoder, pooling, per_token
        if pooling.mode == "cls" and not per_token:
            # Only [CLS] of the last layer is read: the same exact shortcut predict uses for classifiers.
            first_token_only_last_layer(
                types.SimpleNamespace(config=encoder.config, base_model_prefix="model", model=encoder)
            )

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
        wants_all = self.pooling.needs_hidden_states
        outputs = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=wants_all, **extra
        )
        hidden = outputs.hidden_states if wants_all else (outputs.last_hidden_state,)
        if self.per_token:
            return {OUTPUT: token_vectors(hidden, self.pooling)}
        return {OUTPUT: pool(hidden, attention_mask, self.pooling)}


def check_encoder(model_ref: str, display_name: str, pooling: Pooling, max_length: int) -> None:
    """Config-only checks (no weights loaded): layers for the pooling mode, positions for --max-length."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model_ref)
    except (OSError, ValueError) as exc:
        raise BertkitError(
            f"--model {display_name}: its config could not be read ({type(exc).__name__})", OFFLINE_HINT
        ) from exc
    pooling.check_layers(config.num_hidden_layers)
    choose_max_length(max_length, max_length, config, display_name)  # the one position-limit check


def load_encoder(model_ref: str, display_name: str, **kwargs):
    """The bare encoder (AutoModel) of any checkpoint: pretrained, fine-tuned (head dropped), MLM."""
    return load_model("AutoModel", model_ref, display_name, **kwargs)


def check_stride(tokenizer, max_length: int, stride: int, pair: bool) -> None:
    room = max_length - tokenizer.num_special_tokens_to_add(pair=pair)
    if room < 2 or not 0 <= stride < room:
        raise BertkitError(
            f"--stride {stride} must be at least 0 and below the {room} text tokens a window of "
            f"--max-length {max_length} holds",
            "lower --stride or raise --max-length",
        )


def row_features(tokenizer, texts: list[str], pairs: list[str] | None, max_length: int, stride: int) -> list[dict]:
    """One feature per window; a row longer than ``max_length`` gets several, ``stride`` tokens of
    overlap apart (pairs: only the second text is windowed, the first is repeated in each)."""
    check_stride(tokenizer, max_length, stride, pairs is not None)
    if pairs is not None:
        room = max_length - tokenizer.num_special_tokens_to_add(pair=True) - stride
        firsts = tokenizer(texts, add_special_tokens=False)["input_ids"]
        long = [i + 1 for i, ids in enumerate(firsts) if len(ids) >= room]
        if long:
            raise BertkitError(
                f"the first text of row(s) {', '.join(map(str, long[:5]))} leaves no room for the "
                f"second within --max-length {max_length}",
                "raise --max-length or shorten them",
            )
    encoded = tokenizer(
        texts,
        pairs,
        truncation="only_second" if pairs is not None else True,
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
    )
    mapping = encoded["overflow_to_sample_mapping"]
    features = []
    for i, ids in enumerate(encoded["input_ids"]):
        feature = {"input_ids": ids, "example_index": int(mapping[i])}
        if "token_type_ids" in encoded:
            feature["token_type_ids"] = encoded["token_type_ids"][i]
        features.append(feature)
    return features


def word_features(tokenizer, sentences: list[list[str]], max_length: int) -> tuple[list[dict], int]:
    """Windows over words as for NER: each word is read at its first sub-word, in the window where it
    has the most context. Returns the features and how many sentences needed more than one."""
    encodings, _ = encode_words(tokenizer, sentences)
    features, windowed = [], 0
    for index, encoding in enumerate(encodings):
        windows = window_features(encoding, max_length)
        windowed += len(windows) > 1
        for window in windows:
            window["example_index"] = index
            features.append(window)
    return features, windowed


def run(engine, network: EmbeddingNetwork, features: list[dict], batch_size: int, pad_token_id: int) -> list:
    """Per-feature vectors (numpy), in feature order."""
    return engine.infer(network, features, batch_size, (OUTPUT,), network.per_token, pad_token_id, description="embed")[
        OUTPUT
    ]


def rows_from_windows(features: list[dict], vectors: list, rows: int, pooling: Pooling) -> np.ndarray:
    """One float32 vector per row from its windows' vectors."""
    groups: list[list[int]] = [[] for _ in range(rows)]
    for index, feature in enumerate(features):
        groups[feature["example_index"]].append(index)
    return np.stack(
        [
            combine_windows(
                np.stack([vectors[i] for i in group]), [len(features[i]["input_ids"]) for i in group], pooling
            )
            for group in groups
        ]
    ).astype(np.float32)


def words_from_windows(features: list[dict], vectors: list, sentences: list[list[str]]) -> list[np.ndarray]:
    """One ``(words, dim)`` float32 array per sentence (zeros for a word the tokenizer dropped)."""
    dim = vectors[0].shape[-1] if vectors else 0
    result = [np.zeros((len(words), dim), dtype=np.float32) for words in sentences]
    for feature, tokens in zip(features, vectors):
        for word, position in zip(feature["words"], feature["first_tokens"]):
            result[feature["example_index"]][word] = tokens[position]
    return result


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
