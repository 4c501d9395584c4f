"""What a user checks after a run: ``results.json`` (the train and eval numbers in one flat file,
the convention of HF's example scripts' ``all_results.json``) and `bertkit eval`'s predictions
file (one row per example: its row number and id, the gold value, and what ``predict`` writes)."""

from __future__ import annotations

import json
from pathlib import Path

from bertkit.model_dir import write_json, write_text

RESULTS_FILE = "results.json"


def predictions_file(metrics_file: Path) -> Path:
    """``eval-sst2-dev.json`` -> ``predictions-sst2-dev.jsonl`` beside it (``scores.json`` ->
    ``predictions-scores.jsonl``): named after the metrics file, so two metrics files never share one."""
    return metrics_file.with_name(f"predictions-{metrics_file.stem.removeprefix('eval-')}.jsonl")


def run_file(metrics_file: Path) -> Path:
    """`eval --data BEIR_DIR`'s run: ``eval-scifact-test.json`` -> ``run-scifact-test.trec`` beside
    it (``scores.json`` -> ``run-scores.trec``), named after the metrics file as ``predictions_file``."""
    return metrics_file.with_name(f"run-{metrics_file.stem.removeprefix('eval-')}.trec")


def prediction_rows(adapter, examples: list[dict], predictions: list) -> list[dict]:
    rows = []
    for number, (example, prediction) in enumerate(zip(examples, predictions), 1):
        predicted = adapter.format_prediction(example, prediction)
        given = {"id": example["id"]} if "id" in example and "id" not in predicted else {}
        rows.append({"row": number, **given, **adapter.gold(example), **predicted})
    return rows


def verdict_on(adapter, examples: list[dict], predictions: list, metrics: dict, rows: list | None = None):
    """Whether the model predicts one thing for everything (bertkit.metrics.degenerate), from the
    rows ``predict`` would write (``rows``: already made)."""
    from bertkit.metrics.degenerate import degenerate, gold_answers

    if not adapter.prediction_fields or not examples:  # masked LM: no answers to look at
        return None
    rows = rows if rows is not None else prediction_rows(adapter, examples, predictions)
    return degenerate(rows, gold_answers(rows, examples), metrics)


def said(kind: str, texts: list[str]) -> list[str]:
    """Tell the listeners (bertkit.events) each of ``texts`` now; returns them for the result."""
    from bertkit.events import notice

    for text in texts:
        notice(kind, text)
    return texts


def said_warnings(verdict: dict | None, command: str) -> list[str]:
    """The warning line of a degenerate model (none without a verdict), said now: before the
    directory is written or the scores printed."""
    if verdict is None:
        return []
    from bertkit.events import notice
    from bertkit.metrics.degenerate import warning_text

    text = warning_text(verdict, command)
    notice("warning", text, verdict=verdict)
    return [text]


def task_baselines(adapter, examples: list[dict], features: list | None) -> list[dict]:
    """The task's trivial baseline on these evaluation examples (``Task.baseline``), as a list."""
    found = adapter.baseline(examples, features) if examples else None
    return [found] if found else []


def judged(baselines: list[dict], metrics: dict) -> list[dict]:
    """Each baseline with whether the model beats it (``beaten``) and what falls short (``missed``)."""
    from bertkit.metrics.baselines import shortfalls

    out = []
    for baseline in baselines:
        missed = shortfalls(metrics or {}, baseline) if baseline.get("warns", True) else []
        out.append({**baseline, "beaten": not missed, "missed": missed})
    return out


def said_baseline_warnings(baselines: list[dict], command: str, verdict: dict | None = None) -> list[dict]:
    """The warning of each baseline the model does not beat (``judged``), said now; none where the
    degenerate verdict, which names its baseline, was said already. Returns bertkit.json's entries."""
    if verdict is not None:
        return []
    from bertkit.events import notice
    from bertkit.metrics.baselines import warning_line
    from bertkit.metrics.degenerate import warning_text

    entries = []
    for baseline in baselines:
        if baseline["missed"]:
            text = warning_text({"text": warning_line(baseline, baseline["missed"])}, command)
            notice("warning", text, baseline=baseline["name"], missed=baseline["missed"])
            entries.append({"kind": "baseline", "baseline": baseline["name"], "text": text})
    return entries


def write_rows(path: Path, rows: list[dict]) -> None:
    write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def training_results(result) -> dict:
    """A finetune result (bertkit.api.finetuning.FinetuneResult) as results.json's flat keys."""
    throughput, last = result.throughput, (result.history or [{}])[-1]
    values = {
        "epoch": result.best_epoch,
        "train_samples": result.train_examples,
        "train_runtime": throughput.get("train_seconds"),
        "train_samples_per_second": throughput.get("examples_per_s"),
        "train_loss": last.get("train_loss"),
    }
    if result.metrics:
        values.update(_prefixed("eval", result.metrics), eval_samples=result.eval_examples)
    return values


def update_results(model_dir: Path, metrics_file: Path, report: dict) -> Path:
    """Add one `bertkit eval`'s numbers to ``model_dir/results.json``, under the metrics file's
    name (``eval-sst2-dev.json`` -> ``eval_sst2_dev_accuracy``...); other keys stay."""
    path = Path(model_dir) / RESULTS_FILE
    try:
        current = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        current = {}
    if not isinstance(current, dict):
        current = {}
    prefix = metrics_file.stem.replace("-", "_").replace(".", "_")
    timings = report.get("timings", {})
    current.update(
        _prefixed(prefix, report["metrics"]),
        **{f"{prefix}_samples": report["examples"], f"{prefix}_runtime": timings.get("score_seconds")},
    )
    write_json(path, current)
    return path


def _prefixed(prefix: str, metrics: dict) -> dict:
    """Numbers only, as HF's all_results.json: a label or a note (a metric's text) is no result to compare."""
    return {
        f"{prefix}_{name}": value
        for name, value in metrics.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }


def tuned_to_store(tuned: dict, eval_source, config) -> tuple[dict, list[str]]:
    """(settings to store, what was done): what the task tuned on the saved model's evaluation (a
    multi-label threshold) is stored with it, as `bertkit eval` stores it: only from the whole dev data."""
    if not tuned:
        return {}, []
    shown = ", ".join(f"{k} {v}" for k, v in tuned.items() if v is not None)
    if eval_source is None or config.max_eval_samples is not None:
        why = "held-out training examples" if eval_source is None else "part of it (--max-eval-samples)"
        return {}, [
            f"{shown} tuned on the evaluation data (the metrics above are at it) was NOT stored: it was "
            f"{why}; `bertkit eval DIR` on the whole dev data stores it"
        ]
    return tuned, [
        f"{shown} tuned on {eval_source.description} and stored with the model (the metrics above are "
        "at it; dev data that chose it flatters it a little: score a test split with `bertkit eval DIR "
        "--split test`)"
    ]
