"""Sentence (cls) and sentence-pair (pair) classification from the [CLS] vector.

Label ids: a known dataset keeps its own ids (the registry's ``label_names``, in GLUE order, so
MRPC 1 = equivalent); for files, numeric labels sort numerically (``1`` and ``1.0`` are one class)
and string labels alphabetically. Binary F1 is the F1 of label id 1, as GLUE reports it.
"""

from __future__ import annotations

import re

import numpy as np

from bertkit.data.readers import pick_column, text_value
from bertkit.errors import BertkitError
from bertkit.metrics.breakdowns import confusion
from bertkit.metrics.classification import classification_scores, softmax
from bertkit.tasks import card_texts
from bertkit.tasks.base import PREDICT, TRAIN, Task, TaskOption, require_nonempty

TEXT_CANDIDATES = ("sentence", "text", "review", "content")
PAIR_TEXT_CANDIDATES = ("sentence1", "question1", "premise", "question", "text", "text_a", "#1 String")
PAIR_CANDIDATES = ("sentence2", "question2", "hypothesis", "sentence", "text_pair", "text_b", "#2 String")
LABEL_CANDIDATES = ("label", "labels", "gold_label", "Quality", "is_duplicate", "class", "target")
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_INTEGER = re.compile(r"[-+]?\d+")
# More distinct integer labels than this must look like class ids (0..N-1 or 1..N, most of them
# present); otherwise they are scores (ratings, years, counts), i.e. a regression target.
MAX_FREE_NUMERIC_CLASSES = 20
TEXT_COLUMN = TaskOption("text_column", str, "Column with the (first) text.", ("finetune", "probe"))
TEXT_PAIR_COLUMN = TaskOption("text_pair_column", str, "Column with the second text.", ("finetune", "probe"))
LABEL_COLUMN = TaskOption("label_column", str, "Column with the label.", ("finetune", "probe"))


class SingleSentenceTask(Task):
    name = "cls"
    model_class = "AutoModelForSequenceClassification"
    main_metric = "accuracy"
    reads_first_token_only = True
    summary = "one text"
    linear_probe = True
    card_text = card_texts.CLS
    text_fields: tuple = ("text",)
    options_declared = (TEXT_COLUMN, LABEL_COLUMN)
    prediction_fields = {"text": "the input text", "label": "the most probable label's name",
                         "score": "its probability", "probabilities": "every label's probability, by name",
                         "truncated": "present (true) when the input was cut at --max-length"}

    def __init__(self, max_length: int | None = None, options: dict | None = None, labels: list | None = None):
        super().__init__(max_length, options, labels)
        self._dataset_labels = None  # a known dataset's label names in its id order, seen in training data

    # --- reading -------------------------------------------------------------------------
    def from_records(self, records, source, purpose, hub=False):
        spec_columns = (source.spec.hub_columns if hub else source.spec.columns) if source.spec else {}
        columns = list(records[0].keys())
        chosen = self._columns(columns, spec_columns, source.description, purpose)
        label_names = source.spec.label_names if source.spec else None
        if purpose == TRAIN:  # a known dataset's ids win over any sorting (fit_labels)
            self._dataset_labels = tuple(label_names) if label_names else None
        if len(self.text_fields) == 1 and chosen["text"] == "text":
            _refuse_second_texts(records, source.description)
        examples = []
        for row, record in enumerate(records, 1):
            example = {field: text_value(record, column, row, source.description)
                       for field, column in chosen.items() if field != "label"}
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
        if self._dataset_labels:
            self.labels = list(self._dataset_labels)
            return
        _refuse_continuous(values)
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
        truncated = self._truncated(encoded["input_ids"], texts, pairs, tokenizer)
        label_ids = {label: i for i, label in enumerate(self.labels or [])}
        features = []
        for i, ids in enumerate(encoded["input_ids"]):
            feature = {"input_ids": ids, "example_index": i, "truncated": i in truncated}
            if "token_type_ids" in encoded:
                feature["token_type_ids"] = encoded["token_type_ids"][i]
            if "label" in examples[i]:
                feature["labels"] = label_ids[examples[i]["label"]]
            features.append(feature)
        self.stats = {"truncated": len(truncated)}
        if truncated:
            unit = "text pairs" if pairs else "texts"
            self.stats["notices"] = [f"{len(truncated)} of {len(examples)} {unit} were truncated to "
                                     f"{self.max_length} tokens"]
        return features

    def _truncated(self, input_ids, texts, pairs, tokenizer) -> set:
        """Indices of the rows that lost tokens: only rows that came out at exactly max_length can
        have, and only those are tokenized again, untruncated, to tell."""
        full = [i for i, ids in enumerate(input_ids) if len(ids) >= self.max_length]
        if not full:
            return set()
        lengths = tokenizer([texts[i] for i in full], [pairs[i] for i in full] if pairs else None,
                            truncation=False, verbose=False)["input_ids"]
        return {i for i, ids in zip(full, lengths) if len(ids) > self.max_length}

    def postprocess(self, examples, features, outputs):
        probabilities = softmax(np.stack(outputs["logits"]).astype(np.float64))
        # one feature per example, in example order
        return [{"probabilities": p, "truncated": f["truncated"]} for p, f in zip(probabilities, features)]

    def metrics(self, examples, predictions):
        label_ids = {label: i for i, label in enumerate(self.labels)}
        gold = [label_ids[ex["label"]] for ex in examples]
        scores = classification_scores(gold, [int(p["probabilities"].argmax()) for p in predictions],
                                       len(self.labels))
        if len(self.labels) == 2:
            scores["positive_label"] = self.labels[1]  # which class "f1" is about
        return scores

    def breakdown(self, examples, predictions, metrics):
        return confusion(self.labels, [ex["label"] for ex in examples],
                         [self.labels[int(np.asarray(p["probabilities"]).argmax())] for p in predictions])

    metric_inputs_description = "label ids"

    def metric_inputs(self, examples, predictions):
        ids = {label: i for i, label in enumerate(self.labels)}
        return ([int(np.asarray(p["probabilities"]).argmax()) for p in predictions],
                [ids[ex["label"]] for ex in examples])

    def format_prediction(self, example, prediction):
        probabilities = prediction["probabilities"]
        best = int(probabilities.argmax())
        row = {**{f: example[f] for f in self.text_fields}, "label": self.labels[best],
               "score": round(float(probabilities[best]), 6),
               "probabilities": {label: round(float(p), 6) for label, p in zip(self.labels, probabilities)}}
        if prediction["truncated"]:
            row["truncated"] = True
        return row


