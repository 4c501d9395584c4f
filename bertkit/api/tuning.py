"""`bertkit tune TASK`: hyperparameter search on Optuna. Every trial is a whole ``finetune`` into
``OUT.tune/trial-N``, reported to Optuna at each evaluation so that a poor trial is pruned early
(median pruner); the study lives in a real database (SQLite ``OUT.tune/study.db`` by default, any
Optuna RDB URL with ``storage``), so a killed search resumes where it stopped and several
processes or machines can share one study. The best trial's model becomes ``OUT``.

The budget ``trials`` counts trials that finished (complete or pruned) or are running, checked
under a lock before each new trial, so processes sharing a local study stop at exactly that many;
a trial left running by a killed process on this machine is marked failed and not counted."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import socket
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from bertkit.api.finetuning import FinetuneResult, finetune
from bertkit.data import registry
from bertkit.data.hub_datasets import DatasetChoice
from bertkit.engine.interrupts import test_signal
from bertkit.errors import BertkitError
from bertkit.model_dir import check_output_dir, check_sibling_dir, load_meta, replace_dir, run_names, update_meta
from bertkit.model_dir.ownership import named, strangers
from bertkit.model_dir.removal import claim, discard_owned
from bertkit.model_dir.run_config import retarget_run_config
from bertkit.options import RunOptions, TrainConfig, TuneOptions
from bertkit.tasks import get_task_class, task_from_state
from bertkit.training.plan import Driver
from bertkit.training.run_args import output_of
from bertkit.training.search_space import read_space, sample, space_changes


@dataclass
class TuneResult:
    output_dir: str
    study_name: str
    storage: str
    best_trial: dict  # number, value, params
    trials: list[dict] = field(default_factory=list)  # number, state, value, params, evaluations
    importances: dict = field(default_factory=dict)
    ran_here: list[int] = field(default_factory=list)  # trial numbers this process ran
    best: FinetuneResult | None = None  # when this process trained the best trial


def require_optuna():
    try:
        import optuna
    except ImportError as exc:
        raise BertkitError(f"Optuna is not installed ({exc})", "pip install 'bertkit[tune]'") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


STUDY_FILE, LOCK_FILE = "study.db", ".lock"


def tune_root(output: Path) -> Path:
    return output.parent / f"{output.name}.tune"


def tune(
    task: str, run: RunOptions, config: TrainConfig | None = None, search: TuneOptions | None = None, on_trial=None
) -> TuneResult:
    """Search ``search.space`` (bertkit.training.search_space) for ``search.trials`` trials;
    ``search.fixed``: hyperparameters given on the command line, left out of the space.
    ``on_trial(summary)`` after each trial here."""
    search = search or TuneOptions()
    trials, storage, space, fixed = search.trials, search.storage, search.space, search.fixed
    data, output, overwrite, options = run.data, output_of(run, f"tune-{task}-"), run.overwrite, dataclasses.asdict(run)
    optuna = require_optuna()
    config = _checked_config(task, config or TrainConfig(), options)
    _check_request(trials, options)
    # --max-steps sets the run's length: epochs would be searched for nothing (and ranked by chance)
    searched = read_space(space, tuple(fixed) + (("epochs",) if config.max_steps else ()))
    output_path = Path(output).expanduser().resolve()
    root = tune_root(output_path)
    name = search.study_name or f"bertkit-{task}-{output_path.name}"
    _check_outputs(task, data, output_path, root, name, overwrite, options, DatasetChoice.of(config))
    url = storage or f"sqlite:///{root / STUDY_FILE}"
    created, ran, best_here, study = not root.exists(), [], {}, None
    try:
        study = _create_study(optuna, url, name, root, get_task_class(task)(None, dict(config.task_options)), config)
        _check_study(optuna, study, name, searched, output_path)
        while (asked := _next_trial(optuna, study, trials, searched, name, root, output_path)) is not None:
            trial, params = asked
            test_signal("trial", trial.number)  # tests: a kill while a trial is running
            ran.append(trial.number)
            directory = root / f"trial-{trial.number}"
            result = _run_trial(optuna, study, trial, directory, task, run, dataclasses.replace(config, **params))
            if result is not None:
                best_here[trial.number] = result
            if on_trial is not None:
                on_trial(_trial_summary(study.trials[trial.number]))
            _drop_losers(optuna, study, root)
    except BertkitError:
        if created and _nothing_finished(optuna, study, ran):  # refused (the data, the model): undone
            discard_owned(root, "removing what the refused run made")
        raise
    return _finish(optuna, study, name, url, output_path, root, ran, best_here)


def _nothing_finished(optuna, study, ran: list) -> bool:
    """The study this run created holds only trials that failed here: a mistake that every trial
    would meet again (bad data), not a search to resume; another process's trial keeps it."""
    if not ran or study is None:
        return True
    trials = study.get_trials(deepcopy=False)
    return all(t.number in ran and t.state == optuna.trial.TrialState.FAIL for t in trials)


