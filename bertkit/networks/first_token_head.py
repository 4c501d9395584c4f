"""Exact shortcuts that compute less without changing the model's outputs or its saved weights.

Sequence classifiers of the BERT family read only the first token ([CLS]) of the last layer, yet
a stock forward pass runs that layer's query projection, attention output and feed-forward block
for every token. ``first_token_only_last_layer`` makes the last layer compute them for [CLS]
alone (keys and values still cover all tokens). For MiniLM-L6 that is about 14% fewer matmul
FLOPs in training and inference; logits are the same up to float rounding.

A packed batch (packed.py: the rows' real tokens as one sequence) takes each row's first token as
its query and that row's keys and values alone, and returns ``(rows, 1, hidden)`` as the padded
batch does.
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F

from bertkit.networks.packed import PACKING

SUPPORTED_MODEL_TYPES = ("bert",)


def first_token_only_last_layer(model) -> bool:
    """Patch the instance's last encoder layer; returns whether it applied. Safe to save after."""
    config = getattr(model, "config", None)
    base = getattr(model, getattr(model, "base_model_prefix", ""), None)
    if config is None or base is None or config.model_type not in SUPPORTED_MODEL_TYPES:
        return False
    if config._attn_implementation not in ("sdpa", "eager") or getattr(config, "is_decoder", False):
        return False
    layer = base.encoder.layer[-1]
    layer.forward = types.MethodType(_first_token_layer_forward, layer)
    return True


def _first_token_layer_forward(self, hidden_states: torch.Tensor, attention_mask=None, *args, **kwargs):
    if kwargs.get(PACKING) is not None:
        return _first_token_packed(self, hidden_states, kwargs[PACKING])
    attention = self.attention.self
    batch, length, _ = hidden_states.shape
    head_size = attention.attention_head_size
    first = hidden_states[:, :1]
    query = attention.query(first).view(batch, 1, -1, head_size).transpose(1, 2)
    key = attention.key(hidden_states).view(batch, length, -1, head_size).transpose(1, 2)
    value = attention.value(hidden_states).view(batch, length, -1, head_size).transpose(1, 2)
    mask = attention_mask[:, :, :1, :] if attention_mask is not None and attention_mask.dim() == 4 else attention_mask
    context = F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=mask,
        dropout_p=attention.dropout.p if self.training else 0.0,
        scale=attention.scaling,
    )
    context = context.transpose(1, 2).reshape(batch, 1, -1)
    attention_output = self.attention.output(context, first)
    # Only position 0 is returned: the classification head (pooler) reads nothing else.
    return self.output(self.intermediate(attention_output), attention_output)


def _first_token_packed(self, hidden_states: torch.Tensor, packing) -> torch.Tensor:
    """``hidden_states`` ``(1, T, hidden)`` packed: each row's first token attends to its own row."""
    attention = self.attention.self
    head_size = attention.attention_head_size
    lengths = packing.keep.sum(1)
    first = hidden_states[0, lengths.cumsum(0) - lengths].unsqueeze(1)  # (rows, 1, hidden): each row's [CLS]
    query = attention.query(first).view(packing.rows, 1, -1, head_size).transpose(1, 2)
    key = packing.padded(
        attention.key(hidden_states).view(1, -1, attention.num_attention_heads, head_size).transpose(1, 2)
    )
    value = packing.padded(
        attention.value(hidden_states).view(1, -1, attention.num_attention_heads, head_size).transpose(1, 2)
    )
    context = F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=packing.additive_mask(query.dtype),
        dropout_p=attention.dropout.p if self.training else 0.0,
        scale=attention.scaling,
    )
    attention_output = self.attention.output(context.transpose(1, 2).reshape(packing.rows, 1, -1), first)
    return self.output(self.intermediate(attention_output), attention_output)
