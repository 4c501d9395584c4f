"""Sequence-level tasks on the HF side (single sentence, sentence pair, regression, multi-label):
transformers' run_glue.py / run_classification.py recipe on the rows bertkit's own readers return,
so both sides train and score the very same examples.

    single       AutoModelForSequenceClassification, cross-entropy, argmax
    regression   ``problem_type="regression"``, one output, MSE
    multi-label  ``problem_type="multi_label_classification"``, multi-hot float labels, BCE; scored at
                 0.5 and at the one threshold that maximises micro-F1 on the same dev rows (the search
                 bertkit runs and stores), the tuned scores first

Scores come from bertkit's metric functions (scikit-learn underneath), the same formulas on both sides.
"""

from __future__ import annotations

from benchmarks.hf_trainer import predict_in_order, prepare, train_and_eval

MAX_LENGTH = 128  # run_glue's max_seq_length default


def bertkit_rows(name: str, split: str, limit: int | None, task_name: str) -> list[dict]:
    """The examples bertkit reads for a registry dataset (its registry and readers)."""
    from bertkit.data import registry
    from bertkit.tasks import get_task_class

    task = get_task_class(task_name)(None, {})
    task.read(registry.resolve(name, "train", _data_root(), task_name), "train")  # the kind comes from train
    rows = task.read(registry.resolve(name, split, _data_root(), task_name), "eval")
    return rows[:limit] if limit else rows


def _data_root() -> str:
    from benchmarks.workloads import data_dir

    return str(data_dir())


def run(side: str, kind: str, train: list, dev: list, labels: list | None, model_path: str, hp: dict) -> dict:
    """Train on ``train`` and score ``dev`` (rows with "text", optional "text_pair", "label"); ``labels``:
    the class names in bertkit's order (None for regression)."""
    import numpy as np
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, set_seed

    from bertkit.metrics.classification import classification_scores
    from bertkit.metrics.multi_label import decide, multi_label_scores, tune_thresholds
    from bertkit.metrics.regression import regression_scores

    prepare()
    set_seed(hp["seed"])
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if kind == "regression":
        model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=1, problem_type="regression")
        target = float
    elif kind == "multi-label":
        model = AutoModelForSequenceClassification.from_pretrained(
            model_path, num_labels=len(labels), problem_type="multi_label_classification"
        )
        target = lambda names: [float(n in names) for n in labels]  # noqa: E731
    else:
        model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=len(labels))
        target = labels.index

    def encode(row: dict) -> dict:
        pair = (row["text"], row["text_pair"]) if row.get("text_pair") is not None else (row["text"],)
        return {**tokenizer(*pair, truncation=True, max_length=MAX_LENGTH), "labels": target(row["label"])}

    # plain lists, not datasets.Dataset.from_list: Arrow infers int8 for 0/1 columns, and an int8
    # attention mask is taken for an additive one in transformers 5.x (every token attended; chance scores)
    train_ds, dev_ds = [encode(r) for r in train], [encode(r) for r in dev]

    def evaluate(trainer) -> dict:
        output = predict_in_order(trainer, dev_ds)
        if kind == "regression":
            return regression_scores([r["label"] for r in dev], output[:, 0].tolist())
        if kind == "single":
            return classification_scores(
                [labels.index(r["label"]) for r in dev], output.argmax(-1).tolist(), len(labels)
            )
        gold, probabilities = np.asarray([row["labels"] for row in dev_ds], dtype=int), 1 / (1 + np.exp(-output))
        best = float(tune_thresholds(gold, probabilities)["threshold"])
        return {
            **multi_label_scores(gold, decide(probabilities, best), labels),
            "threshold": best,
            "at_half": multi_label_scores(gold, decide(probabilities, 0.5), labels),
        }

    return train_and_eval(side, model, train_ds, DataCollatorWithPadding(tokenizer), hp, evaluate, len(train), len(dev))
