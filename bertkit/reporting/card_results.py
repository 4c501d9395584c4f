"""The model card's "Evaluation results": the saved model's dev metrics, with the spread over the
seeds after ``finetune --seeds`` and the search after ``bertkit tune``, then the figures."""

from __future__ import annotations

from pathlib import Path


def evaluation_section(meta: dict, metrics: dict, figures) -> str:
    if metrics:
        best = meta.get("best_epoch")
        lines = [f"Best epoch: {best} (the saved weights).", ""] if best is not None else []
        repeated = repeats(meta)
        if repeated:  # --seeds or --folds: this model is the best of several runs; the mean is the honest number
            what, section, runs, this = repeated
            summary = section["summary"]
            lines += [
                f"Trained {runs} times ({what}); this model is {this}'s, the best by {section['main_metric']} "
                "on its evaluation data, which flatters it: expect the mean.",
                "",
                "| metric | this model | mean ± std | min | max |",
                "|---|---|---|---|---|",
            ]
            lines += [
                f"| {name} | {value:.4f} | {summary[name]['mean']:.4f} ± {summary[name]['std']:.4f} | "
                f"{summary[name]['min']:.4f} | {summary[name]['max']:.4f} |"
                for name, value in metrics.items()
                if name in summary
            ]
        else:
            lines += ["| metric | value |", "|---|---|"] + [
                f"| {name} | {value:.4f} |" for name, value in metrics.items()
            ]
        lines += baseline_lines(meta.get("baselines") or ())
        if meta.get("tune"):
            tune = meta["tune"]
            lines += [
                "",
                f"Hyperparameters found by `bertkit tune`: trial {tune['best_trial']} of "
                f"{len(tune['trials'])} ({tune['best_params']}), chosen on the dev data above.",
            ]
    else:
        lines = ["No evaluation data was given at training time."]
    for figure in figures:
        lines += ["", f"![{Path(figure).stem}]({figure})"]
    return "\n".join(lines)


def baseline_lines(baselines) -> list[str]:
    """What the metrics are read against on the same evaluation data (bertkit.metrics.baselines)."""
    if not baselines:
        return []
    lines = ["", "Read against, on the same evaluation data:", ""]
    for b in baselines:
        shown = b.get("checked") or list(b["metrics"])
        numbers = ", ".join(f"{name} {b['metrics'][name]:.4f}" for name in shown)
        if not b.get("warns", True):
            verdict = "a reference"
        elif b.get("beaten"):
            verdict = "beaten"
        else:
            verdict = "**not beaten** (" + ", ".join(f"{m['metric']} {m['value']:.4f}" for m in b["missed"]) + ")"
        lines.append(f"- the {b['name']} baseline ({b['rule']}): {numbers}: {verdict}")
    return lines


def repeats(meta: dict) -> tuple | None:
    """(what, section, runs, which run this model is) after --seeds or --folds, else None."""
    if meta.get("seeds"):
        section = meta["seeds"]
        return (
            f"seeds {', '.join(map(str, section['seeds']))}",
            section,
            len(section["seeds"]),
            f"seed {section['chosen_seed']}",
        )
    if meta.get("folds"):
        section = meta["folds"]
        return (
            f"{section['folds']}-fold cross-validation, out-of-fold predictions in {section['predictions_file']}",
            section,
            section["folds"],
            f"fold {section['chosen_fold']}",
        )
    return None
