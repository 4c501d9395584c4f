"""Sentence (cls) and sentence-pair (pair) classification from the [CLS] vector. These tasks read
texts and columns and tokenize them; what a label is (one class, a number, a set of classes:
``--problem-type``) is the label kind's (bertkit/tasks/label_kinds.py), which reads, encodes,
decodes, scores and writes it."""

from __future__ import annotations

import numpy as np

from bertkit.data.readers import pick_column, text_value
from bertkit.errors import BertkitError
from bertkit.tasks import card_texts
from bertkit.tasks.annotated import (
    CHOICES,
    DATA_FORMAT,
    LABEL_CONTROL,
    PREDICTION_FORMAT,
    READING_OPTIONS,
    annotated_records,
    reading_options_dropped,
    with_notices,
)
from bertkit.tasks.base import PREDICT, TRAIN, Examples, Learned, Task, require_nonempty, seen_in
from bertkit.tasks.classification_options import (
    DELIMITER,
    LABEL_CANDIDATES,
    LABEL_COLUMN,
    LABEL_KIND_OPTIONS,
    PAIR_CANDIDATES,
    PAIR_TEXT_CANDIDATES,
    TEXT_CANDIDATES,
    TEXT_COLUMN,
    TEXT_PAIR_COLUMN,
)
from bertkit.tasks.classification_rows import (
    label_columns,
    refuse_joined_labels,
    refuse_second_texts,
    without_unlabelled,
)
from bertkit.tasks.few_shot import FEW_SHOT_OPTIONS, recipe_of
from bertkit.tasks.label_kinds import DEFAULT_KIND, LIST_KIND, is_list_label, make_kind
from bertkit.tasks.long_text import (
    LONG_TEXT_OPTIONS,
    WINDOWS,
    check_long_text_options,
    encode_rows,
    long_text_card,
    pool_windows,
    strategy,
)
from bertkit.tasks.loss_options import LOSS_OPTIONS, check_loss_options, loss_notices, loss_spec, weigh_classes
from bertkit.tasks.training_spec import TrainingSpec


