"""`bertkit finetune ... --folds K`: k-fold cross-validation on the training data, for data without
a dev split (or to use every example for both). Fold k trains on the other K-1 folds and is
evaluated on fold k (bertkit.data.folds: stratified by label for single-label classification,
grouped by CoNLL document or QA context), so every example is predicted once by a model that did
not see it: ``OUT/oof-predictions.jsonl`` (in data order) and the metrics' mean ± std over the
folds. The best fold's model is ``OUT`` (its dev fold flatters it; quote the mean)."""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from bertkit.api.finetuning import FinetuneResult, finetune
from bertkit.api.results import write_rows
from bertkit.api.seeds import record_in_config, spread
from bertkit.config import TrainConfig
from bertkit.errors import BertkitError
from bertkit.model_dir import check_output_dir, check_sibling_dir, load_meta, replace_dir, update_meta
from bertkit.tasks import task_from_state

OOF_FILE = "oof-predictions.jsonl"


@dataclass
class FoldsResult:
    best: FinetuneResult
    folds: int
    chosen_fold: int  # 1-based
    main_metric: str
    runs: list[dict] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    predictions_file: str = ""
    kept: str | None = None


def folds_root(output: Path) -> Path:
    return output.parent / f"{output.name}.folds"


def finetune_folds(task: str, data: str, output: str, folds: int, keep_all: bool = False,
                   config: TrainConfig | None = None, overwrite: bool = False, on_run=None, **options) -> FoldsResult:
    """``finetune`` once per fold; ``on_run(fold, result)`` after each (fold 1-based)."""
    config = config or TrainConfig()
    if options.get("resume") or options.get("resume_from"):
        raise BertkitError("--resume continues one run, not a set of folds", "drop --resume, or drop --folds")
    if options.get("eval_data"):
        raise BertkitError("--folds evaluates each fold on the rest of --data; --eval-data has no place in it",
                           "drop --eval-data (score a separate test set later with `bertkit eval DIR --data`)")
    if not isinstance(folds, int) or folds < 2:
        raise BertkitError(f"--folds must be >= 2, got {folds}", "e.g. --folds 5")
    output_path = Path(output).expanduser().resolve()
    check_output_dir(output_path, overwrite)
    root = folds_root(output_path)
    check_sibling_dir(root, "the folds' runs")
    if root.is_dir() and any(root.iterdir()) and not overwrite:
        raise BertkitError(f"{root} holds an earlier --folds run's models", "remove it, or pass --overwrite")
    shutil.rmtree(root, ignore_errors=True)
    results, rows = {}, []
    for number in range(1, folds + 1):
        result = finetune(task, data, str(root / f"fold-{number}"), config=config, overwrite=True,
                          fold=(number - 1, folds), **options)
        results[number] = result
        rows += [{**row, "fold": number} for row in result.eval_rows or []]
        if on_run is not None:
            on_run(number, result)
    adapter = task_from_state(load_meta(results[1].output_dir)["task"])
    main = adapter.main_metric
    pick = max if adapter.greater_is_better else min
    chosen = pick(results, key=lambda n: results[n].metrics[main])
    runs = [{"fold": n, "metrics": r.metrics, "eval_examples": r.eval_examples, "best_epoch": r.best_epoch,
             "train_seconds": r.throughput.get("train_seconds")} for n, r in results.items()]
    section = {"folds": folds, "chosen_fold": chosen, "main_metric": main, "seed": config.seed,
               "chosen_by": "the main metric on its own held-out fold (which flatters it; the mean is the honest "
                            "number)", "summary": spread([run["metrics"] for run in runs]),
               "std": "sample standard deviation (n - 1)", "runs": runs, "predictions_file": OOF_FILE}
    best_dir = root / f"fold-{chosen}"
    update_meta(best_dir, {"folds": section})
    record_in_config(best_dir, output=str(output_path), folds=folds)
    write_rows(best_dir / OOF_FILE, sorted(rows, key=lambda row: row["row"]))
    replace_dir(output_path, best_dir)
    if not keep_all:
        shutil.rmtree(root, ignore_errors=True)
    from bertkit.reporting.build import build_report

    best = dataclasses.replace(results[chosen], output_dir=str(output_path),
                               report=build_report(output_path, name=output_path.name))
    return FoldsResult(best, folds, chosen, main, runs, section["summary"], str(output_path / OOF_FILE),
                       str(root) if keep_all else None)
