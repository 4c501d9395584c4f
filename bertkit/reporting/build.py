"""(Re)draw a model directory's figures and write report.html and the model card README.md.

Called after ``finetune`` (inside the staging directory, so a model never appears without its
card) and after ``eval``; ``bertkit report DIR`` calls it on its own. Figures need matplotlib
(the ``report`` extra): without it finetune and eval still write the card and the report and say
so in a notice, while ``bertkit report`` fails in one line.
"""

from __future__ import annotations

import json
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.model_dir import META_FILE, write_text
from bertkit.reporting.card import model_card, write_card
from bertkit.reporting.figures import FIGURE_NAMES, draw_breakdown, draw_reliability, draw_training, pyplot
from bertkit.reporting.html import report_html

FIGURES_DIR = "figures"
REPORT_FILE = "report.html"


def build_report(model_dir, meta: dict | None = None, require_figures: bool = False, name: str | None = None) -> dict:
    """Returns ``{"figures": [paths], "report": path, "card": path, "notices": [...]}``. ``name``: the
    model's name in the card and report (default: the directory's name; staging directories differ)."""
    directory = Path(model_dir)
    name = name or directory.name
    if meta is None:
        from bertkit.model_dir import load_meta

        meta = load_meta(str(directory))
    evaluations = _evaluations(directory)
    notices, figures = [], []
    try:
        pyplot()
    except BertkitError as exc:
        if require_figures:
            raise
        notices.append(f"no figures: {exc}")
    else:
        figures = _draw(directory, meta, evaluations)
    relative = [str(f.relative_to(directory)) for f in figures]
    card, kept = write_card(directory, _card(meta, name, relative))  # a card the user edited is kept
    notices += [kept] if kept else []
    report = directory / REPORT_FILE
    write_text(report, report_html(meta, name, directory, figures, evaluations))
    return {"figures": [str(f) for f in figures], "report": str(report), "card": str(card), "notices": notices}


def _card(meta: dict, name: str, figures: list[str]) -> str:
    if _multi_head(meta):
        from bertkit.reporting.multihead_card import multihead_card

        return multihead_card(meta, name, figures)
    return model_card(meta, name, figures)


def _multi_head(meta: dict) -> bool:
    from bertkit.tasks.multihead import DIRECTORY_KIND

    return meta.get("kind") == DIRECTORY_KIND


def _draw(directory: Path, meta: dict, evaluations: dict) -> list[Path]:
    from bertkit.tasks import task_from_state

    out = directory / FIGURES_DIR
    if _multi_head(meta):  # the mean selects its weights; each head's line in heads.png
        from bertkit.reporting.multihead_figures import HEADS_FIGURE, draw_heads

        figures = [draw_training(meta, directory, "mean", out / "training.png")]
        return [f for f in [*figures, draw_heads(meta, directory, out / HEADS_FIGURE)] if f is not None]
    main_metric = task_from_state(meta["task"]).main_metric
    figures = [draw_training(meta, directory, main_metric, out / "training.png")]
    details = meta.get("eval_details") or {}
    if details.get("kind") in FIGURE_NAMES:
        figures.append(draw_breakdown(details, out / FIGURE_NAMES[details["kind"]], "training dev data"))
    for name, report in evaluations.items():
        details = report.get("details") or {}
        if details.get("kind") in FIGURE_NAMES:
            figures.append(
                draw_breakdown(details, out / f"{name}.{FIGURE_NAMES[details['kind']]}", f"{report.get('data', name)}")
            )
    if meta.get("calibration"):
        figures.append(draw_reliability(meta["calibration"], out / "reliability.png"))
    if meta.get("tune"):
        from bertkit.reporting.tune_figures import draw_tuning

        figures += draw_tuning(meta["tune"], out)
    return [f for f in figures if f is not None]


def _evaluations(directory: Path) -> dict[str, dict]:
    """The metrics files `bertkit eval` wrote into the model directory, by file stem."""
    found = {}
    for path in sorted(directory.glob("eval-*.json")):
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(report, dict) and "metrics" in report:
            found[path.stem] = report
    return found


def is_model_dir(path) -> bool:
    return (Path(path) / META_FILE).is_file()
