"""What a classification task's label is: one class, a number, or a set of classes.

The text tasks (cls, pair: bertkit/tasks/classification.py) read texts and columns; how a row's
label is read, turned into a training target, decoded from the logits, scored and written is the
label kind's, chosen by ``--problem-type`` (a known dataset's registry entry, or the file itself
when it can tell: a JSON list of labels is multi-label). A new kind is one module plus one line in
``KINDS``; the names follow transformers' ``config.problem_type``, whose loss and
``pipeline(function_to_apply=...)`` a saved directory then uses as it is.
"""

from __future__ import annotations

import importlib

from bertkit.errors import BertkitError

# --problem-type value -> "module:Class" (imported when used)
KINDS = {
    "single-label": "bertkit.tasks.single_label:SingleLabel",
    "regression": "bertkit.tasks.regression:Regression",
    "multi-label": "bertkit.tasks.multi_label:MultiLabel",
}
DEFAULT_KIND = "single-label"
LIST_KIND = "multi-label"  # the kind a file whose labels are JSON lists (or --label-columns) says it is
NUMBER_KIND = "regression"  # the kind whose label is a number


class LabelKind:
    """The interface; ``labels`` are the model's label names (None for regression)."""

    name: str = ""
    problem_type: str = ""  # transformers' config.problem_type
    main_metric: str = ""
    greater_is_better: bool = True
    target: str = "class"  # base.CLASS, FLOAT or MULTI_HOT: how the engine collates the target
    prediction_fields: dict = {}  # the keys a predict row gets besides the texts
    metric_inputs_description: str | None = None
    names_outputs: bool = True  # each output is a label named in bertkit.json
    linear_probe: bool = False  # `bertkit probe` (a softmax over classes) can fit it
    tunes_while_training: bool = False  # finetune tunes (and stores) ``tune``'s settings on its dev data
    stratifies_folds: bool = False  # --folds keeps each fold's share of every label (one class per row)
    calibrates: bool = False  # one softmax whose temperature --calibrate fits (bertkit/methods/calibration.py)
    # --coverage: split-conformal label sets (conformal_scores of labelled rows; the row's set in ``row``)
    conformal_sets: bool = False

    def __init__(self, options: dict, labels: list | None):
        self.options, self.labels = options, labels  # the task's: tuned settings land there
        self.notices: list[str] = []  # what checking eval labels did that the user should know (check_eval)

    refuses: tuple = ()  # options of the task that do not apply to this kind

    def check_options(self) -> None:
        for name in self.refuses:
            if self.options.get(name) not in (None, False):
                raise BertkitError(
                    f"--{name.replace('_', '-')} does not apply to a {self.name} model", "drop that option"
                )
        if self.options.get("top_k") is not None and self.options["top_k"] < 1:
            raise BertkitError(f"--top-k must be >= 1, got {self.options['top_k']}", "e.g. --top-k 3")

    def conformal_scores(self, probabilities, gold: list):
        """--coverage: each labelled row's nonconformity score (kinds with ``conformal_sets``)."""
        raise NotImplementedError

    def read_label(self, value, row: int, source: str, names: tuple | None):
        """A record's label value (a field, or a tuple of 0/1 columns' values) as this kind's label."""
        raise NotImplementedError

    def fit(self, labels: list, names: tuple | None) -> list | None:
        """The model's label names from the training labels (``names``: a known dataset's)."""
        raise NotImplementedError

    def check_eval(self, labels: list, source: str) -> list:
        """The evaluation labels, checked (and mapped, where that is safe) against the model's."""
        return labels

    def target_of(self, label):
        raise NotImplementedError

    def model_kwargs(self) -> dict:
        labels = self.labels or []
        return {
            "num_labels": len(labels),
            "id2label": dict(enumerate(labels)),
            "label2id": {label: i for i, label in enumerate(labels)},
            "problem_type": self.problem_type,
        }

    def decode(self, logits) -> list[dict]:
        """One prediction per row from its logits (a float64 numpy array, rows x outputs)."""
        raise NotImplementedError

    def scores(self, gold: list, predictions: list[dict]) -> dict:
        raise NotImplementedError

    def row(self, prediction: dict) -> dict:
        raise NotImplementedError

    def tune(self, gold: list, predictions: list[dict]) -> dict:
        return {}

    def baseline(self, gold: list) -> dict | None:
        """The trivial baseline of this kind on the gold labels (bertkit/metrics/baselines.py)."""
        return None

    def breakdown(self, gold: list, predictions: list[dict], metrics: dict) -> dict:
        return {}

    def metric_inputs(self, gold: list, predictions: list[dict]) -> tuple:
        raise BertkitError(f"--metric does not support {self.name} models", "drop --metric")

    def head_bias(self, targets: list):
        """The output bias a fresh head starts from, given the training targets (None: as loaded)."""
        return None

    def target_scaling(self) -> tuple | None:
        """(mean, std) of the targets trained on, which the saved head takes in (None: unscaled)."""
        return None

    def finished_options(self) -> dict:
        """Changes to the task's options once training is done (None removes one)."""
        return {}

    def card_text(self, text):
        """The task's model-card text (a CardText) as this kind changes it: what it predicts, its snippet."""
        return text

    def class_counts(self, targets: list):
        """Positives per label in the training targets, for --class-weights (None: no classes)."""
        return None


def kind_names() -> tuple:
    return tuple(KINDS)


def make_kind(name: str | None, options: dict, labels: list | None) -> LabelKind:
    name = name or DEFAULT_KIND
    if name not in KINDS:
        raise BertkitError(f"unknown --problem-type {name!r}", f"use one of {', '.join(KINDS)}")
    module, _, cls = KINDS[name].partition(":")
    return getattr(importlib.import_module(module), cls)(options, labels)


def is_list_label(value) -> bool:
    """A JSON list (or a Hub sequence) of labels: a file that says it is multi-label by itself."""
    return isinstance(value, (list, tuple))