class SentencePairTask(SingleSentenceTask):
    name = "pair"
    text_fields = ("text", "text_pair")
    summary = "two texts"
    card_text = card_texts.PAIR
    options_declared = (TEXT_COLUMN, TEXT_PAIR_COLUMN, LABEL_COLUMN)
    prediction_fields = {"text_pair": "the second input text", **SingleSentenceTask.prediction_fields}


def _label_name(value, label_names, source) -> str:
    if value is None or str(value).strip() == "":
        raise BertkitError(f"{source}: a row has an empty label", "fill or drop rows without labels")
    text = normalise_label(value)
    if label_names:
        if text in label_names:
            return text
        if text.lstrip("-").isdigit() and 0 <= int(text) < len(label_names):
            return label_names[int(text)]
        raise BertkitError(f"{source}: unknown label {text!r}", f"expected one of {', '.join(label_names)}")
    return text


def normalise_label(value) -> str:
    """A label as text; numbers in canonical form, so 1, "1", 1.0, "1.0" and "01" are one class."""
    text = str(value).strip()
    if isinstance(value, bool) or not _NUMBER.fullmatch(text):
        return text
    if _INTEGER.fullmatch(text):
        return str(int(text))  # exact, however long (a float would round big ids)
    number = float(text)
    return str(int(number)) if number.is_integer() else repr(number)


def _refuse_continuous(values: set) -> None:
    numbers = [float(v) for v in values if _NUMBER.fullmatch(v)]
    if len(numbers) != len(values):
        return  # some label is a name: these are classes
    fractional = sorted(v for v in numbers if not v.is_integer())
    looks_like_ids = min(numbers) >= 0 and max(numbers) + 1 <= 2 * len(numbers)
    if fractional or (len(numbers) > MAX_FREE_NUMERIC_CLASSES and not looks_like_ids):
        examples = ", ".join(f"{v:g}" for v in (fractional or sorted(numbers))[:3])
        raise BertkitError(f"the labels look continuous ({len(numbers)} distinct numeric values, e.g. {examples}): "
                           "regression is not supported, only classification",
                           "use class labels (e.g. bin the scores into a few classes), or point --label-column at "
                           "the column with the classes")


def _refuse_second_texts(records: list[dict], source: str) -> None:
    """A single-text model would silently ignore a second text (what follows a TAB in .txt)."""
    rows = [n for n, record in enumerate(records, 1) if str(record.get("text_pair") or "").strip()]
    if rows:
        where = ", ".join(map(str, rows[:5])) + (", ..." if len(rows) > 5 else "")
        raise BertkitError(f"{source}: {len(rows)} row(s) have a second text after a TAB (rows {where}), which a "
                           "single-text (cls) model would ignore",
                           "remove or replace the TABs to classify the whole line, or use a pair model "
                           "(bertkit finetune pair) for two texts")
