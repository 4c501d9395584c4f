"""`bertkit report`: redraw the figures, report.html and the model card of a model directory."""

from __future__ import annotations

from pathlib import Path

from bertkit.model_dir import load_meta
from bertkit.model_dir.files import probe_writable


def report(model_dir: str) -> dict:
    """(Re)draw the figures, write report.html and the model card of a model directory."""
    from bertkit.reporting.build import build_report

    meta = load_meta(model_dir)
    probe_writable(Path(model_dir), f"report of {model_dir}")  # a read-only directory fails before the drawing
    return build_report(model_dir, meta, require_figures=True)
