"""Multi-label classification: a set of classes per text (GoEmotions: 28 emotions, 1-5 per comment).

One sigmoid output per label trained with binary cross-entropy (transformers'
``problem_type="multi_label_classification"``, so ``pipeline("text-classification", top_k=None)``
applies the sigmoid to a saved directory by itself). A label is predicted when its probability
reaches the threshold: 0.5 until ``bertkit eval`` tunes one on the model's own dev data (global,
or per label with ``--tune-per-label``) and stores it, as QA's null threshold is stored.

Labels come as a JSON list, a separator-joined string (``3,15``, ``anger|joy``) or several 0/1
columns (``--label-columns a,b,c``); ids are read as the known dataset's names.
"""

from __future__ import annotations

import re

import numpy as np

from bertkit.errors import BertkitError
from bertkit.metrics.breakdowns import per_label
from bertkit.metrics.calibration import prediction_sets, set_nonconformity
from bertkit.metrics.multi_label import decide, multi_label_scores, tune_thresholds
from bertkit.tasks import card_texts
from bertkit.tasks.label_kinds import LabelKind, is_list_label
from bertkit.tasks.single_label import map_label_ids, normalise_label

SEPARATORS = re.compile(r"\s*[,|;]\s*")
TRUE = {"1", "1.0", "true", "yes"}
FALSE = {"0", "0.0", "false", "no", ""}


class MultiLabel(LabelKind):
    name = "multi-label"
    problem_type = "multi_label_classification"
    main_metric = "micro_f1"
    target = "multi_hot"
    PREDICTION_FIELDS = {
        "labels": "the labels at or above the threshold",
        "probabilities": "every label's probability, by name (the --top-k most probable, with --top-k)",
    }
    SET_FIELD = {
        "prediction_set": "with --coverage: the labels whose set holds all the true ones at that rate (split "
        "conformal), most probable first"
    }
    metric_inputs_description = "0/1 lists, one entry per label"
    refuses = ("scale_targets",)
    tunes_while_training = True
    conformal_sets = True

    @property
    def prediction_fields(self) -> dict:
        """A row's keys: the set only where --coverage asked for it (a Ray table's columns are these)."""
        return {**self.PREDICTION_FIELDS, **(self.SET_FIELD if self.options.get("set_quantile") is not None else {})}

    def conformal_scores(self, probabilities, gold):
        return set_nonconformity(probabilities, [[self.labels.index(label) for label in labels] for labels in gold])

    def card_text(self, text):
        return card_texts.with_label_sets(text)

    def read_label(self, value, row, source, names):
        if isinstance(value, dict):  # several 0/1 columns (--label-columns)
            return tuple(column for column, flag in value.items() if _flag(flag, column, row, source))
        if is_list_label(value):
            nested = next((v for v in value if isinstance(v, (list, tuple, dict)) or v is None), False)
            if nested is not False:  # a label is a name or a number, not a list of its own
                raise BertkitError(
                    f"{source}: row {row}: the labels {value!r} hold {nested!r}, which is not a label",
                    'give a flat list of label names or ids, e.g. ["joy", "love"]',
                )
            parts = [normalise_label(v) for v in value]
        elif value is None:
            parts = []
        elif isinstance(value, str):
            parts = [normalise_label(p) for p in SEPARATORS.split(value.strip()) if p]
        else:
            parts = [normalise_label(value)]
        if names:
            parts = [_named(p, names, row, source) for p in parts]
        return tuple(dict.fromkeys(parts))  # a label given twice counts once

    def fit(self, labels, names):
        seen = {label for labelset in labels for label in labelset}
        if names:
            return list(names)
        if self.options.get("label_columns"):
            return self._named_columns(seen)
        if len(seen) < 2:
            raise BertkitError(f"the training data uses {len(seen)} label(s)", "a multi-label model needs at least two")
        return sorted(seen, key=lambda v: (0, int(v), v) if v.lstrip("-").isdigit() else (1, 0, v))

    def _named_columns(self, seen: set) -> list:
        """--label-columns: every named column is a label, in the order named, also one without a
        positive row (its output then only learns "never"; said, so a typo'd or empty column is seen)."""
        columns = label_column_names(self.options["label_columns"])
        empty = [column for column in columns if column not in seen]
        if len(empty) == len(columns):
            raise BertkitError(
                f"no training row has any of the --label-columns ({', '.join(columns)}) set to 1",
                "name the 0/1 columns that hold the labels",
            )
        if empty:
            self.notices.append(
                f"--label-columns: {', '.join(empty)} has no positive row in the training data; the model "
                "keeps it as a label but can only learn to never predict it"
            )
        return columns

    def check_eval(self, labels, source):
        """The evaluation label sets in the model's names: ids of the model's labels (``3,15``) are
        read as those labels when no label is a name, and ``--label-map`` maps explicitly (as for
        single-label models: single_label.map_label_ids)."""
        distinct = sorted({label for labelset in labels for label in labelset})
        if not set(distinct) - set(self.labels) and not self.options.get("label_map"):
            return labels
        mapped, notice = map_label_ids(distinct, self.labels, source, self.options.get("label_map"))
        self.notices += [notice] if notice else []
        table = dict(zip(distinct, mapped))
        return [tuple(dict.fromkeys(table[label] for label in labelset)) for labelset in labels]

    def target_of(self, labelset):
        hot = [0.0] * len(self.labels)
        for label in labelset:
            hot[self.labels.index(label)] = 1.0
        return hot

    def decode(self, logits):
        probabilities = 1.0 / (1.0 + np.exp(-np.clip(logits, -700, 700)))
        chosen = decide(probabilities, self._thresholds())
        return [{"probabilities": p, "chosen": c} for p, c in zip(probabilities, chosen)]

    def _thresholds(self):
        if self.options.get("thresholds"):  # per label, when tuned so
            return np.asarray(self.options["thresholds"], dtype=np.float64)
        threshold = self.options.get("threshold")
        return 0.5 if threshold is None else float(threshold)

    def scores(self, gold, predictions):
        return multi_label_scores(self._matrix(gold), np.stack([p["chosen"] for p in predictions]), self.labels)

    def _matrix(self, gold) -> np.ndarray:
        return np.asarray([self.target_of(labelset) for labelset in gold], dtype=np.int64).reshape(-1, len(self.labels))

    def baseline(self, gold):
        from bertkit.metrics.baselines import per_label_majority

        return per_label_majority(self._matrix(gold).tolist(), self.labels)

    def row(self, prediction):
        probabilities, top_k = prediction["probabilities"], self.options.get("top_k")
        order = np.argsort(-probabilities, kind="stable")[: top_k or None]
        row = {
            "labels": [self.labels[i] for i in order if prediction["chosen"][i]],
            "probabilities": {self.labels[i]: round(float(probabilities[i]), 6) for i in order},
        }
        if self.options.get("set_quantile") is not None:  # predict --coverage: most probable first
            ordered = np.argsort(-probabilities, kind="stable")
            kept = prediction_sets(probabilities[ordered][None, :], self.options["set_quantile"])[0]
            row["prediction_set"] = [self.labels[i] for i, keep in zip(ordered, kept) if keep]
        return row

    def tune(self, gold, predictions):
        tuned = tune_thresholds(
            self._matrix(gold),
            np.stack([p["probabilities"] for p in predictions]),
            per_label=bool(self.options.get("tune_per_label")),
        )
        if "thresholds" in tuned:
            return {"thresholds": [round(float(t), 4) for t in tuned["thresholds"]], "threshold": None}
        return {"threshold": round(float(tuned["threshold"]), 4), "thresholds": None}

    def breakdown(self, gold, predictions, metrics):
        return per_label(self.labels, metrics.get("per_label", {}))

    def metric_inputs(self, gold, predictions):
        return [p["chosen"].astype(int).tolist() for p in predictions], self._matrix(gold).tolist()

    def head_bias(self, targets):
        """Each label's log-odds in the training data (Lin et al. 2017's prior initialisation): a
        fresh head at 0 predicts every label at 0.5, and with rare labels the first hundreds of steps
        only pull the logits down to the priors, long enough for the [CLS] vector to collapse into a
        constant (measured: MiniLM on 4,000 GoEmotions comments predicted the same probabilities for
        every text after 250 steps at lr 5e-5, 1e-4 and 3e-4)."""
        rate = np.clip(np.asarray(targets, dtype=np.float64).mean(axis=0), 1e-4, 1 - 1e-4)
        return np.log(rate / (1 - rate))

    def class_counts(self, targets):
        return np.asarray(targets, dtype=np.float64).sum(axis=0)


