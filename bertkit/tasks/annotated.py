"""Annotation tools' exports for the tasks that read them (cls, pair, ner): their options, declared
once, and the one reading hook (bertkit/data/annotations.py does the reading).

``--data-format``, ``--span-alignment``, ``--label-control`` and ``--span-offsets`` are settings of
the file read, not of the model: they are used to read and never stored with it
(``READING_OPTIONS``, dropped by the tasks' ``finished``).
``--format`` (predict) picks the writer of the predictions: bertkit/data/annotation_sinks.py.
"""

from __future__ import annotations

from bertkit.data.annotations import CHOICES, FORMATS, SPANS, plain_records  # noqa: F401 (the tasks' names)
from bertkit.data.span_offsets import UNITS
from bertkit.data.word_alignment import ALIGNMENTS
from bertkit.events import notice
from bertkit.tasks.base import PREDICT, TaskOption
from bertkit.tasks.learned import Examples
from bertkit.tasks.panels import READING_PANEL

DATA_FORMAT = TaskOption(
    "data_format",
    str,
    f"{' | '.join(FORMATS)}: how the data file is read; an annotation tool's export (Label Studio JSON or "
    "JSON-MIN, doccano JSONL, character spans) is told from its structure by default (auto).",
    ("finetune", "eval", "probe"),
    panel=READING_PANEL,
)
SPAN_ALIGNMENT = TaskOption(
    "span_alignment",
    str,
    f"ner: a character span that cuts a word: {' | '.join(ALIGNMENTS)} (expand: the whole word; "
    "contract: only the words inside; strict: an error). Default expand; counted either way.",
    ("finetune", "eval"),
    panel=READING_PANEL,
)
LABEL_CONTROL = TaskOption(
    "label_control",
    str,
    "Label Studio: the control to read (a result's from_name, e.g. sentiment) where the export has "
    "several <Choices> (cls, pair) or <Labels> (ner) controls; refused unless named.",
    ("finetune", "eval", "probe"),
)
SPAN_OFFSETS = TaskOption(
    "span_offsets",
    str,
    f"ner: what span offsets count: {' | '.join(UNITS)} (auto: each span's own text decides; Label Studio "
    "counts UTF-16 code units; doccano and spaCy-style files must say where emoji make them differ).",
    ("finetune", "eval"),
)
PREDICTION_FORMAT = TaskOption(
    "format",
    str,
    "label-studio | doccano: write annotation-tool tasks with the predictions as pre-annotations "
    "(.json: one JSON list; .jsonl or stdout: one task per line). Default: bertkit's rows.",
    ("predict",),
)
READING_OPTIONS = (DATA_FORMAT.name, SPAN_ALIGNMENT.name, LABEL_CONTROL.name, SPAN_OFFSETS.name)


def annotated_records(records: list, options: dict, want: str, purpose: str, where: str) -> tuple[list, list]:
    """The records as the task reads them (an annotation export made plain) and what reading said
    (the format, the tasks left out, the spans moved), each said at once as a ``data`` event."""
    labelled = purpose != PREDICT
    # predict has no --data-format: a value stored by mistake with a model must not steer its reading
    forced = options.get(DATA_FORMAT.name) if labelled else None
    read = plain_records(
        records,
        want,
        labelled,
        where,
        forced,
        options.get(SPAN_ALIGNMENT.name),
        options.get(LABEL_CONTROL.name) if labelled else None,
        options.get(SPAN_OFFSETS.name),
    )
    if read.format is not None and labelled:
        for text in read.notices:
            notice("data", text)
    return read.records, (read.notices if labelled else [])


def with_notices(examples: list, said: list) -> list:
    """The examples carrying what reading said (their ``seen``, which preprocess reports)."""
    if not said:
        return examples
    if not isinstance(examples, Examples):
        examples = Examples(examples)
    examples.seen["notices"] = list(said) + list(examples.seen.get("notices", []))
    return examples


def reading_options_dropped(options: dict) -> dict:
    """The changes that take the reading settings out of a finished task's options."""
    return {name: None for name in READING_OPTIONS if name in options}
