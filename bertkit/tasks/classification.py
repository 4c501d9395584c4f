"""Sentence (cls) and sentence-pair (pair) classification from the [CLS] vector.

These tasks read texts and columns and tokenize them; what a label is (one class, a number, a set
of classes: ``--problem-type``) is the label kind's (bertkit/tasks/label_kinds.py), which reads,
encodes, decodes, scores and writes it.
"""

from __future__ import annotations

import numpy as np

from bertkit.data.readers import pick_column, text_value
from bertkit.errors import BertkitError
from bertkit.tasks import card_texts
from bertkit.tasks.base import PREDICT, TRAIN, Task, TaskOption, require_nonempty
from bertkit.tasks.label_kinds import DEFAULT_KIND, KINDS, LIST_KIND, is_list_label, make_kind
from bertkit.tasks.loss_options import LOSS_OPTIONS, check_loss_options, loss_spec, weigh_classes
from bertkit.tasks.training_spec import TrainingSpec

TEXT_CANDIDATES = ("sentence", "text", "review", "content")
PAIR_TEXT_CANDIDATES = ("sentence1", "question1", "premise", "question", "text", "text_a", "#1 String")
PAIR_CANDIDATES = ("sentence2", "question2", "hypothesis", "sentence", "text_pair", "text_b", "#2 String")
LABEL_CANDIDATES = ("label", "labels", "gold_label", "Quality", "is_duplicate", "class", "target", "score")
TEXT_COLUMN = TaskOption("text_column", str, "Column with the (first) text.", ("finetune", "probe"))
TEXT_PAIR_COLUMN = TaskOption("text_pair_column", str, "Column with the second text.", ("finetune", "probe"))
LABEL_COLUMN = TaskOption("label_column", str, "Column with the label.", ("finetune", "probe"))
LABEL_KIND_OPTIONS = (
    TaskOption("problem_type", str, f"{' | '.join(KINDS)}; default: the dataset's, or what the labels show (a "
               "JSON list: multi-label; numbers that are not classes: an error asking for regression).",
               ("finetune",)),
    TaskOption("label_columns", str, "multi-label: comma-separated 0/1 columns, one per label.", ("finetune",)),
    TaskOption("scale_targets", bool, "regression: train on standardised targets (the saved head predicts the "
               "original scale).", ("finetune",)),
    TaskOption("target_scaling", dict, "regression: the scaling in use while training (not a flag).", ()),
    TaskOption("scaled_targets", dict, "regression: the scaling training folded into the head (stored).", ()),
    TaskOption("label_map", str, "Read evaluation labels through FILE=MODEL pairs, e.g. 0=negative,1=positive.",
               ("finetune", "eval")),
    TaskOption("tune_per_label", bool, "multi-label: tune one threshold per label (default: one for all).",
               ("eval",)),
    TaskOption("top_k", int, "cls/pair: give only the K most probable labels (multi-label: those of them over "
               "the threshold).", ("predict",)),
    TaskOption("threshold", float, "multi-label: probability at which a label is predicted (stored by eval).", (),
               0.5),
    TaskOption("thresholds", list, "multi-label: per-label thresholds (stored by eval).", (), []),
)