def joined_labels(values) -> list[str]:
    """The labels among ``values`` that look like several labels joined in one field (``1,2``,
    ``anger|joy``): split at a separator, every part an integer id or a label seen on its own.
    Read as single-label they would be classes of their own, so the caller asks which is meant."""
    texts = {str(v).strip() for v in values if isinstance(v, (str, int)) and not isinstance(v, bool)}
    joined = {text: [p for p in SEPARATORS.split(text) if p] for text in texts}
    joined = {text: parts for text, parts in joined.items() if len(parts) >= 2}
    alone = texts - set(joined)
    return sorted(text for text, parts in joined.items() if all(p.isdigit() or p in alone for p in parts))


def label_column_names(value: str) -> list:
    """``--label-columns a,b,c`` as its names; a name given twice is refused, not merged."""
    names = [c.strip() for c in str(value).split(",") if c.strip()]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise BertkitError(f"--label-columns names {', '.join(twice)} more than once", "name each 0/1 column once")
    return names


def _named(label: str, names: tuple, row, source) -> str:
    if label in names:
        return label
    if label.isdigit() and int(label) < len(names):
        return names[int(label)]
    raise BertkitError(f"{source}: row {row}: unknown label {label!r}", f"expected ids 0-{len(names) - 1} or names")


def _flag(value, column: str, row, source) -> bool:
    text = str(value).strip().lower() if value is not None else ""
    if text in TRUE or text in FALSE:
        return text in TRUE
    raise BertkitError(
        f"{source}: row {row}: label column {column!r} holds {str(value)[:20]!r}, not 0 or 1",
        "--label-columns names columns of 0/1 flags, one per label",
    )
