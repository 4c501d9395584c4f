"""A task model's rows run without padding in training: the encoder packed, the head on the padded grid.

A cross-encoder's head reads positions of the padded batch: sequence heads (cls, pair, regression,
multi-label, rerank) the first token of each row, token heads (ner, qa) every token. So only the
encoder runs packed (packed.py: the real tokens of all rows as one sequence, attention row by
row), and its last layer goes back into the ``rows x longest`` grid, zeros on padding, before the
model's own head, pooler and loss read it. Every real token's vector is the padded batch's (up to
float rounding); a padding position holds zeros instead of the vector the padded forward computed
for a [PAD] token, which no loss that ignores padding reads (the heads above: a sequence head reads
[CLS], a token head's padding labels are -100, QA's span loss leaves padding out of its softmax:
networks/losses.span_loss; transformers' own QA loss reads it).

This is the idea of transformers' ``DataCollatorWithFlattening`` (which needs flash attention and
does not work for sequence classification, transformers #41652) done where the head reads. It
applies while a packing attention is on: the CPU training attention (engine/cpu_kernels.py) or, on
CUDA under ``--packing on``, the variable-length kernels (engine/varlen_attention.py); evaluation and
prediction (SDPA) run padded, as before.
"""

from __future__ import annotations

import types

from torch import nn

from bertkit.networks.packed import (
    PACKING,
    PACKING_ATTENTIONS,
    POSITIONS,
    SWAPPABLE_ATTENTIONS,
    Packing,
    can_pack,
    packed_inputs,
)
from bertkit.networks.wrapped import WrappedModel

# where a packed encoder has an attention to run with: the CPU training attention (engine/cpu_kernels.py)
# and CUDA's variable-length kernels (engine/varlen_attention.py)
PACKING_DEVICES = ("cpu", "cuda")
# said once when --packing on packs on CUDA: the path is built and tested on the CPU, its GPU speed unmeasured
PACKED_ON_CUDA = (
    "training batches run packed: CUDA's variable-length attention (flash or memory-efficient); "
    "its speed against padded batches is not yet measured on a GPU"
)
_UNPACKED_OUTPUTS = ("output_hidden_states", "output_attentions")  # per-layer outputs would come back packed


def task_model(network: nn.Module) -> nn.Module:
    """The transformers model inside the training wrappers (a loss, distillation, listwise, LoRA)."""
    while isinstance(network, WrappedModel):
        network = network.wrapped
    base_of_peft = getattr(network, "get_base_model", None)
    return base_of_peft() if callable(base_of_peft) else network


def encoder_of(model: nn.Module) -> nn.Module | None:
    """The encoder under a task model's head (``model.bert``), None for a bare encoder."""
    encoder = getattr(model, getattr(model, "base_model_prefix", ""), None)
    return encoder if isinstance(encoder, nn.Module) and encoder is not model else None


def why_padded(network: nn.Module) -> str | None:
    """None when ``pack_encoder`` applies to ``network``, else the reason its rows run padded."""
    wrapper = network
    while isinstance(wrapper, WrappedModel):  # a wrapper whose calls ask for what packing cannot give
        if wrapper.padded_reason is not None:
            return wrapper.padded_reason
        wrapper = wrapper.wrapped
    model = task_model(network)
    reason = why_encoder_padded(getattr(model, "config", None))
    if reason is not None:
        return reason
    if encoder_of(model) is None:
        return "this model has no head over a separate encoder: its rows run padded"
    return None


def why_encoder_padded(config) -> str | None:
    """Why an encoder with this config cannot run packed (its family, or the attention it was loaded
    with), or None where it can."""
    model_type = getattr(config, "model_type", None)
    if model_type not in POSITIONS:
        return f"{model_type} models run padded: packing knows the position ids of {', '.join(POSITIONS)} only"
    if getattr(config, "is_decoder", False):
        return "a decoder runs padded: packing attends both ways within each row"
    attention = getattr(config, "_attn_implementation", None)
    if attention not in (*SWAPPABLE_ATTENTIONS, *PACKING_ATTENTIONS):
        return (
            f"a model loaded with attn_implementation={attention!r} runs padded: packing swaps in its own "
            "attention for 'sdpa' or 'eager' only (load it with attn_implementation='sdpa')"
        )
    return None


