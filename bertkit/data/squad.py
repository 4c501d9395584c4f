"""Read extractive-QA data into flat examples.

Accepted layouts, detected from the records themselves:

* official nested SQuAD JSON, v1.1 and v2.0: ``{"data": [{"paragraphs": [{"context", "qas": [...]}]}]}``
  (a v2 question with ``"is_impossible": true`` has no answer);
* flat records in JSON, JSONL (or CSV/TSV for prediction): ``id``, ``question``, ``context`` and
  ``answers`` as ``{"text": [...], "answer_start": [...]}`` (the Hugging Face Hub layout) or as a
  list of ``{"text", "answer_start"}``; an empty answer list means unanswerable.

An example is ``{"id", "question", "context", "answers": [{"text", "start"}]}``; ``answers`` is
missing for prediction input without gold answers. A gold ``answer_start`` that does not point at
its answer text is moved to the nearest occurrence of the text (the example gets
``repaired_start``), or, when the text is nowhere in the context, the example gets ``bad_start``.
"""

from __future__ import annotations

import json
from pathlib import Path

from bertkit.data import formats, readers
from bertkit.errors import BertkitError

LAYOUT_HINT = (
    'expected SQuAD JSON ({"data": [{"paragraphs": [{"context", "qas"}]}]}) or records with '
    '"question", "context" and "answers": {"text": [...], "answer_start": [...]}'
)


def read_squad_records(path: Path) -> list:
    """Raw records of a file: SQuAD articles or flat question records."""
    fmt = formats.of(path)
    if fmt is not None and fmt not in formats.JSON_FAMILY:  # CSV, TSV, text lines, Parquet: flat records
        return fmt.read(path)
    text = readers.read_text(path)
    try:
        data = readers.parse_json(text)
    except json.JSONDecodeError as exc:
        if not text.lstrip().startswith("{"):
            raise BertkitError(f"{path}: invalid JSON at line {exc.lineno} ({exc.msg})", LAYOUT_HINT) from exc
        return formats.parse_records(text, formats.JSONL.suffix, str(path))  # JSON Lines, whatever the suffix
    return unwrap(data, str(path))


def unwrap(data, source: str) -> list:
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    elif isinstance(data, dict) and "question" in data:
        data = [data]
    if not isinstance(data, list) or not data or not all(isinstance(r, dict) for r in data):
        raise BertkitError(f"{source}: neither SQuAD JSON nor a list of question records", LAYOUT_HINT)
    return data


def to_examples(records: list, source: str, need_answers: bool) -> list[dict]:
    """Flat examples from nested articles or flat records; one-line errors for malformed input."""
    if len(records) == 1 and isinstance(records[0].get("data"), list):  # stdin gave the whole SQuAD object
        records = unwrap(records[0], source)
    if "paragraphs" in records[0]:
        examples = list(_from_articles(records, source))
    elif "question" in records[0] and "context" in records[0]:
        examples = [_from_flat(r, n, source) for n, r in enumerate(records, 1)]
    else:
        raise BertkitError(
            f"{source}: neither SQuAD articles nor question records "
            f"(first record has keys: {', '.join(map(str, records[0])) or 'none'})",
            LAYOUT_HINT,
        )
    if not examples:
        raise BertkitError(f"{source} has no questions", LAYOUT_HINT)
    _check(examples, source, need_answers)
    return examples


def _from_articles(articles: list, source: str):
    for a, article in enumerate(articles, 1):
        paragraphs = article.get("paragraphs")
        if not isinstance(paragraphs, list):
            raise BertkitError(f"{source}: article {a} has no paragraphs list", LAYOUT_HINT)
        for paragraph in paragraphs:
            if not isinstance(paragraph, dict) or not isinstance(paragraph.get("qas"), list):
                raise BertkitError(f"{source}: article {a} has a paragraph without a qas list", LAYOUT_HINT)
            for q, qa in enumerate(paragraph["qas"], 1):
                example = {
                    "id": str(qa.get("id") or f"a{a}-q{q}"),
                    "question": str(qa.get("question") or ""),
                    "context": str(paragraph.get("context") or ""),
                }
                if qa.get("is_impossible"):
                    example["answers"] = []
                elif "answers" in qa:
                    example["answers"] = _answers(qa["answers"], example["id"], source)
                yield example


