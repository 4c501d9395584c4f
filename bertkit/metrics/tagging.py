"""Entity-level precision, recall and F1 for token tagging (NER), computed with seqeval."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from bertkit.decoding.tags import input_scheme, iob1_to_iob2, repair_bio, tags_as_written, validate_bio

# classification_report adds these summary rows next to the per-type rows.
_SUMMARY_ROWS = ("micro avg", "macro avg", "weighted avg")


def tagging_scores(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]], strict: bool = False) -> dict:
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

    ``token_accuracy`` is conlleval's "accuracy" computed on what ``bertkit predict`` writes
    against the gold tags as given: correctly tagged tokens / all tokens, where a token is
    correct when its tag string equals the gold one, ``O`` included (conlleval: ``if ($correct
    eq $guessed and $guessedType eq $correctType) { $correctTags++; }`` for every token,
    ``$tokenCounter++``). The predicted tags are taken as ``predict`` writes them
    (``tags_as_written``): repaired to valid IOB2, and in IOB1 for a sentence whose gold tags are
    IOB1, so running conlleval on the gold file and ``predict``'s tags for that file gives this
    number, in strict mode too. (``-DOCSTART-`` lines are not tokens here; conlleval would count
    each as one correct ``O``.) When there are no gold or no predicted entities, the undefined
    ratios are reported as 0.0.
    """
    _check_aligned(gold, pred)
    gold_as_given = [list(tags) for tags in gold]
    pred = [list(tags) for tags in pred]
    validate_bio(gold_as_given, "gold tags")
    validate_bio(pred, "predicted tags")
    # Converting IOB1 gold keeps strict mode from silently dropping gold entities; for IOB2
    # gold it changes nothing.
    gold = [iob1_to_iob2(tags) for tags in gold_as_given]
    report = _seqeval_report(gold, pred if strict else [repair_bio(tags) for tags in pred], strict)
    overall = report.get("micro avg", {})
    token_count, correct_tokens = _tokens_tagged_right(gold_as_given, pred)
    return {
        "precision": float(overall.get("precision", 0.0)),
        "recall": float(overall.get("recall", 0.0)),
        "f1": float(overall.get("f1-score", 0.0)),
        "token_accuracy": correct_tokens / token_count if token_count else 0.0,
        "per_type": _per_type(report),
    }


def _seqeval_report(gold: list[list[str]], scored: list[list[str]], strict: bool) -> dict:
    # imported here: seqeval pulls in scikit-learn (seconds), which `bertkit --help` must not pay for
    from seqeval.metrics import classification_report
    from seqeval.scheme import IOB2

    strict_options = {"mode": "strict", "scheme": IOB2} if strict else {}
    with warnings.catch_warnings():
        # With no entities at all seqeval averages an empty macro row (numpy "Mean of empty
        # slice"); that row is not used, and the micro row is a clean 0.
        warnings.simplefilter("ignore", RuntimeWarning)
        return classification_report(gold, scored, output_dict=True, zero_division=0, **strict_options)


def _per_type(report: dict) -> dict:
    return {
        entity_type: {
            "precision": float(row["precision"]),
            "recall": float(row["recall"]),
            "f1": float(row["f1-score"]),
            "support": int(row["support"]),
        }
        for entity_type, row in report.items()
        if entity_type not in _SUMMARY_ROWS
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
            raise ValueError(f"sentence {index}: {len(gold_tags)} gold tags but {len(pred_tags)} predicted")


def _tokens_tagged_right(gold_as_given: list[list[str]], pred: list[list[str]]) -> tuple[int, int]:
    """(all tokens, tokens whose written predicted tag equals the gold tag), as conlleval counts."""
    correct = 0
    for gold_tags, pred_tags in zip(gold_as_given, pred):
        written = tags_as_written(pred_tags, input_scheme(gold_tags))
        correct += sum(g == p for g, p in zip(gold_tags, written))
    return sum(len(tags) for tags in gold_as_given), correct
