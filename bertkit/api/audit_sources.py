"""Where `bertkit audit`'s out-of-sample probabilities come from, as one ``Scored`` value:

* ``from_run``: a `finetune --folds` run's ``oof-predictions.jsonl`` (each row predicted by the fold
  model that did not train on it; cls/pair keep every label's probability there), checked row by
  row against --data (its text and given label), so a file written for other data is refused;
* ``from_model``: a trained model directory scoring --data (rows it did not train on), through the
  Predictor `predict` uses; ner's per-word probabilities are the softmax at each word's first
  sub-word, as `bertkit select` takes them;
* ``checked_rows``: --data read by the task that will fine-tune on it (`audit --folds`), checked
  before any training: classes, not numbers, at least two of them, each in every fold.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertkit.data.registry import resolve
from bertkit.errors import BertkitError
from bertkit.metrics.label_issues import MULTI, SINGLE, TOKENS
from bertkit.model_dir import load_meta
from bertkit.tasks import get_task_class, task_from_state
from bertkit.tasks.base import EVAL, TRAIN
from bertkit.tasks.label_kinds import DEFAULT_KIND, LIST_KIND
from bertkit.tasks.learned import seen_in

OOF_FILE = "oof-predictions.jsonl"  # bertkit.api.folds writes it (not imported: folds is a command above)
AUDITED_TASKS = ("cls", "pair", "ner")


@dataclass
class Scored:
    """--data's rows with their given labels (class ids, lists of ids, per-word tag ids), the
    out-of-sample probabilities, the model's suggestion per row (a label, a set, tags) and what
    the probabilities came from (``source``: recorded, compared when an audit is written again)."""

    adapter: object
    examples: list
    kind: str
    given: list
    pred_probs: object
    suggested: list
    source: dict
    model_dir: str


def audit_hint(exc: BertkitError) -> BertkitError:
    """A reading or label check's error (the task's, written for finetune and eval) with a hint that
    names no flag audit lacks: audit reads --data as finetune does, with the task's default columns."""
    hint = exc.hint or ""
    if "--problem-type regression" in hint:
        hint = "bertkit audit ranks class labels: a number's error is a residual, not a wrong class"
    elif "--label-map" in hint:
        hint = "audit data labelled with the model's own label names"
    elif "--" in hint:
        hint = "audit reads --data as finetune reads it with the task's default columns: fix the file"
    return BertkitError(exc.message, hint)


def kind_of(adapter, where: str) -> str:
    """The label kind cleanlab ranks: one class, a set of classes, a tag per word; else refused."""
    if adapter.name not in AUDITED_TASKS:
        raise BertkitError(
            f"{where} is a {adapter.name} model; bertkit audit ranks the labels of cls, pair and ner",
            "audit a classification or ner model's data",
        )
    if adapter.name == "ner":
        return TOKENS
    name = adapter.kind.name
    shapes = {DEFAULT_KIND: SINGLE, LIST_KIND: MULTI}
    if name not in shapes:
        raise BertkitError(
            f"{where} has {name} labels (numbers); bertkit audit ranks class labels",
            "audit classification data (a score's error is a residual, not a wrong class)",
        )
    return shapes[name]


def given_labels(adapter, kind: str, examples: list) -> list:
    """Each example's given label as class ids (ner: one tag id per word)."""
    ids = {label: i for i, label in enumerate(adapter.labels)}

    def known(label):
        if label not in ids:
            names = ", ".join(map(str, adapter.labels))
            raise BertkitError(
                f"label {label!r} of the audited data is not one of the model's ({names})",
                "audit data with the label set the model was trained on",
            )
        return ids[label]

    if kind == TOKENS:
        return [[known(tag) for tag in ex["tags"]] for ex in examples]
    if kind == MULTI:
        return [sorted(known(label) for label in ex["label"]) for ex in examples]
    return [known(ex["label"]) for ex in examples]


def check_classes(kind: str, given: list, labels: list, folds: int | None, where: str) -> None:
    """At least two classes given; with ``folds``, each class (multi-label: each label) in at least
    ``folds`` rows, so every fold's model and cleanlab's per-class thresholds have it."""
    counts = Counter(c for row in given for c in (row if kind != SINGLE else [row]))
    if len(counts) < 2:
        only = labels[next(iter(counts))] if counts else "none"
        raise BertkitError(
            f"{where} has one class ({only}): no label can be told wrong from another",
            "audit labelled data with at least two classes",
        )
    if folds is not None and kind != TOKENS:
        rare = sorted((n, labels[c]) for c, n in counts.items() if n < folds)
        if rare:
            n, name = rare[0]
            raise BertkitError(
                f"{where}: class {name!r} has {n} row(s), fewer than --folds {folds}",
                f"give --folds {max(2, n)} or fewer, or label more {name!r} rows",
            )


def checked_rows(task: str, data: str, folds: int, limit: int | None):
    """(the task fitted on --data, the examples): refused before any fold trains when they cannot be audited."""
    adapter = get_task_class(task)(None, {})
    source = resolve(data, TRAIN, task=task, command="audit")
    try:
        examples = adapter.read(source, TRAIN)
        examples = examples[:limit] if limit else examples
        adapter = adapter.with_learned(adapter.fit(examples, seen_in(examples)))
    except BertkitError as exc:
        raise audit_hint(exc) from None
    kind = kind_of(adapter, source.description)
    check_classes(kind, given_labels(adapter, kind, examples), adapter.labels, folds, source.description)
    return adapter, examples


