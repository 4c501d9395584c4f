"""The model card: README.md in the Hugging Face format (YAML metadata, then prose), written from
bertkit.json, so that the directory can be pushed to the Hub as it is."""

from __future__ import annotations

import json
from pathlib import Path

PIPELINES = {"cls": "text-classification", "pair": "text-classification", "ner": "token-classification",
             "qa": "question-answering", "mlm": "fill-mask"}
TASK_NAMES = {"text-classification": "Text Classification", "token-classification": "Token Classification",
              "question-answering": "Question Answering", "fill-mask": "Fill-Mask"}
# Aliases resolve to a local copy; the card names the public checkpoint it is.
BASE_MODEL_IDS = {"minilm": "sentence-transformers/all-MiniLM-L6-v2"}
HUB_SPLITS = {"dev": "validation"}


def base_model_id(name: str | None) -> str | None:
    """A Hub id for the card's ``base_model``, or None for a local path (the Hub would reject it)."""
    if not name:
        return None
    if name in BASE_MODEL_IDS:
        return BASE_MODEL_IDS[name]
    if name.startswith(("/", ".", "~")) or Path(name).expanduser().exists() or name.count("/") > 1:
        return None
    return name


def model_card(meta: dict, model_name: str, figures: list[str] = ()) -> str:
    task = meta["task"]["task"]
    pipeline = PIPELINES.get(task, "text-classification")
    data = meta.get("data", {})
    base = base_model_id(meta.get("base_model"))
    dataset_id, dataset_config = _dataset(data.get("name"))
    metrics = {k: v for k, v in (meta.get("metrics") or {}).items() if isinstance(v, (int, float))
               and not isinstance(v, bool)}
    yaml = ["---", "library_name: transformers", f"pipeline_tag: {pipeline}", "tags:", "- bertkit", f"- {task}"]
    if base:
        yaml.append(f"base_model: {_quote(base)}")
    if dataset_id:
        yaml += ["datasets:", f"- {dataset_id}"]
    if metrics:
        yaml += ["metrics:"] + [f"- {name}" for name in metrics]
        yaml += ["model-index:", f"- name: {_quote(model_name)}", "  results:", "  - task:",
                 f"      type: {pipeline}", f"      name: {TASK_NAMES[pipeline]}", "    dataset:",
                 f"      name: {_quote(data.get('name') or Path(str(data.get('eval') or 'eval data')).name)}",
                 f"      type: {_quote(dataset_id or 'custom')}"]
        if dataset_config:
            yaml += [f"      config: {dataset_config}", "      split: validation"]
        yaml.append("    metrics:")
        for name, value in metrics.items():
            yaml += [f"    - type: {name}", f"      value: {round(float(value), 4)}", f"      name: {name}"]
    yaml.append("---")
    return "\n".join(yaml) + "\n\n" + _body(meta, model_name, task, pipeline, base, metrics, figures)


def _body(meta, model_name, task, pipeline, base, metrics, figures) -> str:
    data, config = meta.get("data", {}), meta.get("config", {})
    labels = meta["task"].get("labels") or []
    what = {"cls": "classifies a text", "pair": "classifies a pair of texts", "ner": "tags each word with a BIO "
            "entity tag", "qa": "extracts the answer span to a question from a context",
            "mlm": "predicts masked word pieces (continued masked-LM pre-training)"}[task]
    lines = [f"# {model_name}", "",
             f"A {TASK_NAMES[pipeline].lower()} model fine-tuned with [bertkit](https://pypi.org/project/bertkit/) "
             f"from `{meta.get('base_model')}`: it {what}."]
    if labels:
        lines.append(f"Labels: {', '.join(f'`{label}`' for label in labels)}.")
    lines += ["", "## Intended use", "",
              f"{TASK_NAMES[pipeline]} of English text like its training data "
              f"({data.get('name') or data.get('train')}). Check it on your own data before relying on it.", "",
              "```python", "from transformers import pipeline", "",
              f'model = pipeline("{pipeline}", model="{model_name}")']
    lines += {"cls": ['print(model("a gripping, beautifully acted film"))'],
              "pair": ['print(model({"text": "The cat sat.", "text_pair": "A cat was sitting."}))'],
              "ner": ['print(model("John lives in Paris", aggregation_strategy="first"))'],
              "qa": ['print(model(question="Where does John live?", context="John lives in Paris."))'],
              "mlm": ['print(model("John lives in [MASK]."))']}[task]
    lines += ["```", "", "or with bertkit: `bertkit predict DIR --input texts.txt`.", "",
              "## Training data", "",
              f"- train: {data.get('train')} ({data.get('train_examples')} examples)",
              f"- evaluation: {data.get('eval') or 'none'} ({data.get('eval_examples')} examples)", "",
              "## Training procedure", "", "| hyperparameter | value |", "|---|---|"]
    for key, value in config.items():
        if value is not None and value != {}:
            lines.append(f"| {key} | {json.dumps(value) if isinstance(value, dict) else value} |")
    lines.append(f"| max_length used | {meta['task'].get('max_length')} |")
    throughput = meta.get("throughput") or {}
    if throughput:
        lines += ["", f"Training took {throughput.get('train_seconds')} s "
                      f"({throughput.get('examples_per_s')} examples/s)."]
    lines += ["", "## Evaluation results", ""]
    if metrics:
        lines += [f"Best epoch: {meta.get('best_epoch')} (the saved weights).", "", "| metric | value |", "|---|---|"]
        lines += [f"| {name} | {value:.4f} |" for name, value in metrics.items()]
    else:
        lines.append("No evaluation data was given at training time.")
    for figure in figures:
        lines += ["", f"![{Path(figure).stem}]({figure})"]
    lines += ["", "## Limitations", "", _truncation(task, meta["task"].get("max_length")),
              "Scores are on the evaluation data above; text from other domains, languages or time periods can "
              "score much lower, and the model inherits the biases of its base model and training data.", "",
              "## Versions", "", ", ".join(f"{k} {v}" for k, v in (meta.get("versions") or {}).items())
              + f", bertkit {meta.get('bertkit_version')}", ""]
    return "\n".join(lines)


def _truncation(task: str, max_length) -> str:
    if task == "ner":
        return (f"Sentences longer than {max_length} sub-word tokens are split into overlapping windows by bertkit; "
                "plain transformers pipelines truncate them instead.")
    if task == "qa":
        return (f"Contexts longer than {max_length} tokens are read in overlapping windows; questions longer "
                "than 64 tokens are cut.")
    return f"Texts longer than {max_length} tokens are truncated: the rest of the text is not read."


def _dataset(name: str | None) -> tuple[str | None, str | None]:
    if not name:
        return None, None
    from bertkit.data.registry import DATASETS

    spec = DATASETS.get(name)
    return (spec.hub_id, spec.hub_config) if spec else (None, None)


def _quote(text: str) -> str:
    return json.dumps(str(text))  # a JSON string is a valid YAML scalar, whatever it holds
