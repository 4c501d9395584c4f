"""PNG figures of a model directory, drawn with matplotlib's file-only Agg backend.

``training.png``: loss and learning rate per step with the main metric per evaluation, from
``history.jsonl`` when the run wrote one, else per epoch from bertkit.json's history. Then one
figure of the evaluation's breakdown (bertkit.metrics.breakdowns), chosen by its ``kind``:
``confusion_matrix.png`` (cls/pair), ``entities.png`` (ner), ``qa_breakdown.png`` (qa),
``per_label.png`` (multi-label: F1 per label as horizontal bars, best on top, gold count beside
each; the figure grows taller with the label count) or ``scatter.png`` (regression: predicted
against gold with the y=x diagonal and both correlations; at most ``MAX_SCATTER_POINTS`` drawn, a
fixed-seed subsample, so a huge evaluation does not make a huge figure). A calibrated model also gets
``reliability.png`` (bertkit.json's ``calibration`` section, before and after). An evaluation by
``bertkit eval`` gets the same figure prefixed with its metrics file's stem
(``eval-sst2-dev.confusion_matrix.png``).
"""

from __future__ import annotations

import json
from pathlib import Path

from bertkit.errors import BertkitError

FIGURE_NAMES = {
    "confusion": "confusion_matrix.png",
    "per_type": "entities.png",
    "qa_buckets": "qa_breakdown.png",
    "per_label": "per_label.png",
    "scatter": "scatter.png",
}
DPI = 110
MAX_SCATTER_POINTS = 5000


def pyplot():
    try:
        import matplotlib
    except ImportError as exc:
        raise BertkitError("drawing figures needs matplotlib", "pip install 'bertkit[report]'") from exc
    matplotlib.use("Agg")  # never a window, works headless
    import matplotlib.pyplot as plt

    return plt


def read_step_history(model_dir: Path) -> list[dict]:
    """The rows of ``history.jsonl`` (one per logged step or evaluation); [] without the file."""
    path = model_dir / "history.jsonl"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by a kill; the rest still draws
    return rows


def draw_training(meta: dict, model_dir: Path, main_metric: str, target: Path) -> Path | None:
    steps = read_step_history(model_dir)
    train = [r for r in steps if r.get("type") == "train" and "loss" in r]
    evals = [r for r in steps if r.get("type") == "eval" and main_metric in r.get("metrics", {})]
    epochs = meta.get("history", [])
    if not train and not epochs:
        return None
    plt = pyplot()
    lrs = [r.get("lr") for r in train]
    with_lr = bool(train) and all(v is not None for v in lrs)
    # the learning rate in its own panel under the loss: on one axis pair its line hid the loss's
    figure = plt.figure(figsize=(10, 4.6 if with_lr else 3.8))
    grid = figure.add_gridspec(2 if with_lr else 1, 2, height_ratios=[3, 1] if with_lr else None)
    loss_axis, metric_axis = figure.add_subplot(grid[0, 0]), figure.add_subplot(grid[:, 1])
    if train:
        _loss_and_lr(figure, grid, loss_axis, train, lrs if with_lr else None)
        metric_x = [r["step"] for r in evals]
        metric_y = [r["metrics"][main_metric] for r in evals]
        metric_axis.set_xlabel("optimizer step")
    else:  # per-epoch history only: no learning rate recorded
        loss_axis.plot(
            [h["epoch"] for h in epochs],
            [h["train_loss"] for h in epochs],
            "o-",
            color="tab:blue",
            label="train loss (epoch mean)",
        )
        loss_axis.set_xlabel("epoch")
        scored = [h for h in epochs if main_metric in h.get("metrics", {})]
        metric_x = [h["epoch"] for h in scored]
        metric_y = [h["metrics"][main_metric] for h in scored]
        metric_axis.set_xlabel("epoch")
    loss_axis.set_ylabel("train loss", color="tab:blue")
    loss_axis.set_title("training loss" + (" and learning rate" if with_lr else "" if train else " per epoch"))
    if metric_x:
        metric_axis.plot(metric_x, metric_y, "o-", color="tab:green")
        for x, y in zip(metric_x, metric_y):
            metric_axis.annotate(
                f"{y:.3f}" if y <= 1 else f"{y:.1f}",
                (x, y),
                textcoords="offset points",
                xytext=(0, 6),
                ha="center",
                fontsize=8,
            )
        if meta.get("best_epoch") is not None and not train:
            metric_axis.axvline(meta["best_epoch"], color="grey", linestyle=":", label="saved (best)")
            metric_axis.legend(loc="lower right", fontsize=8)
    else:
        metric_axis.text(0.5, 0.5, "no evaluation data", ha="center", va="center", transform=metric_axis.transAxes)
    metric_axis.margins(y=0.2)  # room for the value labels
    metric_axis.set_ylabel(f"eval {main_metric}")
    metric_axis.set_title(f"evaluation {main_metric}")
    metric_axis.grid(alpha=0.3)
    loss_axis.grid(alpha=0.3)
    return save_figure(plt, figure, target)


