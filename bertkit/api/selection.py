"""`bertkit select`: the pool rows a model is least sure of, written as annotation-tool tasks with
the model's predictions as pre-annotations (what to label next).

The pool streams in chunks (bertkit/data/streams.py) through the Predictor that `predict` uses;
each row gets one certainty number (lower: less sure) and only the N least sure rows are held (a
heap), so memory stays flat whatever the pool's size. Each prediction is one or more probability
distributions: cls one softmax; multi-label one yes/no distribution per label; ner one softmax per
word (at its first sub-word, in the window that predicts it). A row's certainty is that of its
least sure distribution:

* margin: the gap between the two highest probabilities (its smallest over the distributions);
* entropy: the largest entropy (natural log, >= 0: higher is less sure);
* least-confidence: the smallest top probability;
* random: a uniform number from ``seed`` (a seeded sample of the pool);
* prediction-set (with ``--coverage``): the size of the row's split-conformal label set, the largest
  first (bertkit/api/calibration.py), the margin ordering rows of one size.

The distributions of cls and multi-label rows are the probabilities ``predict`` gives the row (a
``--long-text windows`` model's windows pooled to their row as predict pools them), so a row's
margin is that of its predict row. Ties go to the earlier row. The output lists the least sure row
first; each task's ``meta`` holds its row number (from 1) and the strategy's value.
"""

from __future__ import annotations

import heapq
import json
import time
from pathlib import Path

import numpy as np

from bertkit.api.calibration import set_quantile
from bertkit.api.prediction import Predictor, with_id
from bertkit.data import formats
from bertkit.data.annotation_sinks import SPANS, check_tool, doccano_task, label_studio_task
from bertkit.data.registry import Source
from bertkit.data.streams import InputStream
from bertkit.errors import BertkitError
from bertkit.model_dir import atomic_file, check_inputs_kept, check_output_file
from bertkit.options import InferenceOptions
from bertkit.options.selection import SelectOptions
from bertkit.tasks.base import PREDICT


def select(model_dir: str, options: SelectOptions, run: InferenceOptions | None = None) -> dict:
    """Write the ``options.n`` rows of ``options.input`` the model is least sure of to
    ``options.output`` (.json: one list; .jsonl: one task per line) as ``options.format`` tasks;
    returns what was done. ``run``: batch size, precision, threads."""
    run = (run or InferenceOptions()).validate("bertkit select")  # its hints name select's --help
    options = options.validate()
    target = check_output_file(options.output)
    check_inputs_kept(target, options.input, model_dir)
    predictor = Predictor(model_dir, run, quiet=True)
    coverage = set_quantile(predictor, options.conformal, "bertkit select")  # prediction-set: each row's set
    n, strategy, tool = options.n, options.strategy, options.format
    shape = check_tool(tool, predictor.adapter.prediction_fields, target, "select")
    stream = InputStream(options.input)
    started, rows, held = time.perf_counter(), 0, []  # held: a max-heap on (certainty, row) of the n least sure
    rng = np.random.default_rng(options.seed)
    for chunk in _chunks(predictor, stream, options.chunk_rows):
        examples = chunk.records
        rows_out, certainties = _predict(predictor, examples, shape, strategy)
        if strategy == "random":
            certainties = rng.random(len(examples))
        for offset, (row, certainty) in enumerate(zip(rows_out, certainties, strict=True)):
            number = chunk.start + offset + 1
            key = (-float(certainty), -number)
            if len(held) < n:
                heapq.heappush(held, (key, number, row))
            elif key > held[0][0]:
                heapq.heapreplace(held, (key, number, row))
        rows += len(examples)
    if not rows:
        raise BertkitError(f"{stream.description} has no rows to select from", "point --input at unlabelled rows")
    chosen = sorted(held, key=lambda item: (-item[0][0], item[1]))  # least sure first
    make = label_studio_task if tool == "label-studio" else doccano_task
    version = Path(model_dir).name
    tasks = []
    for key, number, (row, score) in chosen:
        task = make(row, shape, version, score)
        task["meta"] = {"row": number, strategy: round(_shown(strategy, -key[0]), 6)}
        if coverage is not None:  # the set itself, and its size as the value ranked by
            task["meta"].update({strategy: len(row["prediction_set"]), "prediction_set": row["prediction_set"]})
        tasks.append(task)
    _write(target, tasks)
    return {
        "rows": rows,
        "selected": len(tasks),
        "strategy": strategy,
        "output": str(target),
        "seconds": time.perf_counter() - started,
        "selected_rows": [task["meta"]["row"] for task in tasks],
    }


