"""What a `bertkit finetune multi` run writes of itself: bertkit.json (the heads, each one's task as
its own directory would record it, the run, the combined metrics) and config.yaml (what runs it
again); bertkit/api/multihead.py calls them with its planned heads."""

from __future__ import annotations

from bertkit.model_dir import data_record
from bertkit.model_dir.meta import bertkit_version, library_versions
from bertkit.options import RunOptions, TrainConfig
from bertkit.options.multihead import MultiOptions
from bertkit.tasks.learned import stats_of
from bertkit.tasks.multihead import DIRECTORY_KIND, MULTI


def directory_meta(planned: list, result, report, model, config: TrainConfig) -> dict:
    """bertkit.json of a multi-head directory: the heads (each one's task as its own directory
    would record it, its transformers class and config), the run, the combined metrics."""
    heads = []
    for head in planned:
        plan, adapter = head.plan, head.adapter.finished()
        data = data_record(
            plan.train_source,
            plan.eval_source,
            len(head.train),
            len(head.eval),
            name=plan.train_source.name,
            data_dir=plan.train_source.data_dir,
        )
        heads.append(
            {
                **head.spec.record(),
                "task": adapter.state(),
                "model_class": adapter.model_class,
                "model_config": model.heads[head.spec.name].config.to_dict(),
                "data": data,
                "metrics": result.heads[head.spec.name],
                "main_metric": adapter.main_metric,
            }
        )
    return {
        "schema": 2,
        "kind": DIRECTORY_KIND,
        "bertkit_version": bertkit_version(),
        "task": {
            "task": MULTI,
            "max_length": max(h.adapter.max_length for h in planned),
            "options": {},
            "labels": None,
        },
        "heads": heads,
        "base_model": planned[0].plan.model,
        "data": {h.spec.name: heads[i]["data"] for i, h in enumerate(planned)},
        "config": config.to_dict(),
        "metrics": result.metrics,
        "best_epoch": report.best_epoch,
        "best_step": report.best_step,
        "resumed_from": report.resumed_from,
        "history": report.history,
        "throughput": result.throughput,
        "preprocessing": {h.spec.name: {"train": stats_of(h.train_features)} for h in planned},
        "runtime": {k: v for k, v in result.runtime.items() if k != "notice"},
        "versions": library_versions(),
        "methods": [MULTI],
    }


def replayable(planned: list, run: RunOptions, config: TrainConfig, heads: MultiOptions, added=None) -> dict:
    """config.yaml: `bertkit finetune multi --config` runs it again."""
    train = config.to_dict()
    train.pop("task_options", None)
    start = {"from_dir": added.from_dir, "freeze_encoder": added.freeze_encoder} if added else {}
    return {
        "task": MULTI,
        "heads": [h.spec.record() for h in planned],
        "sampling": heads.sampling,
        "temperature": heads.temperature,
        "data_dir": run.data_dir,
        **(start or {"model": planned[0].plan.model}),
        "output": str(planned[0].plan.output_path),
        "threads": run.threads,
        **train,
    }
