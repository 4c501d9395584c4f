"""`bertkit audit --folds K --task ner`: each sentence's per-word probabilities from the fold model
that held it out. A ner run's out-of-fold file holds tags, not probabilities, so the folds' models
are kept (``--keep-all``), each scores its own held-out sentences, and they are removed after; the
best fold's model stays, as with `finetune --folds`."""

from __future__ import annotations

import json
from pathlib import Path

from bertkit.api.audit_sources import OOF_FILE, Scored, given_labels, word_probabilities
from bertkit.data.registry import resolve
from bertkit.metrics.label_issues import TOKENS
from bertkit.model_dir import load_meta
from bertkit.model_dir.removal import discard_owned
from bertkit.tasks import task_from_state
from bertkit.tasks.base import TRAIN


def scored_by_folds(result, data: str, run) -> Scored:
    """``result``: finetune_folds' (its folds kept); every sentence scored by its own fold's model."""
    from bertkit.api.prediction import Predictor

    best_dir = Path(result.best.output_dir)
    adapter = task_from_state(load_meta(best_dir)["task"])
    examples = adapter.read(resolve(data, TRAIN, task=adapter.name, command="audit"), TRAIN)
    rows = [json.loads(line) for line in (best_dir / OOF_FILE).read_text(encoding="utf-8").splitlines() if line]
    examples = examples[: len(rows)]  # --max-train-samples: the folds' first rows
    probabilities, suggested = [None] * len(rows), [None] * len(rows)
    try:
        for fold in range(1, result.folds + 1):
            held = [row["row"] - 1 for row in rows if row["fold"] == fold]
            model = best_dir if fold == result.chosen_fold else Path(result.kept) / f"fold-{fold}"
            predictor = Predictor(str(model), run, quiet=True).load()
            found, tags = word_probabilities(predictor, [examples[i] for i in held])
            for i, words, predicted in zip(held, found, tags):
                probabilities[i], suggested[i] = words, predicted
    finally:
        discard_owned(Path(result.kept), "removing the folds' models once scored")
    source = {"kind": "audit --folds", "run": str(best_dir), "folds": result.folds}
    given = given_labels(adapter, TOKENS, examples)
    return Scored(adapter, examples, TOKENS, given, probabilities, suggested, source, str(best_dir))
