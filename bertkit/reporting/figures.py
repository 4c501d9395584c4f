"""PNG figures of a model directory, drawn with matplotlib's file-only Agg backend.

``training.png``: loss and learning rate per step with the main metric per evaluation, from
``history.jsonl`` when the run wrote one, else per epoch from bertkit.json's history. Then one
figure of the evaluation's breakdown (bertkit.metrics.breakdowns): ``confusion_matrix.png``,
``entities.png`` or ``qa_breakdown.png``; an evaluation by ``bertkit eval`` gets the same figure
prefixed with its metrics file's stem (``eval-sst2-dev.confusion_matrix.png``).
"""

from __future__ import annotations

import json
from pathlib import Path

from bertkit.errors import BertkitError

FIGURE_NAMES = {"confusion": "confusion_matrix.png", "per_type": "entities.png", "qa_buckets": "qa_breakdown.png"}
DPI = 110


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
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    loss_axis, metric_axis = axes
    if train:
        x = [r["step"] for r in train]
        loss_axis.plot(x, [r["loss"] for r in train], color="tab:blue", linewidth=1, label="train loss")
        loss_axis.set_xlabel("optimizer step")
        lrs = [r.get("lr") for r in train]
        if all(v is not None for v in lrs):
            lr_axis = loss_axis.twinx()
            lr_axis.plot(x, lrs, color="tab:orange", linewidth=1, label="learning rate")
            lr_axis.set_ylabel("learning rate", color="tab:orange")
            lr_axis.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
        metric_x = [r["step"] for r in evals]
        metric_y = [r["metrics"][main_metric] for r in evals]
        metric_axis.set_xlabel("optimizer step")
    else:  # per-epoch history only: no learning rate recorded
        loss_axis.plot([h["epoch"] for h in epochs], [h["train_loss"] for h in epochs], "o-", color="tab:blue",
                       label="train loss (epoch mean)")
        loss_axis.set_xlabel("epoch")
        scored = [h for h in epochs if main_metric in h.get("metrics", {})]
        metric_x = [h["epoch"] for h in scored]
        metric_y = [h["metrics"][main_metric] for h in scored]
        metric_axis.set_xlabel("epoch")
    loss_axis.set_ylabel("train loss", color="tab:blue")
    loss_axis.set_title("training loss" + (" and learning rate" if train else " per epoch"))
    if metric_x:
        metric_axis.plot(metric_x, metric_y, "o-", color="tab:green")
        for x, y in zip(metric_x, metric_y):
            metric_axis.annotate(f"{y:.3f}" if y <= 1 else f"{y:.1f}", (x, y), textcoords="offset points",
                                 xytext=(0, 6), ha="center", fontsize=8)
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
    return _save(plt, figure, target)


def draw_breakdown(details: dict, target: Path, title: str) -> Path | None:
    kind = details.get("kind")
    if kind == "confusion":
        return _confusion(details, target, title)
    if kind == "per_type" and details.get("per_type"):
        return _entities(details["per_type"], target, title)
    if kind == "qa_buckets":
        return _qa(details, target, title)
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
            axis.text(j, i, f"{int(matrix[i, j])}\n{100 * share[i, j]:.1f}%", ha="center", va="center",
                      fontsize=9, color="white" if share[i, j] > 0.5 else "black")
    axis.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    axis.set_yticks(range(len(labels)), labels)
    axis.set_xlabel("predicted label")
    axis.set_ylabel("gold label")
    axis.set_title(f"{title}: confusion matrix (n={int(matrix.sum())})")
    figure.colorbar(image, ax=axis, fraction=0.046, label="share of gold row")
    return _save(plt, figure, target)


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
    return _save(plt, figure, target)


def _qa(details, target, title):
    plt = pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for axis, key, xlabel in ((axes[0], "by_answer_length", "gold answer length (words)"),
                              (axes[1], "by_first_word", "question's first word")):
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
    return _save(plt, figure, target)


def _save(plt, figure, target: Path) -> Path:
    figure.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp.png")
    figure.savefig(tmp, dpi=DPI)
    plt.close(figure)
    tmp.replace(target)
    return target
