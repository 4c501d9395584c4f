"""How token vectors become one vector: the ``--pooling`` modes, as small pure functions.

``hidden_states`` is the model's tuple ``(embeddings, layer 1, ..., layer L)`` of ``(batch, tokens,
dim)`` tensors; ``mask`` is the attention mask (1 = real token, including [CLS]/[SEP]; 0 = padding).

* ``cls``: the last layer's first token.
* ``mean`` / ``max``: over the real tokens of the last layer (padding never counts).
* ``last4-concat`` / ``last4-sum`` / ``layer:N``: choose the layer(s) per token (the BERT paper's
  feature-based NER recipe used the concatenation of the last four); a row's vector is their mean
  over real tokens, a word's vector (``--per-word``) is the one at its first sub-word. ``N`` counts
  as ``hidden_states`` does (0 = embeddings, L = last layer); negative N counts from the end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from bertkit.errors import BertkitError

MODES = ("cls", "mean", "max", "last4-concat", "last4-sum", "layer:N")
TOKEN_POOLS = ("cls", "mean", "max")  # these pool the last layer's tokens into one vector
ROW_DEFAULT, WORD_DEFAULT = "mean", "layer:-1"
_LAYER = re.compile(r"^layer:(-?\d+)$")


@dataclass(frozen=True)
class Pooling:
    mode: str  # cls, mean, max, last4-concat, last4-sum or layer
    layer: int | None = None  # for mode "layer"

    @property
    def name(self) -> str:
        return f"layer:{self.layer}" if self.mode == "layer" else self.mode

    @property
    def needs_hidden_states(self) -> bool:
        return self.mode not in TOKEN_POOLS

    def check_layers(self, num_layers: int) -> None:
        """Fail before any inference when the model has too few layers for this mode."""
        if self.mode.startswith("last4") and num_layers < 3:
            raise BertkitError(
                f"--pooling {self.name} needs hidden states of 4 layers; the model has "
                f"{num_layers} layer(s) plus embeddings",
                "use layer:N, mean, max or cls",
            )
        if self.mode == "layer" and not -(num_layers + 1) <= self.layer <= num_layers:
            raise BertkitError(
                f"--pooling {self.name}: the model has layers 0..{num_layers} (0 = embeddings)",
                f"use layer:0 .. layer:{num_layers}, or layer:-1 for the last",
            )


def parse_pooling(text: str | None, per_word: bool = False) -> Pooling:
    """``--pooling`` as given on the command line; None means the default for rows or words."""
    text = (text or (WORD_DEFAULT if per_word else ROW_DEFAULT)).strip().lower()
    match = _LAYER.match(text)
    if match:
        pooling = Pooling("layer", int(match.group(1)))
    elif text in MODES[:-1]:
        pooling = Pooling(text)
    else:
        raise BertkitError(f"unknown --pooling {text!r}", f"use one of {', '.join(MODES)} (e.g. layer:0)")
    if per_word and pooling.mode in TOKEN_POOLS:
        raise BertkitError(
            f"--pooling {pooling.name} makes one vector per row, not per word",
            "with --per-word use layer:N, last4-concat or last4-sum (default: the last layer)",
        )
    return pooling


def token_vectors(hidden_states, pooling: Pooling):
    """Per-token vectors ``(batch, tokens, dim')`` from the layer(s) the mode chooses."""
    if pooling.mode == "last4-concat":
        import torch  # here: the mode names above are read without torch (bertkit.json checks, cards)

        return torch.cat(tuple(hidden_states[-4:]), dim=-1)
    if pooling.mode == "last4-sum":
        return sum(hidden_states[-4:])
    if pooling.mode == "layer":
        return hidden_states[pooling.layer]
    return hidden_states[-1]


def masked_mean(vectors, mask):
    weights = mask.unsqueeze(-1).to(vectors.dtype)
    return (vectors * weights).sum(1) / weights.sum(1).clamp(min=1)


def masked_max(vectors, mask):
    return vectors.masked_fill(~mask.bool().unsqueeze(-1), float("-inf")).amax(1)


def pool(hidden_states, mask, pooling: Pooling):
    """One vector per row ``(batch, dim')``."""
    if pooling.mode == "cls":
        return hidden_states[-1][:, 0]
    if pooling.mode == "max":
        return masked_max(hidden_states[-1], mask)
    return masked_mean(token_vectors(hidden_states, pooling), mask)


def combine_windows(vectors: np.ndarray, token_counts, pooling: Pooling) -> np.ndarray:
    """One vector from the vectors of a long input's windows ``(windows, dim)``.

    ``max`` takes the element-wise max (exactly the max over all tokens); the token-averaging
    modes weight each window by its number of tokens (tokens in an overlap count twice); ``cls``
    averages the windows' [CLS] vectors.
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    if len(vectors) == 1:
        return vectors[0]
    if pooling.mode == "max":
        return vectors.max(0)
    if pooling.mode == "cls":
        return vectors.mean(0)
    weights = np.asarray(token_counts, dtype=np.float64)
    return (vectors * weights[:, None]).sum(0) / weights.sum()
