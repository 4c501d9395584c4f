"""Regression: one number per text or pair (STS-B's 0-5 similarity), from the [CLS] vector.

The head has one output trained with MSE (transformers' ``problem_type="regression"``), so a
saved directory gives the same number in ``pipeline("text-classification",
function_to_apply="none")``. Scored with Pearson and Spearman correlation (their mean is GLUE's
STS-B score, the main metric) and the mean squared error.
"""

from __future__ import annotations

import math

import numpy as np

from bertkit.errors import BertkitError
from bertkit.metrics.breakdowns import scatter
from bertkit.metrics.regression import regression_scores, round_score
from bertkit.tasks import card_texts
from bertkit.tasks.label_kinds import LabelKind, is_list_label

SCALING = "target_scaling"
HINT = "give every row a number as its label (e.g. 3.8), or leave out --problem-type regression for classes"


class Regression(LabelKind):
    name = "regression"
    problem_type = "regression"
    main_metric = "pearson_spearman_mean"
    target = "float"
    names_outputs = False
    refuses = ("top_k", "tune_per_label", "label_map", "label_columns")
    prediction_fields = {"score": "the predicted number"}
    metric_inputs_description = "numbers (predicted, gold)"

    def card_text(self, text):
        return card_texts.scoring(text)

    def read_label(self, value, row, source, names):
        if is_list_label(value) or isinstance(value, bool) or value is None or str(value).strip() == "":
            raise BertkitError(f"{source}: row {row}: the label {value!r} is not a number", HINT)
        try:
            number = float(str(value).strip())
        except ValueError:
            raise BertkitError(f"{source}: row {row}: the label {str(value)[:40]!r} is not a number", HINT) from None
        if not math.isfinite(number):
            raise BertkitError(f"{source}: row {row}: the label {value!r} is not a finite number", HINT)
        return number

    def fit(self, labels, names):
        if len(set(labels)) < 2:
            raise BertkitError(
                f"every training label is {labels[0]:g}: there is nothing to learn", "give rows with different scores"
            )
        if self.options.get("scale_targets"):  # trained on (y - mean) / std; the saved head undoes it
            self.options[SCALING] = {"mean": float(np.mean(labels)), "std": float(np.std(labels)) or 1.0}
        return None  # one output, no label names

    def check_eval(self, labels, source):
        """Scores need a gold that varies: on a constant one Pearson and Spearman are undefined (the
        metric would print 0.0000 as if the model ranked at chance), so such data is refused."""
        if labels and len(set(labels)) == 1:
            raise BertkitError(
                f"{source}: every label is {labels[0]:g}, so Pearson and Spearman correlation are undefined",
                "evaluate on rows with different scores",
            )
        return labels

    def target_of(self, label):
        scaling = self.options.get(SCALING)
        return (float(label) - scaling["mean"]) / scaling["std"] if scaling else float(label)

    def target_scaling(self):
        scaling = self.options.get(SCALING)
        return (scaling["mean"], scaling["std"]) if scaling else None

    def finished_options(self):
        """The saved head predicts the original scale (networks/recipes.py folds the scaling into it:
        w' = std w, b' = std b + mean), so the scaling is not applied again; kept as a record."""
        scaling = self.options.get(SCALING)
        return {SCALING: None, "scaled_targets": scaling} if scaling else {}

    def head_bias(self, targets):
        """The training targets' mean (0 with --scale-targets): the head starts at the best constant
        instead of 0, far from STS-B's 0-5 scores."""
        return np.asarray([float(np.mean(targets))])

    def model_kwargs(self):
        return {"num_labels": 1, "problem_type": self.problem_type}

    def decode(self, logits):
        scaling = self.options.get(SCALING) or {"mean": 0.0, "std": 1.0}  # during training only
        return [{"value": float(row[0]) * scaling["std"] + scaling["mean"]} for row in logits]

    def scores(self, gold, predictions):
        return regression_scores(gold, [p["value"] for p in predictions])

    def baseline(self, gold):
        from bertkit.metrics.baselines import constant_mean

        return constant_mean([float(g) for g in gold])

    def row(self, prediction):
        return {"score": round_score(prediction["value"])}

    def breakdown(self, gold, predictions, metrics):
        return scatter(gold, [p["value"] for p in predictions], metrics)

    def metric_inputs(self, gold, predictions):
        return [p["value"] for p in predictions], list(gold)
