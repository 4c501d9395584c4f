"""`bertkit finetune ... --folds K`: k-fold cross-validation on the training data, for data without
a dev split (or to use every example for both). Fold k trains on the other K-1 folds and is
evaluated on fold k (bertkit.data.folds: stratified by label for single-label classification,
grouped by CoNLL document or QA context), so every example is predicted once by a model that did
not see it: ``OUT/oof-predictions.jsonl`` (in data order) and the metrics' mean ± std over the
folds. The best fold's model is ``OUT`` (its dev fold flatters it; quote the mean)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from bertkit.api.finetuning import FinetuneResult
from bertkit.api.parallel_runs import parallel_runs, run_all
from bertkit.errors import BertkitError
from bertkit.model_dir.removal import claim
from bertkit.model_dir.writer_lock import writes_outputs
from bertkit.options import RepeatOptions, RunOptions, TrainConfig
from bertkit.training import fold_records
from bertkit.training.plan import Driver
from bertkit.training.repeats import STD, choose_best, keep_best, prepare_runs, runs_in, spread
from bertkit.training.results import write_rows
from bertkit.training.run_args import output_of

OOF_FILE = "oof-predictions.jsonl"
MAX_FOLDS = 100  # as --seeds: past that, a fine-tuning run per fold is rarely what anyone meant


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


@writes_outputs
def finetune_folds(
    task: str, run: RunOptions, config: TrainConfig | None = None, repeat: RepeatOptions | None = None, on_run=None
) -> FoldsResult:
    """``finetune`` once per fold of ``repeat.folds``; ``on_run(fold, result)`` after each (fold
    1-based); ``repeat.keep_all`` keeps every fold's model."""
    config, repeat = config or TrainConfig(), repeat or RepeatOptions()
    folds, keep_all, options = repeat.folds, repeat.keep_all, dataclasses.asdict(run)
    _check_request(folds, config, options)
    resume = bool(options.get("resume"))
    fold_names = [f"fold-{n}" for n in range(1, folds + 1)]
    output_path, root = prepare_runs(
        output_of(run, f"{task}-"), folds_root, run.overwrite, "--folds", fold_names, resume
    )
    wanted = fold_records.fingerprint(task, folds, options, dataclasses.asdict(config))
    done = fold_records.finished_folds(root, wanted, folds) if resume else {}
    claim(root, *(fold_records.record_name(n) for n in range(1, folds + 1)))
    results, rows = _train_folds(task, run, config, root, folds, done, wanted, on_run)
    results = dict(sorted(results.items()))  # in fold order, however they finished
    main, chosen = choose_best(results)
    runs = [_run_row(n, r) for n, r in results.items()]
    section = {
        "folds": folds,
        "chosen_fold": chosen,
        "main_metric": main,
        "seed": config.seed,
        "chosen_by": "the main metric on its own held-out fold (which flatters it; the mean is the honest number)",
        "summary": spread([run["metrics"] for run in runs]),
        "std": STD,
        "runs": runs,
        "predictions_file": OOF_FILE,
    }
    write_rows(root / f"fold-{chosen}" / OOF_FILE, sorted(rows, key=lambda row: row["row"]))
    best = keep_best(
        results[chosen], root / f"fold-{chosen}", output_path, root, keep_all, {"folds": section}, {"folds": folds}
    )
    return FoldsResult(
        best,
        folds,
        chosen,
        main,
        runs,
        section["summary"],
        str(output_path / OOF_FILE),
        str(root) if keep_all else None,
    )


def _train_folds(task, run: RunOptions, config, root: Path, folds: int, done: dict, wanted: dict, on_run):
    """(fold -> result, the held-out rows of all): the folds of ``done`` taken as they are, the
    others trained (at once where the cores allow), each recorded as it finishes."""
    results, rows = {}, []
    jobs = {
        n: dict(
            task=task,
            run=dataclasses.replace(run, output=str(root / f"fold-{n}"), overwrite=True, resume=False),
            config=config,
            driver=Driver(fold=(n - 1, folds)),
        )
        for n in range(1, folds + 1)
        if n not in done
    }

    def finished(number, result, earlier: bool = False):
        if not earlier:  # from now on the fold counts as finished for --resume
            fold_records.keep_record(root, number, result, wanted)
        results[number] = result
        rows.extend({**row, "fold": number} for row in result.eval_rows or [])
        if on_run is not None:
            on_run(number, result)

    with runs_in(root):
        for number, result in done.items():
            finished(number, result, earlier=True)
        for number, result in run_all(jobs, parallel_runs(len(jobs), run.threads), "fold"):
            finished(number, result)
    return results, rows


def _check_request(folds, config: TrainConfig, options: dict) -> None:
    if options.get("resume_from"):
        raise BertkitError(
            "--resume-from continues one run, not a set of folds",
            "drop it: --resume continues a set of folds (the folds that finished are kept)",
        )
    if options.get("resume") and options.get("overwrite"):
        raise BertkitError("--resume continues the set of folds and --overwrite starts it again", "give one of them")
    if options.get("eval_data"):
        raise BertkitError(
            "--folds evaluates each fold on the rest of --data; --eval-data has no place in it",
            "drop --eval-data (score a separate test set later with `bertkit eval DIR --data`)",
        )
    if config.max_eval_samples is not None:
        raise BertkitError(
            "--max-eval-samples does not apply with --folds: each fold is scored whole, so every "
            "example is predicted once",
            "drop --max-eval-samples (--max-train-samples sets the rows)",
        )
    if not isinstance(folds, int) or not 2 <= folds <= MAX_FOLDS:  # each fold is a whole fine-tuning run
        raise BertkitError(f"--folds must be between 2 and {MAX_FOLDS}, got {folds}", "e.g. --folds 5")


def _run_row(number: int, result) -> dict:
    """One fold's line of the folds section: its metrics on its own held-out fold."""
    return {
        "fold": number,
        "metrics": result.metrics,
        "eval_examples": result.eval_examples,
        "best_epoch": result.best_epoch,
        "train_seconds": result.throughput.get("train_seconds"),
    }
