"""The model card's "Evaluation results": the saved model's dev metrics, with the spread over the
seeds after ``finetune --seeds`` and the search after ``bertkit tune``, then the figures."""

from __future__ import annotations

from pathlib import Path


def evaluation_section(meta: dict, metrics: dict, figures) -> str:
    if metrics:
        best = meta.get("best_epoch")
        lines = [f"Best epoch: {best} (the saved weights).", ""] if best is not None else []
        seeds = meta.get("seeds")
        if seeds:  # --seeds: this model is the best of several runs; the mean is the honest number
            summary = seeds["summary"]
            lines += [f"Trained with {len(seeds['seeds'])} seeds ({', '.join(map(str, seeds['seeds']))}); this model "
                      f"is seed {seeds['chosen_seed']}'s, the best by {seeds['main_metric']} on the dev data, which "
                      "flatters it: expect the mean.", "",
                      "| metric | this model | mean ± std | min | max |", "|---|---|---|---|---|"]
            lines += [f"| {name} | {value:.4f} | {summary[name]['mean']:.4f} ± {summary[name]['std']:.4f} | "
                      f"{summary[name]['min']:.4f} | {summary[name]['max']:.4f} |" for name, value in metrics.items()
                      if name in summary]
        else:
            lines += ["| metric | value |", "|---|---|"] + [f"| {name} | {value:.4f} |" for name, value in metrics.items()]
        if meta.get("tune"):
            tune = meta["tune"]
            lines += ["", f"Hyperparameters found by `bertkit tune`: trial {tune['best_trial']} of "
                          f"{len(tune['trials'])} ({tune['best_params']}), chosen on the dev data above."]
    else:
        lines = ["No evaluation data was given at training time."]
    for figure in figures:
        lines += ["", f"![{Path(figure).stem}]({figure})"]
    return "\n".join(lines)
