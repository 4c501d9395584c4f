"""Single-label classification: one class per text (SST-2, MRPC, RTE, MNLI...).

Label ids: a known dataset keeps its own ids (the registry's ``label_names``, in GLUE order, so
MRPC 1 = equivalent); for files, numeric labels sort numerically (``1`` and ``1.0`` are one class)
and string labels alphabetically. Binary F1 is the F1 of label id 1, as GLUE reports it.
"""

from __future__ import annotations

import re

import numpy as np

from bertkit.errors import BertkitError
from bertkit.metrics.breakdowns import confusion
from bertkit.metrics.calibration import nonconformity, prediction_sets
from bertkit.metrics.classification import classification_scores, softmax
from bertkit.tasks.base import TaskOption
from bertkit.tasks.label_kinds import LabelKind, is_list_label

_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_INTEGER = re.compile(r"[-+]?\d+")
# More distinct integer labels than this must look like class ids (0..N-1 or 1..N, most of them
# present); otherwise they are scores (ratings, years, counts), i.e. a regression target.
MAX_FREE_NUMERIC_CLASSES = 20
# bertkit/metrics/calibration.py; not flags: stored by `finetune --calibrate` / `bertkit calibrate`,
# set by `predict --coverage` for one run (cls and pair declare them among their label kinds' options)
CALIBRATION_OPTIONS = (
    TaskOption("temperature", float, "single-label: probabilities are softmax(logits / T) (stored by calibrate).", ()),
    TaskOption("set_quantile", float, "a row's prediction set: the labels with 1 - p <= it (--coverage).", ()),
)


class SingleLabel(LabelKind):
    name = "single-label"
    problem_type = "single_label_classification"
    main_metric = "accuracy"
    target = "class"
    PREDICTION_FIELDS = {
        "label": "the most probable label's name",
        "score": "its probability",
        "probabilities": "every label's probability, by name",
    }
    SET_FIELD = {
        "prediction_set": "with --coverage: the labels whose set holds the true one at that rate (split conformal)"
    }

    @property
    def prediction_fields(self) -> dict:
        """A row's keys: the set only where --coverage asked for it (a Ray table's columns are these)."""
        return {**self.PREDICTION_FIELDS, **(self.SET_FIELD if self.options.get("set_quantile") is not None else {})}

    metric_inputs_description = "label ids"
    linear_probe = True
    stratifies_folds = True
    calibrates = True
    conformal_sets = True
    refuses = ("tune_per_label", "label_columns", "scale_targets")

    def read_label(self, value, row, source, names):
        if is_list_label(value):
            raise BertkitError(
                f"{source}: row {row}: the label is a list ({value!r}), which is multi-label data",
                # no labels yet: training data, read by finetune (eval has no --problem-type)
                "add --problem-type multi-label"
                if self.labels is None
                else "evaluate this single-label model on one label per row (label sets need a model "
                "trained with `bertkit finetune TASK --problem-type multi-label`)",
            )
        if value is None or str(value).strip() == "":
            raise BertkitError(f"{source}: a row has an empty label", "fill or drop rows without labels")
        text = normalise_label(value)
        if names:
            if text in names:
                return text
            if text.lstrip("-").isdigit() and 0 <= int(text) < len(names):
                return names[int(text)]
            raise BertkitError(f"{source}: unknown label {text!r}", f"expected one of {', '.join(names)}")
        return text

    def fit(self, labels, names):
        values = set(labels)
        if len(values) < 2:
            raise BertkitError(
                f"training data has only one label ({', '.join(values)})", "a classifier needs at least two"
            )
        if names:
            return list(names)
        _refuse_continuous(values)
        return sorted(values, key=lambda v: (0, int(v), v) if v.lstrip("-").isdigit() else (1, 0, v))

    def check_eval(self, labels, source):
        mapped, notice = map_label_ids(labels, self.labels, source, self.options.get("label_map"))
        self.notices += [notice] if notice else []
        return mapped

    def target_of(self, label):
        return self.labels.index(label)

    def decode(self, logits):
        temperature = self.options.get("temperature")  # calibrated: the argmax is the same, the probabilities not
        return [{"probabilities": p} for p in softmax(logits / temperature if temperature else logits)]

    def scores(self, gold, predictions):
        ids = {label: i for i, label in enumerate(self.labels)}
        scores = classification_scores(
            [ids[g] for g in gold], [int(p["probabilities"].argmax()) for p in predictions], len(self.labels)
        )
        if len(self.labels) == 2:
            scores["positive_label"] = self.labels[1]  # which class "f1" is about
        return scores

    def baseline(self, gold):
        from bertkit.metrics.baselines import majority_class

        return majority_class(gold, self.labels)

    def row(self, prediction):
        probabilities = prediction["probabilities"]
        best = int(probabilities.argmax())
        shown = (
            np.argsort(-probabilities, kind="stable")[: self.options["top_k"]]
            if self.options.get("top_k")
            else range(len(self.labels))
        )
        row = {
            "label": self.labels[best],
            "score": round(float(probabilities[best]), 6),
            "probabilities": {self.labels[i]: round(float(probabilities[i]), 6) for i in shown},
        }
        if self.options.get("set_quantile") is not None:  # predict --coverage: most probable first
            ordered = np.argsort(-probabilities, kind="stable")
            kept = prediction_sets(probabilities[ordered][None, :], self.options["set_quantile"])[0]
            row["prediction_set"] = [self.labels[i] for i, keep in zip(ordered, kept) if keep]
        return row

    def conformal_scores(self, probabilities, gold):
        return nonconformity(probabilities, [self.labels.index(label) for label in gold])

    def breakdown(self, gold, predictions, metrics):
        return confusion(
            self.labels, gold, [self.labels[int(np.asarray(p["probabilities"]).argmax())] for p in predictions]
        )

    def metric_inputs(self, gold, predictions):
        ids = {label: i for i, label in enumerate(self.labels)}
        return [int(np.asarray(p["probabilities"]).argmax()) for p in predictions], [ids[g] for g in gold]

    def class_counts(self, targets):
        return np.bincount(np.asarray(targets, dtype=np.int64), minlength=len(self.labels))


