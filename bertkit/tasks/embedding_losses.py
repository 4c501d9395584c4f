"""The embedding losses, declared: one entry per loss, as sentence-transformers' ``losses`` package
and its loss overview table. An entry says which data shapes the loss reads, which shape it is
picked for when ``--loss`` is not given, its own options and its model-card text; its torch function
is bertkit/networks/embedding_losses.py's ``LOSS_FUNCTIONS[name]`` (a test pins the two name sets
equal). A new loss is one entry here plus its function there.

| --loss | data (columns)                       | picked for      | own options                       | as           |
|--------|--------------------------------------|-----------------|-----------------------------------|--------------|
| mnrl   | anchor,positive[,negative]           | pairs, triplets | --scale --symmetric --cache-batch | MNRL         |
| cosent | sentence1,sentence2,score            | scored pairs    | --scale                           | CoSENTLoss   |
| triplet | anchor,positive,negative            | (--loss only)   | --triplet-margin/-distance        | TripletLoss  |

("as": sentence-transformers' loss class; MNRL: MultipleNegativesRankingLoss.)
Every loss also takes ``--matryoshka`` (the loss summed over the vectors cut to each dimension):
the task's own option. Torch-free: the task reads this table before any model is loaded.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from bertkit.errors import BertkitError
from bertkit.tasks.base import TaskOption
from bertkit.tasks.panels import LOSS_PANEL

PAIRS, TRIPLETS, SCORED = "pairs", "triplets", "scored"
# each data shape the embedding task reads -> its columns, as the messages name them
SHAPES = {
    PAIRS: "anchor,positive",
    TRIPLETS: "anchor,positive,negative",
    SCORED: "sentence1,sentence2,score",
}
SHAPE_NAMES = {PAIRS: "pairs", TRIPLETS: "triplets", SCORED: "scored pairs"}


@dataclass(frozen=True)
class EmbeddingLossEntry:
    """One embedding loss: what it reads, when it is picked, its options and its card text."""

    name: str  # the --loss value, and the key of its torch function
    title: str  # sentence-transformers' loss class it equals
    reads: tuple  # the data shapes (SHAPES) it trains on
    help: str  # a few words for --loss's help
    card: str  # completes the model card's "trained with ..."
    picked_for: tuple = ()  # the shapes it trains when --loss is not given
    options: tuple = ()  # the TaskOptions only it reads (several losses may share one)
    check: Callable[[dict], None] | None = None  # its options' values, before any data is read

    def columns(self) -> str:
        return " or ".join(SHAPES[shape] for shape in self.reads)


def check_scale(options: dict) -> None:
    if options.get("scale") is not None and not options["scale"] > 0:
        raise BertkitError(f"--scale {options['scale']} must be above 0", "sentence-transformers uses 20")


def check_mnrl(options: dict) -> None:
    check_scale(options)
    cache = options.get("cache_batch")
    if cache is not None and cache < 1:
        raise BertkitError(f"--cache-batch {cache} must be at least 1", "e.g. --cache-batch 16, or leave it out")


SCALE = TaskOption(
    "scale",
    float,
    "Multiplier of the cosines in the loss (sentence-transformers: 20).",
    ("finetune",),
    panel=LOSS_PANEL,
)
SYMMETRIC = TaskOption(
    "symmetric", bool, "MNRL both ways: anchor->positive and positive->anchor.", ("finetune",), False, panel=LOSS_PANEL
)
CACHE_BATCH = TaskOption(
    "cache_batch",
    int,
    "GradCache mini-batch size: the whole --batch-size is one set of negatives, run N texts at a time.",
    ("finetune",),
    panel=LOSS_PANEL,
)

ENTRIES = (
    EmbeddingLossEntry(
        "mnrl",
        "MultipleNegativesRankingLoss",
        reads=(PAIRS, TRIPLETS),
        help="pairs/triplets, in-batch negatives",
        card="MultipleNegativesRankingLoss (in-batch negatives: every other row's positive and every "
        "negative in the batch is a negative of a row)",
        picked_for=(PAIRS, TRIPLETS),
        options=(SYMMETRIC, CACHE_BATCH, SCALE),
        check=check_mnrl,
    ),
    EmbeddingLossEntry(
        "cosent",
        "CoSENTLoss",
        reads=(SCORED,),
        help="scored pairs",
        card="CoSENTLoss (the cosines of the scored pairs ordered as their gold scores)",
        picked_for=(SCORED,),
        options=(SCALE,),
        check=check_scale,
    ),
)


def check_triplet(options: dict) -> None:
    margin, distance = options.get("triplet_margin"), options.get("triplet_distance")
    if margin is not None and not (math.isfinite(margin) and margin >= 0):
        raise BertkitError(f"--triplet-margin {margin} must be a number >= 0", "sentence-transformers uses 5")
    if distance is not None and distance not in TRIPLET_DISTANCES:
        raise BertkitError(f"--triplet-distance {distance!r} is not a distance", f"use {', '.join(TRIPLET_DISTANCES)}")


TRIPLET_DISTANCES = ("euclidean", "cosine", "manhattan")
ENTRIES += (
    EmbeddingLossEntry(
        "triplet",
        "TripletLoss",
        reads=(TRIPLETS,),
        help="triplets, the negative a margin farther than the positive",
        card="TripletLoss (max(d(anchor, positive) - d(anchor, negative) + margin, 0))",
        options=(
            TaskOption(
                "triplet_margin",
                float,
                "--loss triplet: how much farther the negative must be.",
                ("finetune",),
                5.0,
                panel=LOSS_PANEL,
            ),
            TaskOption(
                "triplet_distance",
                str,
                f"--loss triplet: the distance, {' | '.join(TRIPLET_DISTANCES)} (cosine: 1 - cos).",
                ("finetune",),
                "euclidean",
                panel=LOSS_PANEL,
            ),
        ),
        check=check_triplet,
    ),
)
LOSSES = {entry.name: entry for entry in ENTRIES}


def loss_option() -> TaskOption:
    """--loss, its help generated from the table."""
    named = ", ".join(f"{entry.name} ({entry.help})" for entry in ENTRIES)
    return TaskOption(
        "loss", str, f"{named}; by default the one the data's columns call for.", ("finetune",), panel=LOSS_PANEL
    )


def loss_options() -> tuple:
    """Every loss's own options, each once, in the table's order."""
    found: dict = {}
    for entry in ENTRIES:
        for option in entry.options:
            found.setdefault(option.name, option)
    return tuple(found.values())


def entry_of(name: str) -> EmbeddingLossEntry:
    if name not in LOSSES:
        raise BertkitError(f"--loss {name!r} is not an embedding loss", f"use --loss {' or '.join(LOSSES)}")
    return LOSSES[name]


def check_values(options: dict) -> None:
    """Before any data: a --loss that exists, and every loss option's value in range."""
    if options.get("loss") is not None:
        entry_of(options["loss"])
    for entry in ENTRIES:
        if entry.check is not None:
            entry.check(options)