def _loss_and_lr(figure, grid, loss_axis, train: list[dict], lrs: list | None) -> None:
    """The loss per logged step, and the learning rate (when logged) in the panel under it."""
    x = [r["step"] for r in train]
    style = "o-" if len(x) <= 30 else "-"  # a short run's few points stay visible
    loss_axis.plot(x, [r["loss"] for r in train], style, color="tab:blue", linewidth=1, markersize=3)
    loss_axis.set_xlabel("optimizer step" if lrs is None else "")
    if lrs is not None:
        lr_axis = figure.add_subplot(grid[1, 0], sharex=loss_axis)
        lr_axis.plot(x, lrs, color="tab:orange", linewidth=1)
        lr_axis.set_ylabel("learning rate", color="tab:orange")
        lr_axis.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
        lr_axis.set_xlabel("optimizer step")
        lr_axis.grid(alpha=0.3)
        loss_axis.tick_params(labelbottom=False)


def draw_breakdown(details: dict, target: Path, title: str) -> Path | None:
    kind = details.get("kind")
    if kind == "confusion":
        return _confusion(details, target, title)
    if kind == "per_type" and details.get("per_type"):
        return _entities(details["per_type"], target, title)
    if kind == "qa_buckets":
        return _qa(details, target, title)
    if kind == "per_label" and details.get("labels"):
        return _per_label(details, target, title)
    if kind == "scatter":
        return _scatter(details, target, title)
    return None


def _confusion(details, target, title):
    import numpy as np

    plt = pyplot()
    labels, matrix = details["labels"], np.asarray(details["matrix"], dtype=float)
    share = matrix / np.maximum(matrix.sum(axis=1, keepdims=True), 1)  # colour: share of the gold row
    size = max(3.5, 0.7 * len(labels) + 2.5)
    figure, axis = plt.subplots(figsize=(size + 1, size))
    image = axis.imshow(share, cmap="Blues", vmin=0, vmax=1)
    for i in range(len(labels)):
        for j in range(len(labels)):
            axis.text(
                j,
                i,
                f"{int(matrix[i, j])}\n{100 * share[i, j]:.1f}%",
                ha="center",
                va="center",
                fontsize=9,
                color="white" if share[i, j] > 0.5 else "black",
            )
    axis.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    axis.set_yticks(range(len(labels)), labels)
    axis.set_xlabel("predicted label")
    axis.set_ylabel("gold label")
    axis.set_title(f"{title}: confusion matrix (n={int(matrix.sum())})")
    figure.colorbar(image, ax=axis, fraction=0.046, label="share of gold row")
    return save_figure(plt, figure, target)


def _entities(per_type, target, title):
    import numpy as np

    plt = pyplot()
    types = sorted(per_type, key=lambda t: -per_type[t]["support"])
    x = np.arange(len(types))
    figure, axis = plt.subplots(figsize=(max(5, 1.3 * len(types) + 2), 3.8))
    for k, (key, colour) in enumerate((("precision", "tab:blue"), ("recall", "tab:orange"), ("f1", "tab:green"))):
        values = [per_type[t][key] for t in types]
        bars = axis.bar(x + (k - 1) * 0.27, values, 0.27, label=key, color=colour)
        if key == "f1":
            axis.bar_label(bars, fmt="%.2f", fontsize=7, padding=2)
    axis.set_xticks(x, [f"{t}\n(n={per_type[t]['support']})" for t in types])
    axis.set_ylim(0, 1.1)
    axis.set_ylabel("entity-level score")
    axis.set_title(f"{title}: precision / recall / F1 per entity type")
    axis.legend(fontsize=8, ncol=3, loc="upper right")
    axis.grid(axis="y", alpha=0.3)
    return save_figure(plt, figure, target)


def _qa(details, target, title):
    plt = pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for axis, key, xlabel in (
        (axes[0], "by_answer_length", "gold answer length (words)"),
        (axes[1], "by_first_word", "question's first word"),
    ):
        buckets = details.get(key, {})
        names = list(buckets)
        x = range(len(names))
        axis.bar([i - 0.2 for i in x], [buckets[n]["exact_match"] for n in names], 0.4, label="EM")
        bars = axis.bar([i + 0.2 for i in x], [buckets[n]["f1"] for n in names], 0.4, label="F1")
        axis.bar_label(bars, fmt="%.0f", fontsize=7, padding=2)
        axis.set_xticks(list(x), [f"{n}\n(n={buckets[n]['count']})" for n in names], fontsize=8)
        axis.set_ylim(0, 110)
        axis.set_xlabel(xlabel)
        axis.set_ylabel("score (%)")
        axis.grid(axis="y", alpha=0.3)
        axis.legend(fontsize=8, loc="upper right")
    figure.suptitle(f"{title}: EM / F1 by answer length and question type")
    return save_figure(plt, figure, target)


