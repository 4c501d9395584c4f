"""Several task models over one encoder: each head is the task's own transformers model (its
classifier, its loss), whose encoder attribute points at the one shared encoder.

The shared encoder is a submodule of the multi-head module only (``encoder.*`` in its state dict,
saved once); each head model reaches it through an ordinary attribute (``model.bert``), which is not
a submodule of the head, so a head's state dict holds its own layers only (``heads.NAME.*``). A
batch names its head (``head``: the head's index, one task per batch, collated by the task's own
collator), and the forward routes it there: the loss of a head is the single-task model's loss on
that batch, times the head's weight.
"""

from __future__ import annotations

import torch
from torch import nn

from bertkit.networks.collate import Collator

HEAD_KEY = "head"  # the feature key, and the batch key, that names a batch's head (its index)


def share_encoder(models: dict) -> tuple[nn.Module, dict]:
    """(the largest encoder: one with a pooler, which a classifier reads and a tagger's lacks; the
    models each reading it instead of its own)."""

    def size(model) -> int:
        return sum(p.numel() for p in getattr(model, model.base_model_prefix).parameters())

    largest = max(models.values(), key=size)  # the first of equals: load order decides, as the weights
    encoder = getattr(largest, largest.base_model_prefix)
    for model in models.values():
        attach(model, encoder)
    return encoder, models


def attach(model, encoder) -> None:
    """``model`` reads ``encoder`` as its base model, which is not its submodule: it is the
    multi-head module's (moved, put in train/eval mode and saved there, once)."""
    prefix = model.base_model_prefix
    model._modules.pop(prefix, None)
    object.__setattr__(model, prefix, encoder)  # past nn.Module.__setattr__, which would register it


class MultiHeadModel(nn.Module):
    """The encoder and every head's model: what a multi-head directory saves and loads."""

    def __init__(self, encoder: nn.Module, heads: dict):
        super().__init__()
        self.encoder, self.heads = encoder, nn.ModuleDict(heads)

    def view(self, name: str) -> "HeadView":
        return HeadView(self.encoder, self.heads[name])


class HeadView(nn.Module):
    """One head as a single-task model: its forward is the head model's; train/eval mode and the
    device reach the shared encoder too (the engine's inference runs it as any task model)."""

    def __init__(self, encoder: nn.Module, model: nn.Module):
        super().__init__()
        self.encoder, self.model = encoder, model

    def forward(self, **inputs):
        return self.model(**inputs)

    @property
    def config(self):
        return self.model.config


class MultiHeadTrainer(nn.Module):
    """What the engine trains: ``heads`` are the heads' training modules (each task's recipe: the
    model, or its loss wrapper), ``weights`` their loss weights, in head order."""

    def __init__(self, encoder: nn.Module, heads: dict, weights: list[float]):
        super().__init__()
        self.encoder, self.heads = encoder, nn.ModuleDict(heads)
        self.names, self.weights = list(heads), list(weights)

    @property
    def config(self):
        """The encoder's: the engine's CPU training kernels read its attention (engine/cpu_kernels.py)."""
        return self.encoder.config

    def set_attn_implementation(self, implementation) -> None:
        self.encoder.set_attn_implementation(implementation)

    def get_input_embeddings(self):
        """The shared encoder's (the engine's bf16 master weights treat them as a task model's)."""
        return self.encoder.get_input_embeddings()

    def forward(self, head, **batch):
        index = int(head.reshape(-1)[0])
        outputs = self.heads[self.names[index]](**batch)
        if getattr(outputs, "loss", None) is not None and self.weights[index] != 1.0:
            outputs.loss = outputs.loss * self.weights[index]
        return outputs


class MultiHeadCollator:
    """Each batch is one head's features (engine/batching.GroupedBatches draws them so), collated
    by that head's own collator, plus the head's index."""

    def __init__(self, collators: list, sampling: str, temperature: float):
        self.collators = collators
        self.batch_groups = (HEAD_KEY, sampling, temperature)  # read by the engine's StepPlan

    def __call__(self, features: list[dict]) -> dict:
        index = features[0][HEAD_KEY]
        if any(f[HEAD_KEY] != index for f in features):
            raise ValueError("a multi-head batch mixes heads")  # GroupedBatches never does
        batch = self.collators[index](features)
        batch[HEAD_KEY] = torch.tensor([index])
        return batch


