"""A new label kind is its own module plus one line in the kinds registry, and nothing else.

``Abstaining`` is defined only here (it is this module, then) and registered with one line
(``KINDS["abstaining"]``, done with monkeypatch): a single-label classifier that abstains under a
confidence floor. finetune, eval and predict on the command line then train, score and write it
through the kind alone: no file of bertkit knows its name.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bertkit.tasks.label_kinds import KINDS
from bertkit.tasks.single_label import SingleLabel

REPO = Path(__file__).resolve().parents[2]
FLOOR = 0.99  # a tiny model trained for one epoch is never this sure: every row abstains


class Abstaining(SingleLabel):
    name = "abstaining"
    prediction_fields = {**SingleLabel.PREDICTION_FIELDS, "abstained": "true when no label reached the floor"}

    def decode(self, logits):
        return [{**row, "abstained": bool(row["probabilities"].max() < FLOOR)} for row in super().decode(logits)]

    def scores(self, gold, predictions):
        answered = [p for p in predictions if not p["abstained"]]
        return {**super().scores(gold, predictions), "coverage": len(answered) / len(predictions)}

    def row(self, prediction):
        return {**super().row(prediction), "abstained": prediction["abstained"]}


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(KINDS, "abstaining", f"{__name__}:Abstaining")  # the one registry line


def test_a_kind_defined_outside_bertkit_trains_scores_and_predicts(registered, run_cli, tiny_bert, tmp_path):
    rows = [("a good great movie", "pos"), ("an awful bad film", "neg")] * 12
    data = tmp_path / "train.csv"
    data.write_text("text,label\n" + "".join(f"{text},{label}\n" for text, label in rows))
    model = tmp_path / "model"
    code, _, err = run_cli(
        "finetune",
        "cls",
        "--data",
        data,
        "--model",
        tiny_bert,
        "--output",
        model,
        "--problem-type",
        "abstaining",
        "--epochs",
        "1",
        "--batch-size",
        "8",
    )
    assert code == 0, err
    meta = json.loads((model / "bertkit.json").read_text())
    assert meta["task"]["options"]["problem_type"] == "abstaining"

    code, out, err = run_cli("eval", model, "--data", data, "--output", tmp_path / "eval.json")
    assert code == 0, err
    metrics = json.loads((tmp_path / "eval.json").read_text())["metrics"]
    assert metrics["coverage"] == 0.0 and 0.0 <= metrics["accuracy"] <= 1.0

    code, out, err = run_cli("predict", model, "--input", REPO / "examples" / "sentences.txt")
    assert code == 0, err
    predicted = [json.loads(line) for line in out.splitlines()]
    assert predicted and all(row["abstained"] is True and row["label"] in ("pos", "neg") for row in predicted)
    assert all(np.isclose(sum(row["probabilities"].values()), 1.0, atol=1e-4) for row in predicted)


def test_no_product_file_names_a_kind_but_its_own_module_and_the_registry():
    """What a new kind would touch: the files that name today's kinds outside their own modules."""
    kinds = ("single-label", "multi-label", "regression")
    own = {
        "bertkit/tasks/single_label.py",
        "bertkit/tasks/multi_label.py",
        "bertkit/tasks/regression.py",
        "bertkit/tasks/label_kinds.py",
    }
    listed = subprocess.run(
        ["git", "grep", "-l", "-e", f'"{kinds[0]}"', "-e", f'"{kinds[1]}"', "-e", f'"{kinds[2]}"', "--", "bertkit"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    naming = set(listed.stdout.split()) - own
    # the dataset registry says which kind a known dataset is: a fact about that data, not code of the kind
    if listed.returncode not in (0, 1):  # a copy without its .git (a device machine's): git grep cannot say
        pytest.skip(f"needs a git checkout: {listed.stderr.strip()[:80]}")
    assert naming == {"bertkit/data/known_datasets.py"}, naming
