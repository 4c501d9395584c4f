"""``history.jsonl``: the curves of a training run, one JSON object per line.

Two kinds of line, in the order they happened::

    {"type": "train", "step": 120, "epoch": 0.4, "loss": 0.41, "lr": 1.9e-05, "grad_norm": 3.2}
    {"type": "eval", "step": 300, "epoch": 1.0, "metrics": {"accuracy": 0.91, ...}}

``step`` counts optimizer steps from 1; ``epoch`` is the share of the data seen so far (1.0: one
full pass); ``loss`` is the mean training loss of the batches since the previous train line (over
all processes), ``lr`` the learning rate that step used, and ``grad_norm`` the global L2 norm of
the gradients before clipping. Train lines come every ``--log-every`` steps, eval lines at every
evaluation. The finished model directory holds the whole file; during a run with ``--save-every``
the same lines are appended live to ``<output>.checkpoints/history.jsonl`` (rewritten on resume, so
it never shows steps the killed run did after its last checkpoint).
"""

from __future__ import annotations

import json
from pathlib import Path

from bertkit.model_dir import write_text

FILE = "history.jsonl"


class History:
    def __init__(self, entries: list[dict] | None = None, live: Path | None = None):
        self.entries = list(entries or [])
        self.live = live  # appended to as lines come; only the main process passes one
        if live is not None:
            live.parent.mkdir(parents=True, exist_ok=True)
            self.write(live)

    def train(self, step: int, epoch: float, loss: float, lr: float, grad_norm: float | None) -> None:
        self._add({"type": "train", "step": step, "epoch": epoch, "loss": loss, "lr": lr, "grad_norm": grad_norm})

    def eval(self, step: int, epoch: float, metrics: dict) -> None:
        self._add({"type": "eval", "step": step, "epoch": epoch, "metrics": metrics})

    def _add(self, entry: dict) -> None:
        self.entries.append(entry)
        if self.live is not None:
            with open(self.live, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry) + "\n")

    def write(self, path: Path) -> None:
        write_text(path, "".join(json.dumps(entry) + "\n" for entry in self.entries))


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