class SingleSentenceTask(Task):
    name = "cls"
    model_class = "AutoModelForSequenceClassification"
    reads_first_token_only = True
    summary = "one text"
    linear_probe = True
    base_card_text = card_texts.CLS
    text_fields: tuple = ("text",)
    gold_fields = ("label",)
    options_declared = (TEXT_COLUMN, LABEL_COLUMN, *LABEL_KIND_OPTIONS, *LOSS_OPTIONS)

    def __init__(self, max_length: int | None = None, options: dict | None = None, labels: list | None = None):
        super().__init__(max_length, options, labels)
        self.kind = make_kind(self.options.get("problem_type"), self.options, self.labels)
        self._dataset_labels = None  # a known dataset's label names in its id order, seen in training data

    # --- what the label kind decides ------------------------------------------------------------
    main_metric = property(lambda self: self.kind.main_metric)
    greater_is_better = property(lambda self: self.kind.greater_is_better)
    targets = property(lambda self: {"labels": self.kind.target})
    metric_inputs_description = property(lambda self: self.kind.metric_inputs_description)
    tunes_while_training = property(lambda self: self.kind.tunes_while_training)

    @property
    def prediction_fields(self) -> dict:
        return {**{f: f"the input {'second ' if f == 'text_pair' else ''}text" for f in self.text_fields},
                **self.kind.prediction_fields, "truncated": "present (true) when the input was cut at --max-length"}

    names_outputs = property(lambda self: self.kind.names_outputs)

    @property
    def card_text(self):
        return self.kind.card_text(self.base_card_text)

    # --- reading -------------------------------------------------------------------------
    def from_records(self, records, source, purpose, hub=False):
        spec = source.spec
        spec_columns = (spec.hub_columns if hub else spec.columns) if spec else {}
        columns = list(records[0].keys())
        chosen = self._columns(columns, spec_columns, source.description, purpose)
        label_names = spec.label_names if spec else None
        if purpose == TRAIN:  # a known dataset's ids and kind win over any guessing (fit_labels)
            self._dataset_labels = tuple(label_names) if label_names else None
            self._choose_kind(spec, records, chosen.get("label"))
        if len(self.text_fields) == 1 and chosen["text"] == "text":
            _refuse_second_texts(records, source.description)
        examples = []
        for row, record in enumerate(records, 1):
            example = {field: text_value(record, column, row, source.description)
                       for field, column in chosen.items() if field != "label"}
            if "label" in chosen:
                value = ({c: record.get(c) for c in chosen["label"]} if isinstance(chosen["label"], list)
                         else record.get(chosen["label"]))
                example["label"] = self.kind.read_label(value, row, source.description, label_names)
            examples.append(example)
        require_nonempty(examples, self.text_fields, source.description)
        return examples

    def _choose_kind(self, spec, records, label_column) -> None:
        """The label kind: --problem-type, else the known dataset's, else a JSON list of labels or
        --label-columns says multi-label; remembered in the options for eval and predict."""
        name = self.options.get("problem_type") or (spec.problem_type if spec else None)
        if name is None and (self.options.get("label_columns") or
                             (isinstance(label_column, str) and any(is_list_label(r.get(label_column)) for r in records))):
            name = LIST_KIND
        name = name or DEFAULT_KIND
        if name != self.kind.name:
            self.kind = make_kind(name, self.options, self.labels)
        self.options["problem_type"] = name
        check_loss_options(self.options, has_classes=self.kind.names_outputs)
        self.kind.check_options()

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
            if self.options.get("label_columns"):
                chosen["label"] = _label_columns(self.options["label_columns"], columns, source)
            else:
                chosen["label"] = choose("label", LABEL_CANDIDATES, "label", "--label-column")
        if purpose == TRAIN:  # remember the layout, so eval/predict on the same kind of file just work
            self.options.update({f"{field}_column": column for field, column in chosen.items()
                                 if isinstance(column, str)})
        return chosen

    def check_options(self):
        self.kind.check_options()

    def check_probe_data(self, source):
        if not self.kind.linear_probe:
            raise BertkitError(f"bertkit probe fits one class per text; {source.description} is {self.kind.name} "
                               "data", f"use `bertkit finetune {self.name}` for it")

    def fit_labels(self, examples):
        self.labels = self.kind.fit([ex["label"] for ex in examples], self._dataset_labels)
        self.kind.labels = self.labels

    def check_eval_examples(self, examples, source):
        labels = self.kind.check_eval([ex["label"] for ex in examples], source.description)
        for example, label in zip(examples, labels):
            example["label"] = label

    def model_kwargs(self) -> dict:
        return self.kind.model_kwargs()

    # --- features --------------------------------------------------------------------------
    def preprocess(self, examples, tokenizer, train):
        texts = [ex["text"] for ex in examples]
        pairs = [ex["text_pair"] for ex in examples] if len(self.text_fields) == 2 else None
        encoded = tokenizer(texts, pairs, truncation=True, max_length=self.max_length)
        truncated = self._truncated(encoded["input_ids"], texts, pairs, tokenizer)
        features = []
        for i, ids in enumerate(encoded["input_ids"]):
            feature = {"input_ids": ids, "example_index": i, "truncated": i in truncated}
            if "token_type_ids" in encoded:
                feature["token_type_ids"] = encoded["token_type_ids"][i]
            if "label" in examples[i]:
                feature["labels"] = self.kind.target_of(examples[i]["label"])
            features.append(feature)
        self.stats = {"truncated": len(truncated)}
        notices = list(self.kind.notices)
        if train and features and "labels" in features[0]:
            targets = [f["labels"] for f in features]
            weighed = weigh_classes(self.options, self.kind.class_counts(targets), self.labels, self._multi_label,
                                    len(features))
            notices += [weighed] if weighed else []
            self._head_bias = self.kind.head_bias(targets)
        if truncated:
            unit = "text pairs" if pairs else "texts"
            notices.append(f"{len(truncated)} of {len(examples)} {unit} were truncated to {self.max_length} tokens")
        if notices:
            self.stats["notices"] = notices
        self.kind.notices = []
        return features

    _multi_label = property(lambda self: self.kind.target == "multi_hot")

    def training_spec(self):
        bias = getattr(self, "_head_bias", None)
        return TrainingSpec(loss=loss_spec(self.options, self.kind.target),
                            head_bias=None if bias is None else tuple(float(b) for b in bias),
                            target_scaling=self.kind.target_scaling())

    def finished(self):
        changes = self.kind.finished_options()
        return self.with_options(changes) if changes else self

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
        decoded = self.kind.decode(np.stack(outputs["logits"]).astype(np.float64))
        # one feature per example, in example order
        return [{**d, "truncated": f["truncated"]} for d, f in zip(decoded, features)]

    def metrics(self, examples, predictions):
        return self.kind.scores([ex["label"] for ex in examples], predictions)

    def tune(self, examples, features, outputs):
        return self.kind.tune([ex["label"] for ex in examples], self.postprocess(examples, features, outputs))

    def fold_keys(self, examples):
        return ([ex["label"] for ex in examples] if self.kind.stratifies_folds else None), None

    def breakdown(self, examples, predictions, metrics):
        return self.kind.breakdown([ex["label"] for ex in examples], predictions, metrics)

    def metric_inputs(self, examples, predictions):
        return self.kind.metric_inputs([ex["label"] for ex in examples], predictions)

    def format_prediction(self, example, prediction):
        row = {**{f: example[f] for f in self.text_fields}, **self.kind.row(prediction)}
        if prediction["truncated"]:
            row["truncated"] = True
        return row


