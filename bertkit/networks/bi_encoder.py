"""A bi-encoder: texts encoded one by one by the same encoder, mean-pooled, trained on the
similarity of their vectors (bertkit/tasks/embedding.py says what with, as an ``EmbeddingLoss``).

* The loss: ``LOSS_FUNCTIONS[spec.objective]`` (embedding_losses.py: MNRL, CoSENT, ..., one
  function per entry of bertkit/tasks/embedding_losses.py's table).
* Matryoshka (Kusupati et al. 2022): the loss summed over the vectors cut to each dimension.
* GradCache (Gao et al. 2021, sentence-transformers' Cached MNRL): the batch's vectors are
  computed without gradients in mini-batches, the loss and its gradient with respect to the vectors
  once, then each mini-batch runs again with gradients and back-propagates its part. The same
  gradients as the whole batch at once, with the memory of one mini-batch. The engine's
  ``loss.backward()`` reaches a hook on the returned loss that runs the second pass, so the engine
  needs nothing of its own.
* Each tower runs in length-sorted chunks on the CPU (sorted_chunks.py): the same loss without
  the padding of a random batch.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import torch
from torch import nn

from bertkit.networks.collate import Collator
from bertkit.networks.embedding_losses import LOSS_FUNCTIONS
from bertkit.networks.pooling import Pooling
from bertkit.networks.sorted_chunks import mean_pooled
from bertkit.networks.wrapped import WrappedModel
from bertkit.tasks.training_spec import EmbeddingLoss

TOWERS = ("text", "text_pair", "negative")  # feature prefixes: "" for the anchor, "text_pair_", "negative_"
INPUTS = ("input_ids", "token_type_ids", "attention_mask")


def prefix(tower: str) -> str:
    return "" if tower == "text" else f"{tower}_"


def embedding_loss(spec: EmbeddingLoss, vectors: dict, batch: dict) -> torch.Tensor:
    """The spec's loss of the towers' vectors, summed over the Matryoshka dimensions (the full
    vector alone without them)."""
    total = 0.0
    for dim in spec.dims or (None,):
        cut = {tower: v[:, :dim] if dim else v for tower, v in vectors.items()}
        total = total + LOSS_FUNCTIONS[spec.objective](spec, cut, batch)
    return total


class BiEncoderCollator:
    """Pads each tower on its own (dynamic padding, as the shared Collator) and keeps the text ids
    and scores the loss reads."""

    # In-batch negatives are rows that meet at random, as in sentence-transformers: the engine does
    # not group these batches by the anchor's length (sorted chunks take the padding out instead).
    random_batches = True

    def __init__(self, pad_token_id: int):
        self.pad = Collator(pad_token_id)

    def __call__(self, features: list[dict]) -> dict:
        batch = {}
        for tower in TOWERS:
            key = prefix(tower)
            if f"{key}input_ids" not in features[0]:
                continue
            part = [{k: f[key + k] for k in ("input_ids", "token_type_ids") if key + k in f} for f in features]
            batch.update({key + k: v for k, v in self.pad(part).items()})
            batch[f"{tower}_id"] = torch.tensor([f[f"{tower}_id"] for f in features], dtype=torch.long)
        if "score" in features[0]:
            batch["score"] = torch.tensor([f["score"] for f in features], dtype=torch.float32)
        return batch


class BiEncoderTrainer(WrappedModel):
    """What the engine trains: ``forward(**batch).loss``; ``encoder`` is the model saved."""

    wrapped_attribute = "encoder"

    def __init__(self, encoder, spec: EmbeddingLoss):
        super().__init__()
        self.encoder, self.spec = encoder, spec

    def embed(self, inputs: dict) -> torch.Tensor:
        return mean_pooled(self.encoder, inputs)

    def forward(self, **batch):
        towers = {t: tower_inputs(batch, t) for t in TOWERS if prefix(t) + "input_ids" in batch}
        if self.spec.cache_batch is None or not torch.is_grad_enabled():
            vectors = {t: self.embed(inputs) for t, inputs in towers.items()}
            return types.SimpleNamespace(loss=embedding_loss(self.spec, vectors, batch))
        return types.SimpleNamespace(loss=self.cached_loss(towers, batch))

    def cached_loss(self, towers: dict, batch: dict) -> torch.Tensor:
        """GradCache: the loss (a leaf) and its gradients with respect to the vectors, now; the
        encoder's gradients when the engine back-propagates the loss (``_second_pass``)."""
        size = self.spec.cache_batch
        chunks, vectors, states = {}, {}, {}
        with torch.no_grad():
            for tower, inputs in towers.items():
                chunks[tower] = split(inputs, size)
                states[tower] = []
                parts = []
                for chunk in chunks[tower]:
                    states[tower].append(rng_state())
                    parts.append(self.embed(chunk))
                vectors[tower] = torch.cat(parts)
        leaves = {t: v.detach().requires_grad_() for t, v in vectors.items()}
        with torch.enable_grad():
            loss = embedding_loss(self.spec, leaves, batch)
            grads = torch.autograd.grad(loss, list(leaves.values()))
        cached = dict(zip(leaves, grads))
        result = loss.detach().requires_grad_()
        result.register_hook(lambda grad_output: self._second_pass(chunks, states, cached, grad_output))
        return result

    def _second_pass(self, chunks: dict, states: dict, cached: dict, grad_output: torch.Tensor) -> None:
        after = rng_state()
        with torch.enable_grad():
            for tower, parts in chunks.items():
                start = 0
                for chunk, state in zip(parts, states[tower]):
                    set_rng_state(state)  # the same dropout masks as the first pass
                    vectors = self.embed(chunk)
                    grad = cached[tower][start : start + len(vectors)] * grad_output
                    start += len(vectors)
                    torch.autograd.backward(vectors, grad.to(vectors.dtype))
        set_rng_state(after)
        return None


