"""The figures of a `bertkit tune` study (bertkit.json's ``tune`` section): ``tune_trials.png``
(the main metric per trial, pruned trials at their last report, the best so far as a line) and
``tune_importances.png`` (Optuna's parameter importances, when it could compute them)."""

from __future__ import annotations

from pathlib import Path

from bertkit.reporting.figures import DPI, pyplot


def draw_tuning(section: dict, out: Path) -> list[Path]:
    trials = section.get("trials") or []
    if not trials:
        return []
    plt = pyplot()
    out.mkdir(parents=True, exist_ok=True)
    figures = []
    complete = [(t["number"], t["value"]) for t in trials if t["state"] == "complete" and t["value"] is not None]
    pruned = [
        (t["number"], list(t["evaluations"].values())[-1])
        for t in trials
        if t["state"] == "pruned" and t.get("evaluations")
    ]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    if complete:
        ax.scatter(*zip(*complete), label="complete", color="tab:blue")
        pick = max if section.get("direction") == "maximize" else min
        best, line = None, []
        for number, value in sorted(complete):
            best = value if best is None else pick(best, value)
            line.append((number, best))
        ax.step(*zip(*line), where="post", color="tab:green", label="best so far")
    if pruned:
        ax.scatter(*zip(*pruned), marker="x", color="tab:red", label="pruned (last report)")
    ax.set_xlabel("trial")
    ax.set_ylabel("main metric (dev)")
    ax.set_title(f"{section.get('study_name')}: {len(trials)} trials, best #{section.get('best_trial')}")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    figures.append(_save(plt, fig, out / "tune_trials.png"))
    importances = section.get("importances") or {}
    if importances:
        names = sorted(importances, key=importances.get)
        fig, ax = plt.subplots(figsize=(6.4, 0.5 + 0.45 * len(names)))
        ax.barh(names, [importances[n] for n in names], color="tab:blue")
        ax.set_xlabel("importance (Optuna, share of the metric's variance)")
        fig.tight_layout()
        figures.append(_save(plt, fig, out / "tune_importances.png"))
    return figures


def _save(plt, fig, target: Path) -> Path:
    fig.savefig(target, dpi=DPI)
    plt.close(fig)
    return target
