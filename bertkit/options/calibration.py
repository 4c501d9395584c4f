"""The options of calibration: `bertkit calibrate` (a trained directory's temperature) and the
coverage of prediction sets that predict and select take (bertkit/metrics/calibration.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from bertkit.errors import BertkitError
from bertkit.options.base import CALIBRATION_PANEL, DATA_PANEL, REQUIRED, calibration_data_option, option


@dataclass
class CalibrateOptions:
    """What `bertkit calibrate` fits the temperature on."""

    data: str = option(
        REQUIRED, "A held-out labelled file (the model's label set) to fit the temperature on.", DATA_PANEL
    )

    def validate(self, command: str = "bertkit calibrate") -> "CalibrateOptions":
        return self


@dataclass
class CoverageOptions:
    """Split-conformal prediction sets: each row's set holds its true label at this rate."""

    coverage: float | None = option(
        None,
        "cls/pair single- and multi-label: give each row the set of labels that holds the true one (multi-label: "
        "all the true ones) with this probability, in (0, 1), e.g. 0.9 (split conformal; docs: calibration.md).",
        CALIBRATION_PANEL,
    )
    calibration_data: str | None = calibration_data_option("coverage")

    def validate(self, command: str) -> "CoverageOptions":
        if self.coverage is not None and not (math.isfinite(self.coverage) and 0 < self.coverage < 1):
            raise BertkitError(
                f"--coverage must be strictly between 0 and 1, got {self.coverage}", "e.g. --coverage 0.9"
            )
        if self.calibration_data is not None and self.coverage is None:
            raise BertkitError("--calibration-data applies only with --coverage", "add --coverage 0.9, or drop it")
        return self
