"""What `finetune --seeds` and `--folds` share: a directory of runs beside the output, the best run
chosen by the task's main metric, the spread of every metric, and the best run moved to the output
with the set recorded in its bertkit.json, config.yaml, card and report."""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.model_dir import check_output_dir, check_sibling_dir, load_meta, replace_dir, run_names, update_meta
from bertkit.model_dir.ownership import MANIFEST, named, strangers
from bertkit.model_dir.removal import claim, discard_owned, remove_owned
from bertkit.model_dir.run_config import retarget_run_config
from bertkit.tasks import task_from_state

STD = "sample standard deviation (n - 1)"


def prepare_runs(
    output: str, root_of, overwrite: bool, flag: str, runs: list[str], resume: bool | None = None
) -> tuple[Path, Path]:
    """(the output, the runs' directory beside it): both checked, an earlier set's runs removed (with
    ``overwrite``, and only when nothing else is there) or kept (``resume``: the caller continues
    them; None: the set cannot be resumed), the ``runs`` about to be made listed in the directory's
    manifest."""
    output_path = Path(output).expanduser().resolve()
    check_output_dir(output_path, overwrite)
    root = root_of(output_path)
    check_sibling_dir(root, f"the {flag} runs")
    found = strangers(root)
    if found:  # the user's files: never deleted, and --overwrite would not help
        raise BertkitError(
            f"{root}, where {flag} puts its runs, holds files bertkit did not write ({named(found)})",
            f"move them out of {root}, or choose another --output",
        )
    if root.is_dir() and any(p.name != MANIFEST for p in root.iterdir()) and not resume:
        if not overwrite:
            also = ", or --resume to continue it" if resume is not None else ""
            raise BertkitError(f"{root} holds an earlier {flag} run's models", f"remove it, pass --overwrite{also}")
        remove_owned(root, "--overwrite")
    claim(root, *(name for run in runs for name in run_names(run)))
    return output_path, root


@contextlib.contextmanager
def runs_in(root: Path):
    """The runs of a set: when one fails before any other left a model, the runs' directory made
    for them goes again (the runs that finished stay, for a look at what they learned)."""
    try:
        yield
    except BaseException:
        if root.is_dir() and all(p.name == MANIFEST for p in root.iterdir()):
            discard_owned(root, "removing the failed set's directory")
        raise


def choose_best(results: dict) -> tuple[str, object]:
    """(the task's main metric, the key of the best run by it; a tie: the first)."""
    adapter = task_from_state(load_meta(next(iter(results.values())).output_dir)["task"])
    pick = max if adapter.greater_is_better else min
    return adapter.main_metric, pick(results, key=lambda key: results[key].metrics[adapter.main_metric])


def spread(metrics: list[dict]) -> dict:
    """metric -> {mean, std (sample; 0 for one run), min, max} over the runs that have it."""
    names = [
        name
        for name in metrics[0]
        if isinstance(metrics[0][name], (int, float)) and not isinstance(metrics[0][name], bool)
    ]
    summary = {}
    for name in names:
        values = [float(m[name]) for m in metrics if isinstance(m.get(name), (int, float))]
        summary[name] = {
            "mean": round(statistics.fmean(values), 6),
            "std": round(statistics.stdev(values), 6) if len(values) > 1 else 0.0,
            "min": round(min(values), 6),
            "max": round(max(values), 6),
            "runs": len(values),
        }
    return summary


def keep_best(best, best_dir: Path, output: Path, root: Path, keep_all: bool, section: dict, replay: dict):
    """Record ``section`` in the best run's bertkit.json and ``replay`` (what replays the whole set)
    in its config.yaml, move it to ``output``, drop the others unless ``keep_all``, and redraw the
    card and report (drawn for one run) with the spread; returns ``best`` pointing at ``output``."""
    update_meta(best_dir, section)
    retarget_run_config(best_dir, output, **replay)
    replace_dir(output, best_dir)
    if not keep_all:
        discard_owned(root, "removing the other runs' models")
    from bertkit.reporting.build import build_report

    return dataclasses.replace(best, output_dir=str(output), report=build_report(output, name=output.name))
