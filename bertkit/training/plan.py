"""What a fine-tuning run settles before it loads a model: every check that needs no model (so a
mistake costs seconds, not a training run), where it reads and writes, its checkpoints, and the
record of its options that `--config` replays."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from bertkit.data import registry
from bertkit.data.hub_datasets import DatasetChoice
from bertkit.engine.checkpoints import Checkpoints
from bertkit.engine.threads import check as check_threads
from bertkit.events import notice
from bertkit.model_dir import check_inputs_kept, check_output_dir, check_sibling_dir, checkpoint_root
from bertkit.options import LORA_FIELDS, RunOptions, TrainConfig, default_output
from bertkit.tasks import finetune_tasks, get_task_class


@dataclass
class Driver:
    """How a command that wraps finetune drives one run (a plain run needs none of it)."""

    fold: tuple[int, int] | None = None  # (k, K): train on the other folds of the data, evaluate on fold k
    on_evaluation: Callable | None = None  # (number, metrics, main_metric) after each evaluation; may raise
    methods: tuple = ()  # training methods the command adds to those its options request (distill's)


@dataclass
class RunPlan:
    """One fine-tuning run, checked: the call's arguments and what follows from them."""

    task: str
    data: str
    model: str
    eval_data: str | None
    data_dir: str | None
    config: TrainConfig
    output_path: Path
    threads: int | None
    report_to: str | None
    trackers: list
    fold: tuple[int, int] | None
    adapter: object  # the task, untrained
    train_source: object
    eval_source: object  # None: the task holds out part of the training data (or a fold is)
    checkpoints: Checkpoints | None
    notices: list = field(default_factory=list)

    @property
    def verb(self) -> str:
        return "finetune" if self.task in finetune_tasks() else "pretrain"


def plan_run(task: str, run: RunOptions, config: TrainConfig | None, fold: tuple[int, int] | None) -> RunPlan:
    # long: every check that needs no model, in the order a user's mistakes should surface
    from bertkit.engine.tracking import logging_dir, parse_report_to
    from bertkit.models import default_model

    data, model, eval_data, data_dir = run.data, run.model, run.eval_data, run.data_dir
    threads, report_to, resume, resume_from = run.threads, run.report_to, run.resume, run.resume_from
    output = run.output or default_output(data, f"{task}-")
    command = f"bertkit {'finetune' if task in finetune_tasks() else 'pretrain'} {task}"
    config = (config or TrainConfig()).validate(command)
    check_threads(threads, "finetune")
    trackers = parse_report_to(report_to)
    adapter = get_task_class(task)(config.max_length, dict(config.task_options))
    unset = ("random_batches",) if config.random_batches is None else ()  # resumed: the checkpoint's order
    config = batch_order(config, adapter)
    output_path = Path(output).expanduser().resolve()
    check_output_dir(output_path, run.overwrite)
    choice = registry.check_choice(data, eval_data, DatasetChoice.of(config))  # --data-config, the split flags
    train_source = registry.resolve(data, "train", data_dir, task, choice=choice, limit=config.max_train_samples)
    limits = config.max_train_samples, config.max_eval_samples  # a dataset streamed: not downloaded whole
    eval_source = (  # folds: data's own
        None if fold else registry.eval_source(data, eval_data, data_dir, task, choice, limits[1], bool(limits[0]))
    )
    model = model or default_model()  # no --model: asks the Hub, once the cheaper checks passed
    check_inputs_kept(output_path, train_source, eval_source, model)  # a local --model is an input too
    if config.save_every or resume or resume_from:
        check_sibling_dir(checkpoint_root(output_path), "checkpoints")
    if trackers:
        check_sibling_dir(logging_dir(output_path), "the trackers' logs")
    checkpoints = Checkpoints.plan(
        output_path,
        config,
        run_identity(task, model, config, train_source, eval_source),
        resume,
        resume_from,
        run.overwrite,
        unset,
    )
    if checkpoints is not None and checkpoints.resume_from is not None:  # the checkpoint's order, unsaid
        config = replace(config, **{key: checkpoints.identity[key] for key in unset})
    elif unset and config.random_batches:
        notice("recipe", f"random batches: {task}'s more accurate order (docs: training.md); --grouped: faster")
    notices = checkpoints.passed_over() if checkpoints is not None else []
    if checkpoints is not None and (resume or resume_from) and checkpoints.resume_from is None:
        notices.append(
            f"--resume: no checkpoint under {checkpoint_root(output_path)} yet, so training started at step 0"
        )
    for text in notices:  # said before the model loads: the user may want another checkpoint
        notice("resume", text)
    if checkpoints is not None and checkpoints.resume_from is not None:
        notice("resume", f"resuming from {checkpoints.resume_from}", checkpoint=str(checkpoints.resume_from))
    return RunPlan(
        task,
        data,
        model,
        eval_data,
        data_dir,
        config,
        output_path,
        threads,
        report_to,
        trackers,
        fold,
        adapter,
        train_source,
        eval_source,
        checkpoints,
        notices,
    )


def run_identity(task, model, config, train_source, eval_source) -> dict:
    """What a resumed run must share with its checkpoint (run_identity.MAY_CHANGE excepted)."""

    def where(source):
        return None if source is None else str(source.path.resolve()) if source.path else source.description

    local = Path(model).expanduser()
    return {
        "task": task,
        "model": str(local.resolve()) if local.exists() else model,
        "data": where(train_source),
        "eval_data": where(eval_source),
        **config.to_dict(),
    }


def resolved_options(plan: RunPlan, adapter) -> dict:
    """Every option of the run as `bertkit finetune|pretrain --config` reads it: local paths made
    absolute (a replay from another directory reads the same files), the task's options with their
    defaults."""

    def local(path):
        found = Path(path).expanduser()
        return str(found.resolve()) if found.exists() else path

    known = registry.is_known(plan.data)
    directory = plan.train_source.data_dir if known else plan.data_dir and Path(plan.data_dir)
    train = plan.config.to_dict()
    given = train.pop("task_options")
    if plan.verb != "finetune":  # pretrain has no --lora (its config.yaml must replay there)
        train = {k: v for k, v in train.items() if k not in LORA_FIELDS}
    task_options = {o.name: given.get(o.name, o.default) for o in adapter.options_for(plan.verb)}
    return {
        "task": plan.task,
        "data": plan.data if known else local(plan.data),
        "eval_data": plan.eval_data and local(plan.eval_data),
        "data_dir": str(directory.resolve()) if directory else None,
        "model": local(plan.model),
        "output": str(plan.output_path),
        "threads": plan.threads,
        "report_to": plan.report_to or "none",
        **train,
        **task_options,
    }


def batch_order(config: TrainConfig, adapter) -> TrainConfig:
    """``config`` with --random-batches/--grouped resolved: unset, the task's more accurate order
    (Task.default_random_batches)."""
    if config.random_batches is not None:
        return config
    return replace(config, random_batches=adapter.default_random_batches)