def choose(shape: str, given: str | None) -> EmbeddingLossEntry:
    """The loss for data of ``shape``: the one given (it must read that shape) or the table's pick."""
    if given is None:
        return next(entry for entry in ENTRIES if shape in entry.picked_for)
    entry = entry_of(given)
    if shape not in entry.reads:
        default = choose(shape, None).name
        raise BertkitError(
            f"--loss {given} does not fit {SHAPE_NAMES[shape]} ({SHAPES[shape]}): it needs {entry.columns()} columns",
            f"give {given} {entry.columns()} rows, or use --loss {default} (what {SHAPE_NAMES[shape]} train with)",
        )
    return entry


def given_option(option: TaskOption, options: dict) -> bool:
    """Set to something other than its default (a replayed config.yaml carries every default)."""
    value = options.get(option.name)
    return value is not None and value is not False and value != option.default


def check_options_fit(entry: EmbeddingLossEntry, options: dict) -> None:
    """No option of another loss is given with this one."""
    own = {option.name for option in entry.options}
    stray = [option for option in loss_options() if option.name not in own and given_option(option, options)]
    if stray:
        flags = ", ".join(f"--{option.name.replace('_', '-')}" for option in stray)
        owners = [e.name for e in ENTRIES if any(o in e.options for o in stray)]
        raise BertkitError(
            f"{flags} {'applies' if len(stray) == 1 else 'apply'} to --loss {' or '.join(owners)}, "
            f"not --loss {entry.name}",
            f"drop {flags} for {entry.name}",
        )


def option_values(entry: EmbeddingLossEntry, options: dict) -> tuple:
    """(name, value) of the loss's own options, a default where none is given: the TrainingSpec's."""
    return tuple((option.name, options.get(option.name, option.default)) for option in entry.options)
