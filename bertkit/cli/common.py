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
    chosen = f"--backend auto: {runtime['backend_reason']}\n" if runtime.get("backend_reason") else ""
    if "backend" in runtime:  # an exported backend: its runtime chose the precision
        return chosen + f"backend: {runtime['backend']} ({runtime['precision']})"
    line = (
        f"precision: {runtime['precision_name']} ({runtime['precision_reason']}), {runtime['threads']} "
        f"thread{'s' if runtime['threads'] != 1 else ''}"
    )
    return chosen + line + (f"\n{runtime['notice']}" if runtime.get("notice") else "")


def is_main_process() -> bool:
    """Under a multi-process launch only rank 0 prints and writes (the others ran the same work)."""
    return int(next((os.environ[k] for k in RANK_ENV if k in os.environ), "0")) == 0


def echo_notices(*reports: dict, prefix: str = "", err: bool = False) -> None:
    """Print the human-readable notices that tasks (truncated texts, windows, skipped rows) and api
    (settings not stored, figures not drawn) put under "notices", one line each."""
    for report in reports:
        for notice in report.get("notices", ()):
            typer.echo(f"{prefix}{notice}", err=err)


def format_metrics(metrics: dict) -> str:
    return ", ".join(
        f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items() if not isinstance(v, dict)
    )


def require(*modules: str, extra: str) -> None:
    """An optional dependency group that is missing fails in one line naming the pip extra."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise BertkitError(f"this command needs {', '.join(missing)}", f"pip install 'bertkit[{extra}]'")
