"""`bertkit finetune ... --seeds N`: one recipe trained once per seed, every seed's metrics and
their spread (mean, sample standard deviation, min, max), the best run's model as the output.

A number from one seed on a small dev set says little (BERT on MRPC: a standard deviation of
several points across seeds); the spread says how much. The runs go one after another, each a
whole ``finetune`` into ``OUT.seeds/seed-S``; the best by the task's main metric on the dev data
is moved to ``OUT`` (the choice is made on the dev data, which flatters the chosen run a little:
the mean is the honest number)."""

from __future__ import annotations

import dataclasses
import shutil
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from bertkit.api.finetuning import FinetuneResult, finetune
from bertkit.config import TrainConfig
from bertkit.data import registry
from bertkit.errors import BertkitError
from bertkit.model_dir import (check_output_dir, check_sibling_dir, load_meta, replace_dir, seeds_root, update_meta)
from bertkit.model_dir.run_config import RUN_CONFIG_FILE, read_run_config, write_run_config
from bertkit.tasks import task_from_state


@dataclass
class SeedsResult:
    best: FinetuneResult  # the chosen run (its output_dir is the final --output)
    seeds: list[int]
    chosen_seed: int
    main_metric: str
    runs: list[dict] = field(default_factory=list)  # per seed: seed, metrics, best_epoch, train_seconds
    summary: dict = field(default_factory=dict)  # metric -> {mean, std, min, max}
    kept: str | None = None  # where the other seeds' models are (--keep-all)


def finetune_seeds(task: str, data: str, output: str, seeds: list[int], keep_all: bool = False,
                   config: TrainConfig | None = None, overwrite: bool = False, on_run=None, **options) -> SeedsResult:
    """``finetune`` once per seed; ``on_run(seed, result)`` after each. ``options`` are finetune's."""
    config = config or TrainConfig()
    if options.get("resume") or options.get("resume_from"):
        raise BertkitError("--resume continues one run, not a set of seeds", "drop --resume, or drop --seeds")
    if not seeds:
        raise BertkitError("--seeds needs at least one seed", "e.g. --seeds 3")
    output_path = Path(output).expanduser().resolve()
    check_output_dir(output_path, overwrite)
    root = seeds_root(output_path)
    check_sibling_dir(root, "the seeds' runs")
    if root.is_dir() and any(root.iterdir()) and not overwrite:
        raise BertkitError(f"{root} holds an earlier --seeds run's models", "remove it, or pass --overwrite")
    if registry.eval_source(data, options.get("eval_data"), options.get("data_dir"), task) is None:
        raise BertkitError("--seeds compares runs on evaluation data, and there is none",
                           "add --eval-data FILE (a known dataset brings its dev split)")
    shutil.rmtree(root, ignore_errors=True)
    runs, results = [], {}
    for seed in seeds:
        result = finetune(task, data, str(root / f"seed-{seed}"), config=dataclasses.replace(config, seed=seed),
                          overwrite=True, **options)
        results[seed] = result
        runs.append({"seed": seed, "metrics": result.metrics, "best_epoch": result.best_epoch,
                     "best_step": result.best_step, "train_loss": result.history[-1].get("train_loss"),
                     "train_seconds": result.throughput.get("train_seconds")})
        if on_run is not None:
            on_run(seed, result)
    adapter = task_from_state(load_meta(results[seeds[0]].output_dir)["task"])
    main = adapter.main_metric
    pick = max if adapter.greater_is_better else min
    chosen = pick(seeds, key=lambda s: results[s].metrics[main])  # a tie: the first seed
    section = {"seeds": seeds, "chosen_seed": chosen, "main_metric": main, "chosen_by": "the main metric on the "
               "evaluation data (which flatters the chosen run; the mean is the honest number)",
               "summary": spread([run["metrics"] for run in runs]), "std": "sample standard deviation (n - 1)",
               "runs": runs}
    best_dir = root / f"seed-{chosen}"
    update_meta(best_dir, {"seeds": section})
    record_in_config(best_dir, output=str(output_path), seed=seeds[0], seeds=",".join(map(str, seeds)))
    replace_dir(output_path, best_dir)
    if not keep_all:
        shutil.rmtree(root, ignore_errors=True)
    from bertkit.reporting.build import build_report

    # the card and report.html were drawn for one run: drawn again with the spread over the seeds
    best = dataclasses.replace(results[chosen], output_dir=str(output_path),
                               report=build_report(output_path, name=output_path.name))
    return SeedsResult(best, seeds, chosen, main, runs, section["summary"], str(root) if keep_all else None)


def spread(metrics: list[dict]) -> dict:
    """metric -> {mean, std (sample; 0 for one run), min, max} over the runs that have it."""
    names = [name for name in metrics[0] if isinstance(metrics[0][name], (int, float))
             and not isinstance(metrics[0][name], bool)]
    summary = {}
    for name in names:
        values = [float(m[name]) for m in metrics if isinstance(m.get(name), (int, float))]
        summary[name] = {"mean": round(statistics.fmean(values), 6),
                         "std": round(statistics.stdev(values), 6) if len(values) > 1 else 0.0,
                         "min": round(min(values), 6), "max": round(max(values), 6), "runs": len(values)}
    return summary


def record_in_config(directory: Path, **values) -> None:
    """The chosen run's config.yaml replays the whole set (every seed or fold), into the final --output."""
    path = directory / RUN_CONFIG_FILE
    if path.is_file():
        write_run_config(directory, {**read_run_config(str(path)), **values})
