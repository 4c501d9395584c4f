"""Which given labels are probably wrong, from out-of-sample probabilities: cleanlab's confident
learning (Northcutt et al., 2021), called as it is, never re-implemented (`bertkit audit`).

* one class per row: ``cleanlab.filter.find_label_issues`` (the flags, ``prune_by_noise_rate``),
  ``cleanlab.rank.get_label_quality_scores`` (``self_confidence``: the probability of the given
  label) and ``cleanlab.count.estimate_joint`` (the joint of given and true label: its off-diagonal
  mass is the estimated noise rate);
* a set of classes per row: ``cleanlab.multilabel_classification``'s ``find_label_issues`` and
  ``get_label_quality_scores``; the noise rate is ``cleanlab.count.num_label_issues(...,
  multi_label=True)`` over the rows, the joint one 2x2 table per class;
* one tag per word (ner): ``cleanlab.token_classification``'s ``find_label_issues`` (words) and
  ``get_label_quality_scores`` (a sentence's score: its worst word's); a sentence is flagged when
  one of its words is, and the noise rate is that of the words (``estimate_joint`` on them).

Near-duplicate rows and outliers come from cleanlab's Datalab on vectors of the rows (``data_issues``).
cleanlab is an optional extra: without it, one line saying how to install it. Torch-free.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from bertkit.errors import BertkitError

# cleanlab's three shapes of a label (each has its own functions): one class, a set of classes, a tag per word
SINGLE, MULTI, TOKENS = "one-class", "class-set", "tokens"


@dataclass
class LabelIssues:
    """Per row: ``flagged`` (cleanlab's verdict), ``quality`` (0..1, lower: the label more likely
    wrong); ``words``: per flagged ner row, its flagged words; and the estimates over the data."""

    flagged: np.ndarray
    quality: np.ndarray
    noise_rate: float
    joint: list
    words: dict = field(default_factory=dict)


def cleanlab_module(name: str):
    """``cleanlab.<name>``, or one line saying how to get it (an optional extra)."""
    import importlib

    try:
        return importlib.import_module(f"cleanlab.{name}")
    except ImportError as exc:
        raise BertkitError(
            "bertkit audit ranks labels with cleanlab, which is not installed", "pip install 'bertkit[quality]'"
        ) from exc


def label_issues(kind: str, labels: list, pred_probs) -> LabelIssues:
    """``labels``: class ids (SINGLE), lists of class ids (MULTI) or per-sentence lists of tag ids
    (TOKENS); ``pred_probs``: (rows, classes), or one (words, tags) array per sentence."""
    if kind == SINGLE:
        return _single(np.asarray(labels, dtype=np.int64), np.asarray(pred_probs, dtype=np.float64))
    if kind == MULTI:
        return _multi([list(map(int, row)) for row in labels], np.asarray(pred_probs, dtype=np.float64))
    return _tokens([list(map(int, row)) for row in labels], [np.asarray(p, dtype=np.float64) for p in pred_probs])


# cleanlab forks a multiprocessing Pool per class by default (n_jobs = the physical cores): forked from a
# process that already runs torch's threads, a child can deadlock on a lock held by a thread that does
# not exist in it (a test run hung there); the per-class work is small, one process does it
ONE_PROCESS = 1


def _single(labels: np.ndarray, pred_probs: np.ndarray) -> LabelIssues:
    filter_, rank, count = cleanlab_module("filter"), cleanlab_module("rank"), cleanlab_module("count")
    flagged = filter_.find_label_issues(labels, pred_probs, n_jobs=ONE_PROCESS)
    quality = rank.get_label_quality_scores(labels, pred_probs)
    joint = count.estimate_joint(labels, pred_probs)
    return LabelIssues(
        np.asarray(flagged, bool), np.asarray(quality, float), float(1.0 - np.trace(joint)), joint.tolist()
    )


def _multi(labels: list, pred_probs: np.ndarray) -> LabelIssues:
    filter_ = cleanlab_module("multilabel_classification.filter")
    rank, count = cleanlab_module("multilabel_classification.rank"), cleanlab_module("count")
    flagged = filter_.find_label_issues(labels, pred_probs, n_jobs=ONE_PROCESS)
    quality = rank.get_label_quality_scores(labels, pred_probs)
    with warnings.catch_warnings():  # cleanlab warns of its own inner call to a deprecated argument
        warnings.simplefilter("ignore", DeprecationWarning)
        issues = count.num_label_issues(labels, pred_probs, multi_label=True)
    joint = count.estimate_joint(labels, pred_probs, multi_label=True)  # (classes, 2, 2): one vs rest
    return LabelIssues(
        np.asarray(flagged, bool), np.asarray(quality, float), float(issues) / len(labels), joint.tolist()
    )


def _tokens(labels: list, pred_probs: list) -> LabelIssues:
    filter_, rank = cleanlab_module("token_classification.filter"), cleanlab_module("token_classification.rank")
    count = cleanlab_module("count")
    found = filter_.find_label_issues(labels, pred_probs, n_jobs=ONE_PROCESS)
    sentence_scores, _ = rank.get_label_quality_scores(labels, pred_probs)
    words: dict = {}
    for sentence, word in found:
        words.setdefault(int(sentence), []).append(int(word))
    flagged = np.zeros(len(labels), dtype=bool)
    flagged[list(words)] = True
    flat_labels = np.concatenate([np.asarray(row, dtype=np.int64) for row in labels])
    joint = count.estimate_joint(flat_labels, np.concatenate(pred_probs))  # the words' own
    words = {sentence: sorted(found_words) for sentence, found_words in words.items()}
    return LabelIssues(flagged, np.asarray(sentence_scores, float), float(1.0 - np.trace(joint)), joint.tolist(), words)


NEIGHBOURS = 10  # Datalab's own default k for near_duplicate and outlier
DATA_CHECKS = ("near_duplicate", "outlier")


def data_issues(vectors: np.ndarray, labels: list) -> dict:
    """Datalab's ``near_duplicate`` and ``outlier`` issue types on ``vectors`` (one per row):
    {"near_duplicates": [[row, other], ...] of near-duplicate pairs whose given labels differ (0-based),
    "outliers": [row, ...], "skipped": {check: why}}; a check Datalab cannot run on these rows is
    None, with its reason under "skipped". ``labels``: each row's given label as a hashable value.

    Both checks use a k-nearest-neighbour graph whose k must be below the number of rows (Datalab
    raises otherwise, and then has no issues to return), so k is min(10, rows - 1); with fewer than
    two rows there is no neighbour and both are skipped."""
    import contextlib
    import io

    rows = len(labels)
    k = min(NEIGHBOURS, rows - 1)
    if k < 1:
        why = f"{rows} row(s): a nearest-neighbour check needs at least 2"
        return {"near_duplicates": None, "outliers": None, "skipped": dict.fromkeys(DATA_CHECKS, why)}
    datalab = cleanlab_module("datalab.datalab")
    given = [repr(label) for label in labels]
    lab = datalab.Datalab(data={"label": given}, label_name="label", verbosity=0)
    printed = io.StringIO()  # Datalab prints a failed check's error instead of raising it
    with contextlib.redirect_stdout(printed):
        lab.find_issues(
            features=np.asarray(vectors, dtype=np.float32), issue_types={check: {"k": k} for check in DATA_CHECKS}
        )
    ran = set(lab.issue_summary["issue_type"]) if len(lab.issue_summary) else set()
    skipped = {check: _failure(printed.getvalue(), check) for check in DATA_CHECKS if check not in ran}
    issues = lab.get_issues() if ran else None
    pairs = None
    if "near_duplicate" in ran:
        pairs = set()
        for row, others in enumerate(lab.get_info("near_duplicate")["near_duplicate_sets"]):
            for other in others:
                if given[row] != given[int(other)]:
                    pairs.add(tuple(sorted((row, int(other)))))
        pairs = [list(pair) for pair in sorted(pairs)]
    outliers = [int(i) for i in np.flatnonzero(issues["is_outlier_issue"].to_numpy())] if "outlier" in ran else None
    return {"near_duplicates": pairs, "outliers": outliers, "skipped": skipped}


def _failure(printed: str, check: str) -> str:
    """Datalab's printed reason a check failed (its line ``Error in <check>: ...``)."""
    for line in printed.splitlines():
        if line.startswith(f"Error in {check}:"):
            return line.split(":", 1)[1].strip()
    return "cleanlab's Datalab did not run it"
