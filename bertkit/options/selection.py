"""The options of `bertkit select`: which unlabelled pool rows a model is least sure of, in an
annotation tool's format (what to label next). It also takes inference's options (InferenceOptions)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bertkit.errors import BertkitError
from bertkit.options.base import (
    DATA_PANEL,
    INFERENCE_PANEL,
    OUTPUT_PANEL,
    REQUIRED,
    check_at_least,
    check_choice,
    option,
)
from bertkit.options.calibration import CoverageOptions

STRATEGIES = ("margin", "entropy", "least-confidence", "random", "prediction-set")
SELECT_FORMATS = ("label-studio", "doccano")


@dataclass
class SelectOptions:
    """What `bertkit select` reads, how it ranks the rows and what it writes."""

    input: str = option(
        REQUIRED,
        "The unlabelled pool: text lines, JSONL, CSV/TSV, Parquet, a Label Studio or doccano export "
        "(its texts); a directory or glob of shards.",
        DATA_PANEL,
    )
    n: int = option(REQUIRED, "How many rows to select.", DATA_PANEL)
    strategy: str = option(
        "margin",
        "margin: the smallest gap between the two most probable labels; entropy: the most spread "
        "probabilities; least-confidence: the lowest top probability; random: a seeded sample. ner: the "
        "least sure word of each sentence counts. prediction-set (cls/pair, multi-label too, with --coverage): the "
        "rows whose conformal label set is largest first, by margin within a size.",
        DATA_PANEL,
        choices=STRATEGIES,
    )
    seed: int = option(0, "Seed of --strategy random.", DATA_PANEL)
    output: str = option(
        REQUIRED, "Output file: .json (one list: Label Studio's import) or .jsonl (one task per line).", OUTPUT_PANEL
    )
    format: str = option("label-studio", "The annotation tool the tasks are for.", OUTPUT_PANEL, choices=SELECT_FORMATS)
    chunk_rows: int = option(10_000, "Pool rows run at a time: memory stays flat whatever its size.", INFERENCE_PANEL)
    conformal: CoverageOptions = field(default_factory=CoverageOptions)  # --coverage, its flags (not its own)

    def validate(self, command: str = "bertkit select") -> "SelectOptions":
        check_at_least(self.n, "--n", command)
        check_at_least(self.chunk_rows, "--chunk-rows", command)
        check_choice(self.strategy, STRATEGIES, "--strategy")
        check_choice(self.format, SELECT_FORMATS, "--format")
        self.conformal.validate(command)
        if (self.strategy == "prediction-set") != (self.conformal.coverage is not None):
            raise BertkitError(
                "--strategy prediction-set ranks by the sets of --coverage, and only it takes them",
                "give both --strategy prediction-set and --coverage 0.9, or neither",
            )
        return self