def _checked_config(task: str, config: TrainConfig, options: dict) -> TrainConfig:
    """Every option a trial's finetune would refuse, refused before the study or its folder exists:
    the hyperparameters, --threads, --report-to and the task's own options."""
    from bertkit.engine.threads import check as check_threads
    from bertkit.engine.tracking import parse_report_to

    command = f"bertkit tune {task}"
    config = config.validate(command)
    check_threads(options.get("threads"), command.removeprefix("bertkit "))
    parse_report_to(options.get("report_to"))
    get_task_class(task)(config.max_length, dict(config.task_options)).check_training_options()
    return config


def _check_request(trials, options: dict) -> None:
    if not isinstance(trials, int) or trials < 1:
        raise BertkitError(f"--trials must be >= 1, got {trials}", "e.g. --trials 20")
    if options.get("resume") or options.get("resume_from"):
        raise BertkitError(
            "--resume continues one run; a tune study resumes by itself", "run the same tune command again"
        )


def _check_outputs(
    task, data, output_path: Path, root: Path, name: str, overwrite: bool, options: dict, choice: DatasetChoice
) -> None:
    check_sibling_dir(root, "the trials and the study")
    found = strangers(root)
    if found:  # a trial's model directory is replaced, a finished trial's removed: never a file of the user's
        raise BertkitError(
            f"{root}, where tune keeps its trials and study, holds files bertkit did not write ({named(found)})",
            f"move them out of {root}, or choose another --output",
        )
    if not _holds_study(output_path, name):  # another process of this study may have saved the best already
        check_output_dir(output_path, overwrite)
    if registry.eval_source(data, options.get("eval_data"), options.get("data_dir"), task, choice) is None:
        raise BertkitError(
            "tune scores trials on evaluation data, and there is none",
            "add --eval-data FILE (a known dataset brings its dev split)",
        )


def _create_study(optuna, url: str, name: str, root: Path, adapter, config):
    """The study (created, or the one that exists); ``root``'s manifest lists the lock file and the
    default SQLite database with its journals (absent with --storage elsewhere)."""
    claim(root, LOCK_FILE, STUDY_FILE, *(f"{STUDY_FILE}-{end}" for end in ("journal", "wal", "shm")))
    with _lock(root):  # two processes started together would race to create SQLite's tables
        return _open_study(optuna, url, name, adapter, config.seed)


def _check_study(optuna, study, name: str, searched: dict, output: Path) -> None:
    """Before any trial: a study run for another --output keeps its models there (this run's
    trials would be dropped as losers and its best found nowhere), and a study searched over
    other ranges or kinds is another search."""
    trials = study.get_trials(deepcopy=False)
    others = sorted({t.user_attrs["output"] for t in trials if t.user_attrs.get("output", str(output)) != str(output)})
    if others:
        raise BertkitError(
            f"study {name!r} is run for --output {others[0]}: its trials' models are kept beside that output",
            f"run it with --output {others[0]}, or start another study with --study-name NAME",
        )
    changes = space_changes(optuna, searched, [t.distributions for t in trials])
    if changes:
        raise BertkitError(
            f"study {name!r} searched {'; '.join(changes)}",
            "search as the study did, or start another with --study-name NAME (or another --output)",
        )


def _next_trial(optuna, study, trials: int, searched, name: str, root: Path, output: Path):
    """(a new trial, its sampled parameters), or None once the study holds ``trials`` (any process's).
    The trial's directory (and its siblings) are listed in ``root``'s manifest before they exist."""
    with _lock(root):
        _fail_dead_trials(optuna, study)
        states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.RUNNING)
        if len(study.get_trials(deepcopy=False, states=states)) >= trials:
            return None
        trial = study.ask()
        trial.set_user_attr("host", socket.gethostname())
        trial.set_user_attr("pid", os.getpid())
        trial.set_user_attr("output", str(output))
        claim(root, *run_names(f"trial-{trial.number}"))
        try:
            params = sample(trial, searched)
        except ValueError as exc:  # Optuna: a parameter this study already searched another way
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            raise BertkitError(
                f"study {name!r} searched a hyperparameter over another range or kind than this --space ({exc})",
                "search as the study did, or start another with --study-name NAME (or another --output)",
            ) from None
        return trial, params


def _run_trial(optuna, study, trial, directory: Path, task, run: RunOptions, config):
    """Train one trial into ``directory`` and tell the study; the result, or None when it was pruned."""
    try:
        trial_run = dataclasses.replace(run, output=str(directory), overwrite=True)
        result = finetune(task, trial_run, config, Driver(on_evaluation=_reporter(optuna, trial)))
    except optuna.TrialPruned:
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        discard_owned(directory, "removing a pruned trial's model")
        return None
    except BaseException:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        discard_owned(directory, "removing a failed trial's files")  # a folder holding the user's files stays
        raise
    main = task_from_state(load_meta(str(directory))["task"]).main_metric
    study.tell(trial, result.metrics[main])
    return result


