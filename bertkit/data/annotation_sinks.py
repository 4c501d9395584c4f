"""Predictions written as annotation tools' tasks, to import as pre-annotations (`predict --format`,
`bertkit select`).

* Label Studio: ``{"id", "data": {"text"[, "text_pair"]}, "predictions": [{"model_version", "score",
  "result": [...]}]}``; a result is ``choices`` (cls/pair: one, or several for multi-label) or
  ``labels`` with character ``start``/``end`` (ner), ``from_name`` "label" and ``to_name`` "text":
  the names of the labelling configs ``labeling_config`` writes.
* doccano: ``{"id", "text", "label": [...]}``: class names (cls/pair), or ``[start, end, type]``
  spans (ner).

A ``.json`` output is one JSON list (what Label Studio's import takes); ``.jsonl`` and standard
output hold one task per line (doccano's import format). Pre-tokenised
input has no text: its words are joined with single spaces, and the offsets point into that.
Both formats read back as data (bertkit/data/annotations.py) give the predicted tags and classes.
"""

from __future__ import annotations

import json
from pathlib import Path

from bertkit.data.sinks import Sink
from bertkit.data.span_offsets import utf16_offset
from bertkit.errors import BertkitError

TOOLS = ("label-studio", "doccano")
SPANS, CHOICE, CHOICES = "spans", "choice", "choices"  # a prediction's shape: ner, cls/pair, multi-label
FROM_NAME, TO_NAME = "label", "text"


def shape_of(prediction_fields: dict) -> str | None:
    """What a task's predict rows hold, by their fields: tags, one label, a set of labels."""
    if "tags" in prediction_fields:
        return SPANS
    if "labels" in prediction_fields:
        return CHOICES
    return CHOICE if "label" in prediction_fields else None


def check_tool(tool: str, prediction_fields: dict, target: Path | None, command: str = "predict") -> str:
    """The tool's name checked against the model (classes or tags) and the output (JSON); the shape."""
    if tool not in TOOLS:
        raise BertkitError(f"--format {tool!r} is not an annotation tool", f"use one of {', '.join(TOOLS)}")
    shape = shape_of(prediction_fields)
    if shape is None:
        raise BertkitError(
            f"--format {tool} writes classes or entity spans; this model predicts neither",
            "drop --format (bertkit predict writes its own rows)"
            if command == "predict"
            else "select ranks the predictions of classification (cls, pair) and ner models",
        )
    if target is not None and target.suffix.lower() not in (".json", ".jsonl"):
        raise BertkitError(
            f"--format {tool} writes JSON, not {target.suffix or 'a file without a suffix'}",
            "give --output FILE.json (one list) or FILE.jsonl (one task per line)",
        )
    return shape


def annotation_sink(tool: str | None, prediction_fields: dict, target: Path | None, model_version: str):
    """The sink of ``--format tool`` (None when no tool is asked for: bertkit's own rows)."""
    if not tool:
        return None
    shape = check_tool(tool, prediction_fields, target)
    array = target is not None and target.suffix.lower() == ".json"
    return ToolTasks(tool, shape, model_version, array)


class ToolTasks(Sink):
    """bertkit predict rows made into tool tasks; a JSON list assembled from the parts, or JSONL."""

    part_suffix = ".json"

    def __init__(self, tool: str, shape: str, model_version: str, array: bool = False):
        self.tool, self.shape, self.model_version, self.array = tool, shape, model_version, array

    def tasks(self, rows: list[dict]) -> list[dict]:
        make = label_studio_task if self.tool == "label-studio" else doccano_task
        return [make(row, self.shape, self.model_version) for row in rows]

    def lines(self, rows) -> str:
        return "".join(json.dumps(task, ensure_ascii=False) + "\n" for task in self.tasks(rows))

    def write_part(self, rows, handle) -> None:
        if not self.array:
            return super().write_part(rows, handle)
        handle.write(",\n".join(json.dumps(task, ensure_ascii=False) for task in self.tasks(rows)).encode("utf-8"))

    def assemble(self, parts: list[Path], handle) -> None:
        if not self.array:
            return super().assemble(parts, handle)
        handle.write(b"[\n")
        for number, part in enumerate(parts):
            handle.write(b",\n" if number else b"")
            handle.write(part.read_bytes())
        handle.write(b"\n]\n")


