"""A multi-head directory's own figure: every head's main metric at each evaluation of the run, on
one 0-1 scale (as the ``mean`` that selects the saved weights reads them), so a head that the
others pull down shows as a falling line while the mean still rises."""

from __future__ import annotations

from pathlib import Path

from bertkit.reporting.figures import pyplot, read_step_history, save_figure

HEADS_FIGURE = "heads.png"


def draw_heads(meta: dict, model_dir: Path, target: Path) -> Path | None:
    """One line per head (its main metric over the run's evaluations, divided by its full mark) and
    the mean; None when the run recorded no evaluation."""
    from bertkit.tasks import task_from_state

    evals = [r for r in read_step_history(model_dir) if r.get("type") == "eval" and "metrics" in r]
    x_name = "optimizer step"
    if not evals:  # per-epoch history only
        evals = [{"step": h["epoch"], "metrics": h.get("metrics", {})} for h in meta.get("history", [])]
        x_name = "epoch"
    lines = {}
    for head in meta["heads"]:
        key = f"{head['name']}/{head['main_metric']}"
        scale = task_from_state(head["task"]).metric_scale
        points = [(r["step"], r["metrics"][key] / scale) for r in evals if key in r["metrics"]]
        if points:
            lines[key + (f" / {scale:g}" if scale != 1 else "")] = points
    if not lines:
        return None
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(8, 4.2))
    for label, points in lines.items():
        axis.plot([p[0] for p in points], [p[1] for p in points], "o-", linewidth=1, markersize=3, label=label)
    mean = [(r["step"], r["metrics"]["mean"]) for r in evals if "mean" in r["metrics"]]
    if mean:
        axis.plot([p[0] for p in mean], [p[1] for p in mean], "k--", linewidth=2, label="mean (selects the weights)")
    best = meta.get("best_step") if x_name == "optimizer step" else meta.get("best_epoch")
    if best is not None:
        axis.axvline(best, color="grey", linestyle=":", label="saved (best mean)")
    axis.set_xlabel(x_name)
    axis.set_ylabel("main metric (0-1 scale)")
    axis.set_title("every head's main metric during training")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8, loc="best")
    return save_figure(plt, figure, target)
