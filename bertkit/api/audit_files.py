"""What `bertkit audit` writes into its output directory (all of it staged, moved into place whole):

* ``ranked.jsonl`` and ``ranked.csv``: every row, the most suspicious first (cleanlab's label
  quality, lowest first; ties: the earlier row): rank, row (from 1, as the data file's rows),
  text, given label, suggested label (the model's), quality, issue (cleanlab's flag), the id
  where the data has one, and the data issues beside: the rows it is a near-duplicate of with
  another label, whether it is an outlier;
  ner rows also name their flagged words (``issue_words``, from 0). CSV cells holding a list are JSON;
* ``summary.json``: the counts, the estimated noise rate and joint, what the probabilities came from;
* ``relabel-label-studio.json``: the flagged rows as Label Studio tasks, the given label as the
  task's annotation and the model's suggestion as its prediction (bertkit/data/annotation_sinks.py
  writes both; a span's offsets count UTF-16 code units), with ``label-studio-config.xml`` to import
  them into; a relabelled export trains again through ``--data``;
* or, with ``--format doccano``, ``relabel-doccano.jsonl``: one doccano task per flagged row whose
  ``label`` is the given one (a doccano task holds one labelling: an export left untouched is the
  data as it was, never the model's guess) and whose ``meta`` holds the model's suggestion, the
  row, rank and quality (doccano shows a task's other keys as its metadata).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from bertkit.data.annotation_sinks import CHOICE, CHOICES, SPANS, doccano_task, label_studio_task, labeling_config
from bertkit.metrics.label_issues import MULTI, SINGLE, TOKENS
from bertkit.model_dir import write_json, write_text

RANKED, RANKED_CSV, SUMMARY = "ranked.jsonl", "ranked.csv", "summary.json"
TASKS, CONFIG, DOCCANO = "relabel-label-studio.json", "label-studio-config.xml", "relabel-doccano.jsonl"
WRITTEN = (RANKED, RANKED_CSV, SUMMARY, TASKS, CONFIG, DOCCANO)
SHAPES = {SINGLE: CHOICE, MULTI: CHOICES, TOKENS: SPANS}


def ranked_rows(scored, issues, data_issues: dict | None) -> list[dict]:
    """Every row of the audit, the lowest label quality first."""
    duplicates: dict = {}
    for first, second in (data_issues or {}).get("near_duplicates") or []:
        duplicates.setdefault(first, []).append(second + 1)
        duplicates.setdefault(second, []).append(first + 1)
    outliers = set((data_issues or {}).get("outliers") or [])
    order = sorted(range(len(scored.examples)), key=lambda i: (float(issues.quality[i]), i))
    rows = []
    for rank, index in enumerate(order, 1):
        example = scored.examples[index]
        row = {"rank": rank, "row": index + 1, **({"id": example["id"]} if "id" in example else {})}
        row.update(_texts(scored, example))
        row.update(given=_given(scored, example), suggested=_suggested(scored, index))
        row.update(quality=round(float(issues.quality[index]), 6), issue=bool(issues.flagged[index]))
        if scored.kind == TOKENS:
            row["issue_words"] = issues.words.get(index, [])
        if (data_issues or {}).get("near_duplicates") is not None:  # None: not checked, or skipped
            row["near_duplicate_of"] = sorted(duplicates.get(index, []))
        if (data_issues or {}).get("outliers") is not None:
            row["outlier"] = index in outliers
        rows.append(row)
    return rows


def _texts(scored, example: dict) -> dict:
    if scored.kind == TOKENS:
        return {"text": example.get("text", " ".join(example["tokens"])), "words": list(example["tokens"])}
    return {f: example[f] for f in scored.adapter.text_fields}


def _given(scored, example: dict):
    if scored.kind == TOKENS:
        return list(example["tags"])
    return sorted(example["label"]) if scored.kind == MULTI else example["label"]


def _suggested(scored, index: int):
    suggestion = scored.suggested[index]
    return list(suggestion) if isinstance(suggestion, (list, tuple)) else suggestion


def relabel_files(tool: str) -> tuple[str, ...]:
    """The files ``--format`` writes the flagged rows to."""
    return (DOCCANO,) if tool == "doccano" else (TASKS, CONFIG)


def write_audit(directory: Path, rows: list[dict], summary: dict, scored, tool: str = "label-studio") -> None:
    """The files above, into ``directory`` (a staging directory); ``tool``: --format."""
    write_text(directory / RANKED, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    write_text(directory / RANKED_CSV, _csv(rows))
    write_json(directory / SUMMARY, summary)
    if tool == "doccano":
        tasks = [_doccano(scored, row) for row in rows if row["issue"]]
        write_text(directory / DOCCANO, "".join(json.dumps(task, ensure_ascii=False) + "\n" for task in tasks))
        return
    tasks = [_task(scored, row) for row in rows if row["issue"]]
    write_text(directory / TASKS, json.dumps(tasks, ensure_ascii=False, indent=1) + "\n")
    pair = "text_pair" in getattr(scored.adapter, "text_fields", ())
    write_text(directory / CONFIG, labeling_config(SHAPES[scored.kind], scored.adapter.labels, pair) + "\n")


def _csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    columns = [name for name in rows[0] if name != "words"] if rows else []
    writer = csv.DictWriter(buffer, columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(
            {k: json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v for k, v in row.items()}
        )
    return buffer.getvalue()


def _task(scored, row: dict) -> dict:
    """One Label Studio task: the model's suggestion as the prediction, the given label as the annotation."""
    shape, version = SHAPES[scored.kind], Path(scored.model_dir).name
    suggested = label_studio_task(_tool_row(scored, row, row["suggested"]), shape, version)
    given = label_studio_task(_tool_row(scored, row, row["given"]), shape, version)
    annotation = [
        {**region, "id": f"g{n}"} if "id" in region else region
        for n, region in enumerate(given["predictions"][0]["result"], 1)
    ]
    task = {**suggested, "annotations": [{"result": annotation}]}
    task["meta"] = {"row": row["row"], "rank": row["rank"], "quality": row["quality"]}
    return task


def _doccano(scored, row: dict) -> dict:
    """One doccano task: the given label as its label; the model's suggestion in its metadata."""
    task = doccano_task(_tool_row(scored, row, row["given"]), SHAPES[scored.kind], Path(scored.model_dir).name)
    if scored.kind == TOKENS:
        suggested = doccano_task(_tool_row(scored, row, row["suggested"]), SPANS, "")["label"]
    else:
        suggested = row["suggested"]
    task["meta"] = {"row": row["row"], "rank": row["rank"], "quality": row["quality"], "suggested": suggested}
    return task


def _tool_row(scored, row: dict, label) -> dict:
    """What annotation_sinks' writers take: predict's row for ``label`` (a class, a set, tags)."""
    if scored.kind == TOKENS:
        example = scored.examples[row["row"] - 1]
        return scored.adapter.format_prediction(example, list(label))
    texts = {f: row[f] for f in scored.adapter.text_fields}
    return {**texts, "labels": list(label)} if scored.kind == MULTI else {**texts, "label": label}
