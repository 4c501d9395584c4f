"""`bertkit finetune multi --seeds N`: one multi-head recipe trained once per seed, every head's
metrics with their spread, the run with the best mean of the heads' main metrics as the output.

The same set as `finetune --seeds` (bertkit.api.seeds; training/repeats.py does the directory
work): each seed a whole ``finetune multi`` into ``OUT.seeds/seed-S``, one after another or side by
side with ``--threads``; the best by ``mean`` (what selects a multi-head run's evaluation) is moved
to ``OUT``, its bertkit.json and card carrying the spread of every ``head/metric``.
"""

from __future__ import annotations

import dataclasses

from bertkit.api.multihead import MultiResult, finetune_multi
from bertkit.api.parallel_runs import parallel_runs, run_all
from bertkit.api.seeds import SeedsResult, run_row, seed_jobs
from bertkit.data import registry
from bertkit.data.hub_datasets import DatasetChoice
from bertkit.errors import BertkitError
from bertkit.model_dir import replace_dir, seeds_root, update_meta
from bertkit.model_dir.removal import discard_owned
from bertkit.model_dir.run_config import retarget_run_config
from bertkit.model_dir.writer_lock import writes_outputs
from bertkit.options import RepeatOptions, RunOptions, TrainConfig, default_output, parse_seeds
from bertkit.options.multihead import MultiOptions
from bertkit.training.repeats import STD, prepare_runs, runs_in, spread

MAIN = "mean"  # the heads' main metrics on one 0-1 scale (tasks/multihead.combined_metrics)


@writes_outputs
def finetune_multi_seeds(
    heads: MultiOptions, run: RunOptions, config: TrainConfig, repeat: RepeatOptions, on_run=None
) -> SeedsResult:
    """``finetune_multi`` once per seed of ``repeat.seeds``; ``on_run(seed, result)`` after each."""
    seeds = parse_seeds(repeat.seeds, config.seed)
    specs = heads.validate().specs()
    _check_request(heads, specs, run, config, seeds)
    output = run.output or default_output("-".join(s.name for s in specs), "multi-")
    output_path, root = prepare_runs(output, seeds_root, run.overwrite, "--seeds", [f"seed-{s}" for s in seeds])
    parallel = parallel_runs(len(seeds), run.threads)
    results: dict[int, MultiResult] = {}
    with runs_in(root):
        jobs = seed_jobs(seeds, root, run, config, heads=heads)
        for seed, result in run_all(jobs, parallel, "seed", target=finetune_multi):
            results[seed] = result
            if on_run is not None:
                on_run(seed, result)
    results = {seed: results[seed] for seed in seeds}  # in the order given, however they finished
    runs = [run_row(seed, result) for seed, result in results.items()]
    chosen = max(results, key=lambda seed: results[seed].metrics[MAIN])  # a tie: the first
    section = {
        "seeds": seeds,
        "chosen_seed": chosen,
        "main_metric": MAIN,
        "chosen_by": "the mean of the heads' main metrics on their evaluation data (which flatters the chosen "
        "run; the mean over seeds is the honest number)",
        "summary": spread([r["metrics"] for r in runs]),
        "std": STD,
        "runs": runs,
        "parallel": parallel,
    }
    best = _keep_best(results[chosen], root / f"seed-{chosen}", output_path, root, repeat.keep_all, section)
    return SeedsResult(best, seeds, chosen, MAIN, runs, section["summary"], str(root) if repeat.keep_all else None)


def _check_request(heads: MultiOptions, specs: list, run: RunOptions, config: TrainConfig, seeds: list) -> None:
    """What a set of multi-head seeds cannot do, refused before anything is written."""
    if not seeds:
        raise BertkitError("--seeds needs at least one seed", "e.g. --seeds 3")
    if run.resume or run.resume_from:
        raise BertkitError("--resume continues one run, not a set of seeds", "drop --resume, or drop --seeds")
    if heads.from_dir is not None:  # each seed would add its heads to DIR's encoder: not tested, so refused
        raise BertkitError("--from adds heads to one trained model; it does not compose with --seeds", "drop --seeds")
    choice = DatasetChoice.of(config)
    for spec in specs:
        if registry.eval_source(spec.data, spec.eval_data, run.data_dir, spec.task, choice) is None:
            raise BertkitError(
                f"--seeds compares runs on every head's evaluation data, and head {spec.name} has none",
                f"give it one: --task {spec.name}:{spec.kind}:{spec.data}:eval_data=FILE",
            )


def _keep_best(best: MultiResult, best_dir, output, root, keep_all: bool, section: dict) -> MultiResult:
    """The chosen seed's directory, with the set in its bertkit.json, config.yaml (which replays the
    whole set) and card, moved to ``output``; the other seeds' dropped unless ``keep_all``."""
    update_meta(best_dir, {"seeds": section})
    retarget_run_config(best_dir, output, seed=section["seeds"][0], seeds=",".join(map(str, section["seeds"])))
    replace_dir(output, best_dir)
    if not keep_all:
        discard_owned(root, "removing the other runs' models")
    from bertkit.reporting.build import build_report

    return dataclasses.replace(best, output_dir=str(output), report=build_report(output, name=output.name))
