"""k-fold splits for `finetune --folds K` (scikit-learn's splitters): stratified by label for
single-label classification, grouped where examples share a source (a CoNLL document, a QA
context: its questions never sit on both sides), else shuffled; every example is held out once."""

from __future__ import annotations

import warnings

from bertkit.errors import BertkitError


def assign_folds(
    count: int, folds: int, seed: int, stratify: list | None = None, groups: list | None = None
) -> list[int]:
    """The fold (0..folds-1) each of ``count`` examples is held out in."""
    from sklearn.model_selection import GroupKFold, KFold, StratifiedKFold

    if not isinstance(folds, int) or folds < 2:
        raise BertkitError(f"--folds must be >= 2, got {folds}", "e.g. --folds 5")
    units = len(set(groups)) if groups is not None else count
    if units < folds:
        what = "groups (documents or contexts)" if groups is not None else "examples"
        raise BertkitError(f"--folds {folds} needs at least {folds} {what}, the data has {units}", "use fewer folds")
    indices = list(range(count))
    if groups is not None:
        splits = GroupKFold(n_splits=folds, shuffle=True, random_state=seed).split(indices, groups=groups)
    elif stratify is not None:
        with warnings.catch_warnings():  # a class rarer than the folds: sklearn warns, the split is still valid
            warnings.simplefilter("ignore", UserWarning)
            splits = list(StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(indices, stratify))
    else:
        splits = KFold(n_splits=folds, shuffle=True, random_state=seed).split(indices)
    assigned = [-1] * count
    for fold, (_, held) in enumerate(splits):
        for index in held:
            assigned[index] = fold
    return assigned


def split_fold(adapter, examples: list[dict], fold: tuple[int, int], seed: int) -> tuple[list, list, list[int]]:
    """(training examples, held-out examples, the held-out examples' positions in ``examples``)
    for fold ``fold[0]`` of ``fold[1]``; the same ``seed`` gives the same folds in every run."""
    number, folds = fold
    stratify, groups = adapter.fold_keys(examples)
    assigned = assign_folds(len(examples), folds, seed, stratify, groups)
    held = [i for i, f in enumerate(assigned) if f == number]
    train = [ex for ex, f in zip(examples, assigned) if f != number]
    missing = _classes_held_out_whole(stratify, assigned, number)
    seen = getattr(examples, "seen", None)  # tasks' Examples: what reading saw, its notices printed by preprocess
    if missing and seen is not None:
        shown = ", ".join(map(repr, missing[:5])) + (", ..." if len(missing) > 5 else "")
        notice = (
            f"fold {number + 1} of {folds} trains without class {shown}: every example of it is held out "
            "in this fold (a class needs as many examples as --folds for every fold to see it)"
        )
        train = type(examples)(train, {**seen, "notices": [*seen.get("notices", []), notice]})
    return train, [examples[i] for i in held], held


def _classes_held_out_whole(stratify: list | None, assigned: list[int], number: int) -> list:
    """The classes with no example left in fold ``number``'s training part (a class of one example)."""
    if stratify is None:
        return []
    trained = {label for label, fold in zip(stratify, assigned) if fold != number}
    return sorted({label for label in stratify if label not in trained}, key=str)