def map_label_ids(labels: list, known: list, source: str, label_map: str | None) -> tuple[list, str | None]:
    """Evaluation labels in the model's names. A file may name them by id (SST-2's own dev.tsv says
    0/1 where the model says negative/positive): mapped when every label is an id of the model's
    list and none is one of its names; ``label_map`` ("0=negative,1=positive") maps explicitly."""
    mapping = parse_label_map(label_map, known) if label_map else None
    how = "as --label-map says"
    if mapping is None:
        seen = sorted(set(labels) - set(known))
        if not seen:
            return labels, None
        ids = {str(i): name for i, name in enumerate(known)}
        if all(label in ids for label in set(labels)):
            mapping, how = ids, "as the ids of the model's labels"
        else:
            raise BertkitError(
                f"{source}: label(s) never seen in training: {', '.join(seen[:10])}",
                f"the model knows {', '.join(known)}; map them with --label-map "
                f"{','.join(f'{s}={k}' for s, k in zip(seen[:2], known))}",
            )
    unmapped = sorted(set(labels) - set(mapping) - set(known))
    if unmapped:
        raise BertkitError(
            f"{source}: label(s) {', '.join(unmapped[:10])} are not in --label-map or the model's "
            f"labels ({', '.join(known)})",
            "add them to --label-map",
        )
    used = sorted(set(labels) & set(mapping), key=lambda label: known.index(mapping[label]))
    return [
        mapping.get(label, label) for label in labels
    ], f"{source}: labels read {how}: {', '.join(f'{label}={mapping[label]}' for label in used)}"


def parse_label_map(text: str, known: list) -> dict:
    """``--label-map 0=negative,1=positive``: file label -> model label."""
    mapping = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        given, equals, name = item.partition("=")
        if not equals or not given.strip() or name.strip() not in known:
            raise BertkitError(
                f"--label-map: {item!r} is not FILE_LABEL=MODEL_LABEL with a label the model knows",
                f"e.g. --label-map 0={known[0]},1={known[-1]}; the model knows {', '.join(known)}",
            )
        key = normalise_label(given)
        if key in mapping:  # last-wins would score a different map than the one read ("0=a,0=b")
            same = mapping[key] == name.strip()
            raise BertkitError(
                f"--label-map maps {given.strip()!r} "
                + ("twice" if same else f"to both {mapping[key]!r} and {name.strip()!r}"),
                "give each file label once",
            )
        mapping[key] = name.strip()
    return mapping


def normalise_label(value) -> str:
    """A label as text; numbers in canonical form, so 1, "1", 1.0, "1.0" and "01" are one class."""
    text = str(value).strip()
    if isinstance(value, bool) or not _NUMBER.fullmatch(text):
        return text
    if _INTEGER.fullmatch(text):
        return str(int(text))  # exact, however long (a float would round big ids)
    number = float(text)
    return str(int(number)) if number.is_integer() else repr(number)


def is_number(text: str) -> bool:
    return bool(_NUMBER.fullmatch(text.strip()))


def _refuse_continuous(values: set) -> None:
    numbers = [float(v) for v in values if _NUMBER.fullmatch(v)]
    if len(numbers) != len(values):
        return  # some label is a name: these are classes
    fractional = sorted(v for v in numbers if not v.is_integer())
    looks_like_ids = min(numbers) >= 0 and max(numbers) + 1 <= 2 * len(numbers)
    if fractional or (len(numbers) > MAX_FREE_NUMERIC_CLASSES and not looks_like_ids):
        examples = ", ".join(f"{v:g}" for v in (fractional or sorted(numbers))[:3])
        raise BertkitError(
            f"the labels look continuous ({len(numbers)} distinct numeric values, e.g. {examples}), not classes",
            "add --problem-type regression to predict the number, or point "
            "--label-column at the column with the classes",
        )