class SingleSentenceTask(Task):
    name = "cls"
    model_class = "AutoModelForSequenceClassification"
    reads_first_token_only = True
    summary = "one text"
    linear_probe = True
    base_card_text = card_texts.CLS
    text_fields: tuple = ("text",)
    gold_fields = ("label",)
    reading_options = ("delimiter", *READING_OPTIONS)
    options_declared = (
        TEXT_COLUMN,
        LABEL_COLUMN,
        DELIMITER,
        DATA_FORMAT,
        LABEL_CONTROL,
        PREDICTION_FORMAT,
        *LABEL_KIND_OPTIONS,
        *LOSS_OPTIONS,
        *FEW_SHOT_OPTIONS,
        *LONG_TEXT_OPTIONS,
    )

    def __init__(self, max_length: int | None = None, options: dict | None = None, labels: list | None = None):
        super().__init__(max_length, options, labels)
        self.kind = make_kind(self.options.get("problem_type"), self.options, self.labels)
        self.windows = strategy(self.options) == WINDOWS  # several features per row, pooled in postprocess

    # --- what the label kind decides ------------------------------------------------------------
    main_metric = property(lambda self: self.kind.main_metric)
    greater_is_better = property(lambda self: self.kind.greater_is_better)
    targets = property(lambda self: {"labels": self.kind.target})
    metric_inputs_description = property(lambda self: self.kind.metric_inputs_description)
    tunes_while_training = property(lambda self: self.kind.tunes_while_training)

    @property
    def prediction_fields(self) -> dict:
        return {
            **{f: f"the input {'second ' if f == 'text_pair' else ''}text" for f in self.text_fields},
            **self.kind.prediction_fields,
            "truncated": "present (true) when the input was cut at --max-length",
            **({"windows": "how many windows the row was read in (--long-text windows)"} if self.windows else {}),
        }

    names_outputs = property(lambda self: self.kind.names_outputs)
    calibrates = property(lambda self: self.kind.calibrates)
    conformal_sets = property(lambda self: self.kind.conformal_sets)
    conformal_scores = property(lambda self: self.kind.conformal_scores)  # (probabilities, gold labels) -> scores

    @property
    def card_text(self):
        return long_text_card(self.kind.card_text(self.base_card_text), self.options)

    # --- reading -------------------------------------------------------------------------
    def from_records(self, records, source, purpose, hub=False):
        records, said = annotated_records(records, self.options, CHOICES, purpose, source.description)
        return with_notices(self._from_plain(records, source, purpose, hub), said)

    def _from_plain(self, records, source, purpose, hub):
        spec = source.spec
        spec_columns = (spec.hub_columns if hub else spec.columns) if spec else {}
        columns = list(records[0].keys())
        chosen = self._columns(columns, spec_columns, source.description, purpose)
        label_names = spec.labels_of(chosen.get("label")) if spec else None  # a ClassLabel column's names
        kind, seen = self.kind, {}
        if purpose == TRAIN:  # a known dataset's ids and kind win over any guessing (fit)
            kind = self._training_kind(spec, records, chosen.get("label"))
            # what fit learns from: the layout (so eval/predict on the same kind of file just work)
            seen = {
                "problem_type": kind.name,
                "dataset_labels": tuple(label_names) if label_names else None,
                "columns": {f"{field}_column": column for field, column in chosen.items() if isinstance(column, str)},
            }
        if len(self.text_fields) == 1 and chosen["text"] == "text":
            refuse_second_texts(records, source.description)
        records, seen = without_unlabelled(records, spec, chosen.get("label"), source.description, seen)
        examples = []
        for row, record in enumerate(records, 1):
            example = {
                field: text_value(record, column, row, source.description)
                for field, column in chosen.items()
                if field != "label"
            }
            if "label" in chosen:
                value = (
                    {c: record.get(c) for c in chosen["label"]}
                    if isinstance(chosen["label"], list)
                    else record.get(chosen["label"])
                )
                example["label"] = kind.read_label(value, row, source.description, label_names)
            examples.append(example)
        require_nonempty(examples, self.text_fields, source.description)
        return Examples(examples, seen)

    def _training_kind(self, spec, records, label_column):
        """The label kind training data is read as: --problem-type, else the known dataset's, else a
        JSON list of labels or --label-columns says multi-label (``fit`` stores it for eval and predict)."""
        name = self.options.get("problem_type") or (spec.problem_type if spec else None)
        listed = isinstance(label_column, str) and any(is_list_label(r.get(label_column)) for r in records)
        if name is None and (self.options.get("label_columns") or listed):
            name = LIST_KIND
        if name is None and isinstance(label_column, str):
            refuse_joined_labels([r.get(label_column) for r in records])
        name = name or DEFAULT_KIND
        kind = self.kind if name == self.kind.name else make_kind(name, self.options, self.labels)
        check_loss_options(self.options, has_classes=kind.names_outputs)
        check_long_text_options(self.options, self.max_length, training=True)
        kind.check_options()
        return kind

    def _columns(self, columns, spec_columns, source, purpose) -> dict:
        def choose(field, candidates, role, flag, required=True):
            explicit = spec_columns.get(field) or self.options.get(f"{field}_column")
            if explicit not in columns and purpose != TRAIN:
                explicit = None  # the training layout need not match an eval/predict file: infer instead
            # eval and predict have no column flags: their hints must not name one
            train = purpose == TRAIN  # finetune, tune and probe: they have the column flags and --delimiter
            return pick_column(
                columns,
                explicit,
                candidates,
                role,
                flag if train else None,
                source,
                required,
                "--" + DELIMITER.name if train else None,
            )

        pair = len(self.text_fields) == 2
        chosen = {"text": choose("text", PAIR_TEXT_CANDIDATES if pair else TEXT_CANDIDATES, "text", "--text-column")}
        if pair:
            candidates = tuple(c for c in PAIR_CANDIDATES if c != chosen["text"])
            named = (spec_columns.get("text_pair"), self.options.get("text_pair_column"))
            if not any(c in columns for c in candidates + named):
                raise BertkitError(
                    f"{source}: a pair model needs two texts per row, found only {', '.join(columns)}",
                    "give two text columns (a tab between them in .txt)"
                    + (" or set --text-pair-column" if purpose == TRAIN else ""),
                )
            chosen["text_pair"] = choose("text_pair", candidates, "second text", "--text-pair-column")
        if purpose != PREDICT:
            if self.options.get("label_columns"):
                chosen["label"] = label_columns(self.options["label_columns"], columns, source)
            else:
                chosen["label"] = choose("label", LABEL_CANDIDATES, "label", "--label-column")
        return chosen

    def check_options(self):
        self.kind.check_options()
        check_long_text_options(self.options, self.max_length, training=False)

    def check_training_options(self):
        """finetune's checks of ``_training_kind`` and ``recipe_of`` that need no data; a loss that
        needs classes is refused here only when --problem-type says there are none."""
        recipe_of(self.options)
        check_long_text_options(self.options, self.max_length, training=True)
        given_kind = bool(self.options.get("problem_type"))
        check_loss_options(self.options, has_classes=not given_kind or self.kind.names_outputs)
        if given_kind:
            self.kind.check_options()

    def check_probe_data(self, source, examples=None):
        """``examples``: the training examples as read (without them ``source`` is read again, since
        reading tells the kind without keeping it: probing/command.py should pass them)."""
        name = seen_in(self.read(source, TRAIN) if examples is None else examples).get("problem_type", self.kind.name)
        if not make_kind(name, self.options, None).linear_probe:
            raise BertkitError(
                f"bertkit probe fits one class per text; {source.description} is {name} data",
                f"use `bertkit finetune {self.name}` for it",
            )

    def fit(self, examples, seen=None):
        """The label names, the kind and layout read, a regression's scaling, the class weights and
        the head bias, from the training examples' labels."""
        seen = seen_in(examples) if seen is None else seen
        options = {**self.options, **seen.get("columns", {})}
        if seen.get("problem_type"):
            options["problem_type"] = seen["problem_type"]
        kind = make_kind(options.get("problem_type"), options, None)  # it writes what it fits into ``options``
        kind.labels = kind.fit([ex["label"] for ex in examples], seen.get("dataset_labels"))
        targets = [kind.target_of(ex["label"]) for ex in examples]
        weighed = weigh_classes(
            options, kind.class_counts(targets), kind.labels, kind.target == "multi_hot", len(targets)
        )
        bias = kind.head_bias(targets) if targets else None
        changes = {key: value for key, value in options.items() if self.options.get(key) != value}
        return Learned(
            kind.labels,
            {**changes, **{key: None for key in self.options if key not in options}},
            None if bias is None else tuple(float(b) for b in bias),
            (*kind.notices, *loss_notices(options), *([weighed] if weighed else [])),
        )

    def check_eval_examples(self, examples, source):
        """Labels checked and mapped in place; what mapping them did travels with the examples (their
        ``seen``, for preprocess's notices), not with the task."""
        kind = make_kind(self.kind.name, self.options, self.labels)  # a fresh one: its notices are this call's
        for example, label in zip(examples, kind.check_eval([ex["label"] for ex in examples], source.description)):
            example["label"] = label
        if kind.notices and isinstance(examples, Examples):
            examples.seen["notices"] = examples.seen.get("notices", []) + kind.notices

    def model_kwargs(self) -> dict:
        return self.kind.model_kwargs()

    # --- features --------------------------------------------------------------------------
    def preprocess(self, examples, tokenizer, train):
        texts = [ex["text"] for ex in examples]
        pairs = [ex["text_pair"] for ex in examples] if len(self.text_fields) == 2 else None
        encoded = encode_rows(tokenizer, texts, pairs, self.max_length, self.options)
        for feature in encoded.features:  # a window is trained with its row's label
            if "label" in examples[feature["example_index"]]:
                feature["labels"] = self.kind.target_of(examples[feature["example_index"]]["label"])
        stats = dict(encoded.stats)
        notices = list(seen_in(examples).get("notices", [])) + (list(self.learned.notices) if train else [])
        notices += encoded.notices
        if notices:
            stats["notices"] = notices
        return self.reported(encoded.features, stats)

    def training_spec(self):
        return TrainingSpec(
            loss=loss_spec(self.options, self.kind.target),
            head_bias=self.learned.head_bias,
            target_scaling=self.kind.target_scaling(),
        )

    def finished(self):
        changes = {
            **self.kind.finished_options(),
            **reading_options_dropped(self.options),  # how the file was read is not the model's
            **({DELIMITER.name: None} if DELIMITER.name in self.options else {}),
        }
        return self.with_options(changes) if changes else self

    def postprocess(self, examples, features, outputs):
        logits = np.stack(outputs["logits"]).astype(np.float64)
        if not self.windows:  # one feature per example, in example order
            return [{**d, "truncated": f["truncated"]} for d, f in zip(self.kind.decode(logits), features)]
        index = [f["example_index"] for f in features]
        pooled, counts = pool_windows(logits, index, len(examples), self.options.get("window_pooling") or "mean")
        cut = [False] * len(examples)
        for i, feature in zip(index, features):
            cut[i] = cut[i] or feature["truncated"]
        return [{**d, "truncated": c, "windows": n} for d, c, n in zip(self.kind.decode(pooled), cut, counts)]

    def metrics(self, examples, predictions):
        return self.kind.scores([ex["label"] for ex in examples], predictions)

    def baseline(self, examples, features=None):
        return self.kind.baseline([ex["label"] for ex in examples]) if examples else None

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
        if "windows" in prediction:
            row["windows"] = prediction["windows"]
        return row


class SentencePairTask(SingleSentenceTask):
    name = "pair"
    text_fields = ("text", "text_pair")
    summary = "two texts"
    base_card_text = card_texts.PAIR
    options_declared = (
        TEXT_COLUMN,
        TEXT_PAIR_COLUMN,
        LABEL_COLUMN,
        DELIMITER,
        DATA_FORMAT,
        LABEL_CONTROL,
        PREDICTION_FORMAT,
        *LABEL_KIND_OPTIONS,
        *LOSS_OPTIONS,
        *FEW_SHOT_OPTIONS,
        *LONG_TEXT_OPTIONS,
    )
