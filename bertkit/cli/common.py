"""What every command shares: main-process-only output, notices, metric formatting, extras checks."""

from __future__ import annotations

import os

import typer

from bertkit.errors import BertkitError

RANK_ENV = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK")  # set by torchrun / mpirun


def runtime_line(runtime: dict) -> str:
    """e.g. `precision: bf16 (auto: CPU has avx512_bf16), 2 threads`, plus a busy-machine notice."""
    if not runtime:
        return ""
    chosen = (  # the words bertkit.api.prediction says when it chooses
        f"--backend auto: {runtime.get('backend', 'torch')}: {runtime['backend_reason']}\n"
        if runtime.get("backend_reason")
        else ""
    )
    if "backend" in runtime:  # an exported backend: its runtime chose the precision
        return chosen + f"backend: {runtime['backend']} ({runtime['precision']})"
    from bertkit.engine.runtime_text import precision_text

    return chosen + precision_text(runtime) + (f"\n{runtime['notice']}" if runtime.get("notice") else "")


def is_main_process() -> bool:
    """Under a multi-process launch only rank 0 prints and writes (the others ran the same work)."""
    return int(next((os.environ[k] for k in RANK_ENV if k in os.environ), "0")) == 0


class Shown:
    """What the running command said when it was decided (show_event), for the summary at the end
    not to say it again. Facts decided before the work starts wait for it (the engine's ``start``
    event): a mistake found before then stays the command's one line, ``error: ...``."""

    lines: set[str] = set()
    waiting: list[str] = []
    started = False

    @classmethod
    def reset(cls) -> None:
        cls.lines, cls.waiting, cls.started = set(), [], False

    @classmethod
    def flush(cls) -> None:
        waiting, cls.waiting = cls.waiting, []
        for line in waiting:
            typer.echo(line, err=True)


def show_event(event) -> None:
    """The CLI's listener (bertkit.events): a decided fact goes to stderr when the work starts, or at
    once after; main process only, each line once (several seeds or folds decide it again)."""
    if not is_main_process():
        return
    if event.kind == "start":
        Shown.started = True
    for line in event.text.splitlines():
        if line not in Shown.lines:
            Shown.lines.add(line)
            Shown.waiting.append(line)
    if Shown.started:
        Shown.flush()


def echo_runtime(runtime: dict, err: bool = False) -> None:
    """The runtime line(s) (runtime_line) not already shown when they were decided."""
    Shown.flush()
    lines = [line for line in runtime_line(runtime).splitlines() if line not in Shown.lines]
    if lines:
        typer.echo("\n".join(lines), err=err)


def echo_notices(*reports: dict, prefix: str = "", err: bool = False) -> None:
    """Print the human-readable notices that tasks (truncated texts, windows, skipped rows) and api
    (settings not stored, figures not drawn) put under "notices", one line each, unless it was
    already shown when it was decided."""
    Shown.flush()
    for report in reports:
        for notice in report.get("notices", ()):
            if notice not in Shown.lines and f"{prefix}{notice}" not in Shown.lines:
                typer.echo(f"{prefix}{notice}", err=err)


def format_metrics(metrics: dict, baselines: list | None = None) -> str:
    """``accuracy 0.8100 (majority-class baseline 0.6800), f1 ...``: each metric a baseline checks
    (bertkit.metrics.baselines) with the baseline's score beside it; a reference's (a teacher) too."""

    def beside(name: str) -> str:
        shown = [
            f"{b['name']} {'baseline ' if b.get('warns', True) else ''}{b['metrics'][name]:.4f}"
            for b in baselines or ()
            if name in b["metrics"] and (name in b.get("checked", ()) or not b.get("warns", True))
        ]
        return f" ({', '.join(shown)})" if shown else ""

    return ", ".join(
        (f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}") + beside(k)
        for k, v in metrics.items()
        if not isinstance(v, dict) and v is not None  # nothing to say is not said ("thresholds None")
    )


def best_line(result) -> str:
    """The saved evaluation of a finetune or distill run, not called fine when a warning says otherwise."""
    which = "best"
    if result.warnings:
        which += ", but degenerate" if result.degenerate else ", but no better than a baseline"
        which += " (see the warning)"
    shown = format_metrics(result.metrics, result.baselines)
    if result.best_step is None:  # one evaluation at the end (SetFit's head): no epoch chose it
        return f"{'final' + which[4:]}: {shown}"
    return f"{which} (epoch {result.best_epoch}, step {result.best_step}): {shown}"


def require(*modules: str, extra: str) -> None:
    """An optional dependency group that is missing fails in one line naming the pip extra."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise BertkitError(f"this command needs {', '.join(missing)}", f"pip install 'bertkit[{extra}]'")


def show_spread(repeated) -> None:
    """The spread first: with several runs it is the number to quote, not the best run's."""
    folds = getattr(repeated, "folds", None)
    runs, unit = (folds, "folds") if folds else (len(repeated.seeds), "seeds")
    for name, stats in repeated.summary.items():
        typer.echo(
            f"{name} over {runs} {unit}: {stats['mean']:.4f} ± {stats['std']:.4f} (min {stats['min']:.4f}, "
            f"max {stats['max']:.4f})"
        )
    kept = f"; the others' in {repeated.kept}" if repeated.kept else ""
    chosen = f"fold {repeated.chosen_fold}" if folds else f"seed {repeated.chosen_seed}"
    typer.echo(f"kept {chosen}'s model (best {repeated.main_metric} on its evaluation data){kept}")
