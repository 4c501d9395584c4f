"""A task that exists only in the tests: does a text negate (``not``, ``no``)? It is written
against the Task interface alone, with its own reading, metric, main metric and prediction rows, and
registered with one call; nothing in bertkit knows it (tests/cli/test_toy_task.py)."""

from __future__ import annotations

import numpy as np

from bertkit.tasks import register
from bertkit.tasks.base import CLASS, Task, TaskOption, require_nonempty

LABELS = ["plain", "negated"]


class NegationTask(Task):
    name = "negation"
    summary = "does the text negate?"
    model_class = "AutoModelForSequenceClassification"
    main_metric = "balanced_accuracy"
    reads_first_token_only = True
    targets = {"labels": CLASS}
    options_declared = (
        TaskOption("text_field", str, "Record field with the text.", default="text"),
        # a flag of one command each: `bertkit predict --cutoff`, `bertkit eval --score-cutoff`
        TaskOption("cutoff", float, "Probability from which a text counts as negated.", ("predict",), 0.5),
        TaskOption(
            "score_cutoff", float, "Probability from which a text counts as negated when scoring.", ("eval",), 0.5
        ),
    )
    prediction_fields = {
        "text": "the input",
        "negated": "whether the model reads a negation",
        "probability": "the probability of a negation",
    }

    def __init__(self, max_length=128, options=None, labels=None):
        super().__init__(max_length, options, LABELS)

    def from_records(self, records, source, purpose, hub=False):
        field = self.options.get("text_field", "text")
        examples = [{"text": str(record.get(field) or "")} for record in records]
        for example, record in zip(examples, records):
            if "negated" in record:
                example["negated"] = bool(record["negated"])
        require_nonempty(examples, ("text",), source.description)
        return examples

    def model_kwargs(self):
        return {
            "num_labels": 2,
            "id2label": dict(enumerate(LABELS)),
            "label2id": {name: i for i, name in enumerate(LABELS)},
        }

    def preprocess(self, examples, tokenizer, train):
        encoded = tokenizer([ex["text"] for ex in examples], truncation=True, max_length=self.max_length)
        features = []
        for i, ids in enumerate(encoded["input_ids"]):
            feature = {"input_ids": ids, "example_index": i}
            if "token_type_ids" in encoded:
                feature["token_type_ids"] = encoded["token_type_ids"][i]
            if "negated" in examples[i]:
                feature["labels"] = int(examples[i]["negated"])
            features.append(feature)
        return features

    def postprocess(self, examples, features, outputs):
        logits = np.stack(outputs["logits"]).astype(np.float64)
        return list(1 / (1 + np.exp(logits[:, 0] - logits[:, 1])))  # softmax over two classes

    def metrics(self, examples, predictions):
        gold = np.array([ex["negated"] for ex in examples])
        guessed = np.array(predictions) > self.options.get("score_cutoff", 0.5)
        recalls = [float((guessed[gold == value] == value).mean()) for value in (False, True) if (gold == value).any()]
        return {"balanced_accuracy": float(np.mean(recalls)), "examples": len(examples)}

    def format_prediction(self, example, prediction):
        negated = bool(prediction > self.options.get("cutoff", 0.5))
        return {"text": example["text"], "negated": negated, "probability": round(float(prediction), 6)}


register("negation", NegationTask)
