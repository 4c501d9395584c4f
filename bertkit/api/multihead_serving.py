"""`bertkit serve` on a multi-head directory: the server's predictor (bertkit/serving/app.py reads
``examples``, ``predict``, ``info``) over a MultiHeadPredictor. ``POST /predict`` answers every head
whose input a row is (a pair head needs two texts), ``POST /predict/<head>`` that head only; each
answer is the row `bertkit predict --head NAME` writes, under the head's name."""

from __future__ import annotations

from pathlib import Path

from bertkit.api.multihead_inference import MultiHeadPredictor
from bertkit.api.prediction import keep_ids
from bertkit.data import readers
from bertkit.data.registry import Source
from bertkit.errors import BertkitError
from bertkit.options import InferenceOptions
from bertkit.tasks.base import PREDICT

HEADS_KEY = "_heads"  # an example of the server: {head name: that head's example}, the heads asked for


class MultiHeadServing:
    task = "multi"

    def __init__(
        self, model_dir: str, run: InferenceOptions | None = None, backend: str = "torch", head: str | None = None
    ):
        # torch (auto), or the graph of every head `bertkit export onnx|openvino DIR` wrote; ``head``: that one only
        self.heads = MultiHeadPredictor(model_dir, run, head, backend=backend)
        self.model_dir, self.names, self.backend = str(model_dir), self.heads.names, self.heads.backend
        self.adapter = self.heads.adapters[self.names[0]]  # /embed asks a model's fields: no head embeds

    def load(self) -> "MultiHeadServing":
        self.heads.load()
        self.heads.engine.quiet = True
        return self

    def examples(self, records: list, where: str = "request", head: str | None = None) -> list[dict]:
        """Each row with the examples of the heads that read it (``head``: that one, or an error)."""
        if head is not None and head not in self.names:
            raise BertkitError(
                f"no head {head!r} (the heads: {', '.join(self.names)})",
                f"POST /predict/NAME with one of {', '.join(self.names)}, or /predict",
            )
        rows = _rows(records, where)
        read, first_error = {}, None
        for name in [head] if head else self.names:
            try:
                read[name] = self._read(name, rows, where)
            except BertkitError as exc:
                first_error = first_error or exc
        if not read:
            raise first_error
        return [{HEADS_KEY: {name: examples[i] for name, examples in read.items()}} for i in range(len(rows))]

    def examples_of(self, records: list, where: str, names: list[str]) -> list[dict]:
        """Each row with the examples of every head of ``names``, all of which must read it (streamed predict)."""
        rows = _rows(records, where)
        read = {name: self._read(name, rows, where) for name in names}
        return [{HEADS_KEY: {name: examples[i] for name, examples in read.items()}} for i in range(len(rows))]

    @staticmethod
    def as_examples(rows: list[dict]) -> list[dict]:
        """Rows of {head: its example} (read by each head's own reader) as the server's examples."""
        return [{HEADS_KEY: row} for row in rows]

    def _read(self, name: str, rows: list[dict], where: str) -> list[dict]:
        try:
            return keep_ids(rows, self.heads.adapters[name].from_records(rows, Source(where), PREDICT), where)
        except BertkitError as exc:
            raise BertkitError(f"head {name}: {exc.message}", exc.hint) from None

    def predict(self, examples: list[dict]) -> list[dict]:
        """Every example's heads, each head run once over the examples (of any requests) that ask it;
        heads reading the same token ids share one encoder pass."""
        answers: list[dict] = [{} for _ in examples]
        asked = {n: [i for i, example in enumerate(examples) if n in example[HEADS_KEY]] for n in self.names}
        asked = {n: rows for n, rows in asked.items() if rows}
        found = self.heads.predict_many({n: [examples[i][HEADS_KEY][n] for i in rows] for n, rows in asked.items()})
        for name, rows in asked.items():
            for i, row in zip(rows, found[name]):
                answers[i][name] = row
        return answers

    def info(self) -> dict:
        meta = self.heads.meta
        heads = {
            h["name"]: {
                "task": h["task"]["task"],
                "kind": h["kind"],
                "labels": h["task"].get("labels"),
                "metrics": h.get("metrics"),
            }
            for h in meta["heads"]
        }
        return {
            "model": Path(self.model_dir).name,
            "task": "multi",
            "heads": heads,
            "backend": self.backend,
            "base_model": meta.get("base_model"),
            "metrics": meta.get("metrics"),
        }


def _rows(records: list, where: str) -> list[dict]:
    """The request's rows as objects (a string: one line of a text file, a TAB before a pair's second text)."""
    if not records:
        raise BertkitError(f"{where}: no inputs", "send at least one input row")
    rows = []
    for number, record in enumerate(records, 1):
        if isinstance(record, str):
            first, tab, second = record.partition("\t")
            record = {"text": first, "text_pair": second} if tab else {"text": record}
        if not isinstance(record, dict):
            raise BertkitError(
                f"{where}: input {number} is {readers.json_kind(record)}, not an object or a string",
                "send rows like the lines of a JSONL file for `bertkit predict`",
            )
        rows.append(record)
    return rows