def _from_flat(record: dict, number: int, source: str) -> dict:
    example = {
        "id": str(readers.id_value(record, number, source) or f"q{number}"),
        "question": readers.text_value(record, "question", number, source),
        "context": readers.text_value(record, "context", number, source),
    }
    if record.get("is_impossible") in (True, "true", "True", 1):
        example["answers"] = []
    elif record.get("answers") not in (None, ""):
        example["answers"] = _answers(record["answers"], example["id"], source)
    return example


def _answers(value, qid: str, source: str) -> list[dict]:
    if isinstance(value, str):
        if value.strip().startswith(("{", "[")):  # a CSV cell holding the answers as JSON
            try:
                value = readers.parse_json(value)
            except json.JSONDecodeError as exc:
                raise BertkitError(
                    f"{source}: question {qid}: answers are not valid JSON ({exc.msg})", LAYOUT_HINT
                ) from exc
    if isinstance(value, dict) and isinstance(value.get("text"), list):  # Hub layout: parallel lists
        value = [{"text": t, "answer_start": s} for t, s in zip(value["text"], value.get("answer_start") or [])]
    if not isinstance(value, list) or not all(isinstance(a, dict) and "text" in a for a in value):
        raise BertkitError(
            f"{source}: question {qid}: answers must be a list of {{text, answer_start}} "
            "or {text: [...], answer_start: [...]}",
            LAYOUT_HINT,
        )
    try:
        return [{"text": str(a["text"]), "start": int(a.get("answer_start", -1))} for a in value]
    except (TypeError, ValueError) as exc:
        raise BertkitError(f"{source}: question {qid}: answer_start must be a number", LAYOUT_HINT) from exc


def _check(examples: list[dict], source: str, need_answers: bool) -> None:
    def fail(what: str, bad: list, hint: str):
        ids = ", ".join(ex["id"] for ex in bad[:3]) + (", ..." if len(bad) > 3 else "")
        raise BertkitError(f"{source}: {len(bad)} question(s) {what} ({ids})", hint)

    for field in ("context", "question"):
        empty = [ex for ex in examples if not ex[field].strip()]
        if empty:
            fail(f"with an empty {field}", empty, f"every question needs a non-empty {field}")
    if need_answers:
        missing = [ex for ex in examples if "answers" not in ex]
        if missing:
            fail("without gold answers", missing, 'give "answers" (an empty list: SQuAD v2 unanswerable)')
    for ex in examples:
        for answer in ex.get("answers", ()):
            if not _points_at(ex["context"], answer["start"], answer["text"]):
                _repair(ex, answer)


def _points_at(context: str, start: int, text: str) -> bool:
    return start >= 0 and context[start : start + len(text)] == text


def _repair(example: dict, answer: dict) -> None:
    """Move a wrong answer_start to the nearest occurrence of the answer text (``repaired_start``);
    when the text is nowhere in the context the question gets ``bad_start`` (skipped in training).
    The given offset stays in ``given_start`` so that strict mode can report it."""
    context, text = example["context"], answer["text"]
    found, at = [], context.find(text)
    while at != -1:
        found.append(at)
        at = context.find(text, at + 1)
    answer["given_start"] = answer["start"]
    if found:
        answer["start"] = min(found, key=lambda position: abs(position - answer["given_start"]))
        example["repaired_start"] = True
    else:
        example["bad_start"] = True


def bad_start_error(examples: list[dict], source: str) -> BertkitError | None:
    """Strict mode: every answer_start must be right as given, repairable or not."""
    bad = [ex for ex in examples if any("given_start" in a for a in ex.get("answers", ()))]
    if not bad:
        return None
    first = bad[0]
    answer = next(a for a in first["answers"] if "given_start" in a)
    given = answer["given_start"]
    found = first["context"][max(given, 0) : max(given, 0) + len(answer["text"])]
    return BertkitError(
        f"{source}: {len(bad)} question(s) whose answer_start does not point at the answer text "
        f"(first: {first['id']}: {answer['text']!r} at {given} reads {found!r})",
        "fix the offsets, or drop the strict option to repair them (nearest occurrence of the "
        "text) or skip those questions in training",
    )