def head_collator(collator, pad_token_id: int, targets: dict):
    """A head's collator: its recipe's, or the padding collator with its task's targets."""
    return collator if collator is not None else Collator(pad_token_id, targets)


def load_multihead(model_dir, heads: list[tuple[str, str, dict]]) -> MultiHeadModel:
    """A saved multi-head directory: the encoder from its config.json, each head (name,
    transformers class name, its config as a dict) built without weights of its own encoder, then
    every weight from model.safetensors (strict: nothing may be missing or left over)."""
    import transformers
    from safetensors.torch import load_file

    base_config = transformers.AutoConfig.from_pretrained(model_dir)
    encoder = transformers.AutoModel.from_config(base_config)
    models = {}
    for name, class_name, config in heads:
        head_config = type(base_config).from_dict(config)
        with torch.device("meta"):  # the head's own encoder is never built: it reads the shared one
            named = getattr(transformers, class_name)  # an Auto class, or the model's own
            model = named.from_config(head_config) if hasattr(named, "from_config") else named(head_config)
        attach(model, encoder)
        models[name] = model.to_empty(device="cpu")
    state = load_file(f"{model_dir}/model.safetensors")
    if getattr(encoder, "pooler", None) is not None and not any(k.startswith("encoder.pooler.") for k in state):
        encoder.pooler = None  # taggers only: the encoder trained had none
    model = MultiHeadModel(encoder, models)
    model.load_state_dict(state, strict=True)
    return model.eval()


def save_multihead(directory, model: MultiHeadModel) -> None:
    """model.safetensors (the encoder once, then each head's own layers) and the encoder's config.json."""
    from safetensors.torch import save_file

    state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    save_file(state, f"{directory}/model.safetensors", metadata={"format": "pt"})
    model.encoder.config.save_pretrained(directory)


def single_model(model: MultiHeadModel, name: str):
    """Head ``name`` as an ordinary transformers task model: the encoder its submodule again (a
    copy: the multi-head model keeps its own)."""
    import copy

    head = model.heads[name]
    prefix = head.base_model_prefix
    single = copy.copy(head)  # a new module object whose dicts are copies: the head itself is left as it was
    single.__dict__ = dict(head.__dict__)
    single.__dict__.pop(prefix, None)
    single._modules = {**head._modules, prefix: model.encoder}
    return copy.deepcopy(single)


class SharedPass(nn.Module):
    """Several heads whose rows are the same token ids (a topic, an urgency and a language
    classifier on one text), answered from one encoder pass: outputs ``NAME/KEY`` for each head's
    output KEY. The encoder runs once per batch; each head model reads that pass's output."""

    def __init__(self, encoder: nn.Module, heads: dict):
        super().__init__()
        self.encoder, self.heads = encoder, nn.ModuleDict(heads)

    def forward(self, **inputs) -> dict:
        once = _OnePass(self.encoder)
        found = {}
        for name, model in self.heads.items():
            prefix = model.base_model_prefix
            object.__setattr__(model, prefix, once)  # this forward only: the head reads the one pass
            try:
                outputs = model(**inputs)
            finally:
                object.__setattr__(model, prefix, self.encoder)
            found.update({f"{name}/{key}": value for key, value in outputs.items()})
        return found


class _OnePass:
    """The encoder's output for the first call, returned to every later call (one batch's heads)."""

    def __init__(self, encoder):
        self.encoder, self.output = encoder, None

    def __call__(self, *args, **kwargs):
        if self.output is None:
            self.output = self.encoder(*args, **kwargs)
        return self.output

    def __getattr__(self, name):  # what a head model may read of its encoder (its config, its dtype)
        return getattr(self.encoder, name)
