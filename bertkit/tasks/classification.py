"""Sentence (cls) and sentence-pair (pair) classification from the [CLS] vector."""

from __future__ import annotations

import numpy as np

from bertkit.data.readers import pick_column
from bertkit.errors import BertkitError
from bertkit.metrics.classification import classification_scores, softmax
from bertkit.tasks.base import PREDICT, TRAIN, Task, require_nonempty

TEXT_CANDIDATES = ("sentence", "text", "review", "content")
PAIR_TEXT_CANDIDATES = ("sentence1", "question1", "premise", "question", "text", "text_a", "#1 String")
PAIR_CANDIDATES = ("sentence2", "question2", "hypothesis", "sentence", "text_pair", "text_b", "#2 String")
LABEL_CANDIDATES = ("label", "labels", "gold_label", "Quality", "is_duplicate", "class", "target")


class SingleSentenceTask(Task):
    name = "cls"
    model_class = "AutoModelForSequenceClassification"
    main_metric = "accuracy"
    reads_first_token_only = True
    text_fields: tuple = ("text",)
    option_names = ("text_column", "text_pair_column", "label_column")

    # --- reading -------------------------------------------------------------------------
    def from_records(self, records, source, purpose, hub=False):
        spec_columns = (source.spec.hub_columns if hub else source.spec.columns) if source.spec else {}
        columns = list(records[0].keys())
        chosen = self._columns(columns, spec_columns, source.description, purpose)
        label_names = source.spec.label_names if source.spec else None
        examples = []
        for record in records:
            example = {field: str(record.get(column) or "") for field, column in chosen.items() if field != "label"}
            if "label" in chosen:
                example["label"] = _label_name(record.get(chosen["label"]), label_names, source.description)
            examples.append(example)
        require_nonempty(examples, self.text_fields, source.description)
        return examples

    def _columns(self, columns, spec_columns, source, purpose) -> dict:
        def choose(field, candidates, role, flag, required=True):
            explicit = spec_columns.get(field) or self.options.get(f"{field}_column")
            if explicit not in columns and purpose != TRAIN:
                explicit = None  # the training layout need not match an eval/predict file: infer instead
            # eval and predict have no column flags: their hints must not name one
            return pick_column(columns, explicit, candidates, role, flag if purpose == TRAIN else None, source,
                               required)

        pair = len(self.text_fields) == 2
        chosen = {"text": choose("text", PAIR_TEXT_CANDIDATES if pair else TEXT_CANDIDATES, "text", "--text-column")}
        if pair:
            candidates = tuple(c for c in PAIR_CANDIDATES if c != chosen["text"])
            named = (spec_columns.get("text_pair"), self.options.get("text_pair_column"))
            if not any(c in columns for c in candidates + named):
                raise BertkitError(f"{source}: a pair model needs two texts per row, found only {', '.join(columns)}",
                                   "give two text columns (a tab between them in .txt)"
                                   + (" or set --text-pair-column" if purpose == TRAIN else ""))
            chosen["text_pair"] = choose("text_pair", candidates, "second text", "--text-pair-column")
        if purpose != PREDICT:
            chosen["label"] = choose("label", LABEL_CANDIDATES, "label", "--label-column")
        if purpose == TRAIN:  # remember the layout, so eval/predict on the same kind of file just work
            self.options.update({f"{field}_column": column for field, column in chosen.items()})
        return chosen

    def fit_labels(self, examples):
        values = {ex["label"] for ex in examples}
        if len(values) < 2:
            raise BertkitError(f"training data has only one label ({', '.join(values)})", "a classifier needs at least two")
        self.labels = sorted(values, key=lambda v: (0, int(v), v) if v.lstrip("-").isdigit() else (1, 0, v))

    def check_eval_examples(self, examples, source):
        unseen = sorted({ex["label"] for ex in examples} - set(self.labels))
        if unseen:
            raise BertkitError(f"{source.description}: label(s) never seen in training: {', '.join(unseen)}",
                               f"the model knows {', '.join(self.labels)}")

    # --- features --------------------------------------------------------------------------
    def preprocess(self, examples, tokenizer, train):
        texts = [ex["text"] for ex in examples]
        pairs = [ex["text_pair"] for ex in examples] if len(self.text_fields) == 2 else None
        encoded = tokenizer(texts, pairs, truncation=True, max_length=self.max_length)
        label_ids = {label: i for i, label in enumerate(self.labels or [])}
        features = []
        for i, ids in enumerate(encoded["input_ids"]):
            feature = {"input_ids": ids, "example_index": i}
            if "token_type_ids" in encoded:
                feature["token_type_ids"] = encoded["token_type_ids"][i]
            if "label" in examples[i]:
                feature["labels"] = label_ids[examples[i]["label"]]
            features.append(feature)
        self.stats = {"truncated": int(sum(len(ids) >= self.max_length for ids in encoded["input_ids"]))}
        return features

    def postprocess(self, examples, features, outputs):
        probabilities = softmax(np.stack(outputs["logits"]).astype(np.float64))
        return list(probabilities)  # one feature per example, in example order

    def metrics(self, examples, predictions):
        label_ids = {label: i for i, label in enumerate(self.labels)}
        gold = [label_ids[ex["label"]] for ex in examples]
        return classification_scores(gold, [int(p.argmax()) for p in predictions], len(self.labels))

    def format_prediction(self, example, prediction):
        best = int(prediction.argmax())
        return {**{f: example[f] for f in self.text_fields}, "label": self.labels[best],
                "score": round(float(prediction[best]), 6),
                "probabilities": {label: round(float(p), 6) for label, p in zip(self.labels, prediction)}}


class SentencePairTask(SingleSentenceTask):
    name = "pair"
    text_fields = ("text", "text_pair")


def _label_name(value, label_names, source) -> str:
    if value is None or str(value).strip() == "":
        raise BertkitError(f"{source}: a row has an empty label", "fill or drop rows without labels")
    text = str(value).strip()
    if label_names:
        if text in label_names:
            return text
        if text.lstrip("-").isdigit() and 0 <= int(text) < len(label_names):
            return label_names[int(text)]
        raise BertkitError(f"{source}: unknown label {text!r}", f"expected one of {', '.join(label_names)}")
    return text
