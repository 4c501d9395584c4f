"""Few-shot classification as SetFit does it (Tunstall et al., 2022), the torch-free part: the
``--recipe`` and ``--pairs-per-example`` options of `bertkit finetune cls|pair`, the checks of
the labelled rows, and the contrastive pairs made from them.

SetFit trains the encoder ("the body") on pairs of labelled rows: two rows of one label are a
positive pair (cosine target 1), two rows of different labels a negative pair (target 0); then a
logistic regression on the trained body's embeddings is the classifier. The pairs are drawn here as
SetFit's ``num_iterations`` sampler draws them: every row anchors the same number of pairs, half
positive and half negative, its partners drawn at random (a seeded ``random.Random``, so one seed
gives one list of pairs). networks/contrastive.py trains on them (the recipe SETFIT_BODY of
tasks/training_spec.py); api/few_shot.py runs it all.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass

from bertkit.errors import BertkitError
from bertkit.tasks.base import TaskOption
from bertkit.tasks.label_kinds import DEFAULT_KIND
from bertkit.tasks.panels import RECIPE_PANEL

FINETUNE, SETFIT = "finetune", "setfit"
RECIPES = (FINETUNE, SETFIT)
DEFAULT_PAIRS = 20
SINGLE_LABEL = DEFAULT_KIND  # the one kind setfit trains (the kind is named in its own module)

FEW_SHOT_OPTIONS = (
    TaskOption(
        "recipe",
        str,
        "finetune (the model and its head trained together) | setfit (few labelled rows: the encoder "
        "trained on pairs of rows, then a logistic-regression head; loads in SetFit too).",
        ("finetune",),
        FINETUNE,
        RECIPE_PANEL,
    ),
    TaskOption(
        "pairs_per_example",
        int,
        f"--recipe setfit: contrastive pairs each labelled row anchors, half positive, half negative "
        f"(default {DEFAULT_PAIRS}).",
        ("finetune",),
        panel=RECIPE_PANEL,
    ),
)


@dataclass(frozen=True)
class Pair:
    """Rows ``first`` and ``second`` of the training data; ``similarity``: 1.0 same label, 0.0 not."""

    first: int
    second: int
    similarity: float


def recipe_of(options: dict) -> str:
    """The recipe the options ask for, checked (--recipe, and --pairs-per-example only with setfit)."""
    recipe = str(options.get("recipe") or FINETUNE).strip().lower()
    if recipe not in RECIPES:
        raise BertkitError(f"unknown --recipe {options.get('recipe')!r}", f"use one of {', '.join(RECIPES)}")
    pairs = options.get("pairs_per_example")
    if pairs is not None and recipe != SETFIT:
        raise BertkitError("--pairs-per-example applies only with --recipe setfit", "add --recipe setfit or drop it")
    if pairs is not None and (isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 1):
        raise BertkitError(f"--pairs-per-example must be at least 1, not {pairs}", f"e.g. {DEFAULT_PAIRS} (default)")
    return recipe


def check_problem_type(problem_type: str | None) -> None:
    """SetFit's head here is one softmax over classes: regression and multi-label are refused."""
    if problem_type and problem_type != SINGLE_LABEL:
        raise BertkitError(
            f"--recipe setfit trains one class per text, not {problem_type} data",
            "use --recipe finetune (the default) for it",
        )


def check_rows(labels: list, names: list) -> None:
    """Every label needs a positive pair (2 rows) and a negative one (another label)."""
    counts = {name: 0 for name in names}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    present = {name: n for name, n in counts.items() if n}
    if len(present) < 2:
        only = next(iter(present), None)
        raise BertkitError(
            f"--recipe setfit needs rows of at least 2 labels; the training data has only {only!r}",
            "add rows of another label (a negative pair joins two labels)",
        )
    rare = sorted(name for name, n in present.items() if n < 2)
    if rare:
        shown = ", ".join(repr(name) for name in rare[:5]) + (", ..." if len(rare) > 5 else "")
        raise BertkitError(
            f"--recipe setfit needs at least 2 rows of every label (a positive pair); {shown} "
            f"{'has' if len(rare) == 1 else 'have'} 1",
            "add a second row of that label, or remove its row",
        )


def contrastive_pairs(labels: list, pairs_per_example: int, seed: int) -> list[Pair]:
    """``pairs_per_example`` pairs anchored at every row (the first ceil(n/2) positive, the rest
    negative), partners drawn without repeats until a row's candidates are used up, then again: a
    row never meets itself, and the same labels and seed give the same pairs."""
    rng = random.Random(seed)
    rows_of = defaultdict(list)
    for row, label in enumerate(labels):
        rows_of[label].append(row)
    positives = (pairs_per_example + 1) // 2
    pairs = []
    for row, label in enumerate(labels):
        same = [other for other in rows_of[label] if other != row]
        different = [other for name, rows in rows_of.items() if name != label for other in rows]
        pairs += [Pair(row, other, 1.0) for other in _drawn(same, positives, rng)]
        pairs += [Pair(row, other, 0.0) for other in _drawn(different, pairs_per_example - positives, rng)]
    rng.shuffle(pairs)
    return pairs


def _drawn(candidates: list[int], n: int, rng: random.Random) -> list[int]:
    """``n`` of ``candidates``: each once in a shuffled round before any comes back."""
    drawn = []
    while len(drawn) < n:
        round_ = list(candidates)
        rng.shuffle(round_)
        drawn += round_[: n - len(drawn)]
    return drawn
