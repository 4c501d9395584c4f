"""A probe directory as a network: the frozen encoder, its pooling and the linear head that
`bertkit probe` fitted, run by eval and predict like any classifier."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from bertkit.errors import BertkitError
from bertkit.model_dir import PROBE_HEAD_FILE
from bertkit.networks.embedding import EmbeddingNetwork, load_encoder
from bertkit.networks.pooling import parse_pooling


class ProbeNetwork(nn.Module):
    """Frozen encoder + pooling + the linear head: ``forward`` returns ``{"logits": ...}`` like a
    transformers classifier, so the classification task's eval/predict path runs unchanged."""

    def __init__(self, embedder, weight: torch.Tensor, bias: torch.Tensor, normalize: bool = False):
        super().__init__()
        self.embedder, self.normalize = embedder, normalize  # normalize: the head read unit vectors
        self.head = nn.Linear(weight.shape[1], weight.shape[0])
        with torch.no_grad():
            self.head.weight.copy_(weight)
            self.head.bias.copy_(bias)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        vectors = self.embedder(input_ids, attention_mask, token_type_ids)["embedding"]
        if self.normalize:
            vectors = torch.nn.functional.normalize(vectors.float(), dim=-1)
        return {"logits": self.head(vectors.to(self.head.weight.dtype))}


def load_probe(model_dir: str, probe_meta: dict) -> ProbeNetwork:
    from safetensors.torch import load_file

    head_path = Path(model_dir) / probe_meta.get("head", PROBE_HEAD_FILE)
    if not head_path.is_file():
        raise BertkitError(
            f"{model_dir} is a probe without its head ({head_path.name} is missing)", "run `bertkit probe` again"
        )
    tensors = load_file(str(head_path))
    embedder = EmbeddingNetwork(load_encoder(str(model_dir), str(model_dir)), parse_pooling(probe_meta["pooling"]))
    return ProbeNetwork(embedder, tensors["weight"], tensors["bias"], bool(probe_meta.get("normalize")))