def _open_study(optuna, url: str, name: str, adapter, seed: int):
    try:
        storage = optuna.storages.RDBStorage(url, heartbeat_interval=None)
        return optuna.create_study(
            study_name=name,
            storage=storage,
            load_if_exists=True,
            direction="maximize" if adapter.greater_is_better else "minimize",
            sampler=optuna.samplers.TPESampler(seed=seed),
            pruner=optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0),
        )
    except ValueError as exc:  # a study of that name with the other direction
        raise BertkitError(f"study {name!r} in {url}: {exc}", "give another --study-name") from None
    except ImportError as exc:
        raise BertkitError(
            f"--storage {url} needs a database driver ({exc})",
            "install the driver for that database, or leave out --storage (SQLite)",
        ) from None
    except Exception as exc:  # sqlalchemy's errors: an unreachable server, a bad URL, a locked file
        raise BertkitError(
            f"cannot open the study at {url} ({type(exc).__name__}: {str(exc).splitlines()[0]})",
            "check --storage (an Optuna RDB URL such as sqlite:///study.db)",
        ) from None


def _reporter(optuna, trial):
    def report(number: int, metrics: dict, main: str) -> None:
        if main in metrics:
            trial.report(float(metrics[main]), number)
            if trial.should_prune():
                raise optuna.TrialPruned(f"pruned at evaluation {number}")

    return report


@contextlib.contextmanager
def _lock(root: Path):
    """One process at a time counts the trials and asks for a new one (processes on this machine)."""
    with open(root / LOCK_FILE, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fail_dead_trials(optuna, study) -> None:
    """A trial still 'running' whose process on this machine is gone (killed) is marked failed."""
    host = socket.gethostname()
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        pid = trial.user_attrs.get("pid")
        if trial.user_attrs.get("host") == host and isinstance(pid, int) and not _alive(pid):
            study.tell(trial.number, state=optuna.trial.TrialState.FAIL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _drop_losers(optuna, study, root: Path) -> None:
    """Only the best finished trial's model is kept (a finished trial can never become best later)."""
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    best = study.best_trial.number if complete else None
    finished = {t.number for t in study.get_trials(deepcopy=False) if t.state.is_finished()}
    for directory in root.glob("trial-*"):
        number = directory.name.removeprefix("trial-")
        if number.isdigit() and int(number) in finished and int(number) != best:
            discard_owned(directory, "removing a finished trial that is not the best")


def _trial_summary(trial) -> dict:
    return {
        "number": trial.number,
        "state": trial.state.name.lower(),
        "value": trial.value,
        "params": trial.params,
        "evaluations": {str(k): v for k, v in sorted(trial.intermediate_values.items())},
    }


def _holds_study(output: Path, name: str) -> bool:
    try:
        return (load_meta(str(output)).get("tune") or {}).get("study_name") == name
    except BertkitError:
        return False


def _finish(optuna, study, name: str, url: str, output: Path, root: Path, ran: list, best_here: dict) -> TuneResult:
    summaries = [_trial_summary(t) for t in study.get_trials(deepcopy=False)]
    if not any(s["state"] == "complete" for s in summaries):
        raise BertkitError(
            f"no trial of study {name!r} completed", "run more trials (--trials), or look at the failed trials' errors"
        )
    best = study.best_trial
    importances = {}
    with contextlib.suppress(Exception), warnings.catch_warnings():  # a nicety, not the result: it needs
        warnings.simplefilter("ignore")  # complete trials that differ, and warns when they are too few
        importances = {k: round(float(v), 4) for k, v in optuna.importance.get_param_importances(study).items()}
    section = {
        "study_name": name,
        "storage": _shown(url),
        "direction": study.direction.name.lower(),
        "best_trial": best.number,
        "best_value": best.value,
        "best_params": best.params,
        "trials": summaries,
        "importances": importances,
    }
    with _lock(root):
        source = root / f"trial-{best.number}"
        if source.is_dir():  # else another process of this study has moved it to the output already
            update_meta(source, {"tune": section})
            retarget_run_config(source, output)
            replace_dir(output, source)
        elif _holds_study(output, name):
            update_meta(output, {"tune": section})
        else:
            raise BertkitError(
                f"the best trial ({best.number}) of study {name!r} is not in {root}, nor its model in {output}",
                f"it was trained for --output {best.user_attrs.get('output', 'another output')}: look there",
            )
        from bertkit.reporting.build import build_report

        report = build_report(output, name=output.name)  # in the lock: each process rewrites the figures
    found = best_here.get(best.number)
    if found is not None:
        found = dataclasses.replace(found, output_dir=str(output), report=report)
    return TuneResult(
        str(output),
        name,
        _shown(url),
        {"number": best.number, "value": best.value, "params": best.params},
        summaries,
        importances,
        ran,
        found,
    )


def _shown(url: str) -> str:
    """A storage URL without its password."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest.split("/", 1)[0]:
        credentials, _, host = rest.partition("@")
        rest = f"{credentials.split(':', 1)[0]}:***@{host}"
    return scheme + sep + rest
