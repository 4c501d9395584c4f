"""Entity-level precision, recall and F1 for token tagging (NER), computed with seqeval."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from bertkit.decoding.tags import iob1_to_iob2, repair_bio, validate_bio

# classification_report adds these summary rows next to the per-type rows.
_SUMMARY_ROWS = ("micro avg", "macro avg", "weighted avg")


def tagging_scores(
    gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]], strict: bool = False
) -> dict:
    """Score predicted BIO tags against gold tags, one list of tags per sentence.

    Returns ``{"precision", "recall", "f1", "token_accuracy", "per_type"}``, where the first
    three are micro-averaged over entities and ``per_type`` maps each entity type found in gold
    or predictions to ``{"precision", "recall", "f1", "support"}`` (support = gold entities).
    An entity counts as correct only if its type and both boundaries match. Gold tags may be
    IOB1 or IOB2 (IOB1 is converted first).

    Default mode: predictions are repaired with ``repair_bio`` before scoring, so an orphan
    ``I-X`` starts a new entity. That is also how conlleval reads them, so the numbers match
    conlleval's.

    ``strict=True``: seqeval's strict mode with the IOB2 scheme, on the predictions as given
    (no repair): an entity must be written ``B-X I-X ...``, and one that starts with ``I-`` is
    not counted, so ill-formed predictions cost score. (Repairing first would make strict mode
    identical to the default.)

    ``token_accuracy`` is the share of tokens whose predicted tag equals the gold tag, on the
    predictions as given, as conlleval's "accuracy" is. When there are no gold or no
    predicted entities, the undefined ratios are reported as 0.0.
    """
    # imported here: seqeval pulls in scikit-learn (seconds), which `bertkit --help` must not pay for
    from seqeval.metrics import classification_report
    from seqeval.scheme import IOB2

    _check_aligned(gold, pred)
    # Converting IOB1 gold keeps strict mode from silently dropping gold entities; for IOB2
    # gold it changes nothing.
    gold = [iob1_to_iob2(tags) for tags in gold]
    pred = [list(tags) for tags in pred]
    validate_bio(gold, "gold tags")
    validate_bio(pred, "predicted tags")

    scored = pred if strict else [repair_bio(tags) for tags in pred]
    strict_options = {"mode": "strict", "scheme": IOB2} if strict else {}
    with warnings.catch_warnings():
        # With no entities at all seqeval averages an empty macro row (numpy "Mean of empty
        # slice"); that row is not used, and the micro row is a clean 0.
        warnings.simplefilter("ignore", RuntimeWarning)
        report = classification_report(
            gold, scored, output_dict=True, zero_division=0, **strict_options
        )

    overall = report.get("micro avg", {})
    per_type = {
        entity_type: {
            "precision": float(row["precision"]),
            "recall": float(row["recall"]),
            "f1": float(row["f1-score"]),
            "support": int(row["support"]),
        }
        for entity_type, row in report.items()
        if entity_type not in _SUMMARY_ROWS
    }
    token_count = sum(len(tags) for tags in gold)
    correct_tokens = sum(
        g == p for gold_tags, pred_tags in zip(gold, pred) for g, p in zip(gold_tags, pred_tags)
    )
    return {
        "precision": float(overall.get("precision", 0.0)),
        "recall": float(overall.get("recall", 0.0)),
        "f1": float(overall.get("f1-score", 0.0)),
        "token_accuracy": correct_tokens / token_count if token_count else 0.0,
        "per_type": per_type,
    }


def _check_aligned(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> None:
    # A mismatch here is a bug in the caller (predictions are made per gold sentence), so it
    # is a ValueError with the first offending sentence rather than a user-facing error.
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold sentences but {len(pred)} predicted")
    if not gold:
        raise ValueError("no sentences to score")
    for index, (gold_tags, pred_tags) in enumerate(zip(gold, pred)):
        if len(gold_tags) != len(pred_tags):
            raise ValueError(
                f"sentence {index}: {len(gold_tags)} gold tags but {len(pred_tags)} predicted"
            )
