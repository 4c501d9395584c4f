"""What `bertkit finetune` returns (api/finetuning.py, and the runs of seeds, folds
and tune that repeat it)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FinetuneResult:
    output_dir: str
    metrics: dict
    throughput: dict
    history: list
    best_epoch: float | None
    train_examples: int
    eval_examples: int
    preprocessing: dict = field(default_factory=dict)
    report: dict = field(default_factory=dict)  # figures, report.html, model card (bertkit.reporting)
    runtime: dict = field(default_factory=dict)  # precision used (and why), threads
    best_step: int | None = None
    resumed_from: str | None = None  # the checkpoint this run continued from (--resume)
    notices: list = field(default_factory=list)
    before: dict = field(default_factory=dict)  # the starting model's scores (tasks that ask for them)
    sections: dict = field(default_factory=dict)  # what the task adds to bertkit.json (Task.directory_sections)
    eval_rows: list | None = None  # --folds: the held-out fold's prediction rows (row: its place in the data)
    warnings: list = field(default_factory=list)  # a degenerate model, one that beats no baseline: said
    baselines: list = field(default_factory=list)  # what its metrics are read against (bertkit.metrics.baselines)
    degenerate: bool = False  # one answer for everything (bertkit.metrics.degenerate): among the warnings