def _per_label(details, target, title):
    rows = sorted(zip(details["labels"], details["f1"], details["support"]), key=lambda row: -(row[1] or 0.0))
    names, f1s, supports = [r[0] for r in rows], [r[1] or 0.0 for r in rows], [int(r[2]) for r in rows]
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(8, max(3.0, 0.3 * len(names) + 1.4)))  # ~0.3 inch a bar
    colours = ["tab:green" if n else "tab:gray" for n in supports]  # grey: no gold example, F1 means little
    axis.barh(range(len(names)), f1s, 0.7, color=colours)
    for i, (f1, support) in enumerate(zip(f1s, supports)):
        axis.text(f1 + 0.01, i, f"{f1:.2f}  (n={support})", va="center", fontsize=8)
    axis.set_yticks(range(len(names)), names, fontsize=9 if len(names) <= 30 else 7)
    axis.set_ylim(len(names) - 0.5, -0.5)  # inverted: the first (best) label on top
    axis.set_xlim(0, 1.2)  # room for the value and support beside a bar of F1 1
    axis.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    axis.set_xlabel("F1 (n = gold examples with the label)")
    axis.set_title(f"{title}: F1 per label ({len(names)} labels, best on top)")
    axis.grid(axis="x", alpha=0.3)
    return save_figure(plt, figure, target)


def _scatter(details, target, title):
    import numpy as np

    pairs = [
        (g, p)
        for g, p in zip(details.get("gold", []), details.get("predicted", []))
        if g is not None and p is not None and np.isfinite(g) and np.isfinite(p)
    ]
    if not pairs:
        return None
    points = np.asarray(pairs, dtype=float)
    total = len(points)
    if total > MAX_SCATTER_POINTS:  # a fixed seed: the same points on every redraw
        keep = np.random.default_rng(0).choice(total, MAX_SCATTER_POINTS, replace=False)
        points = points[np.sort(keep)]
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(5.8, 5.6))
    alpha = min(0.8, max(0.12, 300 / len(points)))  # dense clouds stay readable
    axis.scatter(points[:, 0], points[:, 1], s=9, alpha=alpha, color="tab:blue", edgecolors="none")
    low, high = float(points.min()), float(points.max())
    pad = 0.05 * (high - low) or 0.5
    axis.plot([low - pad, high + pad], [low - pad, high + pad], "--", color="tab:red", linewidth=1, label="y = x")
    axis.set_xlim(low - pad, high + pad)
    axis.set_ylim(low - pad, high + pad)
    axis.set_aspect("equal")
    axis.set_xlabel("gold value")
    axis.set_ylabel("predicted value")
    axis.legend(loc="upper left", fontsize=8)
    axis.grid(alpha=0.3)

    def corr(key):
        return "n/a" if details.get(key) is None else f"{details[key]:.3f}"

    lines = [
        f"{title}: predicted vs gold (n={total:,})",
        f"Pearson r = {corr('pearson')}, Spearman \u03c1 = {corr('spearman')}",
    ]
    if total > len(points):
        lines.append(f"{len(points):,} of {total:,} points drawn (fixed random subsample)")
    axis.set_title("\n".join(lines), fontsize=10)
    return save_figure(plt, figure, target)


def draw_reliability(calibration: dict, target: Path) -> Path:
    """``reliability.png``: accuracy against mean confidence per bin of the top probability, before
    and after the temperature (bertkit.json's ``calibration`` section), the diagonal being perfect."""
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(5.6, 5.2))
    axis.plot([0, 1], [0, 1], ":", color="grey", label="perfectly calibrated")
    for part, colour in (("before", "tab:red"), ("after", "tab:blue")):
        table = calibration["reliability"][part]
        sizes = [max(12.0, 300.0 * row["count"] / calibration["examples"]) for row in table]
        label = f"{part} (ECE {calibration[part]['ece']:.3f}, Brier {calibration[part]['brier']:.3f})"
        axis.plot([r["confidence"] for r in table], [r["accuracy"] for r in table], "-", color=colour, alpha=0.6)
        axis.scatter(
            [r["confidence"] for r in table], [r["accuracy"] for r in table], s=sizes, color=colour, label=label
        )
    axis.set_xlim(0, 1.02)
    axis.set_ylim(0, 1.02)
    axis.set_xlabel(f"mean top-label probability per bin ({calibration['bins']} bins; dot area: rows)")
    axis.set_ylabel("accuracy in the bin")
    axis.set_title(f"reliability: temperature {calibration['temperature']:.3f}, {calibration['examples']:,} rows")
    axis.legend(loc="upper left", fontsize=8, markerscale=0.4)
    return save_figure(plt, figure, target)


def save_figure(plt, figure, target: Path) -> Path:
    figure.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp.png")
    figure.savefig(tmp, dpi=DPI)
    plt.close(figure)
    tmp.replace(target)
    return target
