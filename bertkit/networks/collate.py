"""The padding collator: a list of feature dicts becomes one batch of tensors, padded only to the
batch's own longest row. The engine's loops and the masked-LM collator (masking.py) pad with it."""

from __future__ import annotations

import torch

# Keys the model receives; every other feature key is meta data kept for postprocessing.
MODEL_KEYS = ("input_ids", "token_type_ids", "labels", "start_positions", "end_positions")
INPUT_KEYS = ("input_ids", "token_type_ids")
# Target kinds (Collator's ``targets``). Plain strings: task modules declare them without importing
# torch.
CLASS, TOKEN_CLASS, FLOAT, MULTI_HOT = "class", "token_class", "float", "multi_hot"
KINDS = (CLASS, TOKEN_CLASS, FLOAT, MULTI_HOT)
IGNORED = -100  # the label of padding tokens: torch's cross-entropy skips it


class Collator:
    """Pads a list of feature dicts to the batch's longest row and adds the attention mask.

    ``targets`` maps feature keys to their kind:

    * ``"class"``: one int per feature -> long ``[batch]``
    * ``"token_class"``: one int per token -> long ``[batch, longest]``, padded with -100
    * ``"float"``: one number per feature -> float32 ``[batch]`` (regression)
    * ``"multi_hot"``: a fixed-length list of 0/1 per feature -> float32 ``[batch, n]`` (multi-label),
      not padded: its length is the number of labels, not of tokens

    A key absent from the features (prediction) is left out. Without ``targets`` the kinds are
    inferred from the features as before tasks declared them: ``labels``, ``start_positions`` and
    ``end_positions`` are ``"token_class"`` when they hold a list, else ``"class"``.
    """

    def __init__(self, pad_token_id: int, targets: dict[str, str] | None = None):
        unknown = {k: v for k, v in (targets or {}).items() if v not in KINDS}
        if unknown:
            raise ValueError(f"unknown target kinds {unknown}; the kinds are {', '.join(KINDS)}")
        self.pad_token_id, self.targets = pad_token_id, targets

    def __call__(self, features: list[dict]) -> dict:
        longest = max(len(f["input_ids"]) for f in features)
        first = features[0]
        batch = {}
        for key in INPUT_KEYS:
            if key not in first:
                continue
            values = [f[key] for f in features]
            if isinstance(values[0], list):
                pad = self.pad_token_id if key == "input_ids" else 0
                values = [v + [pad] * (longest - len(v)) for v in values]
            batch[key] = torch.tensor(values, dtype=torch.long)
        for key, kind in self._kinds(first).items():
            values = [f[key] for f in features]
            if kind == TOKEN_CLASS:
                values = [v + [IGNORED] * (longest - len(v)) for v in values]
            batch[key] = torch.tensor(values, dtype=torch.float32 if kind in (FLOAT, MULTI_HOT) else torch.long)
        lengths = torch.tensor([len(f["input_ids"]) for f in features])
        batch["attention_mask"] = (torch.arange(longest)[None, :] < lengths[:, None]).long()
        return batch

    def _kinds(self, first: dict) -> dict[str, str]:
        if self.targets is not None:
            return {key: kind for key, kind in self.targets.items() if key in first}
        return {
            key: TOKEN_CLASS if isinstance(first[key], list) else CLASS
            for key in MODEL_KEYS
            if key not in INPUT_KEYS and key in first
        }