def from_run(run_dir: str, data: str, limit: int | None = None) -> Scored:
    """The out-of-fold probabilities a `finetune --folds` run wrote for --data (its first ``limit`` rows)."""
    directory = Path(run_dir).expanduser()
    meta = _meta_of(directory, "--from")
    if not isinstance(meta.get("folds"), dict) or not (directory / OOF_FILE).is_file():
        raise BertkitError(
            f"--from {run_dir} holds no out-of-fold predictions ({OOF_FILE})",
            "give the model directory of a `bertkit finetune ... --folds K` run",
        )
    adapter = task_from_state(meta["task"])
    kind = kind_of(adapter, f"--from {run_dir}")
    if kind == TOKENS:
        raise BertkitError(
            f"--from {run_dir}: a ner run's out-of-fold file holds tags, not the words' probabilities",
            "score held-out sentences with --model DIR instead",
        )
    source = resolve(data, TRAIN, task=adapter.name, command="audit")
    try:
        examples = adapter.read(source, TRAIN)
    except BertkitError as exc:
        raise audit_hint(exc) from None
    examples = examples[:limit] if limit else examples
    rows = [json.loads(line) for line in (directory / OOF_FILE).read_text(encoding="utf-8").splitlines() if line]
    examples = _matched(adapter, examples, rows, meta, run_dir, source.description)
    given = given_labels(adapter, kind, examples)
    check_classes(kind, given, adapter.labels, None, source.description)
    probabilities = np.asarray([_vector(row, adapter.labels, run_dir) for row in rows], dtype=np.float64)
    suggested = [row["label"] if kind == SINGLE else list(row["labels"]) for row in rows]
    record = {"kind": "folds", "run": str(directory.resolve()), "folds": meta["folds"].get("folds")}
    return Scored(adapter, examples, kind, given, probabilities, suggested, record, str(directory))


def _meta_of(directory: Path, flag: str) -> dict:
    if not directory.is_dir():
        raise BertkitError(f"{flag} {directory} is not a directory", "give a bertkit model directory")
    try:
        return load_meta(directory)
    except BertkitError as exc:
        raise BertkitError(f"{flag} {directory}: {exc.message}", exc.hint) from None


def _matched(adapter, examples: list, rows: list, meta: dict, run_dir: str, where: str) -> list:
    """--data's examples, the ones the run's file predicted, each checked against its row there."""
    limit = (meta.get("config") or {}).get("max_train_samples")
    if len(rows) != len(examples) and not (limit and len(rows) == min(limit, len(examples))):
        raise BertkitError(
            f"--from {run_dir}'s out-of-fold file has {len(rows)} rows, {where} {len(examples)}: "
            "it was written for other data",
            "give the --data that run was trained on, or run audit --folds on this data",
        )
    examples = examples[: len(rows)]
    fields = adapter.text_fields
    for number, (example, row) in enumerate(zip(examples, rows), 1):
        if row.get("gold_label") != example["label"] or any(row.get(f) != example.get(f) for f in fields):
            raise BertkitError(
                f"--from {run_dir}'s out-of-fold file differs from {where} at row {number}: "
                "it was written for other data",
                "give the --data that run was trained on, or run audit --folds on this data",
            )
    return examples


def _vector(row: dict, labels: list, run_dir: str) -> list:
    probabilities = row.get("probabilities") or {}
    missing = [label for label in labels if label not in probabilities]
    if missing:
        raise BertkitError(
            f"--from {run_dir}'s out-of-fold rows lack the probability of {missing[0]!r}",
            "let audit run the folds itself: bertkit audit --folds K --task cls --model M",
        )
    return [probabilities[label] for label in labels]


def from_model(model_dir: str, data: str, run, limit: int | None = None) -> Scored:
    """A trained model's probabilities of --data's rows (its first ``limit``; held out from its
    training: the caller's word)."""
    from bertkit.api.prediction import Predictor

    directory = Path(model_dir).expanduser()
    _meta_of(directory, "--model")
    predictor = Predictor(str(directory), run, quiet=True)
    adapter = predictor.adapter
    kind = kind_of(adapter, f"--model {model_dir}")
    source = resolve(data, TRAIN, task=adapter.name, command="audit")
    try:
        examples = adapter.read(source, EVAL)
        examples = examples[:limit] if limit else examples
        adapter.check_eval_examples(examples, source)
    except BertkitError as exc:
        raise audit_hint(exc) from None
    given = given_labels(adapter, kind, examples)
    check_classes(kind, given, adapter.labels, None, source.description)
    predictor.load()
    if kind == TOKENS:
        probabilities, suggested = word_probabilities(predictor, examples)
    else:
        rows = predictor.predict(examples)
        probabilities = np.asarray([_vector(row, adapter.labels, model_dir) for row in rows], dtype=np.float64)
        suggested = [row["label"] if kind == SINGLE else list(row["labels"]) for row in rows]
    record = {"kind": "model", "model": str(directory.resolve())}
    return Scored(adapter, examples, kind, given, probabilities, suggested, record, str(directory))


def word_probabilities(predictor, examples: list) -> tuple[list, list]:
    """(per sentence, a (words, tags) array of probabilities; the predicted tags): each word's
    softmax at its first sub-word (a later window's word overriding, as the task's postprocess
    does); a word without a sub-word gets no evidence: the uniform distribution."""
    adapter = predictor.adapter
    features, outputs = predictor.outputs_of(examples)
    tags = len(adapter.labels)
    words = [np.full((len(ex["tokens"]), tags), 1.0 / tags) for ex in examples]
    for feature, logits in zip(features, outputs["logits"]):
        if feature["words"]:
            picked = np.asarray(logits, dtype=np.float64)[feature["first_tokens"]]
            shifted = np.exp(picked - picked.max(axis=-1, keepdims=True))
            words[feature["example_index"]][feature["words"]] = shifted / shifted.sum(axis=-1, keepdims=True)
    return words, adapter.postprocess(examples, features, outputs)