def label_studio_task(row: dict, shape: str, model_version: str, score: float | None = None) -> dict:
    """One Label Studio task with the row's prediction. ``score``: the prediction's own (select's
    certainty), else the row's probability where it has one."""
    text, data = _text_and_data(row, shape)
    if shape == SPANS:
        result = [
            {
                "id": f"e{number}",
                "from_name": FROM_NAME,
                "to_name": TO_NAME,
                "type": "labels",
                "value": {"start": tool_start, "end": tool_end, "text": text[start:end], "labels": [kind]},
            }
            for number, ((start, end, kind), (tool_start, tool_end, _)) in enumerate(
                zip(_spans(row, text), _tool_spans(row, text)), 1
            )
        ]
    else:
        chosen = row["labels"] if shape == CHOICES else [row["label"]]
        result = [{"from_name": FROM_NAME, "to_name": TO_NAME, "type": "choices", "value": {"choices": chosen}}]
        result = result if chosen else []  # multi-label with nothing over the threshold: no pre-annotation
    prediction = {"model_version": model_version, "result": result}
    score = row.get("score") if score is None and shape == CHOICE else score
    if score is not None:
        prediction["score"] = score
    task = {"data": data, "predictions": [prediction]}
    return {"id": row["id"], **task} if "id" in row else task


def doccano_task(row: dict, shape: str, model_version: str, score: float | None = None) -> dict:
    text, data = _text_and_data(row, shape)
    label = [list(span) for span in _tool_spans(row, text)] if shape == SPANS else None
    if label is None:
        label = list(row["labels"]) if shape == CHOICES else [row["label"]]
    task = {**data, "label": label}
    if score is not None:
        task["score"] = score
    return {"id": row["id"], **task} if "id" in row else task


def _text_and_data(row: dict, shape: str) -> tuple[str, dict]:
    if shape == SPANS:
        text = row.get("text")
        return (
            (text, {"text": text}) if text is not None else (" ".join(row["words"]), {"text": " ".join(row["words"])})
        )
    data = {"text": row["text"]}
    if "text_pair" in row:
        data["text_pair"] = row["text_pair"]
    return row["text"], data


def _tool_spans(row: dict, text: str) -> list[tuple[int, int, str]]:
    """``_spans`` in the tools' own unit: Label Studio and doccano count UTF-16 code units
    (data/span_offsets.py), so a span after an emoji lands on its words in the tool too."""
    return [(utf16_offset(text, start), utf16_offset(text, end), kind) for start, end, kind in _spans(row, text)]


def _spans(row: dict, text: str) -> list[tuple[int, int, str]]:
    """(start, end, type) of each entity: the row's own offsets, or offsets into the words joined by spaces."""
    if "text" in row:
        return [(e["start"], e["end"], e["type"]) for e in row["entities"]]
    starts, position = [], 0
    for word in row["words"]:
        starts.append(position)
        position += len(word) + 1
    return [
        (starts[e["start_word"]], starts[e["end_word"] - 1] + len(row["words"][e["end_word"] - 1]), e["type"])
        for e in row["entities"]
    ]


def labeling_config(shape: str, labels: list, pair: bool = False) -> str:
    """A Label Studio labelling config whose names match the tasks written here."""
    texts = f'<Text name="{TO_NAME}" value="$text"/>' + ('<Text name="text_pair" value="$text_pair"/>' if pair else "")
    if shape == SPANS:
        types = sorted({label[2:] for label in labels if label != "O"})
        tags = "".join(f'<Label value="{t}"/>' for t in types)
        return f'<View><Labels name="{FROM_NAME}" toName="{TO_NAME}">{tags}</Labels>{texts}</View>'
    choice = "multiple" if shape == CHOICES else "single"
    tags = "".join(f'<Choice value="{label}"/>' for label in labels)
    return f'<View>{texts}<Choices name="{FROM_NAME}" toName="{TO_NAME}" choice="{choice}">{tags}</Choices></View>'