class SentencePairTask(SingleSentenceTask):
    name = "pair"
    text_fields = ("text", "text_pair")
    summary = "two texts"
    base_card_text = card_texts.PAIR
    options_declared = (TEXT_COLUMN, TEXT_PAIR_COLUMN, LABEL_COLUMN, *LABEL_KIND_OPTIONS, *LOSS_OPTIONS)


def _label_columns(value: str, columns: list, source: str) -> list:
    wanted = [c.strip() for c in value.split(",") if c.strip()]
    missing = [c for c in wanted if c not in columns]
    if missing or len(wanted) < 2:
        raise BertkitError(f"{source}: --label-columns {value!r}: " + (f"no column {missing[0]!r}" if missing
                           else "name at least two 0/1 columns"), f"columns found: {', '.join(columns)}")
    return wanted


def _refuse_second_texts(records: list[dict], source: str) -> None:
    """A single-text model would silently ignore a second text (what follows a TAB in .txt)."""
    rows = [n for n, record in enumerate(records, 1) if str(record.get("text_pair") or "").strip()]
    if rows:
        where = ", ".join(map(str, rows[:5])) + (", ..." if len(rows) > 5 else "")
        raise BertkitError(f"{source}: {len(rows)} row(s) have a second text after a TAB (rows {where}), which a "
                           "single-text (cls) model would ignore",
                           "remove or replace the TABs to classify the whole line, or use a pair model "
                           "(bertkit finetune pair) for two texts")
