"""Annotation tools' exports read as plain records: Label Studio (the full JSON export and JSON-MIN),
doccano JSONL and character-span JSONL (spaCy-style ``{"text", "entities": [...]}``).

The format is told from the records' structure (``--data-format`` forces one):

* Label Studio: tasks ``{"id", "data": {...}, "annotations": [{"result": [...]}, ...]}``; the latest
  annotation of a task counts (by ``updated_at``, ``created_at``, id); cancelled (skipped)
  annotations and tasks without any are left out and counted. Results are ``labels`` (character
  spans) or ``choices`` (one or several classes). JSON-MIN: one flat record per task, the spans
  under the labelling config's name, meta fields (``annotator``, ``annotation_id``...) dropped.
  Each result names its control (``from_name``: the ``<Choices>`` or ``<Labels>`` tag's name); one
  control is read. An export with several (``sentiment`` and ``quality``) is refused unless
  ``--label-control`` names one: pooled, their classes would make one problem that is neither.
  Span offsets: bertkit/data/span_offsets.py (the tools count UTF-16 code units).
* spans (doccano's sequence labelling export too): ``{"text", K: [[start, end, tag], ...]}`` or
  ``{start, end, label}`` objects, under any key K (``label``, ``entities``, ``spans``...).
* doccano's text classification (``{"text", "label": ["pos"]}``) is only read as such when forced:
  a list of labels is bertkit's own multi-label record, so it stays that without the flag.

``plain_records`` gives what the tasks already read: ``{"tokens", "tags"}`` for tagging (spans
aligned to words: bertkit/data/word_alignment.py) and the task's data fields plus ``label`` for
classification (several choices: a JSON list, which reads as multi-label).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bertkit.data.span_offsets import check_units, in_code_points
from bertkit.data.word_alignment import Alignment, Span, check_alignment, words_and_tags
from bertkit.errors import BertkitError

FORMATS = ("auto", "plain", "label-studio", "doccano", "spans")
SPANS, CHOICES = "spans", "choices"  # what a task wants from an annotation: tagging, classification
MIN_META = {"annotator", "annotation_id", "created_at", "updated_at", "lead_time", "drafts", "predictions"}
TASK_KEYS = {"annotations", "completions", "predictions", "drafts", "meta", "total_annotations"}


@dataclass
class Read:
    """Plain records, the format they came in (None: they were plain already) and what was said."""

    records: list
    format: str | None = None
    notices: list = field(default_factory=list)


def check_format(value: str | None) -> str:
    chosen = value or "auto"
    if chosen not in FORMATS:
        raise BertkitError(f"--data-format {value!r} is not a format", f"use one of {', '.join(FORMATS)}")
    return chosen


def detect(records: list) -> str | None:
    """The annotation format the records are in, or None for plain records."""
    first = next((r for r in records if isinstance(r, dict)), None)
    if first is None or "tokens" in first:
        return None
    if isinstance(first.get("data"), dict) and (set(first) & TASK_KEYS or set(first) <= {"id", "data", "meta"}):
        return "label-studio"
    if set(first) & {"annotator", "annotation_id", "lead_time"}:
        return "label-studio"
    if any(isinstance(r, dict) and _span_key(r) for r in records[:200]):
        return "spans"
    return None


def plain_records(
    records: list,
    want: str,
    labelled: bool,
    where: str,
    data_format: str | None = None,
    alignment: str | None = None,
    control: str | None = None,
    offsets: str | None = None,
) -> Read:
    """``records`` as the tasks read them. ``want``: SPANS (tagging) or CHOICES (classification);
    ``labelled``: gold is needed (training, evaluation), else only the texts are (predict);
    ``control``: the Label Studio control read (--label-control); ``offsets``: --span-offsets."""
    chosen = check_format(data_format)
    policy, offsets_unit = check_alignment(alignment), check_units(offsets)
    found = detect(records) if chosen == "auto" else None if chosen == "plain" else chosen
    if control is not None and found != "label-studio":
        raise BertkitError(
            f"--label-control {control}: {where} is not a Label Studio export"
            + (f" (read as {found})" if found else ""),
            "drop --label-control: it names one of a Label Studio project's labelling controls",
        )
    if found is None:
        return Read(records)
    if found == "doccano":
        found = "spans" if want == SPANS else "doccano"
    if found == "spans" and want == CHOICES:  # entities are not classes: a plain record that happens to hold spans
        if chosen == "auto":
            return Read(records)
        raise BertkitError(
            f"{where}: --data-format spans holds entity spans, which a classification model does not read",
            "train ner on it (bertkit finetune ner), or pass --data-format doccano for a doccano classification export",
        )
    _check_objects(records, where, found)
    units = _units(records, found, want, where, control)
    if found == "label-studio":
        _one_control(units, control, want, where, labelled)
    return _Plain(want, labelled, where, policy, found, offsets_unit).build(units)


@dataclass
class _Unit:
    """One task: its data fields, its id, and its gold (spans or choices; None: not annotated)."""

    number: int
    data: dict
    gold: list | None
    left_out: str | None = None  # why the task has no gold: "cancelled", "not annotated"
    text_key: str | None = None
    controls: dict | None = None  # Label Studio: control name -> its gold (spans or choices), its text's name


class _Plain:
    def __init__(self, want: str, labelled: bool, where: str, policy: str, found: str, offsets: str):
        self.want, self.labelled, self.where, self.policy, self.found = want, labelled, where, policy, found
        self.offsets, self.alignment, self.moved = offsets, Alignment(), 0

    def build(self, units: list[_Unit]) -> Read:
        kept = [u for u in units if u.gold is not None or not self.labelled]
        left: dict = {}
        for unit in units:
            if self.labelled and unit.gold is None:
                left[unit.left_out or "not annotated"] = left.get(unit.left_out or "not annotated", 0) + 1
        name = {"label-studio": "Label Studio", "spans": "character-span", "doccano": "doccano"}[self.found]
        why = ", ".join(f"{count} {reason}" for reason, count in left.items())
        if not kept:
            raise BertkitError(
                f"{self.where}: a {name} file with no annotated tasks ({len(units)} task(s): {why or 'none'})",
                "annotate and submit some tasks in the tool, then export again",
            )
        records = self._tags(kept) if self.want == SPANS else self._choices(kept)
        notices = [f"{self.where}: read as a {name} export ({len(kept)} of {len(units)} task(s) used)"]
        if left:
            notices[0] = notices[0][:-1] + f"; left out: {why})"
        if self.moved:
            notices.append(
                f"{self.moved} span(s) after characters outside the BMP (emoji) were read in UTF-16 code units, "
                "the tool's count (bertkit/data/span_offsets.py)"
            )
        return Read(records, self.found, notices + self.alignment.notices(self.policy))

    def _tags(self, units: list[_Unit]) -> list[dict]:
        records = []
        for unit in units:
            text = _text(unit, self.where)
            if not self.labelled:
                records.append({"text": text})
                continue
            task = f"{self.where}: task {_name(unit)}"
            spans, moved = in_code_points(text, unit.gold, task, self.offsets, self.found == "label-studio")
            self.moved += moved
            words, tags = words_and_tags(text, spans, task, self.policy, self.alignment)
            if not words:
                raise BertkitError(f"{task} has no words", "remove tasks with an empty text")
            records.append({"tokens": words, "tags": tags})
        return records

    def _choices(self, units: list[_Unit]) -> list[dict]:
        several = any(u.gold is not None and len(u.gold) > 1 for u in units)
        records = []
        for unit in units:
            record = {k: v for k, v in unit.data.items() if k != "__id__"}
            if self.labelled and unit.gold != [None]:  # JSON-MIN: the label is a field of its own
                record["label"] = list(unit.gold) if several else unit.gold[0]
            records.append(record)
        return records


def _name(unit: _Unit) -> str:
    return str(unit.data.get("__id__", unit.number))


def _check_objects(records: list, where: str, found: str) -> None:
    for number, record in enumerate(records, 1):
        if not isinstance(record, dict):
            raise BertkitError(f"{where}: task {number} is not a JSON object", f"a {found} export holds objects")


def _units(records: list, found: str, want: str, where: str, control: str | None) -> list[_Unit]:
    if found == "label-studio":
        full = any(isinstance(r.get("data"), dict) for r in records)
        return [(_task if full else _min_task)(r, n, want, where, control) for n, r in enumerate(records, 1)]
    if found == "doccano":
        return [_doccano_choices(r, n, where) for n, r in enumerate(records, 1)]
    return [_span_record(r, n, where) for n, r in enumerate(records, 1)]


def _task(task: dict, number: int, want: str, where: str, control: str | None = None) -> _Unit:
    """A full Label Studio task: the latest annotation that was not cancelled, its gold by control."""
    data = task.get("data")
    if not isinstance(data, dict):
        raise BertkitError(f"{where}: task {number} has no 'data' object", "export the project again (JSON)")
    data = {**data, "__id__": task.get("id", number)}
    annotations = [a for a in (task.get("annotations") or task.get("completions") or []) if isinstance(a, dict)]
    valid = [a for a in annotations if not a.get("was_cancelled")]
    if not valid:
        why = "skipped or cancelled" if annotations else "only pre-annotated" if task.get("predictions") else ""
        return _Unit(number, data, None, why or "not annotated")
    latest = max(valid, key=lambda a: (str(a.get("updated_at") or a.get("created_at") or ""), _int(a.get("id"))))
    results = [r for r in latest.get("result") or [] if isinstance(r, dict) and isinstance(r.get("value"), dict)]
    controls: dict = {}  # control -> (gold, the name of the text it labels)
    if want == CHOICES:  # the task's classes: not a region's (perRegion choices have offsets)
        for result in (r for r in results if r["value"].get("choices") and "start" not in r["value"]):
            gold, _ = controls.setdefault(str(result.get("from_name") or ""), ([], None))
            gold.extend(result["value"]["choices"])
        return _Unit(number, data, None, "without a choice", controls=controls)
    regions = [r for r in results if "start" in r["value"] and str(r.get("type") or "labels").endswith("labels")]
    for index, result in enumerate(regions, 1):  # numbered in the task's order, whatever control is read
        spans, _ = controls.setdefault(str(result.get("from_name") or ""), ([], result.get("to_name")))
        spans.append(_span(result["value"], index, f"{where}: task {data['__id__']}"))
    return _Unit(number, data, [], controls=controls)


def _min_task(record: dict, number: int, want: str, where: str, control: str | None = None) -> _Unit:
    """A JSON-MIN record: data fields, meta fields and one field per labelling control."""
    data = {k: v for k, v in record.items() if k not in MIN_META}
    data["__id__"] = record.get("id", number)
    if want == CHOICES:
        for key, value in list(data.items()):
            if isinstance(value, dict) and isinstance(value.get("choices"), list):
                data[key] = value["choices"]  # several choices: a list, read as multi-label
        if control is None:  # the choice is a field: the label column (--label-column) picks it
            return _Unit(number, data, [None])
        value = data.pop(control, None)
        chosen = value if isinstance(value, list) else [value] if value not in (None, "") else []
        return _Unit(number, data, None, "without a choice", controls={control: (chosen, None)} if chosen else {})
    keys = _span_keys(record)
    if not keys:
        return _Unit(number, data, None, "not annotated")
    task = f"{where}: task {data['__id__']}"
    controls = {key: ([_span(item, i, task) for i, item in enumerate(data.pop(key), 1)], None) for key in keys}
    return _Unit(number, data, [], controls=controls)


def _one_control(units: list[_Unit], control: str | None, want: str, where: str, labelled: bool) -> None:
    """Each Label Studio unit's gold: the one control's (--label-control, else the only one found)."""
    found = list(dict.fromkeys(name for u in units for name in (u.controls or {})))
    kind = "<Choices>" if want == CHOICES else "<Labels>"
    if control is None and len(found) > 1 and labelled:
        raise BertkitError(
            f"{where}: a Label Studio export with {len(found)} {kind} controls ({', '.join(found)}); "
            "bertkit reads one, as one problem",
            f"name it with --label-control (e.g. --label-control {found[0]}), and train another model on the other",
        )
    if control is not None and control not in found:
        fields = sorted({k for u in units for k in u.data if k != "__id__"})
        listed = f"controls: {', '.join(found)}" if found else f"fields: {', '.join(fields)}"
        raise BertkitError(
            f"--label-control {control}: no {kind} control of that name in {where} ({listed})",
            "name one of its controls (a result's from_name)",
        )
    control = control or (found[0] if found else None)
    for unit in units:
        if unit.controls is None:
            continue
        gold, to_name = unit.controls.get(control, ([], None))
        if want == CHOICES:
            unit.gold = gold or None
        else:
            unit.gold, unit.text_key = gold, to_name


def _span_record(record: dict, number: int, where: str) -> _Unit:
    key = _span_key(record) or next((k for k in ("label", "entities", "spans", "labels") if k in record), None)
    data = {k: v for k, v in record.items() if k != key}
    data["__id__"] = record.get("id", number)
    if key is None:
        return _Unit(number, data, None, "not annotated")
    items = record[key]
    if not isinstance(items, list):
        raise BertkitError(f"{where}: task {data['__id__']}: {key!r} is not a list of spans", SPAN_HINT)
    return _Unit(number, data, [_span(item, i, f"{where}: task {data['__id__']}") for i, item in enumerate(items, 1)])


def _doccano_choices(record: dict, number: int, where: str) -> _Unit:
    key = next((k for k in ("label", "labels", "cats") if k in record), None)
    data = {k: v for k, v in record.items() if k != key}
    data["__id__"] = record.get("id", number)
    value = record.get(key) if key else None
    chosen = value if isinstance(value, list) else [value] if value not in (None, "") else []
    return _Unit(number, data, chosen or None, "not annotated")


SPAN_HINT = 'spans look like [start, end, "TAG"] or {"start": 0, "end": 5, "label": "TAG"}'


def _span(item, number: int, task: str) -> Span:
    said = None
    if isinstance(item, (list, tuple)) and len(item) == 3:
        start, end, label = item
    elif isinstance(item, dict):
        said = item.get("text") if isinstance(item.get("text"), str) else None
        start, end = item.get("start", item.get("start_offset")), item.get("end", item.get("end_offset"))
        label = item.get("label", item.get("labels"))
        label = label[0] if isinstance(label, list) and len(label) == 1 else label
    else:
        raise BertkitError(f"{task}: span {number} is not a span ({str(item)[:60]})", SPAN_HINT)
    if not (isinstance(start, int) and isinstance(end, int)) or isinstance(start, bool) or isinstance(end, bool):
        raise BertkitError(f"{task}: span {number} has no integer start and end ({str(item)[:60]})", SPAN_HINT)
    if not isinstance(label, str) or not label.strip() or any(c.isspace() for c in label):
        raise BertkitError(f"{task}: span {number} has no label (one word) ({str(item)[:60]})", SPAN_HINT)
    return Span(start, end, label, number, said)


def _span_key(record: dict) -> str | None:
    """The field holding character spans, if any: a non-empty list of spans."""
    return next(iter(_span_keys(record)), None)


def _span_keys(record: dict) -> list[str]:
    """The fields holding character spans: non-empty lists of spans (JSON-MIN: one per control)."""
    if not isinstance(record.get("text"), str):
        return []
    return [k for k, v in record.items() if isinstance(v, list) and v and all(_is_span(item) for item in v)]


def _is_span(item) -> bool:
    if isinstance(item, (list, tuple)):
        return len(item) == 3 and all(isinstance(v, int) for v in item[:2]) and isinstance(item[2], str)
    keys = set(item) if isinstance(item, dict) else set()
    return bool(keys & {"start", "start_offset"}) and bool(keys & {"end", "end_offset"})


def _text(unit: _Unit, where: str) -> str:
    data = unit.data
    for key in (unit.text_key, "text"):
        if key and isinstance(data.get(key), str):
            return data[key]
    texts = [k for k, v in data.items() if isinstance(v, str) and k != "__id__"]
    if len(texts) == 1:
        return data[texts[0]]
    raise BertkitError(
        f"{where}: task {_name(unit)} has no 'text' field (data fields: {', '.join(k for k in data if k != '__id__')})",
        "name the text field 'text' in the tool's data",
    )


def _int(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
