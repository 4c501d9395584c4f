"""The options cls and pair declare (bertkit/tasks/classification.py): the columns and the file's
separator they read, and the label kind's flags (--problem-type and what each kind takes)."""

from __future__ import annotations

from bertkit.tasks.base import TaskOption
from bertkit.tasks.label_kinds import KINDS
from bertkit.tasks.panels import LABEL_KINDS_PANEL, READING_PANEL
from bertkit.tasks.single_label import CALIBRATION_OPTIONS

TEXT_CANDIDATES = ("sentence", "text", "review", "content")
PAIR_TEXT_CANDIDATES = ("sentence1", "question1", "premise", "question", "text", "text_a", "#1 String")
PAIR_CANDIDATES = ("sentence2", "question2", "hypothesis", "sentence", "text_pair", "text_b", "#2 String")
LABEL_CANDIDATES = ("label", "labels", "gold_label", "Quality", "is_duplicate", "class", "target", "score")
TEXT_COLUMN = TaskOption(
    "text_column", str, "Column with the (first) text.", ("finetune", "probe"), panel=READING_PANEL
)
TEXT_PAIR_COLUMN = TaskOption(
    "text_pair_column", str, "Column with the second text.", ("finetune", "probe"), panel=READING_PANEL
)
LABEL_COLUMN = TaskOption("label_column", str, "Column with the label.", ("finetune", "probe"), panel=READING_PANEL)
# a setting of the file read, not of the model: used to read, never stored with it (``finished``)
DELIMITER = TaskOption(
    "delimiter",
    str,
    "CSV field separator: comma, semicolon, tab, pipe or one character; default: sniffed from the first rows.",
    ("finetune", "eval", "probe"),
    panel=READING_PANEL,
)
LABEL_KIND_OPTIONS = (
    TaskOption(
        "problem_type",
        str,
        f"{' | '.join(KINDS)}; default: the dataset's, or what the labels show (a "
        "JSON list: multi-label; numbers that are not classes: an error asking for regression).",
        ("finetune",),
        panel=LABEL_KINDS_PANEL,
    ),
    TaskOption(
        "label_columns",
        str,
        "multi-label: comma-separated 0/1 columns, one per label.",
        ("finetune",),
        panel=LABEL_KINDS_PANEL,
    ),
    TaskOption(
        "scale_targets",
        bool,
        "regression: train on standardised targets (the saved head predicts the original scale).",
        ("finetune",),
        panel=LABEL_KINDS_PANEL,
    ),
    TaskOption("target_scaling", dict, "regression: the scaling in use while training (not a flag).", ()),
    TaskOption("scaled_targets", dict, "regression: the scaling training folded into the head (stored).", ()),
    TaskOption(
        "label_map",
        str,
        "cls/pair: read evaluation labels through FILE=MODEL pairs, e.g. 0=negative,1=positive.",
        ("finetune", "eval"),
        panel=READING_PANEL,
    ),
    TaskOption("tune_per_label", bool, "multi-label: tune one threshold per label (default: one for all).", ("eval",)),
    TaskOption(
        "top_k",
        int,
        "cls/pair: give only the K most probable labels (multi-label: those of them over the threshold).",
        ("predict",),
    ),
    TaskOption("threshold", float, "multi-label: probability at which a label is predicted (stored by eval).", (), 0.5),
    TaskOption("thresholds", list, "multi-label: per-label thresholds (stored by eval).", (), []),
    *CALIBRATION_OPTIONS,
)
