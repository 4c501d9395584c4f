"""A probe directory as a network: the frozen encoder, its pooling and the linear head that
`bertkit probe` fitted, run by eval and predict like any classifier."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from bertkit.errors import BertkitError
from bertkit.model_dir import META_FILE, PROBE_HEAD_FILE, load_meta
from bertkit.networks.pooling import parse_pooling

def inference_network(model_dir: str, adapter, tokenizer, meta: dict | None = None):
    """The network eval/predict run for a directory that is not a plain transformers task model:
    a probe (frozen encoder + linear head), or a task that scores with a wrapper (masked LM).
    None for ordinary fine-tuned directories. ``meta``: its bertkit.json, when already loaded."""
    if meta is None and (Path(model_dir) / META_FILE).is_file():
        meta = load_meta(model_dir)
    if meta and meta.get("probe"):
        return load_probe(model_dir, meta["probe"])
    if hasattr(adapter, "scoring_network"):
        from bertkit.models import load_model

        return adapter.scoring_network(load_model(adapter.model_class, str(model_dir), str(model_dir)), tokenizer)
    return None


class ProbeNetwork(nn.Module):
    """Frozen encoder + pooling + the linear head: ``forward`` returns ``{"logits": ...}`` like a
    transformers classifier, so the classification task's eval/predict path runs unchanged."""

    def __init__(self, embedder, weight: torch.Tensor, bias: torch.Tensor):
        super().__init__()
        self.embedder = embedder
        self.head = nn.Linear(weight.shape[1], weight.shape[0])
        with torch.no_grad():
            self.head.weight.copy_(weight)
            self.head.bias.copy_(bias)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        vectors = self.embedder(input_ids, attention_mask, token_type_ids)["embedding"]
        return {"logits": self.head(vectors.to(self.head.weight.dtype))}


def load_probe(model_dir: str, probe_meta: dict) -> ProbeNetwork:
    from safetensors.torch import load_file

    from bertkit.networks.embedding import EmbeddingNetwork, load_encoder

    head_path = Path(model_dir) / probe_meta.get("head", PROBE_HEAD_FILE)
    if not head_path.is_file():
        raise BertkitError(f"{model_dir} is a probe without its head ({head_path.name} is missing)",
                           "run `bertkit probe` again")
    tensors = load_file(str(head_path))
    embedder = EmbeddingNetwork(load_encoder(str(model_dir), str(model_dir)), parse_pooling(probe_meta["pooling"]))
    return ProbeNetwork(embedder, tensors["weight"], tensors["bias"])
