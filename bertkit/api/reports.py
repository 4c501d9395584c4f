"""`bertkit report`: redraw the figures, report.html and the model card of a model directory."""

from __future__ import annotations

from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.model_dir import load_meta
from bertkit.model_dir.files import probe_writable


def report(model_dir: str) -> dict:
    """(Re)draw the figures, write report.html and the model card of a model directory."""
    from bertkit.reporting.build import build_report

    meta = load_meta(model_dir)
    probe_writable(Path(model_dir), f"report of {model_dir}")  # a read-only directory fails before the drawing
    check_figures_dir(Path(model_dir))
    return build_report(model_dir, meta, require_figures=True)


def check_figures_dir(model_dir: Path) -> None:
    """The figures go to DIR/figures/: a file of that name would fail the drawing half-way."""
    from bertkit.reporting.build import FIGURES_DIR

    figures = model_dir / FIGURES_DIR
    if figures.exists() and not figures.is_dir():
        raise BertkitError(f"{figures} is a file, where the report's figures go", f"move or rename {figures}")