def tower_inputs(batch: dict, tower: str) -> dict:
    key = prefix(tower)
    return {k: batch[key + k] for k in INPUTS if key + k in batch}


def split(inputs: dict, size: int) -> list[dict]:
    """Mini-batches of ``size`` rows, each trimmed to its own longest row."""
    rows = len(inputs["input_ids"])
    parts = []
    for start in range(0, rows, size):
        part = {k: v[start : start + size] for k, v in inputs.items()}
        longest = int(part["attention_mask"].sum(1).max())
        parts.append({k: v[:, :longest] for k, v in part.items()})
    return parts


def rng_state() -> tuple:
    return torch.get_rng_state(), (torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)


def set_rng_state(state: tuple) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state_all(state[1])


class SentenceEncoder(nn.Module):
    """The model saved: the encoder, plus the files that make its directory a sentence-transformers
    model (Transformer + mean Pooling: the vectors `bertkit embed DIR` gives; then the base's
    ``Normalize`` when it had one: ``carried_modules``)."""

    def __init__(self, encoder, max_length: int, pooling: str = "mean", carried: tuple = ()):
        super().__init__()
        self.encoder, self.max_length, self.pooling, self.carried = encoder, max_length, pooling, tuple(carried)

    @property
    def config(self):
        return self.encoder.config

    def save_pretrained(self, directory, **kwargs) -> None:
        self.encoder.save_pretrained(directory, **kwargs)
        write_sentence_transformers_files(
            Path(directory), self.encoder.config.hidden_size, self.max_length, self.carried
        )


ST_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json", "1_Pooling")
NORMALIZE_DIR = "2_Normalize"  # the base's Normalize, after bertkit's pooling (as sentence-transformers names it)
OWN_MODULES = ("Transformer", "Pooling")  # what bertkit trains and writes itself


def base_modules(model_ref: str) -> list[dict]:
    """The base checkpoint's sentence-transformers modules (its ``modules.json``); [] for a plain one."""
    from transformers.utils import cached_file

    try:
        path = cached_file(str(model_ref), "modules.json", _raise_exceptions_for_missing_entries=False)
        modules = json.loads(Path(path).read_text(encoding="utf-8")) if path else []
    except (OSError, ValueError):  # offline and not cached, or unreadable: described as a plain checkpoint
        return []
    return [entry for entry in modules if isinstance(entry, dict)] if isinstance(modules, list) else []


def carried_modules(modules: list[dict]) -> tuple[tuple, list[str]]:
    """(what the fine-tuned directory keeps after its Transformer and Pooling, the base's modules it
    drops): a ``Normalize`` is kept (no weights: the base's unit vectors stay unit vectors, as
    sentence-transformers' own trainer keeps it); a module with weights bertkit did not train through
    (Dense, ...) is dropped, and named."""
    kinds = [str(entry.get("type", "")).rsplit(".", 1)[-1] for entry in modules]
    carried = ("Normalize",) if "Normalize" in kinds else ()
    dropped = [
        f"{entry.get('path') or entry.get('name')} ({kind})"
        for entry, kind in zip(modules, kinds, strict=True)
        if kind not in (*OWN_MODULES, "Normalize")
    ]
    return carried, dropped


def said_modules(carried: tuple, dropped: list[str], model_name: str) -> None:
    """What the saved directory's module list keeps and drops of the base's, said when it matters."""
    from bertkit.events import notice

    if carried:
        notice(
            "weights",
            f"kept {model_name}'s Normalize module: SentenceTransformer(DIR).encode gives unit vectors as the "
            "base did (`bertkit embed DIR --normalize` gives the same)",
        )
    if dropped:
        notice(
            "weights",
            f"dropped {model_name}'s sentence-transformers modules {', '.join(dropped)}: bertkit trains the "
            "encoder and its mean pooling only, so the directory holds what was trained",
        )


def write_sentence_transformers_files(directory: Path, dim: int, max_length: int, carried: tuple = ()) -> None:
    """sentence-transformers' layout (the one every Hub embedding model has): a Transformer at the
    root, mean pooling in 1_Pooling (`bertkit embed` without --normalize); ``carried``: ("Normalize",)
    adds the base's Normalize in 2_Normalize (`bertkit embed --normalize`)."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if "Normalize" in carried:
        modules.append({"idx": 2, "name": "2", "path": NORMALIZE_DIR, "type": "sentence_transformers.models.Normalize"})
        (directory / NORMALIZE_DIR).mkdir(exist_ok=True)
        _write(directory / NORMALIZE_DIR / "config.json", {})  # Normalize's defaults (the pooled vector)
    pooling = {
        "word_embedding_dimension": dim,
        "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    }
    (directory / "1_Pooling").mkdir(exist_ok=True)
    _write(directory / "modules.json", modules)
    _write(directory / "sentence_bert_config.json", {"max_seq_length": max_length, "do_lower_case": False})
    _write(directory / "1_Pooling" / "config.json", pooling)
    _write(
        directory / "config_sentence_transformers.json",
        {"prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine"},
    )


def _write(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


MEAN = Pooling("mean")