def why_padded_on(device: str) -> str | None:
    """Why an encoder cannot run packed on a device of type ``device``, or None where it can."""
    return None if device in PACKING_DEVICES else f"packing runs on the CPU and on CUDA only, not {device}"


def pack_encoder(network: nn.Module) -> bool:
    """Let the encoder under ``network``'s head run packed whenever a packing attention is on
    (networks/packed.PACKING_ATTENTIONS; the instance's forward is replaced; nothing saved
    changes). Returns whether it applied."""
    if why_padded(network) is not None:
        return False
    pack_this_encoder(encoder_of(task_model(network)))
    return True


def pack_shared_encoder(encoder: nn.Module, device: str) -> str | None:
    """A multi-head model's shared encoder runs packed, as ``pack_encoder`` does a task model's
    (``device``: the training device's type); returns the line to say once, as
    networks/recipes.pack_rows does (why it runs padded, or that it packs on CUDA), or None."""
    reason = why_padded_on(device) or why_encoder_padded(encoder.config)
    if reason is not None:
        return f"training batches run padded: {reason}"
    pack_this_encoder(encoder)
    return PACKED_ON_CUDA if device == "cuda" else None


def pack_this_encoder(encoder: nn.Module) -> None:
    """``encoder`` itself runs packed whenever a packing attention is on, whoever calls it
    (a multi-head model's heads share one; ``unpack_this_encoder`` undoes it)."""
    encoder.forward = types.MethodType(_packed_forward, encoder)


def unpack_this_encoder(encoder: nn.Module) -> None:
    if "forward" in vars(encoder):
        del encoder.forward


def unpack_encoder(network: nn.Module) -> None:
    """Undo ``pack_encoder``: the encoder's own forward again."""
    encoder = encoder_of(task_model(network))
    if encoder is not None:
        unpack_this_encoder(encoder)


def packs(network: nn.Module) -> bool:
    """Whether an encoder in ``network`` runs packed (``pack_encoder``'s, or a multi-head model's shared one)."""
    return any(getattr(vars(m).get("forward"), "__func__", None) is _packed_forward for m in network.modules())


def _packed_forward(
    self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, inputs_embeds=None, **kwargs
):
    """The encoder's forward with the real tokens only; the last layer returned as the padded grid."""
    whole = type(self).forward
    if not _packable_call(self, input_ids, attention_mask, position_ids, kwargs):
        given = {"token_type_ids": token_type_ids, "position_ids": position_ids, "inputs_embeds": inputs_embeds}
        given = {name: value for name, value in given.items() if value is not None}  # DistilBERT has no segments
        return whole(self, input_ids, attention_mask=attention_mask, **given, **kwargs)
    packing = Packing.of(attention_mask)
    out = whole(self, **packed_inputs(self.config, packing, input_ids, token_type_ids), **kwargs)
    if out.last_hidden_state.shape[1] == packing.total:  # every token (a first-token layer gives rows x 1)
        out.last_hidden_state = packing.grid(out.last_hidden_state)
    if getattr(self, "pooler", None) is not None and out.get("pooler_output") is not None:
        out.pooler_output = _pooled(self, out.last_hidden_state)  # each row's [CLS], not the packed row's first
    return out


def _pooled(encoder, grid):
    """The encoder's pooler on the padded grid: BERT's and RoBERTa's pooler module reads [CLS]
    itself; ALBERT's is a bare linear layer over [CLS] with its activation apart."""
    activation = getattr(encoder, "pooler_activation", None)
    return activation(encoder.pooler(grid[:, 0])) if activation is not None else encoder.pooler(grid)


def _packable_call(encoder, input_ids, attention_mask, position_ids, kwargs: dict) -> bool:
    """Only the plain call a head makes: ids and a 2-D mask, no positions of its own, no packing yet."""
    return (
        can_pack(encoder)
        and input_ids is not None
        and attention_mask is not None
        and attention_mask.dim() == 2
        and position_ids is None
        and PACKING not in kwargs
        and not any(kwargs.get(name) for name in _UNPACKED_OUTPUTS)
    )
