"""`bertkit finetune ... --seeds N`: one recipe trained once per seed, every seed's metrics and
their spread (mean, sample standard deviation, min, max), the best run's model as the output.

A number from one seed on a small dev set says little (BERT on MRPC: a standard deviation of
several points across seeds); the spread says how much. Each run is a whole ``finetune`` into
``OUT.seeds/seed-S``, one after another, or side by side in their own processes when ``--threads``
leaves cores for several (bertkit.api.parallel_runs); the best by the task's main metric on the dev
data is moved to ``OUT`` (the choice is made on the dev data, which flatters the chosen run a
little: the mean is the honest number)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from bertkit.api.finetuning import FinetuneResult
from bertkit.api.parallel_runs import parallel_runs, run_all
from bertkit.data import registry
from bertkit.data.hub_datasets import DatasetChoice
from bertkit.errors import BertkitError
from bertkit.model_dir import seeds_root
from bertkit.model_dir.writer_lock import writes_outputs
from bertkit.options import RepeatOptions, RunOptions, TrainConfig, parse_seeds
from bertkit.training.repeats import STD, choose_best, keep_best, prepare_runs, runs_in, spread
from bertkit.training.run_args import output_of


@dataclass
class SeedsResult:
    best: FinetuneResult  # the chosen run (its output_dir is the final --output)
    seeds: list[int]
    chosen_seed: int
    main_metric: str
    runs: list[dict] = field(default_factory=list)  # per seed: seed, metrics, best_epoch, train_seconds
    summary: dict = field(default_factory=dict)  # metric -> {mean, std, min, max}
    kept: str | None = None  # where the other seeds' models are (--keep-all)


@writes_outputs
def finetune_seeds(
    task: str, run: RunOptions, config: TrainConfig | None = None, repeat: RepeatOptions | None = None, on_run=None
) -> SeedsResult:
    """``finetune`` once per seed of ``repeat.seeds`` (a count from ``config.seed``, or a list);
    ``on_run(seed, result)`` after each; ``repeat.keep_all`` keeps every seed's model."""
    config, repeat = config or TrainConfig(), repeat or RepeatOptions()
    seeds, keep_all = parse_seeds(repeat.seeds, config.seed), repeat.keep_all
    data, options = run.data, dataclasses.asdict(run)
    _check_request(task, data, seeds, options, DatasetChoice.of(config))
    output_path, root = prepare_runs(
        output_of(run, f"{task}-"), seeds_root, run.overwrite, "--seeds", [f"seed-{s}" for s in seeds]
    )
    parallel = parallel_runs(len(seeds), options.get("threads"))
    jobs = seed_jobs(seeds, root, run, config, task=task)
    results = {}
    with runs_in(root):
        for seed, result in run_all(jobs, parallel, "seed"):
            results[seed] = result
            if on_run is not None:
                on_run(seed, result)
    results = {seed: results[seed] for seed in seeds}  # in the order given, however they finished
    runs = [run_row(seed, result) for seed, result in results.items()]
    main, chosen = choose_best(results)
    section = {
        "seeds": seeds,
        "chosen_seed": chosen,
        "main_metric": main,
        "chosen_by": "the main metric on the "
        "evaluation data (which flatters the chosen run; the mean is the honest number)",
        "summary": spread([run["metrics"] for run in runs]),
        "std": STD,
        "runs": runs,
        "parallel": parallel,
    }
    best = keep_best(
        results[chosen],
        root / f"seed-{chosen}",
        output_path,
        root,
        keep_all,
        {"seeds": section},
        {"seed": seeds[0], "seeds": ",".join(map(str, seeds))},
    )
    return SeedsResult(best, seeds, chosen, main, runs, section["summary"], str(root) if keep_all else None)


def seed_jobs(seeds: list[int], root, run: RunOptions, config: TrainConfig, **fixed) -> dict:
    """seed -> the keyword arguments of its run (``fixed`` plus its own output in ``root`` and its seed)."""
    return {
        seed: dict(
            **fixed,
            run=dataclasses.replace(run, output=str(root / f"seed-{seed}"), overwrite=True),
            config=dataclasses.replace(config, seed=seed),
        )
        for seed in seeds
    }


def _check_request(task: str, data: str, seeds: list[int], options: dict, choice: DatasetChoice) -> None:
    if options.get("resume") or options.get("resume_from"):
        raise BertkitError("--resume continues one run, not a set of seeds", "drop --resume, or drop --seeds")
    if not seeds:
        raise BertkitError("--seeds needs at least one seed", "e.g. --seeds 3")
    if registry.eval_source(data, options.get("eval_data"), options.get("data_dir"), task, choice) is None:
        raise BertkitError(
            "--seeds compares runs on evaluation data, and there is none",
            "add --eval-data FILE (a known dataset brings its dev split)",
        )


def run_row(seed: int, result) -> dict:
    """One seed's line of the seeds section: its metrics and how its training went (``result``: a
    FinetuneResult, or a multi-head run's, which keeps its best point in its history)."""
    return {
        "seed": seed,
        "metrics": result.metrics,
        "best_epoch": getattr(result, "best_epoch", None),
        "best_step": getattr(result, "best_step", None),
        "train_loss": result.history[-1].get("train_loss"),
        "train_seconds": result.throughput.get("train_seconds"),
    }