def _chunks(predictor: Predictor, stream: InputStream, chunk_rows: int):
    """The pool's chunks as validated examples (a file the task reads whole, such as CoNLL, by the task)."""
    adapter = predictor.adapter

    def whole(path):  # a JSON list keeps its ids (Label Studio's task ids); a CoNLL file is the task's to read
        if formats.lookup(path.suffix) is formats.JSON:
            return predictor.examples(formats.read_records(path), str(path))
        return adapter.read(Source(str(path), path=path), PREDICT)

    for number, chunk in enumerate(stream.chunks(chunk_rows, whole_needed=adapter.reads_whole, read_whole=whole)):
        if not chunk.examples:
            chunk.records = predictor.examples(chunk.records, chunk.where)
        if number == 0:
            predictor.load()  # after the first chunk is checked: bad input costs no load
        yield chunk


def _predict(predictor: Predictor, examples: list, shape: str, strategy: str) -> tuple[list, list]:
    """(prediction row, its top probability) and the certainty of each example (Predictor.predict's
    steps, keeping the model's outputs to score them)."""
    adapter = predictor.adapter
    features, outputs = predictor.outputs_of(examples)
    predictions = adapter.postprocess(examples, features, outputs)
    rows = [with_id(ex, adapter.format_prediction(ex, p)) for ex, p in zip(examples, predictions, strict=True)]
    distributions = _distributions(features, outputs["logits"], predictions, shape)
    scored = [_certainty(d, strategy) for d in distributions]
    if strategy == "prediction-set":  # more labels in the set: less sure; within a size, the margin's order
        scored = [(margin - len(row["prediction_set"]), top) for row, (margin, top) in zip(rows, scored)]
    return [(row, round(top, 6)) for row, (_, top) in zip(rows, scored, strict=True)], [c for c, _ in scored]


def _distributions(features, logits, predictions: list, shape: str) -> list[np.ndarray]:
    """Per example, its probability distributions as rows of one array: a class's or a label set's
    from the probabilities the task's postprocess gave the row (predict's own: its windows pooled)."""
    if shape != SPANS:
        probabilities = [np.asarray(p["probabilities"], dtype=np.float64) for p in predictions]
        if shape == "choice":
            return [p[None, :] for p in probabilities]
        return [np.stack([p, 1.0 - p], axis=1) for p in probabilities]  # each label: yes or no
    count = len(predictions)
    words: list[dict] = [{} for _ in range(count)]
    for feature, values in zip(features, logits):
        if feature["words"]:
            picked = np.asarray(values, dtype=np.float64)[feature["first_tokens"]]
            for word, row in zip(feature["words"], _softmax(picked)):
                words[feature["example_index"]][word] = row  # a later window's word overrides, as postprocess does
    return [np.stack([found[w] for w in sorted(found)]) if found else np.ones((1, 1)) for found in words]


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def _certainty(distributions: np.ndarray, strategy: str) -> tuple[float, float]:
    """(certainty: lower is less sure, the smallest top probability) of one example's distributions."""
    ordered = np.sort(distributions, axis=-1)
    top = float(ordered[:, -1].min())
    if strategy in ("margin", "prediction-set"):
        second = ordered[:, -2] if ordered.shape[-1] > 1 else np.zeros(len(ordered))
        return float((ordered[:, -1] - second).min()), top
    if strategy == "entropy":  # -sum p ln p, 0 ln 0 = 0 (scipy.stats.entropy): the most spread distribution
        safe = np.where(distributions > 0, distributions, 1.0)
        entropy = -(distributions * np.log(safe)).sum(axis=-1)
        return -float(entropy.max()), top  # ranked by certainty: minus the entropy
    return top, top  # least-confidence (random replaces it)


def _shown(strategy: str, certainty: float) -> float:
    """The strategy's own value for ``meta``: the entropy itself (>= 0), not the certainty it ranks by."""
    return max(-certainty, 0.0) if strategy == "entropy" else certainty


def _write(target: Path, tasks: list[dict]) -> None:
    with atomic_file(target, "w") as handle:
        if target.suffix.lower() == ".json":
            handle.write(json.dumps(tasks, ensure_ascii=False, indent=1) + "\n")
        else:
            handle.writelines(json.dumps(task, ensure_ascii=False) + "\n" for task in tasks)
