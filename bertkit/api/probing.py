"""``bertkit probe`` in the Python API. The probe's home is bertkit/probing (the command's steps,
the classifier, the head network and the card text); this module is its public name."""

from __future__ import annotations

from bertkit.probing.classifier import C_GRID, fit_head  # noqa: F401  (the API's names)
from bertkit.probing.command import ProbeResult, probe  # noqa: F401  (the API's names)
