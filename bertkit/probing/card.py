"""A probe directory's model card text: the code that runs what `bertkit predict` runs (encoder,
the recorded pooling, the head). Torch-free: the card is built without loading a model."""

from __future__ import annotations

from dataclasses import replace

from bertkit.model_dir import PROBE_HEAD_FILE
from bertkit.tasks.base import CardText

# A row's vector from the encoder's hidden states, as bertkit.networks.pooling computes it for each
# --pooling mode ("mask" is the attention mask, shaped to broadcast over the hidden size).
_MEAN_OF = "({} * mask).sum(1) / mask.sum(1)"
POOLING_CODE = {
    "cls": "hidden[-1][:, 0]",
    "mean": _MEAN_OF.format("hidden[-1]"),
    "max": 'hidden[-1].masked_fill(mask == 0, float("-inf")).amax(1)',
    "last4-concat": _MEAN_OF.format("torch.cat(hidden[-4:], -1)"),
    "last4-sum": _MEAN_OF.format("sum(hidden[-4:])"),
}
PROBE_SNIPPET = """import torch
from safetensors.torch import load_file
from transformers import AutoModel, AutoTokenizer

# a local directory (huggingface_hub.snapshot_download(repo_id) fetches a pushed one)
MODEL_DIR = $model_dir
tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
encoder = AutoModel.from_pretrained(MODEL_DIR).eval()  # the frozen base model
head = load_file(f"{MODEL_DIR}/HEAD")  # the probe: logits = weight @ vector + bias
labels = $labels
inputs = tokenizer(INPUTS, truncation=True, max_length=$max_length, return_tensors="pt")
with torch.no_grad():
    hidden = encoder(**inputs, output_hidden_states=True).hidden_states
mask = inputs["attention_mask"][..., None]
vector = POOLED  # POOLING pooling, as at training time
probabilities = (vector @ head["weight"].T + head["bias"]).softmax(-1)[0]
print(labels[int(probabilities.argmax())], dict(zip(labels, probabilities.tolist())))"""


def card_text(probe_meta: dict, task_text: CardText) -> CardText:
    """A probe directory's model card text: its task's example and limitations, and code that runs
    what `bertkit predict` runs (encoder, the recorded pooling, the head) instead of a transformers
    pipeline, which would put a fresh random head on the encoder."""
    name = str(probe_meta.get("pooling") or "mean")
    layer = name.partition("layer:")[2]
    pooled = POOLING_CODE.get(name) or _MEAN_OF.format(f"hidden[{int(layer)}]")
    snippet = (
        PROBE_SNIPPET.replace("INPUTS", ", ".join(f"${field}" for field in task_text.example))
        .replace("POOLED", pooled)
        .replace("POOLING", name)
        .replace("HEAD", str(probe_meta.get("head") or PROBE_HEAD_FILE))
    )
    does = (
        f"{task_text.does} with a logistic-regression probe (fitted by `bertkit probe`) on "
        f"frozen `{name}`-pooled vectors of its base model"
    )
    if probe_meta.get("setfit"):  # `bertkit finetune --recipe setfit`: the encoder was trained first
        does = (
            f"{task_text.does} as SetFit does: its encoder trained on contrastive pairs of the labelled "
            f"rows, then a logistic-regression head on `{name}`-pooled vectors (`setfit.SetFitModel."
            "from_pretrained` loads the directory too)"
        )
        snippet = snippet.replace("  # the frozen base model", "  # the encoder trained on pairs")
    if probe_meta.get("normalize"):  # the head was fitted on unit vectors (as SetFit's body gives them)
        snippet = snippet.replace(
            "probabilities = (vector", "vector = torch.nn.functional.normalize(vector, dim=-1)\nprobabilities = (vector"
        )
    return replace(task_text, pipeline=False, snippet=snippet, does=does)
